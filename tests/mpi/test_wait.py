"""How a rank waits for its requests (:func:`wacoll.mpi.engine.wait_any`): it
returns the request that completed, also when it completes long after the wait
began (the wait then naps between polls; ``tests/test_naps.py`` checks how long)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.mpi.engine import wait_any

W = MPI.COMM_WORLD


@pytest.mark.mpi(min_size=1)
def test_wait_any_returns_the_request_that_completed():
    me = W.Get_rank()
    got = np.zeros(1, np.int64)
    never = W.Irecv(np.zeros(1, np.int64), source=me, tag=7)  # nothing is sent with 7
    recv = W.Irecv(got, source=me, tag=8)
    send = W.Isend(np.array([42], np.int64), dest=me, tag=8)
    assert wait_any([never, recv]) == 1
    assert got[0] == 42
    send.Wait()
    never.Cancel()
    never.Wait()


@pytest.mark.mpi(min_size=2)
def test_wait_any_waits_for_a_message_sent_later():
    me, size = W.Get_rank(), W.Get_size()
    got = np.zeros(1, np.int64)
    recv = W.Irecv(got, source=(me - 1) % size, tag=9)
    W.Barrier()  # every receive is posted before any send
    time.sleep(0.02 * (me + 1))  # well into the waits' napping
    send = W.Isend(np.array([me], np.int64), dest=(me + 1) % size, tag=9)
    assert wait_any([recv]) == 0 and got[0] == (me - 1) % size
    send.Wait()
