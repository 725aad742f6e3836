"""Sphinx configuration: the user guide, the papers' algorithms and the API reference.

Build (warnings are errors, as in CI), in the README's environment::

    .venv/bin/sphinx-build -W -q -b html docs docs/_build/html

The figures of ``algorithms.rst`` are drawn at build time by ``make_figures.py``
from the simulator and the tree builders.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("MPLBACKEND", "Agg")

import make_figures  # noqa: E402

import wacoll  # noqa: E402

project = "wacoll"
author = "the wacoll authors"
copyright = "the wacoll authors"
release = wacoll.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
autosummary_generate = True
# Each object is documented once, in the module that defines it: a package's page
# lists its submodules, not the names it re-exports (``__all__`` is ignored).
autodoc_default_options = {"members": True, "ignore-module-all": True}
templates_path = ["_templates"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"
html_static_path = []
html_theme_options = {
    "description": "Topology-aware collective communication for MPI",
    "fixed_sidebar": True,
}
suppress_warnings = []


# Docstrings of modules this documentation does not own, fixed at build time only:
# (object name, text as written, text for the documentation).
DOCSTRING_FIXES = [
    # an inline literal ending in a space, which docutils cannot close
    ("wacoll.plans.scripts.sexpr.relocate", "``prefix: ``", "``prefix`` and a colon"),
]


def _fix_docstrings(app, what, name, obj, options, lines):
    for target, old, new in DOCSTRING_FIXES:
        if name == target:
            lines[:] = [line.replace(old, new) for line in lines]


def setup(app):
    app.connect("builder-inited", lambda app: make_figures.main(HERE / "_figures"))
    app.connect("autodoc-process-docstring", _fix_docstrings)
