"""A simulated node's Python keeps the bytecode of what it imports from zip archives (node_python/):
what runs is what the archive's source compiles to, its tracebacks name the archive it came from, a
changed source is compiled again, and a kept entry that does not read is compiled over."""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gpufleet_sim import node

KEPT = node.NODE_PYTHON_DIR / "__pycache__" / "zipped"
RUNNER = "import sys; sys.path.insert(0, sys.argv[1]); import probe; print(probe.answer()); probe.fail()"


def on_the_node(code: str, stdin: str = "") -> bytes:
    """What ``code``, run by the node's Python, writes to stdout hex-encoded."""
    done = subprocess.run(
        [node.NODE_PYTHON, "-c", code], input=stdin, capture_output=True, text=True, check=True
    )
    return bytes.fromhex(done.stdout)


def node_compiled(source: str) -> bytes:
    """``source`` compiled and marshalled by the node's Python (another Python's bytecode is not its)."""
    return on_the_node(
        "import marshal, sys; c = compile(sys.stdin.read(), 'elsewhere.py', 'exec', dont_inherit=True); "
        "sys.stdout.write(marshal.dumps(c).hex())",
        source,
    )


@pytest.fixture
def kept() -> Iterator[Callable[[str], Path]]:
    """Where the node keeps a source's code; what the test's sources left there is removed after it."""
    magic = on_the_node("import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())")
    paths: list[Path] = []

    def path(source: str) -> Path:
        paths.append(KEPT / hashlib.sha256(magic + source.encode()).hexdigest())
        return paths[-1]

    yield path
    for each in paths:
        each.unlink(missing_ok=True)


def archive(path: Path, source: str) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("probe.py", source)
    return path


def run(zipped: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(node.NODE_PYTHON_DIR)}
    return subprocess.run(
        [node.NODE_PYTHON, "-c", RUNNER, str(zipped)], env=env, capture_output=True, text=True, check=False
    )


def probe_source(token: str, answer: str) -> str:
    """A module that says ``answer``, then exits with its own file name (what tracebacks name)."""
    lines = [f"TOKEN = {token!r}", "def answer():", f"    return {answer!r}", "def fail():"]
    return "\n".join([*lines, "    raise SystemExit(__file__)", ""])


def test_a_node_session_gets_the_directory() -> None:
    assert (node.NODE_PYTHON_DIR / "sitecustomize.py").is_file()
    spec = node.NodeSpec("node01", 1, "127.0.0.2", 22, "h200", Path("/nonexistent"))
    assert f"PYTHONPATH={node.NODE_PYTHON_DIR}" in node._sshd_config(spec)


def test_a_module_in_a_zip_is_compiled_once_and_its_code_used_again(
    tmp_path: Path, kept: Callable[[str], Path]
) -> None:
    source = probe_source(uuid.uuid4().hex, "compiled")
    first = run(archive(tmp_path / "first.zip", source))
    assert first.stdout.strip() == "compiled", first.stderr
    assert first.stderr.strip() == f"{tmp_path / 'first.zip'}/probe.py"
    entry = kept(source)
    assert entry.is_file()

    # the kept entry is what the next run executes: replace it with other code and that code runs
    entry.write_bytes(node_compiled(probe_source("x", "from the kept code")))
    second = run(archive(tmp_path / "second.zip", source))
    assert second.stdout.strip() == "from the kept code", second.stderr
    # its file name is the new archive's, not the one it was compiled from
    assert second.stderr.strip() == f"{tmp_path / 'second.zip'}/probe.py"


def test_a_changed_source_is_compiled_again(tmp_path: Path, kept: Callable[[str], Path]) -> None:
    token = uuid.uuid4().hex
    one, two = probe_source(token, "one"), probe_source(token, "two")
    assert run(archive(tmp_path / "a.zip", one)).stdout.strip() == "one"
    assert run(archive(tmp_path / "b.zip", two)).stdout.strip() == "two"
    assert kept(one).is_file() and kept(two).is_file()


def test_a_kept_entry_that_does_not_read_is_compiled_over(
    tmp_path: Path, kept: Callable[[str], Path]
) -> None:
    source = probe_source(uuid.uuid4().hex, "recompiled")
    entry = kept(source)
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_bytes(b"not marshal data")
    done = run(archive(tmp_path / "probe.zip", source))
    assert done.stdout.strip() == "recompiled", done.stderr
    assert entry.read_bytes() != b"not marshal data"
    assert run(archive(tmp_path / "again.zip", source)).stdout.strip() == "recompiled"
