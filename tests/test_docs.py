"""The documentation keeps up with the code: every module of ``wacoll/`` is on the
layout page (``docs/layout.rst``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_layout_page_names_every_module():
    text = (ROOT / "docs" / "layout.rst").read_text()
    modules = sorted(p.relative_to(ROOT).as_posix()
                     for ext in ("*.py", "*.pyx") for p in (ROOT / "wacoll").rglob(ext))
    assert modules, "no modules found"
    missing = [m for m in modules if f"``{m}``" not in text]
    assert not missing, f"docs/layout.rst does not name {missing}: add a line for each"
    listed = {line.split("``")[1] for line in text.splitlines()
              if line.startswith("- ``wacoll/")}
    gone = sorted(m for m in listed if not (ROOT / m).exists())
    assert not gone, f"docs/layout.rst names modules that no longer exist: {gone}"
