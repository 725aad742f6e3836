"""The benchmarks' shared modules import on a fresh install and their examples hold;
the benchmarks, their MPI programs and the demo use wacoll's public API only."""

import ast
import doctest
import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
PUBLIC_API_USERS = sorted(
    [
        *BENCHMARKS.glob("*.py"),
        *(BENCHMARKS / "apps").glob("*.py"),
        ROOT / "wacoll" / "tools" / "demo.py",
    ]
)
#: A package whose name starts with an underscore but is public as a module path: the
#: kernels' face (its own underscored attributes are not).
PUBLIC_MODULE_PATHS = {"_kernels"}


@pytest.mark.parametrize("path", ["_harness.py", "apps/_rankside.py"])
def test_shared_benchmark_module_examples(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, BENCHMARKS / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node):
    """The name an attribute chain starts from (``a`` of ``a.b.c``), and its length."""
    depth = 0
    while isinstance(node, ast.Attribute):
        node, depth = node.value, depth + 1
    if isinstance(node, ast.Call):  # wacoll.Comm(...)._x: the callee's root
        return _root(node.func)[0], depth
    return (node.id if isinstance(node, ast.Name) else None), depth


def _is_module(module, name):
    try:
        return inspect.ismodule(getattr(importlib.import_module(module), name))
    except ImportError:
        return False
    except AttributeError:  # a submodule not imported by its package
        return importlib.util.find_spec(f"{module}.{name}") is not None


def private_uses(source, filename="<source>"):
    """Where ``source`` reaches a private wacoll name: ``(line, text)`` pairs.

    Flagged: importing a private wacoll module or name (``wacoll._kernels`` itself
    excepted); an ``_attribute`` of anything that is not plainly a non-wacoll module
    (of a wacoll module, of an object derived from one, or of an object the file
    cannot trace, such as a parameter; ``self._x`` of the file's own classes is
    allowed); ``getattr``/``setattr``/``delattr`` with a private name; and assigning
    to an attribute of a wacoll module (monkeypatching).

    Examples
    --------
    >>> private_uses("from wacoll.mpi import executor\\nexecutor._Compiled(1)")
    [(2, 'executor._Compiled')]
    >>> private_uses("import wacoll._kernels as k\\nk.reduce_into(1, 2, 3)")
    []
    >>> private_uses("import wacoll.mpi.comm as m\\nm.run_program = None")
    [(2, 'assigns wacoll module attribute m.run_program')]
    >>> private_uses("def f(wc):\\n    return wc._plan(1)")
    [(2, 'wc._plan')]
    >>> private_uses("import sys\\nsys._getframe()")
    []
    """
    tree = ast.parse(source, filename)
    found = []
    wacoll_names = {
        "wacoll"
    }  # the module, also as a parameter or import_wacoll()'s result
    wacoll_modules = {"wacoll"}
    other_modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                bound = alias.asname or parts[0]
                if parts[0] != "wacoll":
                    other_modules.add(bound)
                    continue
                bad = [
                    p for p in parts[1:] if _private(p) and p not in PUBLIC_MODULE_PATHS
                ]
                if bad:
                    found.append((node.lineno, f"import {alias.name}"))
                wacoll_names.add(bound)
                wacoll_modules.add(bound)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            parts = module.split(".")
            if node.level or parts[0] != "wacoll":
                other_modules.update(a.asname or a.name for a in node.names)
                continue
            if any(_private(p) and p not in PUBLIC_MODULE_PATHS for p in parts[1:]):
                found.append((node.lineno, f"from {module} import ..."))
            for alias in node.names:
                bound = alias.asname or alias.name
                if _private(alias.name) and not (
                    alias.name in PUBLIC_MODULE_PATHS and _is_module(module, alias.name)
                ):
                    found.append((node.lineno, f"from {module} import {alias.name}"))
                wacoll_names.add(bound)
                if _is_module(module, alias.name):
                    wacoll_modules.add(bound)
    # names bound to anything computed from a wacoll name (flow-insensitive)
    assigns = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For))
    ]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            value = node.iter if isinstance(node, ast.For) else node.value
            if value is None:
                continue
            used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if not used & wacoll_names and not (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "import_wacoll"
            ):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name) and n.id not in wacoll_names:
                        wacoll_names.add(n.id)
                        changed = True
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root, depth = _root(node)
            if root in other_modules and root not in wacoll_names:
                continue
            if root in ("self", "cls") and depth == 1:
                continue
            found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "delattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = (
                node.targets
                if isinstance(node, (ast.Assign, ast.Delete))
                else [node.target]
            )
            for target in targets:
                if isinstance(target, ast.Attribute):
                    root, _ = _root(target)
                    if root in wacoll_modules:
                        found.append(
                            (
                                node.lineno,
                                f"assigns wacoll module attribute {ast.unparse(target)}",
                            )
                        )
    return sorted(set(found))


def test_private_use_detector_examples():
    import sys

    result = doctest.testmod(sys.modules[__name__])
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize("path", PUBLIC_API_USERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_uses_public_wacoll_names_only(path):
    """Benchmarks measure what a user runs: no private wacoll internals, no patching."""
    found = private_uses(path.read_text(), str(path))
    assert not found, (
        f"{path.relative_to(ROOT)} reaches private wacoll names: "
        + "; ".join(f"line {line}: {text}" for line, text in found)
    )


def segment_rules(source, filename="<source>"):
    """Where ``source`` computes a plan's ``segments`` itself: a ``segments=``
    keyword, a ``["segments"] =`` item or a ``"segments":`` key whose value is not a
    literal number. (A fixed, literal segment count is a plan the benchmark chose;
    a computed one copies the selection policy's rule.)

    Examples
    --------
    >>> segment_rules("build('bcast', t, 'tree', segments=16)")
    []
    >>> segment_rules("kw['segments'] = max(1, n // 4)")
    [1]
    >>> segment_rules("f(segments=math.ceil(n / S))")
    [1]
    """
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        values = []
        if isinstance(node, ast.keyword) and node.arg == "segments":
            values.append((node.value.lineno, node.value))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "segments"
                ):
                    values.append((node.lineno, node.value))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "segments":
                    values.append((key.lineno, value))
        for line, value in values:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, int)):
                found.append(line)
    return sorted(found)


@pytest.mark.parametrize(
    "path", sorted(BENCHMARKS.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_benchmarks_take_segments_from_the_selection_policy(path):
    """No benchmark keeps its own copy of the segment rule: wacoll.plans.select has it."""
    found = segment_rules(path.read_text(), str(path))
    assert not found, (
        f"{path.relative_to(ROOT)} computes segments itself (lines "
        f"{found}); ask wacoll.plans.select for the plan instead"
    )
