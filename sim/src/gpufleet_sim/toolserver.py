"""A fork server for a simulated node's fake device tools.

Each call of a fake tool used to start a Python and import the simulator (~30-40 ms of CPU
before the tool did anything). Real tools are native and cost the node's own cores; here 32
nodes share the controller's, so that start-up cost swamped the work being measured. This
server runs inside the node (its namespaces, started before its sshd), imports the tools once,
and forks a child per call. The tool on the node's PATH is a small client (``client_source``)
that hands the server its argv and its stdin/stdout/stderr file descriptors (SCM_RIGHTS), so
the child reads and prints exactly where the tool would, and exits with the tool's status.

If the server is not there (not started yet, or gone), the client runs the tool itself as
before: the server is only a speed-up, never the only path.

Tools that start or own processes (vllm, nvidia-persistenced) are never served: their process tree
is part of what they simulate. systemctl is served for the verbs that only read (its ``served``);
for the others the server answers ``local`` and the client runs the tool itself.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import sys
import traceback
from pathlib import Path

from gpufleet_sim.tools import TOOLS, run

SERVED = (
    "nvidia-smi",
    "ibdev2netdev",
    "mlnx_qos",
    "mlxlink",
    "mlxconfig",
    "cma_roce_mode",
    "ethtool",
    "scontrol",
    "kubectl",
    "systemctl",
    "lldpctl",
    "dmesg",
    "all_reduce_perf",
    "dcgmi",
    "lspci",
)
# the server's answer to a call it leaves to the caller (a tool module's ``served(argv)`` is false)
LOCAL = b"local"
SOCKET_NAME = "tools.sock"
_MAX_REQUEST = 1 << 16


def socket_path(node_dir: Path) -> Path:
    return node_dir / SOCKET_NAME


def client_source(command: str, node_dir: Path, src_dir: Path, python: str) -> str:
    """The fake tool on the node's PATH: ask the server, or run the tool here when there is none."""
    sock = str(socket_path(node_dir))
    return f"""#!{python} -sS
import os, sys, _socket
# Fake {command} of a simulated node: the node's tool server runs it (gpufleet_sim.toolserver).
def _local():
    os.environ['GPUFLEET_SIM_NODE_DIR'] = {str(node_dir)!r}
    sys.path.insert(0, {str(src_dir)!r})
    from gpufleet_sim.tools import run
    sys.exit(run({command!r}, {str(node_dir)!r}))
s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
try:
    s.connect({sock!r})
except OSError:
    s.close()
    _local()
fds = b''.join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
s.sendmsg([b'\\0'.join(os.fsencode(a) for a in [{command!r}] + sys.argv[1:])],
          [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
answer = b''
while True:
    chunk = s.recv(64)
    if not chunk:
        break
    answer += chunk
if answer == {LOCAL!r}:
    s.close()
    _local()
if not answer:
    sys.stderr.write({command!r} + ': the simulated node\\'s tool server failed\\n')
    sys.exit(1)
sys.exit(int(answer))
"""


def _serve_one(conn: socket.socket, node_dir: Path) -> int | None:
    """In the forked child: take the caller's argv and fds, run the tool, return its status (None:
    the caller runs this call itself)."""
    message, ancillary, _, _ = conn.recvmsg(_MAX_REQUEST, socket.CMSG_SPACE(3 * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data) - 3, 4)]
    if len(fds) != 3 or not message:
        return 2
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    command, *args = (os.fsdecode(a) for a in message.split(b"\0"))
    if command not in SERVED:
        sys.stderr.write(f"{command}: not served by the tool server\n")
        return 2
    served = getattr(importlib.import_module(f"gpufleet_sim.tools.{TOOLS[command]}"), "served", None)
    if served is not None and not served(args):
        return None
    sys.argv = [command, *args]
    try:
        return run(command, str(node_dir))
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        sys.stderr.write(f"{code}\n")
        return 1
    except Exception:  # the tool crashed: say so as the tool would, with a failed status
        traceback.print_exc()
        return 1
    finally:
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        with contextlib.suppress(OSError):
            sys.stderr.flush()


def _reap(signum: int, frame: object) -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def serve(node_dir: Path) -> None:
    """Listen on the node's socket and fork a child per call; never returns."""
    os.environ["GPUFLEET_SIM_NODE_DIR"] = str(node_dir)
    for command in SERVED:
        importlib.import_module(f"gpufleet_sim.tools.{TOOLS[command]}")
    # Reap each call's child as it exits (not SIG_IGN: reaped children's CPU time then counts in
    # the server's, so the node's CPU can be measured from its process tree).
    signal.signal(signal.SIGCHLD, _reap)
    path = socket_path(node_dir)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(128)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            status: int | None = 1
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                status = _serve_one(conn, node_dir)
            finally:
                with contextlib.suppress(OSError):
                    conn.sendall(LOCAL if status is None else str(status).encode())
                os._exit(0)
        conn.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
