"""The fake tools' fork server: a served call prints, reads and exits exactly as the tool run
in-process does, and a node without a server still answers (the client falls back). Each test runs
with both clients: the compiled one (toolclient.c) and the Python one (no C compiler)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpufleet_sim import node, toolclient, toolserver

CALLS = [
    ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id,compute_cap", "--format=csv,noheader"],
    ["nvidia-smi", "topo", "-m"],  # (-q prints the time and live temperatures: not comparable)
    ["nvidia-smi", "-i", "99", "-q"],
    ["mlnx_qos", "-i", "ens21np0"],
    ["mlnx_qos", "--no-such-option"],
    ["ethtool", "-a", "ens21np0"],
    ["ibdev2netdev"],
]


@pytest.fixture(params=["native", "python"])
def node_dir(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    client = None
    if request.param == "native":
        client = toolclient.build(tmp_path)
        if client is None:
            pytest.skip("no C compiler here: the fleet's tools are Python clients")
    spec = node.NodeSpec("node01", 1, "127.0.99.2", 2222, "b300-16", tmp_path / "node01")
    node.prepare(spec, "ssh-ed25519 AAAA test\n", client)
    tool = (spec.directory / "bin" / "ethtool").read_bytes()
    assert tool.startswith(b"\x7fELF") == (client is not None)
    return spec.directory


@pytest.fixture
def server(node_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=str(node.SRC_DIR))
    proc = subprocess.Popen(
        [node.NODE_PYTHON, "-sS", "-m", "gpufleet_sim.toolserver", str(node_dir)], env=env
    )
    deadline = time.monotonic() + 20
    while not toolserver.socket_path(node_dir).exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the tool server did not start"
        time.sleep(0.05)
    yield proc
    proc.terminate()
    proc.wait(timeout=10)


def _call(node_dir: Path, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    done = subprocess.run(
        [str(node_dir / "bin" / argv[0]), *argv[1:]], input=stdin, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout, done.stderr


def _children(pid: int, settle_s: float = 10.0) -> list[str]:
    """The server's child processes once they have had ``settle_s`` to go: a call's child sends the
    tool's status before it exits, so the caller can be back before the server has reaped it."""
    deadline = time.monotonic() + settle_s
    while True:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if not children or time.monotonic() > deadline:
            return children
        time.sleep(0.05)


def test_served_calls_answer_exactly_as_the_tool_itself(
    node_dir: Path, server: subprocess.Popen[bytes]
) -> None:
    served = [_call(node_dir, argv) for argv in CALLS]
    assert server.poll() is None
    server.terminate()
    server.wait(timeout=10)
    local = [_call(node_dir, argv) for argv in CALLS]  # the socket is left, nobody listens: fallback
    assert served == local
    assert [rc for rc, _, _ in served][:3] == [0, 0, served[2][0]] and served[2][0] != 0
    assert served[4][0] != 0 and served[4][2]


def test_a_served_call_reads_the_callers_stdin(node_dir: Path, server: subprocess.Popen[bytes]) -> None:
    argv = ["mlxconfig", "-d", "0000:15:00.0", "set", "LINK_TYPE_P1=1"]
    rc, out, _ = _call(node_dir, argv, stdin="n\n")
    assert rc != 0 and "Aborted" in out
    rc, out, _ = _call(node_dir, argv, stdin="y\n")
    assert rc == 0
    _, out, _ = _call(node_dir, ["mlxconfig", "-d", "0000:15:00.0", "q", "LINK_TYPE_P1"])
    assert "IB(1)" in out
    assert _children(server.pid) == []  # every call's child has exited and been reaped


def test_process_owning_tools_are_never_served(node_dir: Path) -> None:
    for command in ("vllm", "nvidia-persistenced"):
        assert command not in toolserver.SERVED
        assert "_socket" not in (node_dir / "bin" / command).read_text()


def _ask(node_dir: Path, argv: list[bytes]) -> bytes:
    """The server's answer to one call, the caller's descriptors being /dev/null."""
    with open(os.devnull, "r+b") as devnull, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(toolserver.socket_path(node_dir)))
        fds = [devnull.fileno()] * 3
        conn.sendmsg(
            [b"\0".join(argv)],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds))],
        )
        answer = b""
        while chunk := conn.recv(64):
            answer += chunk
    return answer


def test_systemctl_is_served_only_for_what_reads(node_dir: Path, server: subprocess.Popen[bytes]) -> None:
    """A start or stop owns processes: the server leaves it to the caller, whose tool runs it."""
    assert _ask(node_dir, [b"systemctl", b"is-enabled", b"nvidia-persistenced.service"]) in (b"0", b"1")
    assert _ask(node_dir, [b"systemctl", b"--quiet", b"start", b"nvidia-persistenced.service"]) == b"local"
    # the tool then runs it itself (here, outside a node's namespaces, the unit file is not found)
    rc, _, err = _call(node_dir, ["systemctl", "start", "nvidia-persistenced.service"])
    assert rc == 5 and "does not exist" in err, err
    assert _children(server.pid) == []


def test_a_damaged_native_tool_says_so(tmp_path: Path) -> None:
    client = toolclient.build(tmp_path)
    if client is None:
        pytest.skip("no C compiler here")
    tool = tmp_path / "ethtool"
    tool.write_bytes(client)  # no trailer
    tool.chmod(0o755)
    done = subprocess.run([str(tool), "-a", "x"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "damaged simulated tool" in done.stderr


def test_the_server_runs_a_call_with_the_callers_descriptors(
    node_dir: Path, server: subprocess.Popen[bytes]
) -> None:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    with open(os.devnull, "rb") as devnull, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(toolserver.socket_path(node_dir)))
        fds = [devnull.fileno(), out_w, err_w]
        conn.sendmsg(
            [b"\0".join([b"ethtool", b"-a", b"ens21np0"])],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds))],
        )
        os.close(out_w)
        os.close(err_w)
        status = b""
        while chunk := conn.recv(64):
            status += chunk
    with os.fdopen(out_r) as out, os.fdopen(err_r) as err:
        printed, errors = out.read(), err.read()
    assert (status, errors) == (b"0", "")
    assert printed == _call(node_dir, ["ethtool", "-a", "ens21np0"])[1]
    assert printed.startswith("Pause parameters for ens21np0:")
