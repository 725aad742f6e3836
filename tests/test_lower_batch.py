"""Short steps are lowered in batches exactly as they are lowered one by one.

A rank of an all-to-all has thousands of one-block steps; :mod:`wacoll.plans.lower`
lowers runs of short steps together (``SMALL_STEP``, ``BATCH_STEPS``). Every
family's plans on several topologies, with the default layouts and with shuffled,
gapped and incomplete user layouts, must lower to the same programs (or fail with
the same error) either way.
"""

import dataclasses
import importlib
import random

import pytest

from wacoll import BufferMismatchError, PlanError, Topology
from wacoll.plans import FAMILIES, build, builders, lower, options
from wacoll.plans import operations as ops
from wacoll.plans.lower import default_offsets
from wacoll.plans.plan import Step

# (the package's ``lower`` is the function; the module holds the batch sizes)
lowering = importlib.import_module("wacoll.plans.lower")


def plans():
    for family in FAMILIES:
        for op in builders(family):
            for sizes in ([3], [2, 2], [3, 1, 2], [4, 3]):
                kwargs = {"root": 1} if "root" in options(family, op) else {}
                if "segments" in options(family, op):
                    kwargs.update(segments=2, count=4)
                try:
                    yield build(op, Topology.from_sizes(sizes), family, **kwargs)
                except PlanError:
                    continue


def layouts(plan, rank, rng):
    """Default layouts, then shuffled and gapped ones, then one missing a block."""
    n = plan.nblocks
    ins = ops.in_blocks(plan.op, plan.size, plan.root, n, rank)
    outs = ops.out_blocks(plan.op, plan.size, plan.root, n, rank)
    yield None, None
    for _ in range(2):
        shuffled = []
        for blocks in (ins, outs):
            order = list(blocks)
            rng.shuffle(order)
            at, offsets = 0, {}
            for b in order:
                offsets[b] = at
                at += plan.counts[b] + rng.choice([0, 0, 3])
            shuffled.append(offsets)
        yield tuple(shuffled)
    if outs:
        gone = default_offsets(outs, plan.counts)
        del gone[rng.choice(list(outs))]
        yield None, gone


def comparable(program):
    """A lowered program with its pack arrays as lists (arrays do not compare)."""

    def listed(index):
        return None if index is None else [a.tolist() for a in index]

    steps = [
        dataclasses.replace(
            s, src_index=listed(s.src_index), dst_index=listed(s.dst_index)
        )
        for s in program.steps
    ]
    return dataclasses.replace(program, steps=tuple(steps))


def outcome(plan, rank, ins, outs):
    try:
        return comparable(lowering.lower(plan, rank, ins, outs))
    except (PlanError, BufferMismatchError) as e:
        return (type(e).__name__, str(e))


def test_batches_lower_as_steps_one_by_one(monkeypatch):
    rng = random.Random(5)
    compared = 0
    for plan in plans():
        for rank in range(plan.size):
            for ins, outs in layouts(plan, rank, rng):
                batched = outcome(plan, rank, ins, outs)
                with monkeypatch.context() as patch:
                    patch.setattr(lowering, "SMALL_STEP", -1)  # every step alone
                    alone = outcome(plan, rank, ins, outs)
                assert batched == alone, (plan.op, plan.family, rank)
                compared += 1
    assert compared > 1000


@pytest.mark.parametrize("batch_steps", [2, 3, 4096])
def test_batches_of_any_length(monkeypatch, batch_steps):
    monkeypatch.setattr(lowering, "BATCH_STEPS", batch_steps)
    plan = build("alltoall", Topology.from_sizes([3, 4]), "mpich")
    batched = [comparable(lower(plan, r)) for r in range(plan.size)]
    monkeypatch.setattr(lowering, "SMALL_STEP", -1)
    assert batched == [comparable(lower(plan, r)) for r in range(plan.size)]


def random_program(plan, rng, length):
    """Short steps of every kind on random buffers and blocks (some with no place
    in a buffer, some repeated, some no block of the plan): lowering does not prove
    a program, so these need not make sense."""
    kinds = ["send", "recv", "recv", "copy", "recv_combine", "combine"]
    buffers = ["in", "out", "out", "tmp", "acc"]
    steps = []
    for _ in range(length):
        kind = rng.choice(kinds)
        top = plan.nblocks + (1 if rng.random() < 0.02 else 0)
        blocks = tuple(rng.randrange(top) for _ in range(rng.choice([0, 1, 1, 2, 3, 5])))
        if rng.random() < 0.3 and blocks:
            blocks = tuple(range(blocks[0], min(blocks[0] + 4, plan.nblocks)))
        src, dst = rng.choice(buffers), rng.choice(buffers)
        if kind == "send":
            steps.append(Step(kind, blocks, peer=1, src=src))
        elif kind == "recv":
            steps.append(Step(kind, blocks, peer=1, dst=dst))
        elif kind == "recv_combine":
            steps.append(Step(kind, blocks, peer=1, dst=dst, side="left"))
        elif kind == "copy":
            steps.append(Step(kind, blocks, src=src, dst=dst))
        else:
            steps.append(Step(kind, blocks, src=src, dst=dst, side="right"))
    return tuple(steps)


def test_random_programs_lower_alike(monkeypatch):
    # receives into slots that earlier steps of the same batch touched, ids without
    # a place, ids beyond the plan, empty steps, zero-element blocks
    direct = touched = 0
    for op in ("allreduce", "alltoallv", "allgather"):
        rng = random.Random(op)
        kwargs = (
            {"counts": [[rng.randrange(3) for _ in range(4)] for _ in range(4)]}
            if op == "alltoallv"
            else {"count": 3}
        )
        plan = build(op, Topology.from_sizes([2, 2]), "mpich", **kwargs)
        for _ in range(300):
            program = random_program(plan, rng, rng.randrange(1, 40))
            rank = rng.randrange(plan.size)

            def lowered():
                try:
                    return comparable(lowering.lower_steps(plan, rank, program))
                except (PlanError, BufferMismatchError, IndexError) as e:
                    # (an id beyond the plan in a scratch buffer fails its layout)
                    return (type(e).__name__, str(e))

            batched = lowered()
            with monkeypatch.context() as patch:
                patch.setattr(lowering, "SMALL_STEP", -1)
                alone = lowered()
            assert batched == alone, op
            if not isinstance(alone, tuple):
                receives = [s for s in alone.steps if s.kind == "recv"]
                direct += sum(s.direct for s in receives)
                touched += sum(not s.direct and len(s.dst[1]) <= 1 for s in receives)
    assert direct and touched  # both kinds of receive were compared
