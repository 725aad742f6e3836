"""One node's ring of non-blocking checks (:class:`wacoll.mpi._runner.NodeRing`),
in one process: several rings over one array stand for the ranks of a node.

A check is the MAX of four int64 words over the ranks, published at a call's start
and read once every rank has published it; a rank may run up to ``RING_LINES``
checks ahead of the slowest rank's reading, and waits beyond.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from wacoll.mpi._runner import RING_LINE_WORDS, RING_LINES, NodeRing


def _node(size):
    lines = np.zeros(size * (RING_LINES + 1) * RING_LINE_WORDS, np.int64)
    return [NodeRing(lines, r, size, lambda: None) for r in range(size)], lines


def _flags(rank, k):
    digest = 1000 * k + 7
    return np.array([0, rank % 2, digest, -digest], np.int64)


def test_a_check_is_the_max_over_the_ranks_once_every_rank_published():
    rings, _ = _node(3)
    mine = [_flags(r, 1) for r in range(3)]
    k = rings[0].publish(mine[0])
    assert k == 1
    assert not rings[0].collect(k), "read before every rank published"
    rings[1].publish(mine[1])
    assert not rings[0].collect(k)
    rings[2].publish(mine[2])
    want = np.max([_flags(r, 1) for r in range(3)], axis=0)
    for r in range(3):
        assert rings[r].collect(k)
        assert mine[r].tolist() == want.tolist(), f"rank {r}"


def test_a_later_check_reads_the_earlier_ones_into_their_own_flags():
    rings, _ = _node(2)
    mine = {(r, k): _flags(r, k) for r in range(2) for k in (1, 2, 3)}
    mine[(1, 2)][0] = 5  # rank 1 flags an error in its second call
    for k in (1, 2, 3):
        for r in range(2):
            assert rings[r].publish(mine[(r, k)]) == k
    assert rings[0].collect(3)  # the last first: the others are read with it
    assert rings[0].done == 3
    assert rings[0].collect(1) and rings[0].collect(2)
    assert mine[(0, 2)][0] == 5 and mine[(0, 1)][0] == 0 and mine[(0, 3)][0] == 0
    assert mine[(0, 1)][1] == 1  # the MAX of the ranks' second words


def test_checks_go_round_the_ring_many_times():
    rings, _ = _node(3)
    for k in range(1, 5 * RING_LINES):
        mine = [_flags(r, k) for r in range(3)]
        if k % 11 == 0:
            mine[k % 3][2] += 1  # one rank's digest differs
        for r in range(3):
            assert rings[r].publish(mine[r]) == k
        for r in (2, 0, 1):
            assert rings[r].collect(k)
            passed = mine[r][2] == -mine[r][3]
            assert passed == (k % 11 != 0), f"check {k} on rank {r}"


def test_a_rank_waits_while_the_slowest_has_not_read_a_ring_behind():
    rings, _ = _node(2)
    ahead = [_flags(0, k) for k in range(1, RING_LINES + 2)]
    for k in range(RING_LINES):  # a full ring: rank 0's checks 1..RING_LINES
        rings[0].publish(ahead[k])
    published = threading.Event()

    def one_more():
        rings[0].publish(ahead[RING_LINES])  # waits: rank 1 has read nothing
        published.set()

    thread = threading.Thread(target=one_more, daemon=True)
    thread.start()
    time.sleep(0.2)
    assert not published.is_set(), "check 65 overwrote check 1 before rank 1 read it"
    behind = _flags(1, 1)
    rings[1].publish(behind)
    assert rings[1].collect(1)  # rank 1 reads check 1: room for check 65
    thread.join(5)
    assert published.is_set(), "rank 0 still waits after rank 1 read check 1"
    assert rings[0].seq == RING_LINES + 1
    assert behind.tolist() == np.maximum(ahead[0], _flags(1, 1)).tolist()


def test_a_rank_whose_ring_is_full_reads_its_own_checks_to_make_room():
    # Rank 0 starts more calls than its ring holds before it waits for any: every
    # rank has published the earlier checks, so it reads them itself.
    rings, _ = _node(2)
    mine = {(r, k): _flags(r, k) for r in range(2) for k in range(1, RING_LINES + 9)}
    mine[(1, 3)][0] = 2
    for k in range(1, RING_LINES + 1):
        rings[0].publish(mine[(0, k)])
        rings[1].publish(mine[(1, k)])
    assert rings[1].collect(RING_LINES)  # rank 1 has read them all
    assert rings[0].done == 0
    for k in range(RING_LINES + 1, RING_LINES + 9):
        assert rings[0].publish(mine[(0, k)]) == k  # no wait
    assert rings[0].done == RING_LINES  # as far as every rank has published
    assert mine[(0, 3)][0] == 2, "rank 0 read check 3 into its flags"
    for k in range(1, RING_LINES + 1):
        assert rings[0].collect(k)
        want = np.maximum(_flags(0, k), mine[(1, k)])
        assert mine[(0, k)].tolist() == want.tolist(), f"check {k}"


def test_bad_arguments_are_refused():
    rings, _ = _node(1)
    with pytest.raises(ValueError, match="four int64"):
        rings[0].publish(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="not published"):
        rings[0].collect(1)
    with pytest.raises(ValueError, match="too small"):
        NodeRing(np.zeros(10, np.int64), 0, 1, lambda: None)
