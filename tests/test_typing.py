"""The public API is typed: a type checker flags a user's wrong call.

wacoll ships ``py.typed``, and ``wacoll.Comm``'s collectives carry mpi4py's own
buffer types (``mpi4py.typing``) plus wacoll's keyword arguments, so mypy checks a
user's script against them: a missing buffer, a root given as text or an unknown
keyword of the constructor is an error before the program runs.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

import wacoll

mypy_api = pytest.importorskip("mypy.api", reason="mypy comes with the test extra")

#: Where the ``wacoll`` package is found: the checkout in an editable install
#: (whose import hook mypy cannot follow: it is named in MYPYPATH), or None when it
#: is installed (a wheel: mypy finds it in site-packages by its ``py.typed``).
PACKAGE_ROOT = Path(wacoll.__file__).resolve().parent.parent
if PACKAGE_ROOT.name in ("site-packages", "dist-packages"):
    PACKAGE_ROOT = None

GOOD = """
import numpy as np
from mpi4py import MPI
import wacoll

comm = wacoll.Comm(MPI.COMM_WORLD, family="magpie", check="beside")
x, y = np.ones(4), np.zeros(4)
comm.Allreduce(x, y, op=MPI.SUM)
comm.Allreduce(MPI.IN_PLACE, y)
comm.Bcast(x, root=0, family="mpich")
req: MPI.Request = comm.Iallreduce(x, y)
req.Wait()
step = comm.Allreduce_init(x, y)
step.Start()
step.Wait()
total: int = comm.allreduce(3)
name: str | None = comm.last_family
topo: wacoll.Topology = wacoll.Topology.from_sizes([2, 2], wan_latency=0.01)
plan = wacoll.plans.build("bcast", topo, "magpie", count=4)
report = plan.prove()
"""

#: Wrong calls, each with the line mypy must flag and a phrase of its message.
BAD = {
    "a missing receive buffer": (
        "comm.Allreduce(x)",
        'Missing positional argument "recvbuf"',
    ),
    "a root given as text": ('comm.Bcast(x, root="0")', 'incompatible type "str"'),
    "a topology of the wrong type": (
        'wacoll.Comm(MPI.COMM_WORLD, topology="4x2")',
        'incompatible type "str"',
    ),
    "an operator given as a number": (
        "comm.Allreduce(x, y, op=1)",
        'incompatible type "int"',
    ),
}


def _check(tmp_path, code):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(code))
    env_path = os.environ.get("MYPYPATH")
    if PACKAGE_ROOT is not None:
        os.environ["MYPYPATH"] = str(PACKAGE_ROOT)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # away from the project's own mypy configuration
    try:
        out, err, status = mypy_api.run(
            [
                "--follow-imports=silent",
                "--ignore-missing-imports",
                "--python-version=3.10",
                f"--cache-dir={tmp_path / 'mypy-cache'}",
                str(script),
            ]
        )
    finally:
        os.chdir(cwd)
        if env_path is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = env_path
    return out + err, status


def test_a_correct_script_passes_and_wrong_calls_are_flagged(tmp_path):
    said, status = _check(tmp_path, GOOD)
    assert status == 0, said
    # every wrong call at once (one run of the checker), each on a line of its own
    first = len(textwrap.dedent(GOOD).splitlines()) + 1
    said, status = _check(
        tmp_path, GOOD + "".join(line + "\n" for line, _ in BAD.values())
    )
    assert status == 1, said
    for n, (case, (_line, phrase)) in enumerate(BAD.items()):
        flagged = [
            m for m in said.splitlines() if f"user_script.py:{first + n}: error:" in m
        ]
        assert flagged and any(phrase in m for m in flagged), (
            f"{case} not flagged:\n{said}"
        )


def test_the_package_is_marked_typed():
    assert (Path(wacoll.__file__).parent / "py.typed").is_file()
