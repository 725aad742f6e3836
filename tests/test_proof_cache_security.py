"""The proof cache against other users: it cannot be forged, jammed or turned against
the user who reads it (issue 26).

Another user (uid 65534) plants files where the cache looks: a FIFO where a record
should be, a symbolic link or a held lock where the lock goes, records signed with
their own key or with none. The tests run as root, the strongest victim: root follows
links and opens anything. The other user is a forked child that has dropped its
uid and gid (the interpreter lives in a folder that user cannot enter, so it cannot
be started again as that user; the forked child works with the modules loaded
already).
"""

import contextlib
import fcntl
import hashlib
import json
import multiprocessing
import os
import select
import shutil
import stat
import tempfile
import threading
import time
import warnings

import pytest

from wacoll import Topology
from wacoll.errors import ProofCacheWarning, ProofLockRefused
from wacoll.plans import Call, prooflock, proofs
from wacoll.plans import select as select_plan
from wacoll.plans.rank import plan_for_rank

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="plants files as another user: needs root"
)

OTHER = 65534  # nobody
TOPO = Topology.from_sizes([3, 2, 3])


def _sel(op="bcast", **kw):
    kw.setdefault("count", 4)
    kw.setdefault("itemsize", 8)
    if op == "bcast":
        kw.setdefault("root", 0)
    return select_plan(Call(op, **kw), TOPO)


def _key(sel=None):
    return proofs.plan_key(sel or _sel(), TOPO)


@pytest.fixture(autouse=True)
def own_key(tmp_path_factory, monkeypatch):
    """A proof key of the test's own, not the user's; the default wait."""
    path = tmp_path_factory.mktemp("key") / "proof-key"
    monkeypatch.setenv(proofs.KEY_ENV, str(path))
    monkeypatch.delenv(prooflock.WAIT_ENV, raising=False)
    proofs.forget_warnings()  # each test sees its own warnings
    return path


@pytest.fixture
def shared():
    """A cache folder of the user's (root's), in a place the other user can reach:
    mode 0755, trusted."""
    where = tempfile.mkdtemp(prefix="wacoll-shared-")
    os.chmod(where, 0o755)
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def others():
    """A folder of the other user's own (mode 0700)."""
    where = tempfile.mkdtemp(prefix="wacoll-other-")
    os.chown(where, OTHER, OTHER)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _become_other():
    os.setgroups([])
    os.setgid(OTHER)
    os.setuid(OTHER)


def as_other(fn, *args):
    """Run ``fn(*args)`` as the other user (a forked child); fail on its error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.close(r)
            _become_other()
            fn(*args)
            os.write(w, b"ok")
        except BaseException as exc:  # noqa: BLE001 -- reported to the parent
            os.write(w, repr(exc).encode()[:4000])
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        said = fh.read()
    os.waitpid(pid, 0)
    assert said == b"ok", said.decode(errors="replace")


@contextlib.contextmanager
def writable_by_all(folder):
    """For the other user to plant files: the folder is 0777 meanwhile (as if it
    had been shared), 0755 again after."""
    os.chmod(folder, 0o777)
    try:
        yield
    finally:
        os.chmod(folder, 0o755)


@contextlib.contextmanager
def within(seconds):
    """Fail if the block takes ``seconds`` or more."""
    began = time.monotonic()
    yield
    took = time.monotonic() - began
    assert took < seconds, f"took {took:.1f} s"


def _run_with_timeout(fn, seconds, unblock=None):
    """``fn()`` in a thread; fail if it does not return within ``seconds``
    (``unblock()`` then frees it, so the test process does not hang)."""
    got, errors = [], []

    def body():
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                got.append(fn())
            got.append(seen)
        except BaseException as exc:  # noqa: BLE001 -- re-raised below
            errors.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if unblock is not None:
            unblock()
        thread.join(5)
        pytest.fail(f"blocked for more than {seconds} s")
    if errors:
        raise errors[0]
    return got[0], [str(w.message) for w in got[1] if w.category is ProofCacheWarning]


# ------------------------------------------------------------------ records
def test_a_fifo_where_a_record_should_be_does_not_block(shared):
    path = os.path.join(shared, f"{_key()}.json")
    with writable_by_all(shared):
        as_other(os.mkfifo, path, 0o666)
    assert stat.S_ISFIFO(os.lstat(path).st_mode) and os.lstat(path).st_uid == OTHER

    def unblock():  # (a reader blocked in open() is freed by a writer)
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    found, said = _run_with_timeout(
        lambda: proofs.lookup(_sel(), TOPO, directory=shared), 1.0, unblock
    )
    assert found is None
    assert any("is a FIFO, not a regular file" in m and "ignored" in m for m in said)
    # the whole path too: the plan is proved here and its proof replaces the FIFO
    proof, said = _run_with_timeout(
        lambda: proofs.prove(_sel(), TOPO, directory=shared), 10.0, unblock
    )
    assert not proof.cached and proof.plan.proved
    assert sum("FIFO" in m for m in said) == 1  # (a waiter that looks again: once)
    assert stat.S_ISREG(os.lstat(path).st_mode)
    assert proofs.prove(_sel(), TOPO, directory=shared).cached


@pytest.mark.parametrize("what", ["symlink", "directory"])
def test_a_record_that_is_not_a_regular_file_is_not_read(shared, tmp_path, what):
    good = proofs.prove(_sel(), TOPO, directory=tmp_path)  # a genuine record, elsewhere
    path = os.path.join(shared, f"{good.key}.json")
    with writable_by_all(shared):
        if what == "symlink":  # (pointing at a genuine record: still not followed)
            as_other(os.symlink, str(tmp_path / f"{good.key}.json"), path)
        else:
            as_other(os.mkdir, path)
    with pytest.warns(ProofCacheWarning, match="not a regular file"):
        assert proofs.lookup(_sel(), TOPO, directory=shared) is None


def _forged(record, how):
    """``record`` (a genuine one) as a forger would plant it: the wrong plan's rank
    digests (another root's), the report and its digest agreeing."""
    other = proofs.prove(_sel(root=1), TOPO, directory=False)
    forged = {k: v for k, v in record.items() if k != "mac"}
    forged["ranks"] = list(other.rank_digests)
    forged["plan"] = other.plan_digest
    assert forged["ranks"] != record["ranks"]
    if how == "no mac":
        return forged
    if how == "invalid mac":
        return {**forged, "mac": hashlib.sha256(b"guess").hexdigest()}
    assert how == "another key's mac"
    return proofs.signed_record(b"\x01" * 32, forged)


@pytest.mark.parametrize("how", ["no mac", "invalid mac", "another key's mac"])
def test_a_forged_record_is_ignored_and_the_plan_proved_again(shared, how):
    sel = _sel()
    genuine = proofs.prove(sel, TOPO, directory=shared)
    path = os.path.join(shared, f"{genuine.key}.json")
    with open(path) as fh:
        record = json.load(fh)
    os.unlink(path)
    forged = _forged(record, how)
    # valid JSON, the right key and format, the report and its digest agree
    assert forged["key"] == genuine.key and forged["format"] == proofs.FORMAT
    assert forged["report_digest"] == proofs.report_digest(genuine.report)
    for rank in (0, 4):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        with writable_by_all(shared):
            as_other(_write, path, json.dumps(forged))
        proofs.forget_warnings()
        with pytest.warns(ProofCacheWarning, match="not trusted") as seen:
            part = plan_for_rank(sel, TOPO, rank, directory=shared)
        # re-proved as a whole (not the forged proof's per-rank route) ...
        assert type(part).__name__ == "Plan" and part.proved
        assert proofs.plan_digest(part) == genuine.plan_digest
        # ... and for the right reason: no rank ever compared its program with it
        assert not any("derived alone" in str(w.message) for w in seen)
    with open(path) as fh:  # the genuine proof replaced the forgery
        assert json.load(fh) == record
    assert os.stat(path).st_uid == 0


def test_a_forged_report_is_not_believed(shared):
    # the plan's true digests (anyone can compute them) with a report that lies:
    # before records were signed, build_proved took such a report without checking
    sel = _sel()
    genuine = proofs.prove(sel, TOPO, directory=shared)
    path = os.path.join(shared, f"{genuine.key}.json")
    with open(path) as fh:
        record = json.load(fh)
    lie = {**record["report"], "messages": 0, "wide_area_messages": 0}
    forged = {k: v for k, v in record.items() if k != "mac"}
    forged.update(
        report=lie, report_digest=proofs.report_digest(proofs.report_from_fields(lie))
    )
    with open(path, "w") as fh:
        fh.write(json.dumps(forged))
    with pytest.warns(ProofCacheWarning, match="carries no authentication code"):
        plan = proofs.build_proved(sel, TOPO, directory=shared)
    assert plan.prove() == genuine.report and plan.prove().messages > 0


def test_untrusted_records_are_warned_of_once_per_process(shared):
    """Records made with another key: one warning for the folder, not one a record
    (a job that met a folder of them warned 5-9 times a rank)."""
    topo = Topology.from_sizes([3, 3], wan_latency=0.01, wan_bandwidth=1e6)
    sels = [
        select_plan(Call("bcast", count=count, itemsize=8, root=0), topo, family="magpie")
        for count in (16, 32, 64)
    ]
    for sel in sels:
        genuine = proofs.prove(sel, topo, directory=shared)
        path = os.path.join(shared, f"{genuine.key}.json")
        with open(path) as fh:
            record = json.load(fh)
        _write(path, json.dumps({**record, "mac": "0" * len(record["mac"])}))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for sel in sels:
            assert proofs.lookup(sel, topo, directory=shared) is None
    said = [str(w.message) for w in seen if w.category is ProofCacheWarning]
    assert len(said) == 1 and "not trusted" in said[0] and "once per process" in said[0]


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def _sign_as_other(key_file, record, path):
    """(As the other user.) Sign ``record`` with the other user's own proof key (made
    on first use, as wacoll makes it) and write it at ``path``."""
    secret = proofs.proof_key({proofs.KEY_ENV: key_file})
    assert secret is not None
    _write(path, json.dumps(proofs.signed_record(secret, record)))


def test_a_record_written_with_another_users_key_is_ignored(shared, others):
    sel = _sel("allgather")
    genuine = proofs.prove(sel, TOPO, directory=shared)
    path = os.path.join(shared, f"{genuine.key}.json")
    with open(path) as fh:
        record = {k: v for k, v in json.load(fh).items() if k != "mac"}
    os.unlink(path)
    # the other user's record of the same, true proof, signed with their key
    key_file = os.path.join(others, "proof-key")
    with writable_by_all(shared):
        as_other(_sign_as_other, key_file, record, path)
    st = os.stat(key_file)
    assert st.st_uid == OTHER and stat.S_IMODE(st.st_mode) == 0o600
    with pytest.warns(ProofCacheWarning, match="not made with this user's proof key"):
        proof = proofs.prove(sel, TOPO, directory=shared)
    assert not proof.cached and proof.plan.proved
    assert proofs.prove(sel, TOPO, directory=shared).cached  # (ours replaced it)


# ------------------------------------------------------------------ locks
def test_a_symlinked_lock_creates_nothing_where_it_points(shared, others):
    target = os.path.join(others, "made-by-root")
    lock = os.path.join(shared, f"{_key()}.lock")
    with writable_by_all(shared):
        as_other(os.symlink, target, lock)
    with pytest.raises(ProofLockRefused, match="symbolic link"):
        prooflock.Claim.take(shared, _key())
    with (
        within(5),
        pytest.warns(ProofCacheWarning, match="symbolic link.*this process proves"),
    ):
        proof = proofs.prove(_sel(), TOPO, directory=shared)
    assert not proof.cached and proof.plan.proved
    assert not os.path.lexists(target)
    assert os.path.islink(lock)  # (left alone)
    assert proofs.prove(_sel(), TOPO, directory=shared).cached


@contextlib.contextmanager
def held_by_other(path):
    """The other user holds ``flock`` on their file ``path`` until the block ends."""
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.close(ready_r)
            os.close(stop_w)
            _become_other()
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(ready_w, b"held")
            select.select([stop_r], [], [], 120)  # until the test ends (2 min at most)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(stop_r)
    try:
        assert select.select([ready_r], [], [], 30)[0]
        assert os.read(ready_r, 4) == b"held"
        yield pid
    finally:
        os.close(stop_w)
        os.close(ready_r)
        os.waitpid(pid, 0)


def test_another_users_held_lock_is_not_waited_for(shared):
    lock = os.path.join(shared, f"{_key()}.lock")
    with writable_by_all(shared):
        holder = held_by_other(lock)
        holder.__enter__()
    try:
        assert os.stat(lock).st_uid == OTHER
        with pytest.raises(ProofLockRefused, match=f"owned by uid {OTHER}"):
            prooflock.Claim.take(shared, _key())
        # the default wait is 300 s: none of it is spent on another user's lock
        with (
            within(5),
            pytest.warns(
                ProofCacheWarning, match=f"owned by uid {OTHER}.*not waited for"
            ),
        ):
            part = plan_for_rank(_sel(), TOPO, 2, directory=shared)
        assert type(part).__name__ == "Plan" and part.proved
        with within(5):  # the proof stored meanwhile serves the next rank
            assert (
                type(plan_for_rank(_sel(), TOPO, 3, directory=shared)).__name__
                == "RankPlan"
            )
    finally:
        holder.__exit__(None, None, None)


def test_a_lock_file_others_can_read_is_made_private(shared):
    # (left by an older version, mode 0644: another user could open it and hold it)
    lock = os.path.join(shared, f"{_key()}.lock")
    _write(lock, "")
    os.chmod(lock, 0o644)
    claim = prooflock.Claim.take(shared, _key())
    try:
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    finally:
        claim.release()
    claim = prooflock.Claim.take(shared, _key())  # new lock files: 0600
    try:
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    finally:
        claim.release()


def test_a_hard_linked_lock_is_refused(shared, tmp_path):
    victim = tmp_path / "important"
    victim.write_text("keep")
    os.link(victim, os.path.join(shared, f"{_key()}.lock"))
    with pytest.raises(ProofLockRefused, match="hard link"):
        prooflock.Claim.take(shared, _key())
    assert victim.read_text() == "keep"


# ------------------------------------------------------------------ folders
@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775, 0o757])
def test_a_cache_folder_others_can_write_is_refused(shared, mode):
    os.chmod(shared, mode)
    folder = os.path.join(shared, "proofs")
    os.mkdir(folder)
    os.chmod(folder, mode)
    said = (
        f"proof cache {folder} is refused: it is writable by others \\(mode {mode:o}\\)"
    )
    with pytest.warns(ProofCacheWarning, match=said):
        first = proofs.prove(_sel(), TOPO, directory=folder)
    again = proofs.prove(_sel(), TOPO, directory=folder)
    assert not first.cached and not again.cached
    assert os.listdir(folder) == []  # nothing written, no lock taken


def test_a_cache_folder_of_another_user_is_refused(others):
    os.chmod(others, 0o755)
    with pytest.warns(ProofCacheWarning, match=f"is refused: it is owned by uid {OTHER}"):
        assert not proofs.prove(_sel(), TOPO, directory=others).cached
    assert os.listdir(others) == []


def test_a_refused_folder_is_reported_once_per_process(shared):
    os.chmod(shared, 0o777)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for rank in range(3):
            plan_for_rank(_sel(), TOPO, rank, directory=shared)
    said = [str(w.message) for w in seen if w.category is ProofCacheWarning]
    assert len(said) == 1 and "writable by others" in said[0]


def test_the_default_folders_are_the_users_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(proofs.ENV, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(proofs.KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert not proofs.prove(_sel(), TOPO).cached
    assert proofs.prove(_sel(), TOPO).cached
    folder = tmp_path / "cache" / "wacoll" / "proofs"
    key = tmp_path / "config" / "wacoll" / "proof-key"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_text().strip()) == 64
    assert [p.name for p in key.parent.iterdir()] == ["proof-key"]  # no temporaries


# ------------------------------------------------------------------ the key
def _chown_other(path):
    os.chown(path, OTHER, OTHER)


KEY_FAULTS = {
    "readable by others": (
        lambda p: os.chmod(p, 0o644),
        "readable or writable by others \\(mode 644\\)",
    ),
    "writable by the group": (
        lambda p: os.chmod(p, 0o620),
        "readable or writable by others \\(mode 620\\)",
    ),
    "another user's": (_chown_other, f"owned by uid {OTHER}"),
    "a symbolic link": (
        lambda p: (os.rename(p, f"{p}.real"), os.symlink(f"{p}.real", p)),
        "symbolic link",
    ),
    "not a key": (lambda p: _write(p, "password\n"), "does not hold a proof key"),
    "a FIFO": (lambda p: (os.unlink(p), os.mkfifo(p, 0o600)), "FIFO"),
}


@pytest.mark.parametrize("fault", sorted(KEY_FAULTS))
def test_a_key_file_that_is_not_the_users_alone_turns_the_cache_off(
    tmp_path, own_key, fault
):
    proofs.prove(_sel(), TOPO, directory=tmp_path)  # (makes the key; a record)
    assert proofs.prove(_sel(), TOPO, directory=tmp_path).cached
    spoil, reason = KEY_FAULTS[fault]
    spoil(own_key)
    with (
        within(5),
        pytest.warns(
            ProofCacheWarning, match=f"proof key {own_key} is refused: .*{reason}"
        ),
    ):
        assert not proofs.prove(_sel(), TOPO, directory=tmp_path).cached
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert proofs.proof_key() is None
        assert proofs.lookup(_sel(), TOPO, directory=tmp_path) is None  # (cache off)
        part = plan_for_rank(_sel(), TOPO, 1, directory=tmp_path)
    assert type(part).__name__ == "Plan"


def _key_of(path, start, out):
    start.wait()
    out.put(proofs.proof_key({proofs.KEY_ENV: path}))


@pytest.mark.parametrize("link", [True, False], ids=["linked", "written in place"])
def test_processes_that_make_the_key_together_end_with_one(tmp_path, monkeypatch, link):
    if not link:  # a file system without hard links: the key is written in place

        def no_links(*args):
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_links)
    path = str(tmp_path / "k" / "proof-key")
    ctx = multiprocessing.get_context("fork")
    n = 8
    start, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_key_of, args=(path, start, out)) for _ in range(n)]
    for p in procs:
        p.start()
    keys = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert None not in keys and len(set(keys)) == 1
    with open(path) as fh:
        assert bytes.fromhex(fh.read().strip()) == keys[0]
    assert os.listdir(tmp_path / "k") == ["proof-key"]


def test_a_key_being_written_is_read_once_whole(tmp_path):
    path = tmp_path / "proof-key"
    key = os.urandom(32).hex()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, key[:10].encode())

    def finish():
        time.sleep(0.2)
        os.write(fd, key[10:].encode() + b"\n")
        os.close(fd)

    thread = threading.Thread(target=finish)
    thread.start()
    try:
        assert proofs.proof_key({proofs.KEY_ENV: str(path)}) == bytes.fromhex(key)
    finally:
        thread.join()
