"""One simulated node's BMC for the Redfish conformance tests.

``prepared``: the node's state, the BMC's CA, certificate and account, as the Fleet makes them
(sim/bmc/launch.py). ``in_namespace``: the BMC's own process (``python -m gpufleet_sim.bmc.server``)
in a network namespace of its own, which has only loopback: what a validator sends past the BMC
(the Protocol Validator's SSDP M-SEARCH multicast, a schema download) fails at once there instead
of reaching the machine's network. ``Namespaced.run`` runs a command in that namespace (nsenter).
Needs root. ``serving``: the same BMC in this process, on a free loopback port, for clients that run
in the test itself.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpufleet_sim import build, state
from gpufleet_sim.bmc import launch, server, tls

NAME = "node01"
ADDRESS = "127.0.0.1"
START_S = 10


@dataclass(frozen=True)
class SimNode:
    node_dir: Path
    bmc_dir: Path
    password: str

    @property
    def ca(self) -> Path:
        return self.bmc_dir / tls.CA_CERT

    @property
    def url(self) -> str:
        return f"https://{ADDRESS}:{launch.PORT}"


def prepared(root: Path) -> SimNode:
    node_dir = root / NAME
    node_dir.mkdir(parents=True)
    state.save(node_dir, build.build_node_state(NAME, "b300-16", 1))
    bmc_dir = root / "bmc"
    return SimNode(node_dir, bmc_dir, launch.prepare(bmc_dir, NAME, ADDRESS, node_dir))


@dataclass(frozen=True)
class Namespaced:
    node: SimNode
    process: subprocess.Popen[bytes]

    def run(
        self, argv: list[str], env: Mapping[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        enter = ["nsenter", f"--net=/proc/{self.process.pid}/ns/net", "--"]
        return subprocess.run(
            enter + argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def listening(self) -> bool:
        probe = "import sys; from gpufleet_sim.bmc import launch; sys.exit(not launch.listening(sys.argv[1]))"
        return self.run([sys.executable, "-c", probe, ADDRESS]).returncode == 0


@contextmanager
def in_namespace(node: SimNode) -> Iterator[Namespaced]:
    """The BMC listening on https://127.0.0.1:443 of its namespace; stopped (SIGTERM) on leaving."""
    argv = launch.argv(node.bmc_dir, NAME, ADDRESS, node.node_dir)
    # unshare and sh exec: the BMC keeps the process's pid, so its /proc/<pid>/ns/net is the namespace
    process = subprocess.Popen(
        ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv],
        stderr=subprocess.DEVNULL,
    )
    bmc = Namespaced(node, process)
    try:
        deadline = time.monotonic() + START_S
        while not bmc.listening():
            assert process.poll() is None, f"the BMC exited with {process.returncode}"
            assert time.monotonic() < deadline, f"the BMC did not listen within {START_S} s"
            time.sleep(0.1)
        yield bmc
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def serving(node: SimNode) -> Iterator[str]:
    """The BMC's base URL on 127.0.0.1 (a free port), served from threads of this process."""
    with server.in_process(node.node_dir, node.bmc_dir, NAME, ADDRESS) as listener:
        assert listener.server is not None
        yield f"https://{ADDRESS}:{listener.server.server_address[1]}"
