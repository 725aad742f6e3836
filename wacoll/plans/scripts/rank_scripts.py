"""PATHS-style rank scripts on disk: file names, writing, and reassembly into a plan.

PATHS looks a script up by operation, communicator size and rank, so the files are
named ``<op>-<size>-rank<rank>.scm`` (:func:`script_filename`). :func:`write_scripts`
writes a plan's scripts; :func:`scripts_in` finds those of one plan in a directory,
and :func:`assemble` checks that parsed scripts agree and rebuilds their plan, which
:func:`wacoll.plans.scripts.from_rank_scripts` returns.
"""

from __future__ import annotations

import re
from pathlib import Path

from wacoll.errors import ScriptError
from wacoll.plans.plan import Plan
from wacoll.plans.scripts.fields import HEADER_FIELDS, make_plan
from wacoll.plans.scripts.limits import Budget, cell_budget, plan_cells
from wacoll.plans.scripts.sexpr import relocate
from wacoll.plans.scripts.writer import rank_scripts, to_sexpr

__all__ = ["FILENAME", "script_filename", "write_scripts", "scripts_in", "assemble"]

#: The name of a rank script file.
FILENAME = re.compile(r"(?P<op>[a-z_]+)-(?P<size>[0-9]+)-rank(?P<rank>[0-9]+)\.scm\Z")


def script_filename(op: str, size: int, rank: int | None = None) -> str:
    """The file name of a plan (``rank=None``) or of one rank's script.

    Examples
    --------
    >>> script_filename("reduce", 32, 12), script_filename("reduce", 32)
    ('reduce-32-rank12.scm', 'reduce-32.scm')
    """
    return f"{op}-{size}.scm" if rank is None else f"{op}-{size}-rank{rank}.scm"


def write_scripts(plan: Plan, directory) -> list:
    """Write the whole plan and one script per rank into ``directory``.

    Names follow :func:`script_filename`: ``<op>-<size>.scm`` for the plan and
    ``<op>-<size>-rank<rank>.scm`` per rank; existing files of the same names are
    replaced. The directory is created if needed.

    Returns
    -------
    list of pathlib.Path
        The plan file first, then the rank scripts in rank order.

    Examples
    --------
    >>> import tempfile
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.scripts import from_rank_scripts
    >>> plan = build("reduce", Topology.single(3), "tree", tree="flat")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     names = [p.name for p in write_scripts(plan, d)]
    ...     again = from_rank_scripts(d)
    >>> names
    ['reduce-3.scm', 'reduce-3-rank0.scm', 'reduce-3-rank1.scm', 'reduce-3-rank2.scm']
    >>> again == plan
    True
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    texts = [(script_filename(plan.op, plan.size), to_sexpr(plan))]
    texts += [
        (script_filename(plan.op, plan.size, r), text)
        for r, text in rank_scripts(plan).items()
    ]
    paths = []
    for name, text in texts:
        path = directory / name
        path.write_text(text, encoding="utf-8", newline="\n")
        paths.append(path)
    return paths


def scripts_in(directory, op, size):
    """``{rank: path}`` of the one plan's rank scripts in ``directory``.

    ``op`` and ``size`` (either may be None) choose among several plans; it is an
    error if none or more than one plan remains.
    """
    groups = {}
    for path in sorted(Path(directory).iterdir()):
        m = FILENAME.match(path.name)
        if m is None or not path.is_file():
            continue
        key = (m["op"], int(m["size"]))
        if (op is None or key[0] == op) and (size is None or key[1] == size):
            groups.setdefault(key, {})[int(m["rank"])] = path
    if not groups:
        raise ScriptError(
            f"{directory}: no rank scripts named <op>-<size>-rank<rank>.scm"
            + (f" for op={op!r}" if op is not None else "")
            + (f" size={size}" if size is not None else "")
        )
    if len(groups) > 1:
        found = ", ".join(f"{o}-{s}" for o, s in sorted(groups))
        raise ScriptError(
            f"{directory}: rank scripts of several plans ({found}); pass "
            f"op= and size= to choose one"
        )
    return next(iter(groups.values()))


def assemble(items, parse, budget_of=None) -> Plan:
    """The proved plan of the rank scripts ``items``.

    ``items`` are ``(key, where, read)`` triples: the rank the script should be,
    where it comes from (for messages) and a function returning its text, which
    ``parse`` turns into a :class:`~wacoll.plans.scripts.reader.RankScript`.
    ``budget_of(nchars)`` is the :class:`~wacoll.plans.scripts.limits.Budget` of the
    scripts' total length, which the reassembled plan's checking work must fit.
    """
    scripts = {}
    nchars = 0
    for key, where, read in items:
        text = read()
        nchars += len(text) if isinstance(text, str) else 0
        try:
            script = parse(text)
        except ScriptError as e:
            raise relocate(e, where) from None
        if isinstance(key, bool) or not isinstance(key, int):
            raise ScriptError(f"{where}: scripts must be keyed by integer rank")
        if key != script.rank:
            raise ScriptError(f"{where}: the script is rank {script.rank}'s")
        if script.rank in scripts:
            raise ScriptError(f"{where}: rank {script.rank} is given twice")
        scripts[script.rank] = script
    if not scripts:
        raise ScriptError("no rank scripts given")
    first = scripts[min(scripts)]
    header = first.header
    for r, script in sorted(scripts.items()):
        for name in HEADER_FIELDS:
            if script.header[name] != header[name]:
                raise ScriptError(
                    f"the script of rank {r} disagrees with rank "
                    f"{first.rank} on field '{name}'"
                )
    missing = [r for r in range(header["size"]) if r not in scripts]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
        raise ScriptError(f"no script for ranks {shown} of {header['size']}")
    budget = budget_of(nchars) if budget_of is not None else Budget(cell_budget(nchars))
    cells = plan_cells(header["op"], header["size"], len(header["counts"]))
    if not budget.spend(cells):
        raise ScriptError(
            budget.refusal(f"the {header['op']} plan of these scripts", cells)
        )
    return make_plan(header, [scripts[r].program for r in range(header["size"])])
