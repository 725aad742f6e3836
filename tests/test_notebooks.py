"""The notebooks run from top to bottom without errors (their cells assert results).

Each notebook of the gallery should run in about 30 s on a quiet machine; the limit
here is generous because the suite shares its cores. ``testbed_timeline`` builds an
emulated testbed where it can, and otherwise says why and draws the prediction only.
"""

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
GALLERY = {
    "explore_plans",
    "heterogeneous_trees",
    "magpie_vs_mpich",
    "matsuda_sweep",
    "testbed_timeline",
    "modern_vs_1999",
}


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= GALLERY


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.output_type == "error"
    ]
    assert not errors
    assert time.monotonic() - start < 120, f"{path.name} took too long"
