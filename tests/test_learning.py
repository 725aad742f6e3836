"""How a communicator's exploration measures (wacoll.mpi.learning), on a recording
stand-in for the ranks' communicator: each explored call starts from a barrier, and
the choice is agreed once, on the slowest rank's figures."""

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


def test_each_explored_call_but_the_last_is_followed_by_a_barrier():
    comm = Recorder()
    tuning = Tuning(comm, rounds=3, clock_offset=0.0)
    _explore(tuning, {None: 0.02, "native": 0.01, "modern": 0.03})
    assert comm.calls == ["Barrier"] * 8 + ["Allreduce"]


def test_the_choice_is_the_fastest_unless_the_model_is_within_the_margin():
    tuning = Tuning(Recorder(slower=2.0), rounds=2, clock_offset=0.0)
    assert _explore(tuning, {None: 0.02, "native": 0.01, "modern": 0.03}) == "native"
    assert tuning.table[0]["seconds"] == [0.04, 0.02, 0.06]  # the slowest rank's
    close = Tuning(Recorder(), rounds=2, clock_offset=0.0)
    near = 0.02 / (1 + MARGIN / 2)
    assert _explore(close, {None: 0.02, "native": near, "modern": 0.03}) is None


def test_a_candidate_that_cannot_run_is_counted_out_without_a_barrier():
    comm = Recorder()
    tuning = Tuning(comm, rounds=1, clock_offset=0.0)
    chosen = _explore(tuning, {None: 0.02, "native": math.inf, "modern": 0.01})
    assert chosen == "modern"
    assert comm.calls == ["Barrier", "Allreduce"]
    assert np.isinf(tuning.table[0]["seconds"][1])


def test_a_candidate_faster_by_less_than_the_noise_floor_does_not_replace_the_model():
    # microsecond calls: an explored call's time is mostly the barrier's skew
    tuning = Tuning(Recorder(), rounds=2, clock_offset=0.0)
    fast = {None: 2 * NOISE_FLOOR / 3, "native": NOISE_FLOOR / 3, "modern": NOISE_FLOOR}
    assert _explore(tuning, fast) is None
    slow = {None: 4 * NOISE_FLOOR, "native": NOISE_FLOOR, "modern": 5 * NOISE_FLOOR}
    assert _explore(Tuning(Recorder(), rounds=2, clock_offset=0.0), slow) == "native"
