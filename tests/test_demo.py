"""The demo's report: a verdict per case and overall, units on every time column, the
library named in its row, MPICH 1.1's algorithms labelled as wacoll's, a picture with
a legend entry for every mark."""

import matplotlib

matplotlib.use("Agg")

from wacoll.tools import demo  # noqa: E402


def _measured_rows():
    """The simulator's rows with made-up measured medians: the library 20 ms, wacoll's
    default 10 ms (2x faster) everywhere but Barrier (20 ms: on par)."""
    sim = demo.simulated_rows(demo.default_topology())
    measured = {"_meta": {"reps": 3, "transport": "x", "library": "MPICH 5.0.2"}}
    for case, _, _ in demo.CASES:
        mine = 0.020 if case == "Barrier" else 0.010
        measured[case] = {
            "times": {
                "native": [0.020] * 3,
                "default": [mine] * 3,
                "magpie": [0.011] * 3,
                "mpich": [0.030] * 3,
            },
            "correct": {"native": True, "default": True, "magpie": True, "mpich": True},
        }
    return demo.merge_rows(sim, measured)


def test_the_table_has_units_verdicts_and_names_the_library():
    rows = _measured_rows()
    lines = demo.table_lines(rows, True, "MPICH 5.0.2")
    head = lines[0]
    for column in ("median ms", "speed-up", "predicted ms", "bound ms"):
        assert column in head
    text = "\n".join(lines)
    assert text.count("MPICH 5.0.2 (native)") == len(demo.CASES)
    assert text.count("wacoll mpich-1.1") == len(demo.CASES)
    verdicts = [line for line in lines if "verdict:" in line]
    assert len(verdicts) == len(demo.CASES)
    assert "on par with MPICH 5.0.2's own" in verdicts[0]
    assert "2.00x faster than MPICH 5.0.2's own (10.00 ms vs 20.00 ms)" in verdicts[1]
    overall = demo.overall_verdict(rows, "MPICH 5.0.2")
    assert overall.startswith(
        "overall: wacoll default faster than MPICH 5.0.2 in 5 of 6 cases, on par in 1"
    )


def test_the_picture_is_drawn_again_from_the_csv(tmp_path):
    rows = _measured_rows()
    demo.write_rows(tmp_path, rows, {"_meta": {}}, "MPICH 5.0.2")
    again, measured, library = demo.read_csv(tmp_path / "demo.csv")
    assert measured and library == "MPICH 5.0.2"
    assert [(r["case"], r["impl"], r["median"]) for r in again] == [
        (r["case"], r["impl"], r.get("median")) for r in rows
    ]
    demo.plot(again, tmp_path / "again.png", measured, library)
    assert (tmp_path / "again.png").stat().st_size > 10_000


def test_the_picture_has_a_legend_entry_for_every_mark(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt.Figure, "savefig", lambda fig, *a, **k: figures.append(fig))
    monkeypatch.setattr(plt, "close", lambda *a: None)
    demo.plot(_measured_rows(), tmp_path / "x.png", True, "MPICH 5.0.2")
    (fig,) = figures
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [
        "MPICH 5.0.2 (native): measured median",
        "wacoll default: measured median",
        "wacoll magpie: measured median",
        "wacoll mpich-1.1: measured median",
        "the simulator's prediction",
        "physical lower bound",
    ]
    assert "lower is better" in fig._suptitle.get_text()
    assert all(ax.get_ylabel() == "ms" for ax in fig.axes)
