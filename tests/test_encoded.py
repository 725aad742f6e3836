"""Plans whose programs are held as arrays (wacoll.plans.encoded).

The flat all-to-all and the ring allgather write their P * P steps as the prover's
arrays. Their programs must be exactly the steps the step-by-step builders append
(a focused build still appends them one by one), their digests the same as those
of the step tuples, and the prover must prove and refuse them as it does plans of
steps.
"""

import dataclasses

import numpy as np
import pytest

from wacoll import Topology
from wacoll.errors import PlanError
from wacoll.plans import build
from wacoll.plans.builder import focus
from wacoll.plans.encoded import (
    EncodedPrograms,
    program_digest,
    program_digests,
    single_block_steps,
)
from wacoll.plans.plan import Step
from wacoll.plans.proofs import plan_digest
from wacoll.plans.prover.encode import encode

CASES = [
    ("mpich", "alltoall", {}),
    ("mpich", "alltoall", {"order": "rotated"}),
    ("magpie", "alltoall", {}),
    ("mpich", "allgather", {}),
    ("mpich", "allgatherv", {"counts": "ragged"}),
    ("mpich", "alltoallv", {"counts": "matrix"}),
]
LAYOUTS = [[2], [3], [1, 1], [2, 3], [3, 1, 2], [1] * 7, [4, 4]]


def kwargs_for(options, size):
    if options.get("counts") == "ragged":
        return {"counts": [r % 3 for r in range(size)]}
    if options.get("counts") == "matrix":
        return {"counts": [[(i + 2 * j) % 3 for j in range(size)] for i in range(size)]}
    return options


@pytest.mark.parametrize("family, op, options", CASES)
@pytest.mark.parametrize("sizes", LAYOUTS)
def test_programs_are_the_steps_a_focused_build_appends(family, op, options, sizes):
    topo = Topology.from_sizes(sizes)
    kwargs = kwargs_for(options, topo.size)
    plan = build(op, topo, family, **kwargs)
    assert isinstance(plan.programs, EncodedPrograms)
    for r in range(topo.size):
        with focus(r):
            part = build(op, topo, family, **kwargs)
        assert plan.programs[r] == part.program
        assert program_digests(plan.programs)[r] == program_digest(part.program)
    report = plan.prove()
    as_steps = dataclasses.replace(plan, programs=tuple(plan.programs))
    assert as_steps.prove() == report
    assert plan_digest(as_steps) == plan_digest(plan)
    assert plan.programs == as_steps.programs


def test_encoding_a_held_plan_returns_its_arrays():
    plan = build("alltoall", Topology.single(4), "mpich")
    steps = encode(plan)
    assert steps is plan.programs.steps
    again = encode(dataclasses.replace(plan, programs=tuple(plan.programs)))
    for name in ("kind", "peer", "src", "dst", "block", "first", "start", "rank"):
        assert np.array_equal(getattr(steps, name), getattr(again, name)), name
    assert steps.buffers == again.buffers and steps.single == again.single


def test_a_broken_encoded_plan_is_refused_as_a_plan_of_steps():
    plan = build("allgather", Topology.single(4), "mpich")
    s = plan.programs.steps
    block = s.block.copy()
    block[5] = (block[5] + 1) % 4  # one send now carries another block than its receive
    broken = dataclasses.replace(
        plan, programs=EncodedPrograms(dataclasses.replace(s, block=block))
    )
    as_steps = dataclasses.replace(broken, programs=tuple(broken.programs))
    with pytest.raises(PlanError) as held:
        broken.prove()
    with pytest.raises(PlanError) as stepped:
        as_steps.prove()
    assert str(held.value) == str(stepped.value)


def test_digest_sees_every_field():
    base = (Step("recv_combine", (1,), peer=0, dst="acc", side="right", group=1),)
    others = [
        (Step("recv_combine", (1,), peer=0, dst="acc", side="left", group=1),),
        (Step("recv_combine", (1,), peer=0, dst="acc", side="right", group=2),),
        (Step("recv_combine", (2,), peer=0, dst="acc", side="right", group=1),),
        (Step("recv_combine", (1,), peer=2, dst="acc", side="right", group=1),),
        (Step("recv_combine", (1,), peer=0, dst="out", side="right", group=1),),
        (Step("recv", (1,), peer=0, dst="acc"),),
    ]
    digests = {program_digest(p) for p in [base, *others]}
    assert len(digests) == 1 + len(others)


def test_only_single_block_steps_without_groups_are_held():
    steps = single_block_steps(
        1,
        [1],
        np.array([3]),
        np.array([-1]),
        np.array([0]),
        np.array([1]),
        np.array([0]),
        ("in", "out"),
    )
    held = EncodedPrograms(steps)
    assert held[0] == (Step("copy", (0,), src="in", dst="out"),) and len(held) == 1
    with pytest.raises(ValueError, match="one block each"):
        EncodedPrograms(dataclasses.replace(steps, group=np.ones(1, bool)))
    with pytest.raises(ValueError, match="sorted"):
        single_block_steps(1, [1], [3], [-1], [1], [0], [0], ("out", "in"))


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda s: {"kind": _put(s.kind, 0, 9)}, "kinds"),
        (lambda s: {"src": _put(s.src, 1, -1)}, "src"),
        (lambda s: {"peer": _put(s.peer, 0, 1)}, "peer"),
        (lambda s: {"dst": _put(s.dst, 0, 7)}, "dst"),
        (lambda s: {"rank": _put(s.rank, 0, 1)}, "rank"),
        (lambda s: {"block": _put(s.block, 0, -1)}, "negative"),
        (lambda s: {"left": _put(s.left, 0, True)}, "side"),
        (lambda s: {"buffers": ("out", "in")}, "buffer names"),
    ],
)
def test_invalid_arrays_are_refused(edit, match):
    steps = build("allgather", Topology.single(3), "mpich").programs.steps
    with pytest.raises(ValueError, match=match):
        EncodedPrograms(dataclasses.replace(steps, **edit(steps)))


def _put(array, at, value):
    out = array.copy()
    out[at] = value
    return out


def test_held_plans_are_immutable_and_hash_as_their_steps():
    plan = build("alltoall", Topology.from_sizes([2, 1]), "magpie")
    with pytest.raises(ValueError):
        plan.programs.steps.block[0] = 5
    as_steps = dataclasses.replace(plan, programs=tuple(plan.programs))
    assert plan == as_steps and hash(plan) == hash(as_steps)
    again = build("alltoall", Topology.from_sizes([2, 1]), "magpie")
    assert (
        again.programs == plan.programs
        and again.programs.steps is not plan.programs.steps
    )
    with pytest.raises(PlanError, match="another size"):
        dataclasses.replace(plan, counts=plan.counts[:-1])


def test_digest_covers_buffer_names_in_full():
    a = (Step("copy", (0,), src="in", dst="tmp"),)
    b = (Step("copy", (0,), src="in", dst="tmq"),)
    assert program_digest(a) != program_digest(b)
