"""The family registry: declared option tables, builders and build()."""

import importlib
import inspect

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import FAMILIES, build, builders, families, options


def _signature_options(fn):
    params = inspect.signature(fn).parameters
    assert next(iter(params)) == "topology"
    assert all(
        p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "topology"
    )
    return tuple(name for name in params if name != "topology")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_declared_options_match_the_builders_signatures(family):
    table = builders(family)
    declared = importlib.import_module(FAMILIES[family]).OPTIONS
    assert set(declared) == set(table)
    for op, fn in table.items():
        assert options(family, op) == _signature_options(fn), (family, op)


def test_registry_is_reexported_by_plans():
    import wacoll.plans as plans

    assert plans.build is families.build and plans.builders is families.builders
    assert plans.FAMILIES is families.FAMILIES and plans.options is families.options


def test_options_and_build_errors():
    with pytest.raises(PlanError, match="unknown plan family 'oak'"):
        options("oak", "bcast")
    with pytest.raises(PlanError, match="the tree family has no scan plan"):
        options("tree", "scan")
    with pytest.raises(PlanError, match="unknown operation 'sum'"):
        build("sum", Topology.single(2))
    with pytest.raises(
        PlanError, match="takes no option 'intra'; it takes count, itemsize"
    ):
        build("alltoall", Topology.single(2), "combining", intra="binary")


def test_the_plan_world_does_not_read_builder_signatures():
    """Families declare their options; only this test may use inspect on builders."""
    import ast
    import pathlib

    import wacoll

    root = pathlib.Path(wacoll.__file__).parent
    users = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "mpi":
            continue  # wacoll.mpi.comm is being moved to options() on its own branch
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if "inspect" in names:
                users.append(str(path.relative_to(root)))
    assert users == []
