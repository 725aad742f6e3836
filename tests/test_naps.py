"""How long a waiting rank sleeps between polls (:func:`wacoll.mpi.engine.next_nap`):
growing with the wait, bounded so that a message is noticed soon after it arrives."""

import pytest

from wacoll.mpi import engine as progress_engine
from wacoll.mpi.engine import next_nap


def test_naps_grow_but_stay_bounded():
    naps, nap, waited = [], 1e-6, 0.0
    for _ in range(2000):
        waited += nap
        nap = next_nap(nap, waited)
        naps.append(nap)
    assert naps == sorted(naps)  # never shorter
    assert max(naps) == progress_engine.LONGEST_NAP
    # a short wait naps at most MAX_NAP; a long one at most 2 % of its length
    assert next_nap(1.0, 1e-3) == progress_engine.MAX_NAP
    assert next_nap(1.0, 0.02) == pytest.approx(0.02 * progress_engine.NAP_SHARE)


def test_the_progress_engine_keeps_short_naps():
    # its wait includes the wake-up of a newly submitted call
    assert (
        next_nap(1.0, 100.0, longest=progress_engine.MAX_NAP) == progress_engine.MAX_NAP
    )
