"""Every code block of the README runs as written, in order, from the checkout's root.

A newcomer copies the README's blocks one after another into a shell opened in the
folder they cloned, with the environment the quick start made (``.venv``). This test
does the same, in a copy of the checkout (the files git tracks or would track, so
the blocks' files land in a scratch folder, not in the working tree) whose ``.venv``
is the checkout's own. Each block is a test item of its own, so a failure names the
block's line; a block that is not run says why (``-rs`` prints it).

A block's kind is its language, or an HTML comment on the line before its fence:

``bash`` / ``python`` (no comment)
    Run: ``bash -euo pipefail`` on the block, or ``.venv/bin/python -`` reading it.
``<!-- readme-test: file NAME -->``
    Written to ``NAME`` ("save this as NAME"), for the blocks after it.
``<!-- readme-test: output -->``
    What the previous block printed: each line, in order, is a line of its output
    (``...`` stands for any text).
``<!-- readme-test: needs testbed -->``
    Run where an emulated testbed can be built (root and ``/dev/net/tun``), as
    ``tests/test_testbed.py`` decides; elsewhere skipped with the reason.
``<!-- readme-test: install -->``
    One of the quick start's two commands. Not run here: ``.ci/run`` runs the test
    command itself, verbatim (checked), and both commands make the same environment
    (checked: the same install before their last ``&&``).
``<!-- readme-test: ci -->``
    Not run here: ``.ci/run`` runs each of its lines verbatim (checked).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
BLOCK_TIMEOUT = 180  # seconds per block
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
KINDS = ("file", "output", "needs testbed", "install", "ci")


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str  # "" when none

    @property
    def id(self):
        kind = self.marker.split()[0] if self.marker else self.lang
        return f"L{self.line}-{kind}"


def parse(text: str) -> list:
    """The fenced code blocks of a Markdown text, each with its marker."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        marker = ""
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and (m := MARKER.fullmatch(lines[j].strip())):
            marker = m.group(1)
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"README line {i + 1}: the code block is never closed")
        blocks.append(
            Block(i + 1, fence.group(1), "\n".join(lines[i + 1 : end]) + "\n", marker)
        )
        i = end + 1
    return blocks


BLOCKS = parse(README.read_text())


def test_every_block_has_a_known_kind():
    for b in BLOCKS:
        if b.marker:
            assert b.marker.startswith(KINDS), (
                f"line {b.line}: unknown marker {b.marker!r}"
            )
            if b.marker.startswith("file"):
                name = b.marker[len("file") :].strip()
                assert re.fullmatch(r"[\w.-]+", name), f"line {b.line}: file {name!r}"
        else:
            assert b.lang in ("bash", "python"), (
                f"README line {b.line}: a ```{b.lang} block needs a readme-test marker "
                f"(file NAME, output, ...) or a language this test runs"
            )


def test_the_readme_reads_in_five_minutes():
    lines = README.read_text().count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move details to docs/"


def test_the_readme_links_to_files_that_exist():
    text = " ".join(README.read_text().split())  # a link may wrap across lines
    targets = re.findall(r"\]\(([^)#\s]+)\)", text)
    assert targets, "the README links into the documentation"
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not missing, f"the README links to missing files: {missing}"


def _ci_lines():
    return {line.strip() for line in CI.read_text().splitlines()}


def test_install_commands_make_one_environment_and_ci_runs_the_test_command():
    installs = [b for b in BLOCKS if b.marker == "install"]
    assert len(installs) == 2, "the quick start has two commands"
    heads = set()
    for b in installs:
        assert b.text.count("\n") == 1, f"line {b.line}: one line, to copy whole"
        head, _, last = b.text.strip().rpartition(" && ")
        heads.add(head)
    assert len(heads) == 1, "the demo's and the tests' commands install differently"
    tests = [b.text.strip() for b in installs if b.text.strip().endswith("pytest -q")]
    assert len(tests) == 1, "one of the two commands runs the tests"
    assert tests[0] in _ci_lines(), ".ci/run must run the README's test command verbatim"
    assert any(b.text.strip().endswith(".venv/bin/wacoll demo") for b in installs)


def test_ci_runs_the_blocks_marked_ci():
    for b in BLOCKS:
        if b.marker == "ci":
            for line in filter(None, (x.strip() for x in b.text.splitlines())):
                assert line in _ci_lines(), (
                    f"README line {b.line}: .ci/run lacks {line!r}"
                )


# ------------------------------------------------------------------ running the blocks
def _checkout_copy(dest: Path) -> None:
    """The checkout's files (tracked, or new and not ignored) copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    if listed.returncode:
        pytest.skip(
            f"the README's blocks run in a copy of a git checkout; git ls-files "
            f"failed here: {listed.stderr.decode(errors='replace').strip()}"
        )
    for name in filter(None, listed.stdout.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def _environment() -> dict:
    """A newcomer's shell: no MPI launcher's, wacoll's or an activated venv's
    variables (the test session's own proof cache and key are kept)."""
    keep = ("WACOLL_PROOF_CACHE", "WACOLL_PROOF_KEY")
    env = {
        k: v
        for k, v in os.environ.items()
        if k in keep
        or not k.startswith(
            ("PMI_", "PMIX_", "HYDRA_", "OMPI_", "WACOLL_", "PYTEST_", "VIRTUAL_ENV")
        )
    }
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin
    )
    env["MPLBACKEND"] = "Agg"
    return env


def _testbed_unavailable() -> str | None:
    from wacoll.emulate import list_testbeds, netns

    reason = netns.unavailable_reason()
    if reason:
        return f"no emulated testbed here: {reason}"
    if "tb" in list_testbeds():
        return "a testbed named 'tb' (the README's) is already up on this machine"
    return None


def _run(argv, cwd, env, stdin=None):
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            # a process started in a session of its own (mpiexec in a testbed's
            # namespace) can hold the pipes open: the block's later cleanup
            # (``wacoll testbed down``) ends it
            out, err = "", ""
        return None, out, err + f"\n(stopped after {BLOCK_TIMEOUT} s)"
    return proc.returncode, out, err


def _matches(expected: str, output: str) -> str | None:
    """None if every line of ``expected`` is a line of ``output``, in order."""
    got = [line.rstrip() for line in output.splitlines()]
    k = 0
    for want in filter(None, (x.rstrip() for x in expected.splitlines())):
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
        while k < len(got) and not pattern.fullmatch(got[k]):
            k += 1
        if k == len(got):
            return f"no line {want!r} (in order) in the output:\n{output}"
        k += 1
    return None


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Run every block in order; block line -> ("ok" | "failed" | "skipped", text)."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip(
            "the README's blocks run with the quick start's .venv, which this "
            "checkout lacks: make it with the README's test command"
        )
    where = tmp_path_factory.mktemp("readme") / "checkout"
    where.mkdir()
    _checkout_copy(where)
    env = _environment()
    results, last_output, skipped = {}, None, None
    try:
        for b in BLOCKS:
            if b.marker in ("install", "ci"):
                results[b.line] = ("checked", "")
                continue
            if b.marker.startswith("file"):
                (where / b.marker[len("file") :].strip()).write_text(b.text)
                results[b.line] = ("ok", "")
                continue
            if b.marker == "output":
                if skipped:
                    results[b.line] = (
                        "skipped",
                        f"the block before was not run: {skipped}",
                    )
                elif last_output is None:
                    results[b.line] = ("failed", "no block ran before this output")
                else:
                    problem = _matches(b.text, last_output)
                    results[b.line] = ("failed", problem) if problem else ("ok", "")
                continue
            if b.marker == "needs testbed":
                why = _testbed_unavailable()
                if why:
                    results[b.line] = ("skipped", why)
                    last_output, skipped = None, why
                    continue
            if b.lang == "python":
                code, out, err = _run(
                    [str(where / ".venv/bin/python"), "-"], where, env, b.text
                )
            else:
                code, out, err = _run(
                    ["bash", "-euo", "pipefail", "-c", b.text], where, env
                )
            last_output, skipped = out, None
            if code == 0:
                results[b.line] = ("ok", "")
            else:
                results[b.line] = (
                    "failed",
                    f"exit status {code}\n--- block:\n{b.text}"
                    f"--- stdout:\n{out[-3000:]}\n--- stderr:\n"
                    f"{err[-3000:]}",
                )
    finally:
        if any(
            b.marker == "needs testbed" and results.get(b.line, ("",))[0] == "failed"
            for b in BLOCKS
        ):
            _run([str(where / ".venv/bin/wacoll"), "testbed", "down"], where, env)
    return results


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_readme_block(block, outcomes):
    status, text = outcomes[block.line]
    if status == "skipped":
        pytest.skip(f"README line {block.line}: {text}")
    assert status in ("ok", "checked"), f"README line {block.line}: {text}"
