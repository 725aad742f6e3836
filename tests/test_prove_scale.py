"""The prover on arrays proves what the prover of one dictionary entry per block
proved, and refuses what it refused, with the same error, at small and large sizes.

``reference_check.py`` (beside this file) is that earlier prover, kept as an
oracle. Small plans of every family and operation, correct and mutated in many ways,
must get the same report or the same error (message, rank and step) from both;
plans of 1024 ranks broken in one message or one combination must still be refused.
"""

import dataclasses
import importlib.util
import pathlib
import random

import numpy as np
import pytest

from wacoll import PlanError, Topology
from wacoll.plans import FAMILIES, build, builders, options
from wacoll.plans.plan import Step
from wacoll.plans.prove import prove_plan
from wacoll.plans.prover import encode as encoding
from wacoll.plans.prover import flow, pairing, pieces, values
from wacoll.plans.prover.layout import Layout
from wacoll.plans.prover.run import Run

_SPEC = importlib.util.spec_from_file_location(
    "reference_check", pathlib.Path(__file__).with_name("reference_check.py")
)
reference = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(reference)


def outcome(check, plan):
    """The report, or the error's message, rank and step (an IndexError: the earlier
    prover's crash on a message naming a block beyond the layout)."""
    try:
        return ("ok", check(plan))
    except PlanError as e:
        return ("error", str(e), e.rank, e.step)
    except IndexError:
        return ("crash",)


def same(plan):
    """Assert both provers agree on ``plan`` (a crash of the earlier one on blocks
    beyond the layout must be a refusal of the new one)."""
    new, old = outcome(prove_plan, plan), outcome(reference.prove_plan, plan)
    if old == ("crash",):
        assert new[0] == "error", new
    else:
        assert new == old


def replace(plan, edits):
    """``plan`` with steps replaced: ``edits`` maps (rank, index) to a list of steps
    (empty: the step is removed)."""
    programs = [list(p) for p in plan.programs]
    for (r, i), new in sorted(edits.items(), reverse=True):
        programs[r][i : i + 1] = new
    return dataclasses.replace(plan, programs=tuple(map(tuple, programs)))


def small_plans(seed=0):
    rng = random.Random(seed)
    for family in FAMILIES:
        for op in builders(family):
            for sizes in ([1], [3], [2, 2], [3, 2], [1, 2, 2], [4, 4], [5, 6, 5]):
                kwargs = {}
                if "level" in options(family, op):
                    kwargs["level"] = rng.choice(["strict", "associative", "commutative"])
                if "root" in options(family, op):
                    kwargs["root"] = rng.randrange(sum(sizes))
                if "segments" in options(family, op) and rng.random() < 0.4:
                    kwargs.update(segments=rng.choice([2, 3]), count=6)
                try:
                    plan = build(op, Topology.from_sizes(sizes), family, **kwargs)
                except PlanError:
                    continue
                if plan.kind == "reduction" and rng.random() < 0.2:
                    plan = dataclasses.replace(plan, arithmetic="reproducible")
                yield plan


BUFFERS = ["in", "out", "acc", "tmp", "zz"]


def mutate(plan, rng):
    """One random edit of one step (or of a send and its receive)."""
    programs = [list(p) for p in plan.programs]
    r = rng.randrange(plan.size)
    prog = programs[r]
    what = rng.randrange(10)
    i = rng.randrange(len(prog)) if prog else None
    s = prog[i] if prog else None
    if what == 0 and prog:
        del prog[i]
    elif what == 1 and prog:
        prog.insert(i, s)
    elif what == 2 and len(prog) > 1:
        j = rng.randrange(len(prog))
        prog[i], prog[j] = prog[j], prog[i]
    elif what == 3 and prog and s.peer is not None:
        prog[i] = dataclasses.replace(
            s, peer=rng.choice([r, -1, plan.size, rng.randrange(plan.size)])
        )
    elif what == 4 and prog:
        blocks = list(s.blocks)
        how = rng.randrange(4)
        if how == 0 and blocks:
            blocks.pop(rng.randrange(len(blocks)))
        elif how == 1 and blocks:
            blocks.append(rng.choice(blocks))
        elif how == 2:
            blocks.append(rng.randrange(plan.nblocks + 2))
        else:
            rng.shuffle(blocks)
        prog[i] = dataclasses.replace(s, blocks=tuple(blocks))
        if s.peer is not None and 0 <= s.peer < plan.size and rng.random() < 0.7:
            other = programs[s.peer]
            for k, t in enumerate(other):  # the partner too, so that they still pair
                if (
                    t.peer == r
                    and t.blocks == s.blocks
                    and (s.kind == "send") != (t.kind == "send")
                ):
                    other[k] = dataclasses.replace(t, blocks=tuple(blocks))
                    break
    elif what == 5 and prog:
        name = (
            "src"
            if s.src is not None and (s.dst is None or rng.random() < 0.5)
            else "dst"
        )
        prog[i] = dataclasses.replace(s, **{name: rng.choice(BUFFERS)})
    elif what == 6 and prog and s.side is not None:
        prog[i] = dataclasses.replace(s, side="left" if s.side == "right" else "right")
    elif what == 7 and prog:
        if s.kind == "recv":
            prog[i] = Step(
                "recv_combine",
                s.blocks,
                peer=s.peer,
                dst=s.dst,
                side=rng.choice(["left", "right"]),
            )
        elif s.kind == "recv_combine":
            prog[i] = Step("recv", s.blocks, peer=s.peer, dst=s.dst)
        elif s.kind == "copy":
            prog[i] = Step("combine", s.blocks, src=s.src, dst=s.dst, side="right")
        elif s.kind == "combine":
            prog[i] = Step("copy", s.blocks, src=s.src, dst=s.dst)
    elif what == 8:
        at = rng.randrange(len(prog) + 1)
        count = min(max(plan.nblocks, 1), rng.randrange(1, 3))
        blocks = tuple(rng.sample(range(max(plan.nblocks, 1)), count))
        how = rng.randrange(3)
        if how == 0:
            prog.insert(
                at, Step("copy", blocks, src=rng.choice(BUFFERS), dst=rng.choice(BUFFERS))
            )
        elif how == 1:
            prog.insert(
                at,
                Step(
                    "combine",
                    blocks,
                    src=rng.choice(BUFFERS),
                    dst=rng.choice(BUFFERS),
                    side="right",
                ),
            )
        else:
            q = rng.randrange(plan.size)
            prog.insert(at, Step("send", blocks, peer=q, src=rng.choice(BUFFERS)))
            programs[q].insert(
                rng.randrange(len(programs[q]) + 1),
                Step("recv", blocks, peer=r, dst=rng.choice(BUFFERS)),
            )
    elif what == 9 and prog and s.kind == "recv_combine":
        prog[i] = dataclasses.replace(s, group=1)
    return dataclasses.replace(plan, programs=tuple(map(tuple, programs)))


def test_every_small_plan_gets_the_same_report():
    for plan in small_plans():
        same(plan)


@pytest.mark.parametrize("seed", range(4))
def test_mutated_small_plans_get_the_same_report_or_error(seed):
    rng = random.Random(seed)
    plans = list(small_plans(seed))
    for _ in range(400):
        plan = rng.choice(plans)
        for _ in range(rng.choice([1, 1, 2, 3])):
            plan = mutate(plan, rng)
        same(plan)


def test_medium_plans_get_the_same_report():
    # ranks * blocks past 2**15: keys that overflow small integers would show here
    topo = Topology.from_sizes([40] * 5)
    for op in ("allgather", "reduce_scatter", "scan"):
        for family in ("magpie", "mpich"):
            kwargs = {"level": "associative"} if "level" in options(family, op) else {}
            same(build(op, topo, family, **kwargs))
    same(build("allreduce", Topology.from_sizes([12] * 4), "magpie", level="strict"))
    same(build("alltoall", Topology.from_sizes([9] * 7), "combining"))


def test_the_reader_of_steps_folds_what_no_plan_can_use_and_takes_any_programs():
    plan = build("alltoall", Topology.from_sizes([3, 4]), "combining")
    odd = plan.programs[0] + (Step("send", (10**30, 2, 3, 4), peer=-5, src="q"),)
    odd = dataclasses.replace(plan, programs=(odd,) + plan.programs[1:])
    steps = encoding.encode(odd)
    row = int(steps.start[1]) - 1
    at = slice(steps.first[row], steps.first[row + 1])
    assert steps.peer[row] == encoding.BAD_PEER and steps.buffers[steps.src[row]] == "q"
    assert (steps.block[at].tolist(), steps.length[at].tolist()) == (
        [plan.nblocks, 2],
        [1, 3],
    )
    same_arrays(
        encoding.encode(
            dataclasses.replace(odd, programs=[list(p) for p in odd.programs])
        ),
        steps,
    )
    empty = dataclasses.replace(plan, programs=((),) * plan.size)
    assert encoding.encode(empty).nsteps == 0


def same_arrays(a, b):
    """Assert two dataclasses of arrays (Steps, Flow) are equal, dtypes included."""
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), field.name
        elif not isinstance(x, Layout):
            assert x == y, field.name


def pieces_and_flow(plan):
    """The steps cut into pieces and their dataflow, as prove_plan makes them."""
    layout = Layout(plan.op, plan.size, plan.root, plan.nblocks)
    cut = pieces.split(encoding.encode(plan), layout)
    return cut, flow.analyse(plan, cut, layout=layout)


def varied_plans(seed, mutations):
    """Every small plan and ``mutations`` mutated ones."""
    rng = random.Random(seed)
    plans = list(small_plans(seed))
    return plans + [mutate(rng.choice(plans), rng) for _ in range(mutations)]


@pytest.mark.parametrize(
    "plan",
    [
        build("allgather", Topology.from_sizes([3, 4]), "mpich"),
        build("allreduce", Topology.from_sizes([3, 4, 2]), "magpie", level="strict"),
        build("alltoall", Topology.from_sizes([3, 4]), "combining"),
        build("alltoallv", Topology.from_sizes([5, 2, 4]), "combining"),
        build("scan", Topology.single(6), "magpie"),
        build("reduce_scatter", Topology.from_sizes([2, 3]), "mpich", level="strict"),
    ],
    ids=lambda plan: f"{plan.op}-{plan.family}",
)
def test_programs_held_as_arrays_and_as_steps_prove_alike(plan):
    assert (
        plan.prove() == dataclasses.replace(plan, programs=tuple(plan.programs)).prove()
    )


def test_packed_and_ordered_keys_agree_on_varied_plans(monkeypatch):
    # the dataflow sorts keys that carry their access's number where they fit, else
    # an order of them: pieces and dataflow arrays alike, and the same report or
    # error (the report holds the hops counted after the run and the measures)
    cases = varied_plans(11, 600)
    packed = []
    for plan in cases:
        try:
            packed.append(pieces_and_flow(plan))
        except ValueError:  # (a layout the prover refuses before it cuts)
            packed.append(None)
    reports = [outcome(prove_plan, plan) for plan in cases]
    monkeypatch.setattr(flow, "PACK_KEYS", False)
    for plan, arrays, report in zip(cases, packed, reports):
        assert outcome(prove_plan, plan) == report
        if arrays is not None:
            for a, b in zip(arrays, pieces_and_flow(plan)):
                same_arrays(a, b)


def write_hops(plan):
    """The wide-area hops of every write of a data-movement plan, after its run."""
    steps = encoding.encode(plan)
    matched = pairing.pair(plan, steps)  # (pieces may differ at a message's ends)
    cut, dataflow = pieces_and_flow(plan)
    clusters = np.unique(np.asarray(plan.clusters), return_inverse=True)[1].ravel()
    hops = values.Hops(cut, dataflow)
    Run(plan, cut, matched, dataflow, clusters.astype(np.int64), hops).run()
    return hops.of(np.flatnonzero(dataflow.writes))


def test_hops_count_copies_and_pieces_as_the_earlier_checker_does():
    # the most wide-area hops (receives and copies), on plans whose pieces differ at
    # a message's two ends and whose copies relay received data
    plans = [
        build("alltoall", Topology.from_sizes([3, 4, 2]), "combining"),
        build("allgather", Topology.from_sizes([2, 3, 3]), "magpie"),
        build("bcast", Topology.from_sizes([3, 3]), "magpie", root=4),
        build("gatherv", Topology.from_sizes([4, 1, 3]), "magpie", root=2),
    ]
    for plan in plans:
        same(plan)
        assert write_hops(plan).max() >= 1, plan.op


# ------------------------------------------------------------- large and broken
@pytest.fixture(scope="module")
def allgather_1024():
    return build("allgather", Topology.from_sizes([128] * 8), "magpie")


def _exchange(plan, a, b):
    """The indices of coordinator ``a``'s send to ``b`` and ``b``'s receive of it."""
    send = next(
        i for i, s in enumerate(plan.programs[a]) if s.kind == "send" and s.peer == b
    )
    recv = next(
        i for i, s in enumerate(plan.programs[b]) if s.kind == "recv" and s.peer == a
    )
    return send, recv


def test_allgather_at_1024_ranks_is_proved(allgather_1024):
    report = allgather_1024.prove()
    assert (report.wide_area_messages, report.optimality) == (56, "yes")


def test_a_block_dropped_from_one_message_is_refused_at_1024_ranks(allgather_1024):
    plan = allgather_1024
    send, recv = _exchange(plan, 0, 128)
    step = plan.programs[0][send]
    kept = step.blocks[:-1]  # block 127 no longer reaches cluster 1
    broken = replace(
        plan,
        {
            (0, send): [dataclasses.replace(step, blocks=kept)],
            (128, recv): [dataclasses.replace(plan.programs[128][recv], blocks=kept)],
        },
    )
    with pytest.raises(
        PlanError,
        match=r"reads block 127 of 'out', which rank 128 does "
        r"not hold",
    ) as e:
        broken.prove()
    assert e.value.rank == 128
    # the same edit on a small plan: the same error from both provers
    small = build("allgather", Topology.from_sizes([4] * 3), "magpie")
    send, recv = _exchange(small, 0, 4)
    step = small.programs[0][send]
    same(
        replace(
            small,
            {
                (0, send): [dataclasses.replace(step, blocks=step.blocks[:-1])],
                (4, recv): [
                    dataclasses.replace(small.programs[4][recv], blocks=step.blocks[:-1])
                ],
            },
        )
    )


def test_a_block_sent_twice_in_one_message_is_refused_at_1024_ranks(allgather_1024):
    plan = allgather_1024
    send, recv = _exchange(plan, 0, 256)
    step = plan.programs[0][send]
    doubled = step.blocks + (step.blocks[5],)
    broken = replace(
        plan,
        {
            (0, send): [dataclasses.replace(step, blocks=doubled)],
            (256, recv): [dataclasses.replace(plan.programs[256][recv], blocks=doubled)],
        },
    )
    with pytest.raises(
        PlanError,
        match=r"rank 256 step \d+ \(recv 0 .*\): receives "
        r"block 5 into 'out', but rank 256 already holds "
        r"that data in 'out' \(a block sent twice\)",
    ):
        broken.prove()


def test_a_message_of_an_alltoall_at_1024_ranks_dropped_or_doubled_is_refused():
    plan = build("alltoall", Topology.from_sizes([128] * 8), "magpie")
    size = plan.size
    # rank 5 sends block 5 * size + 6 first (to 6); rank 6 receives it first
    send, recv = 1, size
    assert plan.programs[5][send].blocks == (5 * size + 6,)
    assert plan.programs[6][recv].peer == 5
    dropped = replace(plan, {(5, send): [], (6, recv): []})
    with pytest.raises(
        PlanError, match=f"rank 6 ends without block {5 * size + 6} in 'out'"
    ):
        dropped.prove()
    twice = replace(
        plan,
        {
            (5, send): [plan.programs[5][send]] * 2,
            (6, recv): [plan.programs[6][recv]] * 2,
        },
    )
    with pytest.raises(
        PlanError,
        match=f"rank 6 step {recv + 1} .*receives block "
        f"{5 * size + 6} into 'out', but rank 6 already "
        f"holds",
    ):
        twice.prove()
    elsewhere = replace(
        plan,
        {
            (5, send): [
                dataclasses.replace(plan.programs[5][send], blocks=(5 * size + 7,))
            ],
            (6, recv): [
                dataclasses.replace(plan.programs[6][recv], blocks=(5 * size + 7,))
            ],
        },
    )
    with pytest.raises(
        PlanError,
        match=f"writes block {5 * size + 7} to 'out', which "
        f"has no place for it on rank 6",
    ):
        elsewhere.prove()


def combined_twice(plan, r):
    """``plan`` with rank ``r``'s first combining receive, and its peer's send to
    ``r``, done twice.

    Parameters
    ----------
    plan : wacoll.plans.Plan
        The plan to break.
    r : int
        A rank with a combining receive.

    Returns
    -------
    tuple
        ``(broken, i, step)``: the broken plan, the index of that receive in
        ``r``'s program, and the receive.
    """
    i, step = next(
        (i, s) for i, s in enumerate(plan.programs[r]) if s.kind == "recv_combine"
    )
    j = next(
        j
        for j, s in enumerate(plan.programs[step.peer])
        if s.kind == "send" and s.peer == r
    )
    broken = replace(
        plan, {(r, i): [step, step], (step.peer, j): [plan.programs[step.peer][j]] * 2}
    )
    return broken, i, step


def test_a_partial_combined_twice_is_refused_at_1024_ranks():
    plan = build(
        "reduce_scatter_block",
        Topology.from_sizes([128] * 8),
        "mpich",
        level="commutative",
    )
    r = next(
        r
        for r in range(plan.size)
        if any(s.kind == "recv_combine" for s in plan.programs[r])
    )
    broken, i, step = combined_twice(plan, r)
    with pytest.raises(
        PlanError,
        match=f"rank {r} step {i + 1} .*combines the contribution of rank {step.peer}",
    ) as e:
        broken.prove()
    assert (e.value.rank, e.value.step) == (r, i + 1)


def test_a_wrong_side_is_refused_at_level_strict_at_1024_ranks():
    plan = build("allreduce", Topology.from_sizes([128] * 8), "mpich", level="strict")
    plan.prove()
    r, i = next(
        (r, i)
        for r in range(plan.size)
        for i, s in enumerate(plan.programs[r])
        if s.kind == "recv_combine"
    )
    step = plan.programs[r][i]
    flipped = replace(
        plan,
        {
            (r, i): [
                dataclasses.replace(
                    step, side="left" if step.side == "right" else "right"
                )
            ]
        },
    )
    with pytest.raises(
        PlanError, match=f"rank {r} step {i} .*not part of the canonical expression"
    ):
        flipped.prove()
    associative = dataclasses.replace(flipped, level="associative")
    with pytest.raises(PlanError, match=f"rank {r} step {i} .*breaking rank order"):
        associative.prove()


# ------------------------------------------------------- the recent family at 4096
#: Every recent algorithm proved at 4096 ranks (one cluster, a block per rank or a
#: chunk per rank): minutes in all, so run with ``WACOLL_TEST_SCALE=1`` only.
RECENT_4096 = [
    (op, name)
    for op, names in sorted(
        __import__(
            "wacoll.plans.families.recent", fromlist=["ALGORITHMS"]
        ).ALGORITHMS.items()
    )
    for name in names
]


@pytest.mark.slow
@pytest.mark.skipif(
    __import__("os").environ.get("WACOLL_TEST_SCALE") != "1",
    reason="set WACOLL_TEST_SCALE=1 to prove the 4096-rank plans",
)
@pytest.mark.parametrize("op,name", RECENT_4096, ids=lambda x: str(x))
def test_every_recent_algorithm_is_proved_at_4096_ranks(op, name):
    size = 4096
    kw = {"algorithm": name}
    if op not in ("bcast", "allgather"):
        kw["level"] = "commutative"
    if op == "reduce_scatter":
        kw["counts"] = [1 + r % 2 for r in range(size)]
    else:
        kw["count"] = size
    report = build(op, Topology.single(size), "recent", **kw).prove()
    assert report.messages >= size - 1


# ------------------------------------------- Swing and Bine: values block by block
def recent_plans():
    """Swing's, Bine's and PAT's reductions on a few sizes (level commutative)."""
    for size in (2, 7, 8, 12):
        for op, name in (
            ("allreduce", "swing"),
            ("allreduce", "bine"),
            ("reduce_scatter_block", "swing"),
            ("reduce_scatter_block", "bine"),
            ("reduce_scatter", "pat"),
        ):
            yield build(
                op,
                Topology.single(size),
                "recent",
                algorithm=name,
                level="commutative",
                count=size,
            )


@pytest.mark.parametrize("seed", range(2))
def test_mutated_swing_and_bine_plans_get_the_same_report_or_error(seed):
    # their received pieces hold blocks of different expressions: the compiled pass
    # keeps a value per block, and must refuse (through the exact pass) what the
    # reference refuses
    rng = random.Random(seed)
    plans = list(recent_plans())
    for plan in plans:
        same(plan)
    for _ in range(300):
        plan = rng.choice(plans)
        for _ in range(rng.choice([1, 1, 2])):
            plan = mutate(plan, rng)
        same(plan)


def exact_outcome(plan, monkeypatch):
    """The outcome of the prover without its compiled pass of reductions."""
    return outcome(lambda p: prove_plan(p, block_pass=False), plan)


@pytest.fixture(scope="module")
def swing_256():
    return build(
        "allreduce",
        Topology.single(256),
        "recent",
        algorithm="swing",
        level="commutative",
        count=256,
    )


def test_a_swing_allreduce_at_256_ranks_combining_twice_is_refused(
    swing_256, monkeypatch
):
    r = 5
    broken, i, _ = combined_twice(swing_256, r)
    with pytest.raises(
        PlanError, match=f"rank {r} step {i + 1} .*combines the contribution of rank"
    ) as e:
        broken.prove()
    assert (e.value.rank, e.value.step) == (r, i + 1)
    assert outcome(prove_plan, broken) == exact_outcome(broken, monkeypatch)


def test_a_block_dropped_from_a_swing_allgather_message_is_refused(
    swing_256, monkeypatch
):
    plan = swing_256
    r = 9
    i, step = [(i, s) for i, s in enumerate(plan.programs[r]) if s.kind == "recv"][-1]
    j = next(
        j
        for j, s in enumerate(plan.programs[step.peer])
        if s.kind == "send" and s.peer == r and s.blocks == step.blocks
    )
    kept = step.blocks[:-1]
    broken = replace(
        plan,
        {
            (r, i): [dataclasses.replace(step, blocks=kept)],
            (step.peer, j): [
                dataclasses.replace(plan.programs[step.peer][j], blocks=kept)
            ],
        },
    )
    with pytest.raises(PlanError, match=f"rank {r} ends without block {step.blocks[-1]}"):
        broken.prove()
    # a block received twice: the copy it already holds is found block by block
    twice = replace(
        plan, {(r, i): [step, step], (step.peer, j): [plan.programs[step.peer][j]] * 2}
    )
    with pytest.raises(PlanError, match=f"rank {r} step {i + 1} .*already holds"):
        twice.prove()
    for broken_plan in (broken, twice):
        assert outcome(prove_plan, broken_plan) == exact_outcome(broken_plan, monkeypatch)
