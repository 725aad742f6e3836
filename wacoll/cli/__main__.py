"""``python -m wacoll.cli``: the ``wacoll`` command."""

import sys

from wacoll.cli import main

sys.exit(main())
