"""The documentation keeps up with the code (the layout page, ``docs/layout.rst``,
is checked against the tree in ``tests/test_layout.py``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gallery():
    """``(name, caption)`` of every figure of ``docs/gallery.rst``, in order."""
    lines = (ROOT / "docs" / "gallery.rst").read_text().splitlines()
    figures = []
    for i, line in enumerate(lines):
        if line.startswith(".. figure:: _figures/"):
            name = line.split("_figures/", 1)[1].removesuffix(".png")
            body = []
            for more in lines[i + 1 :]:
                if more and not more.startswith("   "):
                    break
                body.append(more.strip())
            caption = " ".join(x for x in body if x and not x.startswith(":"))
            figures.append((name, caption))
    return figures


def test_the_gallery_shows_every_figure_once_with_a_caption():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_figures", ROOT / "docs" / "make_figures.py"
    )
    make_figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_figures)
    shown = _gallery()
    names = [name for name, _ in shown]
    assert sorted(names) == sorted(make_figures.FIGURES), (
        "docs/gallery.rst and docs/make_figures.FIGURES differ"
    )
    assert len(set(names)) == len(names), "a figure is shown twice"
    short = [name for name, caption in shown if len(caption.split()) < 15]
    assert not short, f"figures without a caption that says how to read them: {short}"
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert set(make_figures.NOTEBOOK_FIGURES) == notebooks, (
        "docs/make_figures.NOTEBOOK_FIGURES names every notebook's figures"
    )
