"""Hostile and careless input for the plan and topology readers.

Two halves: plain regression tests for the faults a fuzzing probe found (each failed
before the readers were hardened), and Hypothesis properties over generated and
mutated files, started from real plans and topologies written by the writers. The
property of every reader is the same: it raises its named error (ScriptError or
PlanError for plans, TopologyError for topologies), or what it returns is proved (a
plan that passes its check, reads back equal, and delivers, run on concrete values,
what its operation promises) or valid (a topology that saves and reads back equal).
"""

import dataclasses
import json
import math
import time
from collections import Counter, deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wacoll import PlanError, Topology, TopologyError
from wacoll.errors import ScriptError
from wacoll.plans import build, scripts
from wacoll.plans import operations as ops
from wacoll.plans.plan import Step

#: Each property stays within a few seconds on a slow shared machine.
FAST = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
#: The longest a single read may take: readers work in time bounded by their input.
READ_SECONDS = 2.0

SEEDS = [
    build("bcast", Topology.from_sizes([2, 2]), "tree", tree="two-level", root=1),
    build("bcast", Topology.from_sizes([3]), "tree", tree="chain", count=4, segments=2),
    build("reduce", Topology.from_sizes([4]), "tree", tree="lam", level="associative"),
    build(
        "reduce",
        Topology.from_sizes([3]),
        "tree",
        tree="flat",
        level="commutative",
        arrival=True,
    ),
    build("allreduce", Topology.from_sizes([2, 2]), "magpie", level="associative"),
    build("allgather", Topology.from_sizes([2, 1]), "mpich"),
    build("alltoall", Topology.from_sizes([3]), "mpich"),
    build("barrier", Topology.from_sizes([2, 2]), "mpich"),
    build("scan", Topology.from_sizes([3]), "mpich", level="strict"),
    build("gather", Topology.from_sizes([1, 2]), "magpie", root=2),
]
SEXPRS = [scripts.to_sexpr(p) for p in SEEDS]
JSONS = [scripts.to_json(p) for p in SEEDS]
RANK_SCRIPTS = [scripts.rank_scripts(p) for p in SEEDS]


# ====================================================================== oracle
def run_concretely(plan):
    """Run ``plan`` on concrete values, independently of the prover.

    A moved block carries its source rank; a reduced block carries the multiset of
    the ranks whose contributions it combines. Returns each rank's final ``out``
    buffer, or raises AssertionError if the run deadlocks or reads what is absent.
    """
    size, nb = plan.size, plan.nblocks
    reduction = ops.spec(plan.op).kind == "reduction"
    state = []
    for r in range(size):
        init = ops.initial(plan.op, size, plan.root, nb, r)
        state.append(
            {key: (Counter([src]) if reduction else src) for key, src in init.items()}
        )
    chans, pc = {}, [0] * size
    progress = True
    while progress:
        progress = False
        for r in range(size):
            prog = plan.programs[r]
            while pc[r] < len(prog):
                s = prog[pc[r]]
                if s.kind == "send":
                    vals = [state[r][(s.src, b)] for b in s.blocks]
                    chans.setdefault((r, s.peer), deque()).append((s.blocks, vals))
                elif s.kind in ("recv", "recv_combine"):
                    q = chans.get((s.peer, r))
                    if not q:
                        break
                    blocks, vals = q.popleft()
                    assert blocks == s.blocks
                    for b, v in zip(blocks, vals):
                        if s.kind == "recv":
                            state[r][(s.dst, b)] = v
                        else:
                            state[r][(s.dst, b)] = state[r][(s.dst, b)] + v
                elif s.kind == "copy":
                    for b in s.blocks:
                        state[r][(s.dst, b)] = state[r][(s.src, b)]
                else:
                    for b in s.blocks:
                        state[r][(s.dst, b)] = state[r][(s.dst, b)] + state[r][(s.src, b)]
                pc[r] += 1
                progress = True
    assert all(pc[r] == len(plan.programs[r]) for r in range(size)), "deadlock"
    assert not any(chans.values()), "a message is never received"
    return state


def assert_delivers(plan):
    """The proved ``plan`` gives every rank what its operation promises."""
    if plan.op == "barrier":
        return
    state = run_concretely(plan)
    for r in range(plan.size):
        for key, want in ops.expected(
            plan.op, plan.size, plan.root, plan.nblocks, r
        ).items():
            got = state[r][key]
            if isinstance(want, tuple):  # (form, n): contributions of ranks 0..n-1
                assert got == Counter(range(want[1])), (r, key, got)
            else:
                assert got == want, (r, key, got)


def assert_proved(plan):
    plan.prove()
    assert scripts.from_sexpr(scripts.to_sexpr(plan)) == plan
    assert_delivers(plan)


def read_or_refuse(reader, *args, errors=(ScriptError, PlanError)):
    """Call ``reader``; its result, or None if it raised one of ``errors`` (anything
    else fails the test), within :data:`READ_SECONDS`."""
    start = time.perf_counter()
    try:
        return reader(*args)
    except errors:
        return None
    finally:
        assert time.perf_counter() - start < READ_SECONDS


def test_the_oracle_sees_every_seed_deliver():
    for plan in SEEDS:
        assert_proved(plan)


# ==================================================================== mutations
TOKENS = [
    "(",
    ")",
    " ",
    "\n",
    ";",
    '"',
    "0",
    "1",
    "2",
    "-1",
    "3.5",
    "1e999",
    "007",
    "99999999999999999999",
    "1" * 30,
    "true",
    "none",
    "x",
    "send",
    "recv",
    "recv-combine",
    "copy",
    "combine",
    "blocks",
    "from",
    "into",
    "side",
    "left",
    "group",
    "rank",
    "size",
    "counts",
    "clusters",
    "op",
    "plan",
    "script",
    "acc",
    "in",
    "out",
    "(size 1048576)",
    "(counts" + " 1" * 50 + ")",
    "(blocks)",
    "\\",
    "\x00",
    "\xff",
    "é",
    "\u2028",
    "#t",
    "'",
    "`",
]


@st.composite
def mutated_text(draw, texts, tokens=TOKENS):
    """A writer's text with a few edits: delete, insert a token, duplicate, swap."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 40)))
        edit = draw(
            st.sampled_from(["delete", "insert", "duplicate", "replace", "digit"])
        )
        if edit == "delete":
            text = text[:i] + text[j:]
        elif edit == "insert":
            text = text[:i] + draw(st.sampled_from(tokens)) + text[i:]
        elif edit == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif edit == "replace":
            text = text[:i] + draw(st.text(max_size=6)) + text[j:]
        else:  # change one digit: retargets a peer, a block, a size
            digits = [k for k, c in enumerate(text) if c.isdigit()]
            if digits:
                k = draw(st.sampled_from(digits))
                text = text[:k] + str(draw(st.integers(0, 9))) + text[k + 1 :]
    return text


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, 1, 2, -1])
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["out", "in", "acc", "send", "recv_combine", "left", "bcast"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["kind", "blocks", "peer", "src", "dst", "side", "group", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


@st.composite
def mutated_data(draw, datas, values=JSON_VALUES):
    """A decoded document with one to three nodes replaced, dropped or duplicated."""
    data = json.loads(json.dumps(draw(st.sampled_from(datas))))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        edit = draw(st.sampled_from(["replace", "drop", "duplicate"]))
        if edit == "replace":
            parent[key] = draw(values)
        elif edit == "drop":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(parent[key])))
    return data


# ================================================================ plan readers
@FAST
@given(mutated_text(SEXPRS))
def test_mutated_sexpr_plans_are_refused_or_proved(text):
    plan = read_or_refuse(scripts.from_sexpr, text)
    if plan is not None:
        assert_proved(plan)


@FAST
@given(st.integers(0, len(SEEDS) - 1), st.data())
def test_mutated_rank_scripts_are_refused_or_proved(which, data):
    texts = dict(RANK_SCRIPTS[which])
    rank = data.draw(st.sampled_from(sorted(texts)))
    texts[rank] = data.draw(mutated_text([texts[rank]]))
    if data.draw(st.booleans()):  # and sometimes a whole script is lost or repeated
        other = data.draw(st.sampled_from(sorted(texts)))
        if data.draw(st.booleans()):
            del texts[other]
        else:
            texts[other] = texts[rank]
    plan = read_or_refuse(scripts.from_rank_scripts, texts)
    if plan is not None:
        assert_proved(plan)
    script = read_or_refuse(scripts.parse_script, texts.get(rank, "(script)"))
    if script is not None:
        assert all(isinstance(s, Step) for s in script.program)


@FAST
@given(
    mutated_text(
        JSONS,
        TOKENS
        + [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "null",
            "NaN",
            '"peer": 1',
            '"blocks": []',
            "1" * 5000,
        ],
    )
)
def test_mutated_json_text_is_refused_or_proved(text):
    plan = read_or_refuse(scripts.from_json, text)
    if plan is not None:
        assert_proved(plan)


@FAST
@given(mutated_data([json.loads(t) for t in JSONS]))
def test_mutated_json_plans_are_refused_or_proved(data):
    plan = read_or_refuse(scripts.from_json, json.dumps(data))
    if plan is not None:
        assert_proved(plan)


@FAST
@given(mutated_text(SEXPRS), st.sampled_from([".scm", ".json"]))
def test_mutated_plan_directories_are_refused_or_proved(tmp_path_factory, text, suffix):
    folder = tmp_path_factory.mktemp("plans")
    if suffix == ".json":
        plan = read_or_refuse(scripts.from_sexpr, text)
        text = scripts.to_json(plan) if plan is not None else text.replace("(", "[")
    (folder / f"p{suffix}").write_text(text, encoding="utf-8")
    plans = read_or_refuse(scripts.load_all, folder)
    for plan in plans or ():
        assert_proved(plan)


# ===================================================================== prover
@st.composite
def mutated_plan(draw):
    """A real plan with steps dropped, duplicated, moved or retargeted."""
    plan = draw(st.sampled_from(SEEDS))
    programs = [list(p) for p in plan.programs]
    for _ in range(draw(st.integers(1, 3))):
        r = draw(st.integers(0, plan.size - 1))
        prog = programs[r]
        edit = draw(
            st.sampled_from(
                ["drop", "duplicate", "reorder", "retarget", "blocks", "buffer"]
            )
        )
        if not prog:
            continue
        i = draw(st.integers(0, len(prog) - 1))
        step = prog[i]
        if edit == "drop":
            del prog[i]
        elif edit == "duplicate":
            prog.insert(i, step)
        elif edit == "reorder":
            prog.insert(draw(st.integers(0, len(prog) - 1)), prog.pop(i))
        elif edit == "retarget" and step.peer is not None:
            prog[i] = dataclasses.replace(step, peer=draw(st.integers(0, plan.size - 1)))
        elif edit == "blocks" and plan.nblocks:
            blocks = draw(st.lists(st.integers(0, plan.nblocks - 1), max_size=3))
            prog[i] = dataclasses.replace(step, blocks=tuple(blocks))
        elif edit == "buffer" and step.dst is not None:
            prog[i] = dataclasses.replace(
                step, dst=draw(st.sampled_from(["out", "acc", "in", "t"]))
            )
    return dataclasses.replace(plan, programs=tuple(map(tuple, programs)))


@FAST
@given(mutated_plan())
def test_checker_rejects_mutated_plans_or_they_still_deliver(plan):
    try:
        plan.prove()
    except PlanError:
        return
    assert_delivers(plan)


# ==================================================================== topology
LINK = st.tuples(st.floats(0, 1, allow_nan=False), st.floats(1e-3, 1e12, allow_nan=False))


@st.composite
def topologies(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    n, k = sum(sizes), len(sizes)
    ranks = draw(st.permutations(range(n)))
    clusters, start = [], 0
    for s in sizes:
        clusters.append(ranks[start : start + s])
        start += s
    pairs = {}
    if k > 1:
        for _ in range(draw(st.integers(0, 3))):
            a, b = draw(
                st.sampled_from([(a, b) for a in range(k) for b in range(k) if a != b])
            )
            pairs[(a, b)] = draw(LINK)
    intra, wan = draw(LINK), draw(LINK)
    t_ini = draw(st.none() | st.lists(st.floats(0, 1), min_size=n, max_size=n))
    node_bw = draw(st.none() | st.lists(st.floats(1, 1e12), min_size=n, max_size=n))
    return Topology.from_clusters(
        clusters,
        intra_latency=intra[0],
        intra_bandwidth=intra[1],
        wan_latency=wan[0],
        wan_bandwidth=wan[1],
        wan_pairs=pairs,
        t_ini=t_ini,
        node_bandwidth=node_bw,
    )


@FAST
@given(topologies(), st.sampled_from([".toml", ".json"]))
def test_saved_topologies_read_back_equal(tmp_path_factory, topo, suffix):
    path = tmp_path_factory.mktemp("topo") / f"t{suffix}"
    topo.save(path)
    assert Topology.from_file(path) == topo


TOPO_DATA = [
    Topology.from_sizes([2, 3], wan_pairs={(0, 1): (0.05, 2e6)}).to_dict(),
    {"sizes": [2, 2], "wan": {"latency": 0.02}, "t_ini": [0.1, 0.2, 0.3, 0.4]},
    Topology.from_clusters([[0, 3], [1, 2]], node_bandwidth=[1e6] * 4).to_dict(),
]
TOPO_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(-3, 5)
    | st.floats()
    | st.text(max_size=4)
    | st.sampled_from([0, 1, 1e6, 2**62, 10**7]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["from", "to", "latency", "bandwidth", "sizes", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=6,
)


def validate_topology_file(path):
    topo = read_or_refuse(Topology.from_file, path, errors=(TopologyError,))
    if topo is not None:
        again = path.with_name("again" + path.suffix)
        topo.save(again)
        assert Topology.from_file(again) == topo


@FAST
@given(mutated_data(TOPO_DATA, TOPO_VALUES), st.sampled_from([".toml", ".json"]))
def test_mutated_topology_data_is_refused_or_valid(tmp_path_factory, data, suffix):
    folder = tmp_path_factory.mktemp("topo")
    if suffix == ".json":
        text = json.dumps(data)  # may hold NaN and Infinity, which must be refused
    else:
        try:
            topo = Topology.from_dict(data)
        except TopologyError:
            return
        topo.save(folder / "t.toml")
        text = (folder / "t.toml").read_text()
    (folder / f"t{suffix}").write_text(text)
    validate_topology_file(folder / f"t{suffix}")


TOML_TEXTS = []
for _t in (
    Topology.from_sizes([2, 3], wan_pairs={(0, 1): (0.05, 2e6)}),
    Topology.from_clusters(
        [[0, 3], [1, 2]], node_bandwidth=[1e6] * 4, t_ini=[0.0, 1e-4, 2e-4, 0.5]
    ),
):
    TOML_TEXTS.append(_t.to_dict())
TOML_TOKENS = [
    "[",
    "]",
    "=",
    ",",
    '"',
    "\n",
    "true",
    "false",
    "inf",
    "nan",
    "-1",
    "0.7",
    "1e400",
    "10000000",
    "4611686018427387904",
    "[0]",
    "sizes = 4\n",
    "[[wan_pairs]]\nfrom = 0\nto = 1\nlatency = 0.1\nbandwidth = 1.0\n",
    "[intra]\n",
    "x = 1\n",
    "\xff",
    "1" * 5000,
    "{}",
    "from",
    "to",
]


@FAST
@given(st.data(), st.sampled_from([".toml", ".json"]))
def test_mutated_topology_text_is_refused_or_valid(tmp_path_factory, data, suffix):
    folder = tmp_path_factory.mktemp("topo")
    texts = []
    for d in TOML_TEXTS:
        Topology.from_dict(d).save(folder / f"seed{suffix}")
        texts.append((folder / f"seed{suffix}").read_text())
    text = data.draw(mutated_text(texts, TOML_TOKENS + TOKENS[:10]))
    path = folder / f"t{suffix}"
    path.write_bytes(text.encode("utf-8", "surrogatepass").replace(b"\xc3\xbf", b"\xff"))
    validate_topology_file(path)


# ========================================================= regression: scripts
def test_json_number_with_more_digits_than_python_reads_is_a_script_error():
    with pytest.raises(ScriptError, match="invalid JSON: a number too long"):
        scripts.from_json('{"op": "bcast", "size": ' + "1" * 5000 + "}")


def test_scripts_folder_with_such_a_number_raises_script_error(tmp_path):
    # what wacoll.Comm(scripts=...) reads on every rank; it agrees on WacollErrors
    (tmp_path / "bcast-2.json").write_text('{"op": "bcast", "size": ' + "1" * 5000 + "}")
    with pytest.raises(ScriptError, match="bcast-2.json: invalid JSON"):
        scripts.load_all(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "(plan (op barrier) (size 1048576) (counts))",
        "(plan (op barrier) (size 100000) (counts))",
        "(plan (op allgather) (size 6000) (counts" + " 1" * 6000 + "))",
    ],
)
def test_short_scripts_cannot_ask_for_huge_plans(text):
    start = time.perf_counter()
    with pytest.raises(ScriptError, match="cells of checking work") as e:
        scripts.from_sexpr(text)
    assert time.perf_counter() - start < 1.0
    assert (e.value.line, e.value.column) == (1, text.index("(size") + 1)


def test_one_step_cannot_name_a_million_blocks_a_million_times():
    text = (
        "(plan (op bcast) (size 2) (root 0) (counts"
        + " 1" * 4000
        + ")"
        + " (rank 0"
        + " (send 1)" * 2000
        + "))"
    )
    with pytest.raises(ScriptError, match=r"this step \(of 4000 blocks\)"):
        scripts.from_sexpr(text)


def test_json_and_rank_scripts_have_the_same_budget():
    doc = {
        "op": "barrier",
        "size": 3000,
        "root": None,
        "counts": [],
        "clusters": [0] * 3000,
        "level": None,
        "itemsize": 1,
        "family": "",
        "algorithm": "",
        "params": [],
        "programs": [[]] * 3000,
    }
    with pytest.raises(ScriptError, match="size: this barrier plan on 3000 ranks"):
        scripts.from_json(json.dumps(doc))
    texts = {
        r: f"(script (op barrier) (size 1500) (rank {r}) (counts))" for r in range(1500)
    }
    with pytest.raises(ScriptError, match="cells of checking work"):
        scripts.from_rank_scripts(texts)


def test_the_budget_can_be_raised_for_a_large_plan(monkeypatch):
    plan = build("barrier", Topology.single(16), "mpich")
    text = scripts.to_sexpr(plan)
    monkeypatch.setattr(scripts, "MIN_CELLS", 100)
    monkeypatch.setattr(scripts, "CELLS_PER_CHAR", 0)
    with pytest.raises(ScriptError, match="pass max_cells="):
        scripts.from_sexpr(text)
    with pytest.raises(ScriptError, match="cells"):
        scripts.from_json(scripts.to_json(plan))
    assert scripts.from_sexpr(text, max_cells=10**6) == plan
    assert scripts.from_json(scripts.to_json(plan), max_cells=10**6) == plan
    assert scripts.from_rank_scripts(scripts.rank_scripts(plan), max_cells=10**6) == plan
    monkeypatch.setattr(scripts, "MIN_CELLS", 1 << 20)
    assert scripts.from_sexpr(text) == plan


def test_a_plan_file_that_is_not_a_regular_file_is_refused(tmp_path):
    with pytest.raises(ScriptError, match="no such file"):
        scripts.load(tmp_path / "missing.scm")
    (tmp_path / "dir.scm").mkdir()
    with pytest.raises(ScriptError, match="not a regular file"):
        scripts.load(tmp_path / "dir.scm")


def test_a_missing_topology_file_says_so(tmp_path):
    with pytest.raises(TopologyError, match="no such file"):
        Topology.from_file(tmp_path / "missing.toml")


# ======================================================== regression: topology
def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


PAIR = "[[wan_pairs]]\nfrom = {}\nto = 1\nlatency = 0.1\nbandwidth = 1e6\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (b"sizes = [2]\n# \xff\n", "not UTF-8"),
        ("sizes = 4\n", "'sizes' must be a list"),
        (
            "sizes = [1, 1]\n" + PAIR.format("[0]"),
            r"wan_pairs\[0\]\.from must be an integer",
        ),
        (
            "sizes = [1, 1]\n" + PAIR.format("inf"),
            r"wan_pairs\[0\]\.from must be an integer",
        ),
        ("sizes = [1, 1]\n" + PAIR.format("0.7"), r"wan_pairs\[0\]\.from .* got 0\.7"),
        ("sizes = [1, 1]\n" + PAIR.format("true"), r"wan_pairs\[0\]\.from .* got True"),
        (
            "sizes = [1, 1]\n" + PAIR.format("0") + PAIR.format("0"),
            r"\(0, 1\) is given twice",
        ),
        ("sizes = [2]\n[wan]\nlatency = " + "1" * 5000 + "\n", "too many digits"),
        (
            "sizes = [2]\nnode_bandwidth = [inf, 1.0]\n",
            r"node_bandwidth\[0\] must be finite",
        ),
        ("sizes = [2]\n[intra]\nbandwidth = inf\n", "intra bandwidth must be finite"),
        ("sizes = [2]\n[intra]\nlatency = false\n", "intra latency must be a number"),
        ("sizes = [2]\nt_ini = 5\n", "t_ini must be a list"),
        ("sizes = [2]\nwan_pairs = 5\n", "wan_pairs must be a list"),
        ("clusters = [0, 1]\n", r"clusters\[0\] must be a list"),
        ("sizes = " + "[" * 5000 + "\n", "nested too deeply|t.toml"),
    ],
)
def test_bad_toml_raises_topology_error_naming_the_file(tmp_path, text, message):
    path = write(tmp_path, "t.toml", text)
    with pytest.raises(TopologyError, match=message) as e:
        Topology.from_file(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"sizes": [2], "sizes": [3]}', "'sizes' is given twice"),
        ('{"sizes": [2], "t_ini": [NaN, 0]}', "NaN is not a number JSON allows"),
        (
            '{"sizes": [2], "wan": {"latency": ' + "1" * 400 + "}}",
            "wan latency is too large",
        ),
        ('{"sizes": ' + "[" * 100000 + "}", "nested too deeply|t.json"),
    ],
)
def test_bad_json_raises_topology_error_naming_the_file(tmp_path, text, message):
    with pytest.raises(TopologyError, match=message):
        Topology.from_file(write(tmp_path, "t.json", text))


@pytest.mark.parametrize(
    "sizes", ["[10000000]", "[4611686018427387904]", "[65536, 65536]"]
)
def test_sizes_cannot_ask_for_huge_topologies(tmp_path, sizes):
    start = time.perf_counter()
    with pytest.raises(TopologyError, match="more than max_ranks"):
        Topology.from_file(write(tmp_path, "t.toml", f"sizes = {sizes}\n"))
    assert time.perf_counter() - start < 1.0


def test_the_rank_limit_can_be_raised():
    with pytest.raises(TopologyError, match="max_ranks=10"):
        Topology.from_sizes([8, 8], max_ranks=10)
    assert Topology.from_sizes([8, 8], max_ranks=16).size == 16
    assert Topology.single(70000, max_ranks=70000).size == 70000
    assert Topology.from_dict({"sizes": [3]}, max_ranks=3).size == 3


def test_infinite_bandwidth_is_refused_everywhere():
    for kw in (
        {"wan_bandwidth": math.inf},
        {"node_bandwidth": [math.inf]},
        {"wan_pairs": {(0, 0): (0.1, math.inf)}},
    ):
        with pytest.raises(TopologyError, match="must be finite"):
            Topology.from_sizes([1], **kw)


def test_python_api_refuses_coercions():
    with pytest.raises(TopologyError, match="from must be an integer cluster id"):
        Topology.from_sizes([1, 1], wan_pairs={(0.7, 1): (0.1, 1e6)})
    with pytest.raises(TopologyError, match="from must be an integer cluster id"):
        Topology.from_sizes([1, 1], wan_pairs={(True, 0): (0.1, 1e6)})
    with pytest.raises(TopologyError, match="sizes must be a list"):
        Topology.from_sizes(4)
    with pytest.raises(TopologyError, match="t_ini must be a list"):
        Topology.from_sizes([1], t_ini=0.5)
    with pytest.raises(TopologyError, match="too large"):
        Topology.from_sizes([1], wan_latency=10**400)


def test_a_json_plan_whose_strings_a_script_cannot_hold_is_refused():
    """A plan read from JSON can be written as a script: a control character in a
    parameter, the family or the algorithm is refused by name (found by the
    mutation test above: the JSON reader took it, and writing the script raised)."""
    base = {
        "op": "gather", "size": 3, "root": 2, "counts": [1, 1, 1],
        "clusters": [0, 1, 1], "level": None, "itemsize": 1, "family": "magpie",
        "algorithm": "flat", "params": [["intra", "flat"]],
        "programs": [
            [{"kind": "send", "blocks": [0], "peer": 2, "src": "in"}],
            [{"kind": "send", "blocks": [1], "peer": 2, "src": "in"}],
            [{"kind": "recv", "blocks": [0], "peer": 0, "dst": "out"},
             {"kind": "recv", "blocks": [1], "peer": 1, "dst": "out"},
             {"kind": "copy", "blocks": [2], "src": "in", "dst": "out"}],
        ],
    }  # fmt: skip
    assert scripts.from_json(json.dumps(base)).params == (("intra", "flat"),)
    for field, value, named in (
        ("params", [["intra", "\x1f"]], "plan parameter 'intra'"),
        ("family", "mag\x01pie", "family"),
        ("algorithm", "fl\x7fat", "algorithm"),
    ):
        with pytest.raises(ScriptError, match=named + ".*control character"):
            scripts.from_json(json.dumps(dict(base, **{field: value})))
