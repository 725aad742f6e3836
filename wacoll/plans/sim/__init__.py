"""The simulator: predict how long a plan takes under a network cost model.

:func:`simulate` runs every rank's program on a simulated clock (see
:mod:`wacoll.plans.sim.simulator` for the rules); the cost models are
:class:`TsTrModel` (MagPIe's ``t_s``/``t_r``), :class:`TiniModel` (Banikazemi's
``t_ini``) and :class:`LinkModel` (two-level latency/bandwidth with wide-area
contention, Matsuda). The per-message costs the models share with the tree cost
functions live in :mod:`wacoll.costs`.

Modules: ``simulator`` (the public entry), ``models``, ``engine`` (per-rank cursors
over precompiled programs), ``links`` (the wide-area fluid link engine), ``result``.
"""

from wacoll.plans.sim.models import LinkModel, TiniModel, TsTrModel
from wacoll.plans.sim.result import Event, SimResult
from wacoll.plans.sim.simulator import simulate

__all__ = ["simulate", "TsTrModel", "TiniModel", "LinkModel", "SimResult", "Event"]
