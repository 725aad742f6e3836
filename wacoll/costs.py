"""Per-message cost models and the checks of their parameters.

Two simple models describe what one message costs; the tree cost functions of
:mod:`wacoll.trees.cost` and the simulator's models of :mod:`wacoll.plans.sim` both
take their formulas from here. A message costs its sender a time ``busy`` (it can
start its next send only then) and reaches its receiver ``delay`` after the send
started.

*Banikazemi et al. (ICPP 1998), message initiation cost*: a send from rank ``r``
occupies it ``t_ini[r]`` (plus ``nbytes / bandwidth`` if a bandwidth is given) and the
receiver has the message at the end: ``busy = delay`` (:func:`t_ini_message`).

*MagPIe (Kielmann et al., PPoPP 1999), Figure 1*: a send occupies its sender ``t_s``
and the receiver has the message ``t_r`` after the send started
(:func:`ts_tr_message`). Both may be functions of the message size.

A sender that has the message at ``ready`` and sends back to back gets its ``k``-th
message (``k`` from 0) to the receiver at ``ready + k * busy + delay``
(:func:`arrival`).

The parameters are a description of the network, so a bad one raises
:class:`~wacoll.errors.TopologyError`, wherever it is found: :func:`validate_time` for
times in seconds (``t_s``, ``t_r``, ``t_ini``, latencies, overheads),
:func:`validate_rate` for bandwidths in bytes per second and :func:`validate_t_ini` for
per-rank initiation costs.

Examples
--------
>>> t_ini = validate_t_ini([100, 300])
>>> busy, delay = t_ini_message(t_ini[0])
>>> [arrival(0, k, busy, delay) for k in range(3)]
[100, 200, 300]
>>> ts_tr_message(10, 1000)
(10, 1000)
>>> validate_time("t_s", -1)
Traceback (most recent call last):
...
wacoll.errors.TopologyError: t_s must be a finite number >= 0, got -1
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from wacoll.errors import TopologyError

__all__ = [
    "validate_time",
    "validate_rate",
    "validate_time_or_function",
    "validate_t_ini",
    "t_ini_message",
    "ts_tr_message",
    "arrival",
]


# ------------------------------------------------------------------ parameters
def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def validate_time(name, value):
    """``value`` as a Python int or float, finite and >= 0; TopologyError otherwise.

    Integers stay integers, so that costs given in whole units give whole results.

    Parameters
    ----------
    name : str
        What the value is, for the message.
    value : number
        A time (seconds, or any unit the caller keeps to).

    Examples
    --------
    >>> validate_time("t_r", 5), validate_time("latency", np.float64(0.5))
    (5, 0.5)
    >>> validate_time("t_ini[1]", float("nan"))
    Traceback (most recent call last):
    ...
    wacoll.errors.TopologyError: t_ini[1] must be a finite number >= 0, got nan
    """
    if not _is_real(value):
        raise TopologyError(f"{name} must be a finite number >= 0, got {value!r}")
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if not math.isfinite(value) or value < 0:
        raise TopologyError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def validate_rate(name, value, optional=True):
    """``value`` as a positive float (bytes per second), or None when ``optional``.

    Examples
    --------
    >>> validate_rate("bandwidth", 1e6), validate_rate("compute_rate", None)
    (1000000.0, None)
    >>> validate_rate("bandwidth", 0)
    Traceback (most recent call last):
    ...
    wacoll.errors.TopologyError: bandwidth must be > 0 bytes/s, got 0.0
    """
    if value is None and optional:
        return None
    if not _is_real(value):
        raise TopologyError(f"{name} must be a number of bytes/s > 0, got {value!r}")
    value = float(value)
    if not value > 0 or math.isnan(value):
        raise TopologyError(f"{name} must be > 0 bytes/s, got {value!r}")
    return value


def validate_time_or_function(name, value):
    """A time checked by :func:`validate_time`, or a callable ``f(nbytes)`` kept as is.

    Examples
    --------
    >>> validate_time_or_function("t_s", 2), callable(validate_time_or_function("t_s", len))
    (2, True)
    """
    if callable(value):
        return value
    return validate_time(name, value)


def validate_t_ini(costs, name="t_ini", item="t_ini of rank") -> list:
    """Per-rank message initiation costs as a list of Python numbers, each checked.

    Parameters
    ----------
    costs : sequence of number or 1-D numpy array
        ``costs[r]`` is rank ``r``'s ``t_ini``.
    name, item : str
        How messages name the sequence and, followed by a rank, one entry.

    Raises
    ------
    TopologyError
        Unless ``costs`` is a non-empty sequence of finite numbers >= 0.

    Examples
    --------
    >>> validate_t_ini(np.array([1.0, 3.0]))
    [1.0, 3.0]
    >>> validate_t_ini([1, -2], "costs", "cost of rank")
    Traceback (most recent call last):
    ...
    wacoll.errors.TopologyError: cost of rank 1 must be a finite number >= 0, got -2
    """
    if isinstance(costs, np.ndarray):
        if costs.ndim != 1 or costs.dtype.kind not in "iuf":
            raise TopologyError(
                f"{name} must be a one-dimensional sequence of numbers, "
                f"got an array of shape {costs.shape} and dtype "
                f"{costs.dtype}"
            )
        costs = costs.tolist()
    elif (
        isinstance(costs, (str, bytes, dict))
        or not hasattr(costs, "__len__")
        or not hasattr(costs, "__getitem__")
    ):
        raise TopologyError(
            f"{name} must be a sequence of numbers indexed by rank, got {costs!r}"
        )
    costs = [validate_time(f"{item} {r}", c) for r, c in enumerate(costs)]
    if not costs:
        raise TopologyError(f"{name} is empty: a tree needs at least one rank")
    return costs


# -------------------------------------------------------------------- formulas
def t_ini_message(t_ini, nbytes=0, bandwidth=None):
    """``(busy, delay)`` of a message under Banikazemi et al.'s model.

    Parameters
    ----------
    t_ini : number
        The sender's message initiation cost.
    nbytes : int
        The message's size.
    bandwidth : float, optional
        If given, the message also occupies its sender ``nbytes / bandwidth``.

    Examples
    --------
    >>> t_ini_message(100), t_ini_message(100, 1000, bandwidth=10)
    ((100, 100), (200.0, 200.0))
    """
    busy = t_ini if bandwidth is None else t_ini + nbytes / bandwidth
    return busy, busy


def ts_tr_message(t_s, t_r, nbytes=0):
    """``(busy, delay)`` of a message under MagPIe's ``t_s``/``t_r`` model.

    ``t_s`` and ``t_r`` are times or functions of ``nbytes``; a function's result is
    checked by :func:`validate_time`.

    Examples
    --------
    >>> ts_tr_message(10, lambda nbytes: 1 + nbytes / 100, nbytes=500)
    (10, 6.0)
    """
    if callable(t_s):
        t_s = validate_time("t_s(nbytes)", t_s(nbytes))
    if callable(t_r):
        t_r = validate_time("t_r(nbytes)", t_r(nbytes))
    return t_s, t_r


def arrival(ready, order, busy, delay):
    """When the message of send number ``order`` (from 0) reaches its receiver.

    The sender has the data at ``ready`` and sends back to back, each send occupying
    it ``busy``; a message arrives ``delay`` after its send started.

    Examples
    --------
    >>> arrival(0, 2, 10, 1000)
    1020
    """
    return ready + order * busy + delay
