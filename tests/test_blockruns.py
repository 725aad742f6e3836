"""Block ids held as runs (BlockRuns), element runs held compactly (ElementRuns), and
the plans that use them: the combining all-to-all, whose coordinators' messages are
too many blocks for tuples on large topologies."""

import gc
import importlib
import pickle
import tracemalloc

import numpy as np
import pytest

from wacoll import Topology
from wacoll.errors import BufferMismatchError, PlanError
from wacoll.plans import Call, blockruns, build, lower, select
from wacoll.plans.blockruns import BlockRuns, block_array, compact_blocks
from wacoll.plans.encoded import program_digest
from wacoll.plans.lower import ElementRuns
from wacoll.plans.plan import Plan, Step
from wacoll.plans.prover.encode import encode
from wacoll.plans.rank import rank_plan, rank_program

lower_module = importlib.import_module(
    "wacoll.plans.lower"
)  # (the package exports the function)


def _id_arrays():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(0, 40))
        kind = rng.integers(0, 3)
        if kind == 0:  # ascending with repeated gaps
            yield rng.choice([1, 1, 3, 8], n).cumsum()
        elif kind == 1:  # anything, duplicates included
            yield rng.integers(0, 30, n)
        else:  # descending
            yield 500 - rng.choice([1, 2], n).cumsum()


@pytest.mark.parametrize("ids", list(_id_arrays()))
def test_runs_behave_as_the_tuple_of_their_ids(ids):
    runs = BlockRuns.from_array(ids)
    want = tuple(ids.tolist())
    assert block_array(runs).tolist() == list(want)
    assert tuple(runs) == want and runs == want and want == runs
    assert (runs == list(want)) == (want == list(want))  # (a tuple is no list)
    assert (runs == tuple(map(float, want))) and (runs == tuple(map(str, want))) == (
        not want
    )
    assert hash(runs) == hash(want) and len(runs) == len(want)
    assert [runs[i] for i in range(-len(want), len(want))] == list(want + want)
    assert runs[1:-1] == want[1:-1]
    assert pickle.loads(pickle.dumps(runs)) == runs
    assert len(runs.length) <= max(1, (len(want) + 1) // 2)  # never more runs than pairs


def test_runs_refuse_what_is_no_block_sequence():
    with pytest.raises(ValueError, match=">= 0"):
        BlockRuns([3], [-2], [3])  # 3, 1, -1
    with pytest.raises(ValueError, match="nonempty"):
        BlockRuns([0], [1], [0])
    with pytest.raises(ValueError, match="one length"):
        BlockRuns([0, 1], [1], [1])
    with pytest.raises(IndexError):
        BlockRuns([0], [1], [2])[2]
    assert BlockRuns([0], [1], [2]) != (0, 2) and BlockRuns([0], [1], [2]) != "ab"
    assert BlockRuns([0], [1], [3]) != (0.5, 1, 2) and BlockRuns([0], [1], [1]) != (
        2**70,
    )
    with pytest.raises(ValueError, match="below 2"):
        BlockRuns([0], [2**62], [5])  # ids that would wrap around in int64
    with pytest.raises(TypeError):
        BlockRuns([0], [1], [3])[1.5]


def test_compact_blocks_keeps_short_or_irregular_sets_as_tuples():
    assert compact_blocks(np.arange(blockruns.COMPACT_FROM)) == tuple(
        range(blockruns.COMPACT_FROM)
    )
    assert type(compact_blocks(np.arange(blockruns.COMPACT_FROM))) is tuple
    irregular = np.random.default_rng(1).permutation(1000)
    assert type(compact_blocks(irregular)) is tuple
    column = compact_blocks(np.arange(0, 4096 * 100, 4096) + 5)
    assert isinstance(column, BlockRuns) and len(column.length) == 1


def test_a_step_holds_runs_as_it_holds_the_tuple():
    runs = BlockRuns.from_ranges([(0, 100, 1), (200, 300, 10)])
    step = Step("send", runs, peer=2, src="in")
    same = Step("send", tuple(runs), peer=2, src="in")
    assert step == same and hash(step) == hash(same) and step.to_row() == same.to_row()
    assert str(step) == str(same)
    assert str(step).startswith("send 2 [0,1,2,") and str(step).endswith(
        ",... 110 blocks] from in"
    )
    assert program_digest((step,)) == program_digest((same,))
    with pytest.raises(PlanError, match="peer"):
        Step("send", runs, src="in")


def test_element_runs_equal_their_pairs():
    starts, lengths = np.arange(0, 700, 7), np.full(100, 3)
    runs = ElementRuns(starts, lengths)
    pairs = tuple((int(a), int(a) + 3) for a in starts)
    assert runs == pairs and tuple(runs) == pairs and hash(runs) == hash(pairs)
    assert runs[-1] == pairs[-1] and runs[2:4] == pairs[2:4] and len(runs) == 100
    assert runs.extent() == (0, 696) and runs.starts.length.tolist() == [100]
    assert [a.tolist() for a in runs.index()] == [starts.tolist(), lengths.tolist()]


def _as_tuples(plan):
    """``plan`` with every step's blocks as a tuple."""
    programs = tuple(
        tuple(
            Step(
                s.kind,
                tuple(s.blocks),
                peer=s.peer,
                src=s.src,
                dst=s.dst,
                side=s.side,
                group=s.group,
            )
            for s in program
        )
        for program in plan.programs
    )
    return Plan(
        op=plan.op,
        size=plan.size,
        root=plan.root,
        counts=plan.counts,
        programs=programs,
        clusters=plan.clusters,
        level=plan.level,
        itemsize=plan.itemsize,
        family=plan.family,
        algorithm=plan.algorithm,
        params=plan.params,
    )


def _pairs(runs):
    return None if runs is None else (runs[0], tuple(runs[1]))


def _lowered(program):
    return (
        [
            (s.kind, s.peer, s.elements, _pairs(s.src), _pairs(s.dst), s.direct, s.label)
            for s in program.steps
        ],
        program.scratch_sizes,
        program.in_extent,
        program.out_extent,
    )


TOPOLOGIES = {
    "even": Topology.from_sizes([4, 4, 4]),
    "uneven": Topology.from_sizes([1, 5, 3]),
    "reordered": Topology.from_clusters([[0, 3, 6, 8], [1, 4, 7], [2, 5]]),
}


@pytest.mark.parametrize("name", list(TOPOLOGIES))
@pytest.mark.parametrize("counts", [None, "random"])
@pytest.mark.parametrize("chunk", [blockruns.CHUNK, 5])
def test_runs_prove_digest_and_lower_as_tuples_do(name, counts, chunk, monkeypatch):
    """With every regular message held as runs (and every step of several element
    runs as ElementRuns), the combining all-to-all proves, digests and lowers as the
    same plan held as tuples, also when steps are read a few ids at a time."""
    monkeypatch.setattr(blockruns, "CHUNK", chunk)
    monkeypatch.setattr(blockruns, "COMPACT_FROM", 1)
    monkeypatch.setattr(blockruns, "IDS_PER_RUN", 0)
    monkeypatch.setattr(lower_module, "ELEMENT_RUNS_FROM", 1)
    topo = TOPOLOGIES[name]
    P = topo.size
    if counts is None:
        plan = build("alltoall", topo, "combining", count=2, itemsize=8)
    else:
        matrix = np.random.default_rng(P).integers(0, 3, (P, P)).tolist()
        plan = build("alltoallv", topo, "combining", counts=matrix, itemsize=8)
    held = sum(isinstance(s.blocks, BlockRuns) for p in plan.programs for s in p)
    assert held > P  # the runs are really there
    tuples = _as_tuples(plan)
    assert plan.prove() == tuples.prove()
    a, b = encode(plan), encode(tuples)  # the reader of steps takes runs as tuples
    for name in ("start", "kind", "peer", "src", "dst", "first", "block", "length"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    compact = 0
    for r in range(P):
        assert program_digest(plan.programs[r]) == program_digest(tuples.programs[r])
        runs_lowered, tuples_lowered = lower(plan, r), lower(tuples, r)
        assert _lowered(runs_lowered) == _lowered(tuples_lowered)
        many = [
            s
            for s in runs_lowered.steps
            for runs in (s.src, s.dst)
            if runs and isinstance(runs[1], ElementRuns)
        ]
        compact += len(many)
    assert compact or counts is not None  # the executor's compact path was exercised


def test_a_negative_offset_is_refused_as_a_buffer_mismatch_in_long_steps():
    """A step of more element runs than a tuple holds still reports a block placed at
    a negative offset as the buffer's fault."""
    plan = build("allgather", Topology.from_sizes([1, 70]), "magpie", count=1)
    out = {b: 2 * b for b in range(71)}  # every block its own run
    out[5] = -2
    with pytest.raises(BufferMismatchError, match="block 5 placed at negative offset -2"):
        lower(plan, 0, out_offsets=out)


def test_lowering_names_a_block_without_a_place():
    topo = Topology.single(2)
    plan = build("alltoall", topo, "mpich")
    with pytest.raises(PlanError, match="block 1 has no place in buffer 'in'"):
        lower(plan, 0, in_offsets={0: 0})


def test_a_coordinator_of_4096_ranks_derives_its_program_in_little_memory():
    """Issue goal: one rank's first call at 4096 ranks within 50 MiB. The coordinator
    of a combining all-to-all handles 7.3 million block ids; it used 1.35 GB."""
    topo = Topology.from_sizes([512] * 8)
    sel = select(Call("alltoall", count=1, itemsize=8), topo, family="combining")
    gc.collect()
    tracemalloc.start()
    try:
        part = rank_plan(sel, topo, 0)
        digest = program_digest(part.program)
        program = rank_program(sel, topo, 0, proof=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert len(digest) == 64
    kinds = [s.kind for s in program.steps]
    assert kinds.count("send") == 511 + 7 and kinds.count("recv") == 511 + 7
    assert (
        sum(s.elements for s in program.steps if s.kind == "send")
        == 511 * 3585 + 7 * 512 * 512
    )  # each member's column, each other cluster's share
