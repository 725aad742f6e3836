"""How a communicator's exploration measures (wacoll.mpi.learning), on a recording
stand-in for the ranks' communicator: explored calls run as they come, with no
collective of their own, and the choice is agreed once, on the slowest rank's
figures."""

import math

import numpy as np

from wacoll.mpi.learning import MARGIN, NOISE_FLOOR, Tuning


class Recorder:
    """Records the collectives the tuning makes; its Allreduce(MAX) sees another
    rank whose times are ``slower`` times this one's."""

    def __init__(self, slower=1.0):
        self.calls, self.slower = [], slower

    def Barrier(self):
        self.calls.append("Barrier")

    def Allreduce(self, _in_place, buf, op=None):
        self.calls.append("Allreduce")
        buf *= self.slower


SHAPE = ("reduce", 4, "<f8", "SUM", None, 0)


def _explore(tuning, seconds_of):
    """Run a shape's exploration, each candidate's calls taking ``seconds_of``."""
    cands = [None, "native", "modern"]
    while True:
        family, exploring = tuning.family_for(SHAPE, cands)
        if not exploring:
            return family
        tuning.observe(SHAPE, seconds_of[family], cands)


def test_explored_calls_make_no_collective_until_the_decision():
    """Each candidate's first call (not counted), then the counted calls in turns,
    one of each candidate after another; no explored call makes a collective of
    its own (no scheduled start, no barrier): the ranks agree once, after the last
    explored call, every rank at the same call."""
    comm = Recorder()
    tuning = Tuning(comm, rounds=3)
    cands = [None, "native", "modern"]
    ran, calls_seen = [], []
    for _ in range(9):
        family, exploring = tuning.family_for(SHAPE, cands)
        assert exploring
        ran.append(family)
        tuning.observe(SHAPE, 0.01, cands)
        calls_seen.append(len(comm.calls))
    assert ran == cands * 3
    assert calls_seen == [0] * 8 + [1]
    assert comm.calls == ["Allreduce"]
    assert tuning.family_for(SHAPE, cands)[1] is False


def test_the_choice_is_the_fastest_unless_the_model_is_within_the_margin():
    tuning = Tuning(Recorder(slower=2.0), rounds=2)
    assert _explore(tuning, {None: 0.02, "native": 0.01, "modern": 0.03}) == "native"
    assert tuning.table[0]["seconds"] == [0.04, 0.02, 0.06]  # the slowest rank's
    close = Tuning(Recorder(), rounds=2)
    near = 0.02 / (1 + MARGIN / 2)
    assert _explore(close, {None: 0.02, "native": near, "modern": 0.03}) is None


def test_a_candidate_that_cannot_run_is_counted_out():
    comm = Recorder()
    tuning = Tuning(comm, rounds=2)
    chosen = _explore(tuning, {None: 0.02, "native": math.inf, "modern": 0.01})
    assert chosen == "modern"
    # one agreement, at the decision, whatever the candidates could run
    assert comm.calls == ["Allreduce"]
    assert np.isinf(tuning.table[0]["seconds"][1])


def test_a_candidate_faster_by_less_than_the_noise_floor_does_not_replace_the_model():
    # microsecond calls: an explored call's time is mostly the ranks' skew
    tuning = Tuning(Recorder(), rounds=2)
    fast = {None: 2 * NOISE_FLOOR / 3, "native": NOISE_FLOOR / 3, "modern": NOISE_FLOOR}
    assert _explore(tuning, fast) is None
    slow = {None: 4 * NOISE_FLOOR, "native": NOISE_FLOOR, "modern": 5 * NOISE_FLOOR}
    assert _explore(Tuning(Recorder(), rounds=2), slow) == "native"


def _explore_calls(tuning, calls_of):
    """Run a shape's exploration, each candidate's k-th call taking
    ``calls_of[family][k]`` seconds."""
    cands, made = [None, "native", "modern"], {None: 0, "native": 0, "modern": 0}
    while True:
        family, exploring = tuning.family_for(SHAPE, cands)
        if not exploring:
            return family
        tuning.observe(SHAPE, calls_of[family][made[family]], cands)
        made[family] += 1


def test_a_candidate_faster_by_less_than_the_calls_spread_does_not_replace_the_model():
    # the library 7 % faster in the median, but each candidate's calls vary by
    # more than that: a toss-up, and the model's choice stays
    model = [0.02, 1.30e-3, 1.45e-3, 1.35e-3, 1.60e-3, 1.40e-3]
    library = [0.02, 1.20e-3, 1.45e-3, 1.28e-3, 1.50e-3, 1.31e-3]
    modern = [0.02] + [2e-3] * 5
    noisy = Tuning(Recorder(), rounds=6)
    assert (
        _explore_calls(noisy, {None: model, "native": library, "modern": modern}) is None
    )
    row = noisy.table[0]
    assert row["seconds"][1] < row["seconds"][0] / (1 + MARGIN)
    assert row["spread"][0] + row["spread"][1] > row["seconds"][0] - row["seconds"][1]
    # the same medians from steady calls: the library is clearly faster
    steady = Tuning(Recorder(), rounds=6)
    flat = {
        None: [0.02] + [1.40e-3] * 5,
        "native": [0.02] + [1.31e-3] * 5,
        "modern": modern,
    }
    assert _explore_calls(steady, flat) == "native"
    assert steady.table[0]["spread"] == [0.0, 0.0, 0.0]


def test_a_candidate_that_could_not_run_some_calls_does_not_replace_the_model():
    # a loop whose counts vary within one size class: the family plans some counts
    # and not others; its finite median says nothing sure
    tuning = Tuning(Recorder(), rounds=6)
    calls = {
        None: [0.02] + [2e-3] * 5,
        "native": [0.02] + [3e-3] * 5,
        "modern": [0.02, 1e-4, math.inf, 1e-4, math.inf, 1e-4],
    }
    assert _explore_calls(tuning, calls) is None
    assert math.isinf(tuning.table[0]["spread"][2])


def test_a_decided_shape_is_never_forgotten():
    """Ranks replay a decided shape's calls or read them afresh each on its own: a
    rank that forgot the choice would explore again, alone (a hang)."""
    from wacoll.mpi.bounded import SHAPES

    tuning = Tuning(Recorder(), rounds=1)
    assert _explore(tuning, {None: 0.02, "native": 0.01, "modern": 0.03}) == "native"
    cands = [None, "native"]
    for k in range(SHAPES + 5):  # many other shapes explored since
        tuning.observe(("bcast", k, "<f8", None, None, 0), 0.01, cands)
    assert tuning.family_for(SHAPE, [None, "native", "modern"]) == ("native", False)


def test_an_exploring_call_whose_shape_was_dropped_reads_the_call_afresh():
    """A shape's exploration dropped for newer ones (the bounded table): its
    recorded exploring call takes itself out and the call is read afresh (which
    starts the shape again, on every rank alike), never a crash."""
    from wacoll.mpi.bounded import SHAPES
    from wacoll.mpi.exploring import ExploringCall

    class Ran:
        plan = family = sig = flags = None

        def run(self, args):
            return True

    tuning = Tuning(Recorder(), rounds=2)
    cands = [None, "native"]
    tuning.observe(SHAPE, 0.01, cands)  # the first call, read afresh
    recordings = {}
    exploring = ExploringCall(tuning, SHAPE, lambda: None, recordings, "key")
    exploring.calls[None] = exploring.calls["native"] = Ran()
    recordings["key"] = exploring
    assert tuning.knows(SHAPE)
    for k in range(SHAPES):  # newer shapes, each started, drop the oldest
        tuning.observe(("bcast", k, "<f8", None, None, 0), 0.01, cands)
    assert not tuning.knows(SHAPE)
    assert exploring.run(()) is None
    assert "key" not in recordings
