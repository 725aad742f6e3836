"""Plan scripts: exact round trips, PATHS rank scripts, a strict reader, proved plans."""

import dataclasses
import importlib
import json
import shutil
from pathlib import Path

import pytest

from wacoll import PlanError, Topology
from wacoll.errors import ScriptError
from wacoll.plans import FAMILIES, OPERATIONS, build, scripts
from wacoll.plans.plan import Step
from wacoll.plans.scripts import (
    from_json,
    from_rank_scripts,
    from_sexpr,
    load,
    parse_script,
    rank_scripts,
    save,
    script_filename,
    to_json,
    to_sexpr,
    write_scripts,
)

DATA = Path(__file__).parent / "data" / "scripts"
TOPOLOGIES = [
    Topology.single(1),
    Topology.single(4),
    Topology.from_sizes([2, 3]),
    Topology.from_clusters([[0, 3, 4], [1, 2], [5]]),
]


def tree_plans():
    """Plans of the tree family the brief names, and a spread of sizes and levels."""
    plans = [
        build("allreduce", Topology.single(7), "tree", tree="lam", level="associative"),
        build(
            "reduce",
            Topology.single(5),
            "tree",
            tree="flat",
            level="commutative",
            arrival=True,
        ),
        build(
            "allreduce",
            Topology.single(6),
            "tree",
            tree="flat",
            level="commutative",
            arrival=True,
            count=4,
            segments=2,
        ),
        build(
            "bcast",
            Topology.single(9),
            "tree",
            tree="chain",
            count=10,
            segments=3,
            root=4,
            itemsize=8,
        ),
        build(
            "bcast",
            Topology.from_clusters([[0, 3, 4], [1, 2], [5]]),
            "tree",
            tree="two-level",
            root=2,
            count=7,
            segments=2,
        ),
        build(
            "reduce",
            Topology.from_sizes([3, 2]),
            "tree",
            tree="two-level",
            root=3,
            level="commutative",
        ),
        build("reduce", Topology.single(32), "tree", tree="lam"),
    ]
    for n in range(1, 10):
        plans.append(build("bcast", Topology.single(n), "tree", root=n - 1))
        plans.append(
            build("reduce", Topology.single(n), "tree", tree="lam", level="associative")
        )
    return plans


def assert_round_trips(plan):
    assert from_sexpr(to_sexpr(plan)) == plan
    assert from_json(to_json(plan)) == plan
    assert from_rank_scripts(rank_scripts(plan)) == plan


# ------------------------------------------------------------------ PATHS / LAM
def test_lam_reduce_rank_12_receives_and_combines_from_13_and_14_then_sends_to_8():
    plan = build("reduce", Topology.single(32), "tree", tree="lam")
    text = rank_scripts(plan)[12]
    script = parse_script(text)
    assert script.rank == 12
    assert script.header["op"] == "reduce" and script.header["size"] == 32
    net = [(s.kind, s.peer) for s in script.program if s.peer is not None]
    assert net == [("recv_combine", 13), ("recv_combine", 14), ("send", 8)]
    assert script.program == plan.programs[12]
    assert (
        "(recv-combine 13 (into acc))\n  (recv-combine 14 (into acc))\n"
        "  (send 8 (from acc)))" in text
    )


def test_rank_scripts_cover_every_rank_with_the_same_header():
    plan = build(
        "allreduce",
        Topology.from_sizes([3, 4]),
        "tree",
        tree="two-level",
        level="commutative",
    )
    texts = rank_scripts(plan)
    assert sorted(texts) == list(range(7))
    parsed = [parse_script(texts[r]) for r in range(7)]
    assert [p.rank for p in parsed] == list(range(7))
    assert all(p.header == parsed[0].header for p in parsed)
    assert tuple(p.program for p in parsed) == plan.programs


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize(
    "plan", tree_plans(), ids=lambda p: f"{p.op}-{p.size}-{p.algorithm}"
)
def test_tree_plans_round_trip_exactly(plan):
    assert_round_trips(plan)


def test_loaded_plans_are_proved():
    plan = build("reduce", Topology.single(6), "tree", tree="lam")
    for text, reader in ((to_sexpr(plan), from_sexpr), (to_json(plan), from_json)):
        assert reader(text).proved
    assert from_rank_scripts(rank_scripts(plan)).proved


def family_plans(module):
    """Every plan ``module``'s builders make over small topologies (PlanError: skipped)."""
    for op, builder in sorted(module.BUILDERS.items()):
        spec = OPERATIONS[op]
        levels = (
            ("strict", "associative", "commutative")
            if spec.kind == "reduction"
            else (None,)
        )
        for topo in TOPOLOGIES:
            roots = sorted({0, topo.size - 1}) if spec.rooted else (None,)
            for root in roots:
                for level in levels:
                    options = {} if spec.layout == "none" else {"count": 3}
                    if root is not None:
                        options["root"] = root
                    if level is not None:
                        options["level"] = level
                    try:
                        plan = builder(topo, **options)
                        plan.prove()
                    except PlanError:
                        continue  # a combination this family does not build
                    yield plan


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_round_trips(family):
    try:
        module = importlib.import_module(FAMILIES[family])
    except (ImportError, ModuleNotFoundError):
        pytest.skip(f"the {family} family is not written yet")
    done = 0
    for plan in family_plans(module):
        assert_round_trips(plan)
        done += 1
    assert done > 0, f"no {family} plan could be built"


def test_write_scripts_names_files_by_op_size_and_rank(tmp_path):
    plan = build("reduce", Topology.single(4), "tree", tree="lam", level="associative")
    paths = write_scripts(plan, tmp_path / "new")
    assert [p.name for p in paths] == [
        "reduce-4.scm",
        "reduce-4-rank0.scm",
        "reduce-4-rank1.scm",
        "reduce-4-rank2.scm",
        "reduce-4-rank3.scm",
    ]
    assert script_filename("reduce", 32, 12) == "reduce-32-rank12.scm"
    assert from_rank_scripts(tmp_path / "new") == plan
    assert load(paths[0]) == plan


def test_directory_with_several_plans_needs_op_and_size(tmp_path):
    bcast = build("bcast", Topology.single(3), "tree")
    reduce = build("reduce", Topology.single(3), "tree")
    write_scripts(bcast, tmp_path)
    write_scripts(reduce, tmp_path)
    with pytest.raises(ScriptError, match=r"several plans \(bcast-3, reduce-3\)"):
        from_rank_scripts(tmp_path)
    assert from_rank_scripts(tmp_path, op="reduce") == reduce
    assert from_rank_scripts(tmp_path, op="bcast", size=3) == bcast
    with pytest.raises(ScriptError, match="no rank scripts"):
        from_rank_scripts(tmp_path, size=4)


@pytest.mark.parametrize("name", ["plan.scm", "plan.sexp", "plan.json", "PLAN.JSON"])
def test_save_and_load_choose_the_format_by_suffix(tmp_path, name):
    plan = build(
        "allreduce",
        Topology.from_sizes([2, 2]),
        "tree",
        tree="two-level",
        level="commutative",
        arrival=True,
    )
    path = save(plan, tmp_path / name)
    text = path.read_text()
    assert text.startswith("{") == name.lower().endswith(".json")
    assert load(path) == plan


def test_unknown_suffix_is_refused(tmp_path):
    plan = build("bcast", Topology.single(2), "tree")
    with pytest.raises(ScriptError, match="unknown plan file suffix '.txt'"):
        save(plan, tmp_path / "plan.txt")
    with pytest.raises(ScriptError, match="unknown plan file suffix"):
        load(tmp_path / "plan.yaml")


def test_every_kind_of_parameter_value_round_trips():
    plan = build("bcast", Topology.single(3), "tree")
    params = (
        ("a_none", None),
        ("flag", True),
        ("off", False),
        ("neg", -7),
        ("big", 2**63 - 1),
        ("ratio", 0.1),
        ("tiny", 1e-300),
        ("text", 'a "q"\\\n\tb'),
        ("unicode", "Bjørndalen"),
        ("nested", ((1, 2), (), ("x", None))),
    )
    plan = dataclasses.replace(plan, params=params, family="f \"x\"", algorithm="")
    assert_round_trips(plan)


@pytest.mark.parametrize("value", [{"a": 1}, float("nan"), float("inf"), {1, 2}, 2**70])
def test_writers_refuse_values_scripts_cannot_hold(value):
    plan = dataclasses.replace(
        build("bcast", Topology.single(2), "tree"), params=(("bad", value),)
    )
    for writer in (to_sexpr, to_json, rank_scripts):
        with pytest.raises(ScriptError, match="plan parameter 'bad'"):
            writer(plan)


# ------------------------------------------------------------ hand-written files
def test_design_example_loads_and_is_wide_area_optimal():
    plan = load(DATA / "bcast-6.scm")
    assert (plan.op, plan.size, plan.root, plan.itemsize) == ("bcast", 6, 1, 8)
    assert plan.clusters == (0, 0, 0, 1, 1, 1)
    assert [str(s) for s in plan.programs[1]] == [
        "send 3 [0]",
        "send 0 [0]",
        "send 2 [0]",
    ]
    report = plan.prove()
    assert report.wide_area_messages == 1 and report.optimality == "yes"
    assert from_sexpr(to_sexpr(plan)) == plan


def test_hand_written_rank_scripts_reassemble(tmp_path):
    plan = from_rank_scripts(DATA / "reduce-4")
    assert (plan.op, plan.root, plan.level, plan.counts) == (
        "reduce",
        2,
        "associative",
        (5,),
    )
    assert plan.programs[2][3] == Step(
        "recv_combine", (0,), peer=0, dst="out", side="left"
    )
    assert plan.prove().wide_area_messages == 1
    # the same files keyed by rank, and copied elsewhere with the whole-plan file beside
    texts = {
        r: (DATA / "reduce-4" / f"reduce-4-rank{r}.scm").read_text() for r in range(4)
    }
    assert from_rank_scripts(texts) == plan
    shutil.copytree(DATA / "reduce-4", tmp_path / "copy")
    (tmp_path / "copy" / "reduce-4.scm").write_text(to_sexpr(plan))
    assert from_rank_scripts(tmp_path / "copy") == plan


def test_hand_written_json_with_arrival_groups_loads():
    plan = load(DATA / "reduce-3-arrival.json")
    assert plan.level == "commutative"
    assert [s.group for s in plan.programs[0]] == [0, 1, 1]
    assert plan.param("arrival") is True
    assert from_json(to_json(plan)) == plan


def test_well_formed_script_of_a_wrong_plan_raises_plan_error():
    with pytest.raises(PlanError, match="rank 1 step 1 sends to 2, which never receives"):
        load(DATA / "broken-missing-recv.scm")
    text = to_sexpr(
        build("reduce", Topology.single(4), "tree", tree="lam", level="associative")
    )
    with pytest.raises(PlanError, match="before ranks"):  # operands out of rank order
        from_sexpr(text.replace("(recv-combine 1)", "(recv-combine 1 (side left))"))


# ------------------------------------------------------------------ rank scripts
def mutated_scripts(plan, rank, old, new):
    texts = rank_scripts(plan)
    assert old in texts[rank]
    texts[rank] = texts[rank].replace(old, new)
    return texts


LAM4 = build("reduce", Topology.single(4), "tree", tree="lam", level="associative")


def test_reassembly_needs_every_rank_once():
    texts = rank_scripts(LAM4)
    del texts[2]
    with pytest.raises(ScriptError, match=r"no script for ranks 2 of 4"):
        from_rank_scripts(texts)
    texts = rank_scripts(LAM4)
    texts[1] = texts[3]
    with pytest.raises(ScriptError, match=r"script of rank 1: the script is rank 3's"):
        from_rank_scripts(texts)
    with pytest.raises(ScriptError, match="no rank scripts given"):
        from_rank_scripts({})


def test_reassembly_needs_one_header():
    texts = mutated_scripts(LAM4, 3, "(itemsize 1)", "(itemsize 2)")
    with pytest.raises(
        ScriptError, match="rank 3 disagrees with rank 0 on field 'itemsize'"
    ):
        from_rank_scripts(texts)


def test_rank_script_errors_name_the_rank_and_position():
    texts = mutated_scripts(LAM4, 2, "(send 0 (from in))", "(send 0 (form in))")
    with pytest.raises(
        ScriptError,
        match=r"^script of rank 2: unknown option 'form' in "
        r"send \(line 7, column 12\)$",
    ) as e:
        from_rank_scripts(texts)
    assert (e.value.line, e.value.column) == (7, 12)


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.scm"
    path.write_text("(plan (op bcast)\n  (size 0))\n")
    with pytest.raises(ScriptError, match=r"bad\.scm: size 0 is out of range") as e:
        load(path)
    assert (e.value.line, e.value.column) == (2, 9)
    path.write_bytes(b"(plan \xff)")
    with pytest.raises(ScriptError, match="not UTF-8"):
        load(path)


# --------------------------------------------------------------- strict reader
H = "(plan (op bcast) (size 2) (root 0) (counts 1)"
R = "(plan (op reduce) (size 2) (root 0) (level strict) (counts 1)"
OK = H + " (rank 0 (send 1)) (rank 1 (recv 0)))"

# (text with the marker ^ where the error is, what the message says)
MALFORMED = [
    ("^", "empty script"),
    ("  ; only a comment\n^", "empty script"),
    ("^)", r"unexpected '\)'"),
    ("^(plan (op bcast) (size 2)", r"unclosed '\('"),
    ("^" + H + " (rank 0 (send 1) (rank 1 (recv 0)))", r"unclosed '\('"),
    (H + " (rank 0 (send 1)) (rank 1 ^(recv 0 (blocks 0)", r"unclosed '\('"),
    (OK + " ^(plan)", "unexpected text after the end"),
    (OK + "\n^x", "unexpected text after the end"),
    ("^plan", "expected '\\(' to start"),
    ("(plan (op bcast) (^colour red))", "unknown field 'colour'"),
    ("(^planet)", "unknown form 'planet'"),
    ("(plan (op bcast) ^(op bcast))", "duplicate field 'op'"),
    ("^(plan (op bcast) (size 2) (counts 1))", "missing field 'root'"),
    ("^(plan (op bcast) (root 0) (counts 1))", "missing field 'size'"),
    ("^(plan (op reduce) (size 2) (root 0) (counts 1))", "missing field 'level'"),
    ("(plan (op bcast) (size ^two))", "size must be an integer, got symbol 'two'"),
    ("(plan (op bcast) (size ^2.5))", "size must be an integer, got number 2.5"),
    ('(plan (op ^"bcast"))', "op must be a symbol"),
    ("(plan (op bcast) (size 2) (root ^-1))", "root must not be negative"),
    ("(plan (op bcast) (size ^99999999999999999999))", "too large"),
    ("(plan (op bcast) (size ^2000000))", r"size 2000000 is out of range 1\.\.1048576"),
    ("(plan (op bcast) (size ^02))", "leading zero"),
    ("(plan (op bcast) (size ^1x))", "malformed number"),
    ("(plan (op bcast) (size 2) (root ^2) (counts 1))", r"root 2 is out of range 0\.\.1"),
    ("(plan (op bcast) ^(size 2 3))", "takes exactly one value, got 2"),
    ("(plan (op ^scatter_gather))", "unknown operation 'scatter_gather'"),
    ("(plan (op reduce) (level ^sloppy))", "unknown level 'sloppy'"),
    (
        "(plan (op bcast) ^(level strict) (size 2) (root 0) (counts 1))",
        "bcast is not a reduction",
    ),
    (
        "(plan (op allreduce) (size 2) ^(root 0) (level strict) (counts 1))",
        "allreduce has no root",
    ),
    (H + " ^(clusters 0 1 1))", "clusters names 3 ranks; the size is 2"),
    (H + " ^(counts x))", "duplicate field 'counts'"),
    (H + " (rank ^2 (send 1)))", r"rank 2 is out of range 0\.\.1"),
    (H + " (rank 0 (send 1)) ^(rank 0 (send 1)))", "rank 0 is given twice"),
    (H + " (rank 0 (send 1)) ^(size 2))", "must come before the rank programs"),
    (H + " (rank 0 (^jump 1)))", "unknown step kind 'jump'"),
    (H + " (rank 0 ^(size 2)))", "'size' is a header field, not a step"),
    (H + " ^(rank))", r"a program is written \(rank R step ...\)"),
    (H + " (rank ^r0))", "rank must be an integer, got symbol 'r0'"),
    (H + " ^7)", "expected a field like \\(name ...\\), got integer 7"),
    (H + " (rank 0 (send ^7)))", r"peer 7 is out of range 0\.\.1"),
    (H + " (rank 0 ^(send)))", "send needs a peer rank first"),
    (H + " (rank 0 (send ^(blocks 0))))", "send needs a peer rank first"),
    (H + " (rank 0 (send 1 ^0)))", "unexpected integer 0 in send"),
    (H + " (rank 0 (send 1 (blocks ^1))))", r"block 1 is out of range 0\.\.0"),
    (H + " (rank 0 (send 1 ^(side left))))", "option 'side' is not allowed in send"),
    (H + " (rank 0 (send 1 (^to 1))))", "unknown option 'to' in send"),
    (H + " (rank 0 (send 1 (from out) ^(from out))))", "duplicate option 'from'"),
    (H + " (rank 0 (send 1 (from ^Acc))))", "invalid buffer name 'Acc'"),
    (H + " (rank 0 ^(copy (from in))))", r"copy needs a \(into BUFFER\) option"),
    (R + " (rank 0 (recv-combine 1 (side ^up))))", "side must be left or right"),
    (R + " (rank 0 (recv-combine 1 (group ^0))))", r"group 0 is out of range"),
    (H + " (rank 0 ^()))", "empty list where a step was expected"),
    (H + " (rank 0 (^3 1)))", "expected a step name, got integer 3"),
    (
        H + "\n  (rank 0 (send 1))\n  (rank 1\n    (recv 0)\n    (^recieve 0)))",
        "unknown step kind 'recieve'",
    ),
    (H + " (params (tree ^lam)))", "unknown constant 'lam'"),
    (H + " (params ^(tree)))", r"a parameter is written \(name value\)"),
    (H + " (params (x 1) ^(x 2)))", "duplicate parameter 'x'"),
    (H + " (params (^bad-name 1)))", "invalid parameter name 'bad-name'"),
    (H + ' (family ^"unterminated))', "unterminated string"),
    (H + ' (family "a^\\q"))', r"unknown escape '\\\\q'"),
    (H + ' (family "a^\tb"))', "control character"),
    (H + ' (family "x"^"y"))', "expected a space or parenthesis after the string"),
    (H + " (family ^x))", "family must be a double-quoted string"),
    ("(plan (op bcast) ^#t)", "unexpected character '#'"),
    ("(plan (op bcast) ^'(size 2))", "unexpected character \"'\""),
    ("(plan (op bc^.ast))", r"unexpected character '\.' in symbol"),
    ("(plan (op bcast) (size 2)^\f)", r"unexpected character '\\x0c'"),
    ("(plan " * 16 + "^(", "nesting deeper than 16"),
    (
        "(^script (op bcast) (size 1) (rank 0) (root 0) (counts 1))",
        "one rank's script; reassemble",
    ),
]


def split_marker(marked):
    pos = marked.index("^")
    text = marked[:pos] + marked[pos + 1 :]
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return text, line, column


@pytest.mark.parametrize("marked, message", MALFORMED)
def test_malformed_scripts_raise_script_error_at_the_fault(marked, message):
    text, line, column = split_marker(marked)
    with pytest.raises(ScriptError, match=message) as e:
        from_sexpr(text)
    assert (e.value.line, e.value.column) == (line, column)
    assert str(e.value).endswith(f" (line {line}, column {column})")


def test_the_well_formed_base_of_the_table_reads():
    assert from_sexpr(OK).prove().messages == 1


SCRIPT = "(script (op bcast) (size 2) (rank 1) (root 0) (counts 1)"

MALFORMED_SCRIPTS = [
    (
        "^(script (op bcast) (size 2) (root 0) (counts 1) (recv 0))",
        "missing field 'rank'",
    ),
    (SCRIPT + " (recv 0) ^(root 0))", "'root' is a header field, not a step"),
    (SCRIPT + " ^(rank 1 (recv 0)))", "duplicate field 'rank'"),
    (
        "(script (op bcast) (size 2) (rank ^2) (root 0) (counts 1))",
        r"rank 2 is out of range 0\.\.1",
    ),
    (SCRIPT + " (^eval 0))", "unknown field or step 'eval'"),
    ("(^plan (op bcast) (size 1) (root 0) (counts 1))", "this is a whole plan"),
]


@pytest.mark.parametrize("marked, message", MALFORMED_SCRIPTS)
def test_malformed_rank_scripts_raise_script_error_at_the_fault(marked, message):
    text, line, column = split_marker(marked)
    with pytest.raises(ScriptError, match=message) as e:
        parse_script(text)
    assert (e.value.line, e.value.column) == (line, column)


CODE_LIKE = [
    ('(plan (^eval "__import__(\'os\').system(\'true\')"))', "unknown field 'eval'"),
    ("(plan (op ^__import__))", "unknown operation '__import__'"),
    (H + " (rank 0 (^eval (send 1))))", "unknown step kind 'eval'"),
    (H + " (rank 0 (send 1 (from ^__import__))))", "invalid buffer name '__import__'"),
    (H + " (params (^__import__ \"os\")))", "invalid parameter name '__import__'"),
    (H + " (params (x os^.system)))", r"unexpected character '\.'"),
    ("(plan (op bcast) ^`(size ,(+ 1 1)))", "unexpected character '`'"),
    ("(^lambda (x) x)", "unknown form 'lambda'"),
]


@pytest.mark.parametrize("marked, message", CODE_LIKE)
def test_code_is_rejected_as_unknown_syntax(marked, message):
    text, line, column = split_marker(marked)
    with pytest.raises(ScriptError, match=message) as e:
        from_sexpr(text)
    assert (e.value.line, e.value.column) == (line, column)


def test_input_size_is_limited(monkeypatch):
    monkeypatch.setattr(scripts, "MAX_CHARS", 100)
    with pytest.raises(ScriptError, match="too long"):
        from_sexpr(OK + " " * 100)
    with pytest.raises(ScriptError, match="too long"):
        from_json(" " * 101)


def test_text_must_be_a_string():
    with pytest.raises(TypeError):
        from_sexpr(OK.encode())
    with pytest.raises(TypeError):
        from_json(b"{}")


# ---------------------------------------------------------------------- JSON
BASE = json.loads(
    to_json(
        build(
            "reduce",
            Topology.single(3),
            "tree",
            tree="flat",
            level="commutative",
            arrival=True,
        )
    )
)


def edited(edit):
    data = json.loads(json.dumps(BASE))
    edit(data)
    return json.dumps(data)


def step0(data):
    return data["programs"][0][1]  # rank 0's recv_combine from 1


MALFORMED_JSON = [
    (lambda d: d.pop("size"), "plan: missing field 'size'"),
    (lambda d: d.update(extra=1), "plan: unknown field 'extra'"),
    (lambda d: d.update(op="reduce_all"), "op: unknown operation"),
    (lambda d: d.update(size=True), "size: must be an integer"),
    (lambda d: d.update(size="3"), "size: must be an integer"),
    (lambda d: d.update(root=3), r"root: 3 is out of range 0\.\.2"),
    (lambda d: d.update(root=None), "root: must be an integer"),
    (lambda d: d.update(level=None), "level: must be one of"),
    (lambda d: d.update(itemsize=0), r"itemsize: 0 is out of range"),
    (lambda d: d.update(counts=[-1]), r"counts\[0\]: -1 is out of range"),
    (lambda d: d.update(counts=1), "counts: must be an array"),
    (lambda d: d.update(clusters=[0, 0]), "clusters: names 2 ranks"),
    (lambda d: d.update(family=None), "family: must be a string"),
    (lambda d: d["params"].append(["tree", "x"]), "repeated parameter name 'tree'"),
    (lambda d: d["params"].append(["x", {"a": 1}]), r"params\[3\]\[1\]: must be an"),
    (lambda d: d["params"].append(["x"]), "must be a \\[name, value\\] pair"),
    (lambda d: d.update(programs=d["programs"][:2]), "has 2 programs for 3 ranks"),
    (lambda d: step0(d).update(kind="recv-combine"), "unknown step kind"),
    (lambda d: step0(d).update(peer=3), r"programs\[0\]\[1\]\.peer: 3 is out of range"),
    (lambda d: step0(d).update(peer=1.0), r"\.peer: must be an integer"),
    (lambda d: step0(d).pop("peer"), "recv_combine step needs field 'peer'"),
    (lambda d: step0(d).update(src="in"), "recv_combine step takes no field 'src'"),
    (lambda d: step0(d).update(dst="__x"), "invalid buffer name"),
    (lambda d: step0(d).update(side="up"), "must be 'left' or 'right'"),
    (lambda d: step0(d).update(group=0), r"\.group: 0 is out of range"),
    (lambda d: step0(d).update(blocks=[1]), r"\.blocks\[0\]: 1 is out of range 0\.\.0"),
    (lambda d: step0(d).update(colour=1), "unknown field 'colour'"),
    (lambda d: d["programs"][1][0].update(group=1), "send step takes no field 'group'"),
    (lambda d: d["programs"].__setitem__(1, {}), r"programs\[1\]: must be an array"),
]


@pytest.mark.parametrize("edit, message", MALFORMED_JSON)
def test_json_reader_validates_every_field(edit, message):
    with pytest.raises(ScriptError, match=message):
        from_json(edited(edit))


def test_json_base_of_the_table_reads():
    assert from_json(json.dumps(BASE)).level == "commutative"


@pytest.mark.parametrize(
    "text, line, column, message",
    [
        ('{"op": "bcast",\n  "op": "bcast"}', None, None, "the key 'op' is given twice"),
        ('{"op": NaN}', None, None, "NaN is not a number JSON allows"),
        ('{"op": 1e999}', None, None, "plan: missing field"),
        ('{\n  "op": "bcast",,\n}', 2, 17, "invalid JSON"),
        ("[" * 100000, None, None, "nested too deeply|invalid JSON"),
    ],
)
def test_json_syntax_errors(text, line, column, message):
    with pytest.raises(ScriptError, match=message) as e:
        from_json(text)
    if line is not None:
        assert (e.value.line, e.value.column) == (line, column)


def test_json_of_a_wrong_plan_raises_plan_error():
    def drop_recv(d):
        d["programs"][0].pop(2)

    with pytest.raises(PlanError, match="rank 2 step 0 sends to 0, which never receives"):
        from_json(edited(drop_recv))


# ------------------------------------------------------------------ load_all
def test_load_all_reads_plan_files_and_rank_script_groups(tmp_path):
    bcast = build("bcast", Topology.single(3), "tree")
    reduce = build("reduce", Topology.single(3), "tree", tree="lam")
    write_scripts(bcast, tmp_path)
    save(bcast, tmp_path / "bcast-3.json")
    scripts_only = tmp_path / "reduce-3-rank0.scm"
    for r, text in rank_scripts(reduce).items():
        (tmp_path / script_filename("reduce", 3, r)).write_text(text)
    (tmp_path / "notes.txt").write_text("not a plan")
    assert scripts_only.exists()
    assert scripts.load_all(tmp_path) == [bcast, reduce]
    assert scripts.load_all(tmp_path / "bcast-3.json") == [bcast]


def test_load_all_refuses_two_different_plans_for_one_op_and_size(tmp_path):
    save(build("bcast", Topology.single(3), "tree", tree="chain"), tmp_path / "a.scm")
    save(build("bcast", Topology.single(3), "tree", tree="flat"), tmp_path / "b.json")
    with pytest.raises(ScriptError, match="hold different bcast plans for 3 ranks"):
        scripts.load_all(tmp_path)
