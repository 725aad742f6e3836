"""The package's layout, as a maintainer relies on it:

- no import cycles, and a plan world that needs no MPI;
- layers (:data:`LAYERS`): no import reaches up from a lower one;
- no module uses another module's private names (tests and benchmarks included);
- exception classes live in ``wacoll/errors.py`` only;
- ``WACOLL_*`` variables are read through ``wacoll/settings.py`` only;
- the layout page (``docs/layout.rst``) names every module, and no module that is gone.

The import graph is read from the source, not from a running interpreter: every
``import`` and ``from ... import`` in a module counts, at module level or inside a
function (a lazy import is a cycle deferred, not removed), and so does a string that
names a wacoll module (a table for ``importlib.import_module``).
"""

import ast
import pathlib
import subprocess
import sys
import textwrap

import networkx as nx

import wacoll

ROOT = pathlib.Path(wacoll.__file__).parent


def _modules() -> dict:
    """Dotted module name -> path, for every Python module of the package."""
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        mods[".".join(parts)] = path
    return mods


def _imported(node, package, mods) -> list:
    """The wacoll modules ``node`` imports (or names), resolved against ``package``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module
        # ``from package import submodule`` imports the submodule
        return [
            f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module
            for a in node.names
        ]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def _run_time_nodes(tree):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for
    annotations only, which never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.If)
                and isinstance(child.test, ast.Name)
                and child.test.id == "TYPE_CHECKING"
            ):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def import_graph() -> nx.DiGraph:
    """Edges ``a -> b``: module ``a`` imports module ``b`` (both in wacoll) when it
    runs (imports made for type checkers alone are not edges)."""
    mods = _modules()
    graph = nx.DiGraph()
    for name, path in mods.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _run_time_nodes(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, package, mods):
                if target in mods and target != name:
                    graph.add_edge(name, target)
    return graph


def test_the_import_graph_is_read():
    graph = import_graph()
    edges = set(graph.edges)
    assert (
        "wacoll.plans.families.magpie",
        "wacoll.plans.families.magpie_reduce",
    ) in edges
    assert ("wacoll.trees.cost", "wacoll.costs") in edges
    assert ("wacoll.plans.sim.models", "wacoll.costs") in edges
    # a lazy import inside a function, and a module named in a table, count
    assert ("wacoll", "wacoll.mpi.comm") in edges
    assert ("wacoll.plans.families", "wacoll.plans.families.tree") in edges


def test_no_import_cycles():
    graph = import_graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == []


def test_the_plan_world_imports_no_mpi_world():
    graph = import_graph()
    plan_world = [
        "wacoll.errors",
        "wacoll.costs",
        "wacoll.topology",
        "wacoll.trees",
        "wacoll.plans",
        "wacoll.plans.families",
        "wacoll.plans.sim",
        "wacoll.plans.scripts",
    ]
    reached = set().union(*(nx.descendants(graph, m) | {m} for m in plan_world))
    assert (
        sorted(m for m in reached if m.startswith(("wacoll.mpi", "wacoll._kernels")))
        == []
    )


BLOCKED = textwrap.dedent("""
    import sys

    class Blocked:
        '''Refuse mpi4py and wacoll's kernels, as on a machine without MPI.'''

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "mpi4py" or name.startswith("wacoll._kernels"):
                raise ImportError(f"{name} is blocked")
            return None

    sys.meta_path.insert(0, Blocked())

    import wacoll, wacoll.plans, wacoll.trees, wacoll.plans.sim, wacoll.plans.scripts
    from wacoll import Topology
    from wacoll.plans import FAMILIES, build, builders, options
    from wacoll.plans.sim import LinkModel, TsTrModel, simulate

    topo = Topology.from_sizes([3, 3])
    for family in FAMILIES:
        for op in builders(family):
            level = {"level": "associative"} if "level" in options(family, op) else {}
            try:
                build(op, topo, family, **level).prove()
            except wacoll.PlanError:  # (a family that keeps level 'commutative' only)
                if not level:
                    raise
                build(op, topo, family, level="commutative").prove()
    plan = build("allreduce", topo, "magpie", level="associative", count=64)
    report = plan.prove()
    assert report.optimality == "yes", report
    assert simulate(plan, LinkModel(topo)).completion > 0
    assert simulate(plan, TsTrModel(1, 5)).completion > 0
    again = wacoll.plans.scripts.from_sexpr(wacoll.plans.scripts.to_sexpr(plan))
    assert again.prove().messages == report.messages
    loaded = [m for m in sys.modules if m.startswith(("mpi4py", "wacoll._kernels",
                                                      "wacoll.mpi"))]
    assert loaded == [], loaded
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pass
    else:
        raise AssertionError("the block did not hold")
    print("ok")
""")


def test_the_plan_world_works_without_mpi_and_kernels():
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def _environment_reads(tree) -> list:
    """The ``WACOLL_*`` names a module reads from ``os.environ`` itself
    (``environ.get(NAME)``, ``environ[NAME]``; NAME a string or a module constant)."""
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, str)
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    def named(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    def is_environ(node):
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ"
        )

    found = []
    for node in ast.walk(tree):
        key = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and is_environ(node.func.value)
            and node.args
        ):
            key = named(node.args[0])
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            key = named(node.slice)
        if key and key.startswith("WACOLL_"):
            found.append(key)
    return found


def test_wacoll_variables_are_read_in_one_place():
    """Every ``WACOLL_*`` variable wacoll reads goes through :mod:`wacoll.settings`,
    whose table names it."""
    from wacoll.settings import VARIABLES

    own = ROOT / "settings.py"
    readers = {
        str(path.relative_to(ROOT.parent)): reads
        for path in sorted(ROOT.rglob("*.py"))
        if path != own
        for reads in [_environment_reads(ast.parse(path.read_text()))]
        if reads
    }
    assert readers == {}, f"read WACOLL_* variables outside wacoll.settings: {readers}"
    text = own.read_text()
    for name in VARIABLES:
        assert f'"{name}"' in text


def test_the_environment_check_finds_a_reader():
    tree = ast.parse(
        'import os\nENV = "WACOLL_X"\nos.environ.get(ENV, "")\nenviron["WACOLL_Y"]\n'
    )
    assert _environment_reads(tree) == ["WACOLL_X", "WACOLL_Y"]


def _class_names(tree) -> set:
    """The names of the classes ``tree`` defines, at any depth."""
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def _exception_classes(tree, known=()) -> list:
    """The classes ``tree`` defines (at any depth) that derive directly from an
    exception class: a base named ``*Error``, ``*Exception`` or ``*Warning``
    (``MPI.Exception`` too), one of ``known`` (the classes of :mod:`wacoll.errors`),
    or a built-in exception (``OSError``, ``StopIteration``, ...)."""
    import builtins

    def is_exception(name):
        builtin = getattr(builtins, name, None)
        return (
            name.endswith(("Error", "Exception", "Warning"))
            or name in known
            or (isinstance(builtin, type) and issubclass(builtin, BaseException))
        )

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names = [
                base.attr if isinstance(base, ast.Attribute) else base.id
                for base in node.bases
                if isinstance(base, (ast.Attribute, ast.Name))
            ]
            if any(map(is_exception, names)):
                found.append(node.name)
    return found


def test_exception_classes_live_in_errors():
    """Every exception and warning class of wacoll is defined in
    :mod:`wacoll.errors`."""
    own = ROOT / "errors.py"
    known = _class_names(ast.parse(own.read_text()))
    defined = {
        str(path.relative_to(ROOT.parent)): classes
        for path in sorted(ROOT.rglob("*.py"))
        if path != own
        for classes in [_exception_classes(ast.parse(path.read_text()), known)]
        if classes
    }
    assert defined == {}, f"exception classes defined outside wacoll.errors: {defined}"


def test_the_exception_check_finds_a_class():
    tree = ast.parse(
        "from mpi4py import MPI\n"
        "class A(ValueError): pass\n"
        "class B(MPI.Exception): pass\n"
        "class C(StopIteration): pass\n"
        "class D(TestbedUnavailable): pass\n"
        "class E(UserWarning, dict): pass\n"
        "class F(dict): pass\n"
        "class G: pass\n"
        "def f():\n"
        "    class H(OSError): pass\n"
    )
    assert _exception_classes(tree, {"TestbedUnavailable"}) == [
        "A",
        "B",
        "C",
        "D",
        "E",
        "H",
    ]
    assert _exception_classes(ast.parse("class D(TestbedUnavailable): pass")) == []


#: The package's layers, lowest first: a module imports only from its own layer and
#: those below (the package root, the public face, is exempt: it loads the MPI world
#: lazily). The bridge between the plans and MPI is the MPI world's: it is the only
#: layer that imports mpi4py.
LAYERS = (
    (
        "shared",
        ("wacoll.errors", "wacoll.settings", "wacoll.strict_json", "wacoll.datafile"),
    ),
    (
        "plan world",
        (
            "wacoll.costs",
            "wacoll.topology",
            "wacoll.calibration",
            "wacoll.trees",
            "wacoll.plans",
        ),
    ),
    ("kernels", ("wacoll._kernels",)),
    ("MPI world", ("wacoll.mpi",)),
    ("tools", ("wacoll.emulate", "wacoll.tools", "wacoll.cli")),
)


def layer_of(module: str):
    """The index in :data:`LAYERS` of ``module``'s layer (None: the package root)."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def test_every_module_has_a_layer():
    assert [m for m in _modules() if m != "wacoll" and layer_of(m) is None] == []


def test_no_import_reaches_up_a_layer():
    graph = import_graph()
    upward = sorted(
        (a, b)
        for a, b in graph.edges
        if None not in (layer_of(a), layer_of(b)) and layer_of(a) < layer_of(b)
    )
    assert upward == [], "imports from a lower layer into a higher one: " + ", ".join(
        f"{a} -> {b} ({LAYERS[layer_of(a)][0]} -> {LAYERS[layer_of(b)][0]})"
        for a, b in upward
    )


#: Where the private-name check reads: the package, its tests and benchmarks, and the
#: script that writes the notebooks.
PRIVATE_NAME_SCOPE = ("wacoll", "tests", "benchmarks", "notebooks/make_notebooks.py")


def _every_module() -> set:
    """The dotted names of wacoll's modules, the compiled ones (``.pyx``) too."""
    return {
        ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for path in ROOT.rglob("*")
        if path.suffix in (".py", ".pyx")
        for rel in [path.relative_to(ROOT.parent).with_suffix("")]
    }


def _is_private(name: str) -> bool:
    """One leading underscore: ``_x``, not ``__x__`` (nor ``__x``, nor ``_``)."""
    return len(name) > 1 and name[0] == "_" and name[1] != "_"


def private_name_uses(tree, module=None, mods=(), package=None) -> list:
    """``(line, dotted name)`` of every private name of another wacoll module that
    ``tree`` (the source of ``module``; None outside wacoll) uses.

    A private name starts with one underscore. Found: ``from wacoll.x import _name``
    (relative imports resolved within wacoll); ``alias._name`` where the file binds
    ``alias`` to a wacoll module (``import wacoll.x as alias``, ``from wacoll import x``,
    ``from . import x``; ``import wacoll.x`` binds ``wacoll``: ``wacoll.x._name``); a
    call with such a module and the name as a string (``getattr(alias, "_name")``,
    ``monkeypatch.setattr(alias, "_name", ...)``). Not found: a private *module* such
    as ``wacoll.mpi._runner`` (its package and its tests import it; its private names
    are found), a module's own private names, and private attributes of objects
    (``comm._x``). ``package`` is the package relative imports start from (default:
    ``module``'s parent; pass ``module`` itself for a package's ``__init__``);
    ``mods`` holds the dotted names of wacoll's modules (:func:`_every_module`).
    Bindings are read for the whole file, wherever they are made.
    """
    if package is None and module is not None:
        package = module.rpartition(".")[0]
    found, bound = [], {}

    def is_wacoll(name):
        return name == "wacoll" or name.startswith("wacoll.")

    def private_of(owner, name):
        """``owner.name`` if it is a private name (not a module) of another module."""
        full = f"{owner}.{name}"
        if _is_private(name) and owner != module and full not in mods:
            return full
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_wacoll(alias.name):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound["wacoll"] = "wacoll"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    continue
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not is_wacoll(source):
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in mods:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif name := private_of(source, alias.name):
                    found.append((node.lineno, name))

    def owner_of(node):
        """The wacoll module an expression names through the file's bindings."""
        if isinstance(node, ast.Name):
            return bound.get(node.id)
        if isinstance(node, ast.Attribute):
            outer = owner_of(node.value)
            if outer and f"{outer}.{node.attr}" in mods:
                return f"{outer}.{node.attr}"
        return None

    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            owner = owner_of(node.value)
            name = owner and private_of(owner, node.attr)
        elif (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            owner = owner_of(node.args[0])
            name = owner and private_of(owner, node.args[1].value)
        if name:
            found.append((node.lineno, name))
    return sorted(found)


def test_the_private_name_check_finds_every_form():
    mods = {
        "wacoll",
        "wacoll.mpi",
        "wacoll.mpi.engine",
        "wacoll.mpi._runner",
        "wacoll.plans",
        "wacoll.plans.sim",
        "wacoll.plans.sim.engine",
        "wacoll.plans.sim.simulator",
    }
    source = textwrap.dedent("""
        import wacoll.mpi._runner as _runner
        import wacoll.mpi.engine
        from wacoll.mpi import engine as progress
        from wacoll.plans.sim.engine import _Engine, simulate, __doc__
        from wacoll.mpi import _runner

        _runner.run(progress.next_nap, progress.__name__, progress._MAX_NAP)
        _runner._reducer(wacoll.mpi.engine._LONGEST_NAP)
        monkeypatch.setattr(progress, "_NAP_SHARE", 1)
        getattr(wacoll.mpi.engine, "next_nap"), hasattr(progress, "_SPIN")
        comm._seq, self._cache, other._x
    """)
    assert private_name_uses(ast.parse(source), None, mods) == [
        (5, "wacoll.plans.sim.engine._Engine"),
        (8, "wacoll.mpi.engine._MAX_NAP"),
        (9, "wacoll.mpi._runner._reducer"),
        (9, "wacoll.mpi.engine._LONGEST_NAP"),
        (10, "wacoll.mpi.engine._NAP_SHARE"),
        (11, "wacoll.mpi.engine._SPIN"),
    ]
    # relative imports, resolved within wacoll; a module's own names are its own
    own = "from .engine import _Engine\nfrom . import engine\nengine._programs(_flat)\n"
    assert private_name_uses(ast.parse(own), "wacoll.plans.sim.simulator", mods) == [
        (1, "wacoll.plans.sim.engine._Engine"),
        (3, "wacoll.plans.sim.engine._programs"),
    ]
    itself = "import wacoll.plans.sim.engine as me\nme._CACHE\n"
    assert private_name_uses(ast.parse(itself), "wacoll.plans.sim.engine", mods) == []
    package = "from .sim import _helper\nfrom . import sim\nsim._x\n"
    assert private_name_uses(
        ast.parse(package), "wacoll.plans", mods, "wacoll.plans"
    ) == [(1, "wacoll.plans.sim._helper"), (3, "wacoll.plans.sim._x")]


def test_no_module_uses_a_private_name_of_another():
    """No file of wacoll, its tests or benchmarks uses a private name (one leading
    underscore, not a dunder) of another wacoll module: of any module but the one that
    defines it, in the same package or not. Not ``from wacoll.x import _name``, not
    ``alias._name`` nor ``getattr(alias, "_name")`` (``setattr``,
    ``monkeypatch.setattr``, ...) on a name bound to a wacoll module. Importing a
    private module (``wacoll.mpi._runner``, a compiled half) is allowed; using its
    private names is not. Private attributes of objects are beyond this static check
    (see :func:`private_name_uses`). A name another module needs is part of its
    owner's interface: public there, with a docstring, and in ``__all__``."""
    mods = _every_module()
    repo = ROOT.parent
    paths = []
    for scope in PRIVATE_NAME_SCOPE:
        where = repo / scope
        paths += [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
    found = []
    for path in paths:
        rel = path.relative_to(repo)
        module = package = None
        if rel.parts[0] == "wacoll":
            parts = rel.with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            package = module if parts[-1] == "__init__" else None
        tree = ast.parse(path.read_text(), str(path))
        found += [
            f"{rel}:{line}: {name}"
            for line, name in private_name_uses(tree, module, mods, package)
        ]
    assert len(paths) > 100
    assert found == [], "private names of another module used:\n" + "\n".join(found)


REPO = ROOT.parent


def test_the_layout_page_names_every_module():
    text = (REPO / "docs" / "layout.rst").read_text()
    modules = sorted(
        p.relative_to(REPO).as_posix()
        for ext in ("*.py", "*.pyx")
        for p in ROOT.rglob(ext)
    )
    assert modules, "no modules found"
    missing = [m for m in modules if f"``{m}``" not in text]
    assert not missing, f"docs/layout.rst does not name {missing}: add a line for each"
    listed = {
        line.split("``")[1]
        for line in text.splitlines()
        if line.startswith("- ``wacoll/")
    }
    gone = sorted(m for m in listed if not (REPO / m).exists())
    assert not gone, f"docs/layout.rst names modules that no longer exist: {gone}"
