"""GOAL export (LogGOPSim's schedules): every family's plans, round trips, the reader."""

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wacoll import PlanError, Topology
from wacoll.errors import ScriptError
from wacoll.plans import FAMILIES, build, builders, options
from wacoll.plans.goal import (
    GoalDep,
    GoalSchedule,
    from_goal,
    goal_schedule,
    load_goal,
    save_goal,
    to_goal,
)

TOPOLOGIES = [Topology.single(1), Topology.single(5), Topology.from_sizes([3, 2, 3])]


def every_plan():
    """Every family's every operation on a few topologies (segments where taken)."""
    for family in sorted(FAMILIES):
        for op in sorted(builders(family)):
            for topo in TOPOLOGIES:
                kw = {"level": "commutative"} if "level" in options(family, op) else {}
                if "root" in options(family, op):
                    kw["root"] = topo.size - 1
                if "segments" in options(family, op):
                    kw.update(segments=2, count=9)
                elif "count" in options(family, op):
                    kw["count"] = 3
                try:
                    yield build(op, topo, family, **kw)
                except PlanError:
                    continue


PLANS = list(every_plan())


def run(schedule, o=1500, L=2500, G=6):
    """A small LogGP-like reading of a schedule, with unlimited overlap: each
    operation starts when its dependencies allow (``requires``: finished,
    ``irequires``: started); a send takes ``o`` and its message arrives ``L +
    (s - 1) G`` later; a receive finishes ``o`` after its message arrived; a calc
    takes its time. Returns the time the last operation finishes; AssertionError if
    an operation never can (a deadlock)."""
    ops, deps = {}, {}
    for block in schedule.ranks:
        for item in block.items:
            if isinstance(item, GoalDep):
                deps.setdefault((block.rank, item.label), []).append(item)
            elif hasattr(item, "kind"):
                ops[(block.rank, item.label)] = item
    start, end = {}, {}
    arrivals = {}  # (src, dst, tag) -> [arrival times], in send order
    taken = {}
    pending = set(ops)
    while pending:
        moved = False
        for key in sorted(pending):
            rank, label = key
            op = ops[key]
            times = []
            for dep in deps.get(key, ()):
                table = end if dep.kind == "requires" else start
                if (rank, dep.on) not in table:
                    break
                times.append(table[(rank, dep.on)])
            else:
                t = max(times, default=0)
                if op.kind == "recv":
                    channel = (op.peer, rank, op.tag)
                    got = arrivals.get(channel, [])
                    i = taken.get(channel, 0)
                    if i >= len(got):
                        continue
                    taken[channel] = i + 1
                    start[key], end[key] = t, max(t, got[i]) + o
                elif op.kind == "send":
                    start[key], end[key] = t, t + o
                    arrivals.setdefault((rank, op.peer, op.tag), []).append(
                        t + o + L + max(op.size - 1, 0) * G
                    )
                else:
                    start[key], end[key] = t, t + op.size
                pending.discard(key)
                moved = True
        assert moved, f"deadlock: {sorted(pending)[:4]} never start"
    return max(end.values(), default=0)


# ------------------------------------------------------------------ every plan
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: f"{p.family}-{p.op}-{p.size}")
def test_every_plan_exports_reads_back_and_runs(plan):
    report = plan.prove()
    times = {}
    for order in ("program", "data"):
        text = to_goal(plan, order=order)
        schedule = from_goal(text)
        assert to_goal(schedule) == text
        assert to_goal(from_goal(to_goal(schedule))) == text
        assert schedule.num_ranks == plan.size
        assert schedule.messages == report.messages
        exact = goal_schedule(plan, order=order, empty_message_bytes=0)
        assert exact.bytes == report.bytes
        empty = sum(1 for m in plan.messages() if m.nbytes == 0)
        assert schedule.bytes == report.bytes + empty  # written as 1b each
        times[order] = run(schedule)
    # the data flow alone never waits longer than the program order
    assert times["data"] <= times["program"]


def test_tags_number_the_messages_between_two_ranks():
    plan = build("bcast", Topology.single(3), "tree", tree="chain", count=6, segments=3)
    ops = [op for op in goal_schedule(plan).ranks[1].ops]
    assert [(op.kind, op.peer, op.tag) for op in ops] == [
        ("recv", 0, 0),
        ("send", 2, 0),
        ("recv", 0, 1),
        ("send", 2, 1),
        ("recv", 0, 2),
        ("send", 2, 2),
    ]


def test_program_order_dependencies():
    """Receives posted at once; a step waits for the one before it, a send that
    follows a send only for its start; a write waits for the sends reading its
    blocks."""
    plan = build("allgather", Topology.single(3), "mpich", count=2)  # the ring
    text = to_goal(plan, combine_ns_per_byte=1, copy_ns_per_byte=0.5)
    block = text[text.index("rank 1 {") : text.index("}", text.index("rank 1 {"))]
    assert block.splitlines()[1:] == [
        "s0: calc 1",
        "s1: send 2b to 2 tag 0",
        "s1 requires s0",
        "s2: recv 2b from 0 tag 0",
        "s3: send 2b to 2 tag 1",
        "s3 irequires s1",
        "s3 requires s2",
        "s4: recv 2b from 0 tag 1",
    ]
    data = to_goal(plan, order="data")
    block = data[data.index("rank 1 {") : data.index("}", data.index("rank 1 {"))]
    assert "s3 requires s2" in block and "s3 irequires s1" not in block


def test_combine_costs_and_header():
    plan = build(
        "reduce", Topology.single(2), "mpich", count=10, itemsize=8, level="strict"
    )
    text = to_goal(plan, combine_ns_per_byte=0.5, copy_ns_per_byte=0.25)
    assert text.startswith(
        "// wacoll plan: reduce on 2 ranks, root 0, level strict "
        "(mpich/binomial); 1 blocks, 80 bytes\n"
    )
    assert "s0: calc 20\n" in text and "s1c: calc 40\n" in text
    assert goal_schedule(plan, combine_ns_per_byte=0, copy_ns_per_byte=0).calc == 0
    with pytest.raises(PlanError, match="combine_ns_per_byte"):
        to_goal(plan, combine_ns_per_byte=-1)
    with pytest.raises(PlanError, match="order must be"):
        to_goal(plan, order="time")
    with pytest.raises(PlanError, match="written as it is"):
        to_goal(from_goal(to_goal(plan)), order="data")
    with pytest.raises(PlanError, match="needs a wacoll plan"):
        to_goal("allreduce")


def test_files(tmp_path):
    plan = build("alltoall", Topology.single(4), "modern", algorithm="bruck")
    path = save_goal(plan, tmp_path / "bruck.goal")
    assert load_goal(path) == from_goal(to_goal(plan))
    assert load_goal(path).messages == plan.prove().messages == 8


# ------------------------------------------------------------------ the reader
HANDWRITTEN = """\
/* a dissemination barrier on three ranks,
   written by hand */
num_ranks 3

rank 0 {
l1: send 1b to 1 tag 0
l2: recv 1 b from 2 tag 0
l3: send 1b to 2 tag 0 cpu 0 nic 0
l3 requires l2
l4: recv 1b from -1 tag -1
}
// rank 1
rank 1 {
send 1b to 2
l2: recv 1b from 0 tag 0
l3: send 1b to 0 tag 0
   l3 requires l2
l4: recv 1b from 2
l5: calc 250 cpu 1
l5 irequires l3
}

rank 2 {
l1: send 1b to 0 tag 0
l2: recv 1b from 1
l3: send 1b to 1
l3 requires l2
l4: recv 1b from 0 tag 0
}
"""


def test_reads_loggopsim_style_files():
    schedule = from_goal(HANDWRITTEN)
    assert schedule.num_ranks == 3 and schedule.messages == 6
    assert schedule.comments[0].body.endswith("written by hand */")
    assert schedule.ranks[1].comments[0].body == "// rank 1"
    op = schedule.ranks[0].ops[2]
    assert (op.cpu, op.nic, schedule.ranks[0].ops[3].peer) == (0, 0, -1)
    assert schedule.ranks[1].ops[0].label is None
    again = to_goal(schedule)
    assert from_goal(again) == schedule and to_goal(from_goal(again)) == again


BAD = [
    ("rank 0 {\n}\n", "num_ranks must come before", 1),
    ("num_ranks 1\nnum_ranks 1\nrank 0 {\n}\n", "given twice", 2),
    ("num_ranks 0\n", "at least 1", 1),
    ("num_ranks 2\nrank 0 {\n}\n", "rank 1 has no block", 3),
    ("num_ranks 1\nrank 1 {\n}\n", "not below num_ranks", 2),
    ("num_ranks 2\nrank 0 {\n}\nrank 0 {\n}\n", "given twice (first on line 2)", 4),
    ("num_ranks 1\nrank 0 {\nl1: calc 3\n", "never closed", 2),
    ("num_ranks 1\n/* open\nrank 0 {\n}\n", "never closed", 2),
    ("num_ranks 1\n/* c */ rank 0 {\n}\n", "nothing may follow", 2),
    ("num_ranks 1\nrank 0 {\nl1: comp 3\n}\n", "expected a send, recv or calc", 3),
    ("num_ranks 1\nrank 0 {\nsend: calc 3\n}\n", "is a keyword", 3),
    ("num_ranks 1\nrank 0 {\nl1: calc 3\nl1: calc 4\n}\n", "defined twice", 4),
    ("num_ranks 1\nrank 0 {\nl2 requires l1\nl1: calc 3\n}\n", "not defined before", 3),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 3\nl2: calc 3\nl1 requires l2\n"
        "l2 irequires l1\n}\n",
        "form a cycle",
        5,
    ),
    ("num_ranks 2\nrank 0 {\nl1: send 8b to 2\n}\nrank 1 {\n}\n", "not below", 3),
    ("num_ranks 2\nrank 0 {\nl1: send 8b from 1\n}\nrank 1 {\n}\n", "takes 'to'", 3),
    (
        "num_ranks 2\nrank 0 {\nl1: send 8b to 1 tag -1\n}\nrank 1 {\n}\n",
        "tag cannot be -1",
        3,
    ),
    ("num_ranks 1\nrank 0 {\nl1: calc 3 cpu 256\n}\n", "cpu 256 is too large", 3),
    ("num_ranks 2\nrank 0 {\nl1: send 8b to 1\n}\nrank 1 {\n}\n", "never receives", 3),
    (
        "num_ranks 2\nrank 0 {\n}\nrank 1 {\nl1: recv 8b from 0 tag 3\n}\n",
        "never sends",
        5,
    ),
    (
        "num_ranks 2\nrank 0 {\nl1: send 8b to 1\n}\nrank 1 {\nl1: recv 4b from 0\n}\n",
        "whose matching send carries 8b",
        6,
    ),
    ("num_ranks 1\nrank 0 {\nl1: calc 1\x00\n}\n", "NUL", 3),
    ("num_ranks 1\nrank 0 {\nl1: calc 123456789012345678901\n}\n", "expected", 3),
    ("", "no num_ranks line", 1),
]


@pytest.mark.parametrize("text,message,line", BAD, ids=[b[1] for b in BAD])
def test_bad_files_name_the_fault_and_its_line(text, message, line):
    with pytest.raises(ScriptError, match=re.escape(message)) as info:
        from_goal(text)
    assert info.value.line == line


def test_the_reader_takes_only_text():
    with pytest.raises(ScriptError, match="must be a str"):
        from_goal(b"num_ranks 1")


SEED_TEXTS = [to_goal(p) for p in PLANS[:40:4]] + [HANDWRITTEN]


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_files_raise_script_error_or_read_back(data):
    text = data.draw(st.sampled_from(SEED_TEXTS))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        how = data.draw(st.sampled_from(["cut", "insert", "swap-lines"]))
        if how == "cut":
            text = text[:at] + text[at + data.draw(st.integers(1, 12)) :]
        elif how == "insert":
            text = (
                text[:at]
                + data.draw(
                    st.sampled_from(
                        [
                            "{",
                            "}",
                            " ",
                            "\n",
                            "-1",
                            "99",
                            ":",
                            "requires",
                            "//",
                            "/*",
                            "*/",
                            "b",
                            "rank 0 {\n",
                            "calc",
                            "tag",
                            "\x00",
                            "\r",
                        ]
                    )
                )
                + text[at:]
            )
        else:
            lines = text.split("\n")
            i, j = (data.draw(st.integers(0, len(lines) - 1)) for _ in range(2))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    began = time.monotonic()
    try:
        schedule = from_goal(text)
    except ScriptError:
        return
    finally:
        assert time.monotonic() - began < 2.0
    assert isinstance(schedule, GoalSchedule)
    assert from_goal(to_goal(schedule)) == schedule


def test_command_line_export(tmp_path, capsys):
    from wacoll.cli import main

    path = tmp_path / "out" / "bcast.goal"
    assert (
        main(
            [
                "plan",
                "bcast",
                "--clusters",
                "4",
                "--family",
                "modern",
                "--option",
                "algorithm=scatter_ring",
                "--bytes",
                "64",
                "--export-goal",
                str(path),
            ]
        )
        == 0
    )
    assert "txt2bin -i" in capsys.readouterr().out
    schedule = load_goal(path)
    plan = build(
        "bcast",
        Topology.single(4),
        "modern",
        algorithm="scatter_ring",
        count=64,
        segments=1,
    )
    assert schedule == from_goal(to_goal(plan))
    assert schedule.messages == plan.prove().messages == 3 + 8  # scatter, ring
    assert (
        main(
            [
                "plan",
                "barrier",
                "--clusters",
                "2x2",
                "--family",
                "modern,mpich",
                "--export-goal",
                str(path),
                "--goal-order",
                "data",
            ]
        )
        == 0
    )
    assert load_goal(path.with_name("bcast-mpich.goal")).messages == 8  # hypercube
    assert "the blocks' data flow" in (path.parent / "bcast-modern.goal").read_text()
