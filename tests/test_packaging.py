"""The package's metadata agrees with itself, and the maintainers' checks pass.

The version is written in ``pyproject.toml`` (the wheel's metadata), ``meson.build``
(the build) and ``wacoll.__version__`` (``wacoll --version``); the changelog starts
with it. ruff (lint and format) is clean on the tree, as CI and the pre-commit
configuration require.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wacoll

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_everywhere():
    project = re.search(
        r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M
    )
    meson = re.search(r"version:\s*'([^']+)'", (ROOT / "meson.build").read_text())
    assert project is not None and meson is not None
    assert project.group(1) == meson.group(1) == wacoll.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    first = re.search(r"^## (\S+)", changelog, re.MULTILINE)
    assert first is not None and first.group(1) == wacoll.__version__


def _ruff():
    found = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("ruff is not installed beside this Python: pip install -e '.[test]'")
    return found


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_is_clean_on_the_tree(command):
    done = subprocess.run(
        [_ruff(), *command, "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_passes_on_the_package(tmp_path, monkeypatch):
    """The type checker of pyproject.toml's [tool.mypy], on the whole package."""
    api = pytest.importorskip("mypy.api", reason="mypy comes with the test extra")
    monkeypatch.chdir(ROOT)  # the project's configuration
    out, err, status = api.run([f"--cache-dir={tmp_path / 'mypy-cache'}"])
    assert status == 0, out + err
