"""Debian's real lldpd (1.0.16) at both ends of two veth "cables", and gpufleet's LLDP parser
(module_utils/fabric/lldp.py) and cabling judge (module_utils/fabric/fabric.py's plan) on what the
real ``lldpctl`` prints.

Two network namespaces: a node (``ens1np0``, ``ens2np0``, lldpd as ``node01``) and a Cumulus-like
leaf (``swp1``, ``swp2``, lldpd as ``leaf01`` with ``portidsubtype ifname``, a port description from
the interface alias as Cumulus sets it, its management address on ``eth0``). Each lldpd has its own
control socket and configuration (``-u``, ``-O``), stays in the foreground (``-d``, no pid file) and
sends every second, so a neighbour is heard within about a second. The daemons and namespaces go
away in the fixture's teardown, whatever the test did.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import fabric, lldp
from gpufleet_sim import build, state
from gpufleet_sim.tools import lldpctl as fake_lldpctl

from gpufleet import procs
from tests.json_shape import key_paths

LLDPD = "/usr/sbin/lldpd"
LLDPCTL = "/usr/sbin/lldpctl"
LLDPCLI = "/usr/sbin/lldpcli"
# lldpd sends every second (tx-interval 1): a change is heard within ~1 s, so 15 s is a failure
DEADLINE_S = 15.0
LEAF_MGMT_IP = "192.0.2.2"
LEAF_DESCR = "Cumulus Linux version 5.9.1 running on Mellanox SN5600"
# (ibdev, node netdev, leaf port the cabling plan gives it)
PORTS = (("mlx5_0", "ens1np0", "swp1"), ("mlx5_1", "ens2np0", "swp2"))
STRAIGHT = {netdev: swp for _ibdev, netdev, swp in PORTS}
CROSSED = {"ens1np0": "swp2", "ens2np0": "swp1"}
PLAN = {ibdev: "leaf01:" + swp for ibdev, _netdev, swp in PORTS}
_FAST = ["configure lldp tx-interval 1"]
HOST = {"roce_dscp": 26, "cnp_dscp": 48, "priority": 3, "mtu": 4200}


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


PRIVSEP_CHROOT = Path("/run/lldpd")


class Lldpd:
    """One real lldpd in a namespace, on its own control socket and configuration."""

    def __init__(self, netns: str, workdir: Path, name: str, pattern: str, config: list[str]) -> None:
        self.netns, self.socket, self.log = netns, workdir / f"{name}.sock", workdir / f"{name}.log"
        conf = workdir / f"{name}.conf"
        conf.write_text("\n".join(config) + "\n")
        # lldpd's privilege-separation chroot (compiled in): Debian's install makes it as the _lldpd
        # user's home, but /run is emptied at boot and only the (never started) service makes it again
        PRIVSEP_CHROOT.mkdir(mode=0o755, exist_ok=True)
        # NOTIFY_SOCKET would make lldpd think systemd started it
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        with self.log.open("w") as log:
            # its own process group: lldpd forks a monitor and a worker, stopped together
            argv = [LLDPD, "-d", "-u", str(self.socket), "-O", str(conf), "-I", pattern]
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", netns, *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def lldpctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run("ip", "netns", "exec", self.netns, LLDPCTL, "-u", str(self.socket), *args, check=False)

    def configure(self, *words: str) -> None:
        _run(LLDPCLI, "-u", str(self.socket), "configure", *words)

    def stop(self) -> None:
        """Stop every process of its group and reap them: the worker outlives the monitor, and
        this test process (a subreaper) adopts it rather than a PID 1 that may never reap."""
        members = _group(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        deadline = time.monotonic() + 5
        while members and time.monotonic() < deadline:
            for pid in list(members):
                with contextlib.suppress(ChildProcessError):  # not (yet) adopted by this process
                    os.waitpid(pid, os.WNOHANG)
                if not Path(f"/proc/{pid}").exists():
                    members.remove(pid)
            time.sleep(0.05)
        assert not members, f"lldpd processes {members} in {self.netns} outlived SIGTERM by 5 s"


def _group(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (one lldpd and what it forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


class Fabric:
    """The node's and the leaf's namespaces, the cables between them and an lldpd in each."""

    def __init__(self, workdir: Path) -> None:
        tag = f"{os.getpid()}-{time.monotonic_ns() % 100000}"
        self.node_ns, self.leaf_ns = f"gfl-lldp-node-{tag}", f"gfl-lldp-leaf-{tag}"
        self.workdir = workdir
        self.daemons: list[Lldpd] = []
        self.namespaces: list[str] = []
        self.cables: dict[str, str] = {}

    def start(self) -> None:
        """Namespaces, cables and daemons, each recorded as it is made: close() removes what was."""
        for netns in (self.node_ns, self.leaf_ns):
            _run("ip", "netns", "add", netns)
            self.namespaces.append(netns)
            _run("ip", "-n", netns, "link", "set", "lo", "up")
        # the leaf's management port: lldpd advertises its address (and its ifindex, mgmt-iface)
        _run("ip", "-n", self.leaf_ns, "link", "add", "eth0", "type", "veth", "peer", "name", "mgmt0")
        _run("ip", "-n", self.leaf_ns, "addr", "add", LEAF_MGMT_IP + "/24", "dev", "eth0")
        for port in ("eth0", "mgmt0"):
            _run("ip", "-n", self.leaf_ns, "link", "set", port, "up")
        self.cable(STRAIGHT)
        node_config = ["configure system hostname node01", *_FAST]
        self.node = Lldpd(self.node_ns, self.workdir, "node", "ens*", node_config)
        self.daemons.append(self.node)
        leaf_config = [
            "configure system hostname leaf01",
            f'configure system description "{LEAF_DESCR}"',
            "configure lldp portidsubtype ifname",
            *_FAST,
        ]
        self.leaf = Lldpd(self.leaf_ns, self.workdir, "leaf", "swp*", leaf_config)
        self.daemons.append(self.leaf)

    def cable(self, cables: dict[str, str]) -> None:
        """Unplug every node port and plug each into the leaf port ``cables`` names (a new veth pair)."""
        if cables == self.cables:
            return
        self.cables = {}
        for netdev in STRAIGHT:
            _run("ip", "-n", self.node_ns, "link", "del", netdev, check=False)
        for netdev, swp in cables.items():
            _run(
                "ip", "link", "add", netdev, "netns", self.node_ns, "type", "veth",
                "peer", "name", swp, "netns", self.leaf_ns,
            )  # fmt: skip
            _run("ip", "-n", self.node_ns, "link", "set", netdev, "mtu", "4200", "up")
            _run("ip", "-n", self.leaf_ns, "link", "set", swp, "mtu", "9216", "up")
        # Cumulus writes a port's description as the interface alias; lldpd sends it as port.descr
        _run("ip", "-n", self.leaf_ns, "link", "set", "swp1", "alias", "node01 mlx5_0")
        self.cables = dict(cables)

    def wait_heard(self, cables: dict[str, str], name: str = "leaf01") -> dict[str, list[dict[str, Any]]]:
        """The node's parsed json0 once each port hears ``name`` on the leaf port ``cables`` gives it."""
        deadline, out = time.monotonic() + DEADLINE_S, ""
        while time.monotonic() < deadline:
            for daemon in self.daemons:
                if daemon.proc.poll() is not None:
                    pytest.fail(f"lldpd in {daemon.netns} exited {daemon.proc.returncode}:\n{self.logs()}")
            out = self.node.lldpctl("-f", "json0").stdout
            heard = lldp.parse_lldpctl(out) if out.strip() else {}
            found = {i: [(n["chassis_name"], n["port_id"]) for n in heard.get(i, [])] for i in cables}
            if found == {i: [(name, swp)] for i, swp in cables.items()}:
                return heard
            time.sleep(0.1)
        pytest.fail(f"the node did not hear {name} on {cables} within {DEADLINE_S} s:\n{out}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {d.log.name}\n{d.log.read_text()[-3000:]}" for d in self.daemons)

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.stop()
        for netns in self.namespaces:
            _run("ip", "netns", "del", netns, check=False)


@pytest.fixture(scope="module")
def real() -> Iterator[Fabric]:
    if os.geteuid() != 0:
        pytest.fail("the real lldpd runs in network namespaces this test creates: run it as root")
    for tool in (LLDPD, LLDPCTL, LLDPCLI):
        if not os.access(tool, os.X_OK):
            pytest.fail(f"{tool} is missing: scripts/system-packages.sh installs Debian's lldpd")
    procs.become_subreaper()
    # a short path (a unix socket's path is at most 107 bytes), open to lldpd's own user: the
    # lldpcli it runs on start to read its configuration connects as _lldpd
    workdir = Path(tempfile.mkdtemp(prefix="gfl-lldp-"))
    workdir.chmod(0o755)
    fabric_ = Fabric(workdir)
    try:
        fabric_.start()
        fabric_.wait_heard(STRAIGHT)  # both daemons up, configured and heard
        yield fabric_
    finally:
        fabric_.close()
        shutil.rmtree(workdir, ignore_errors=True)


class NodeInNamespace:
    """What fabric.read_neighbours asks of the AnsibleModule (the binary's path, run_command), here
    the real lldpctl in the node's namespace on its lldpd's socket, with fabric.py's own arguments."""

    def __init__(self, daemon: Lldpd) -> None:
        self.daemon = daemon
        self.calls: list[list[str]] = []

    def get_bin_path(self, name: str) -> str | None:
        return LLDPCTL if name == lldp.TOOL else None

    def run_command(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        assert argv[0] == LLDPCTL
        done = self.daemon.lldpctl(*argv[1:])
        return done.returncode, done.stdout, done.stderr


def judged(real: Fabric, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """fabric.plan's checks by name, the node's RoCE ports being the veths (no mlx5 here)."""
    monkeypatch.setattr(fabric, "roce_ports", lambda: [(ibdev, netdev, True) for ibdev, netdev, _ in PORTS])
    node = NodeInNamespace(real.node)
    result = fabric.plan(node, {"node": "node01", "cabling": PLAN, "switches": {}, "host": HOST})
    assert node.calls == [[LLDPCTL, "-f", "json0"]] and result.changes == []
    return {c["name"]: c for c in result.checks}


def _without_age(neighbours: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    # the two reads are apart in time: lldpd's age may have ticked between them
    return {i: [{k: v for k, v in n.items() if k != "age"} for n in heard] for i, heard in neighbours.items()}


def test_each_port_hears_its_planned_leaf_port_in_both_formats(
    real: Fabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    real.cable(STRAIGHT)
    heard = real.wait_heard(STRAIGHT)
    [swp1] = heard["ens1np0"]
    assert swp1["chassis_name"] == "leaf01" and swp1["chassis_descr"] == LEAF_DESCR
    assert (swp1["port_id"], swp1["port_id_type"], swp1["port_descr"]) == ("swp1", "ifname", "node01 mlx5_0")
    assert heard["ens2np0"][0]["port_descr"] == "swp2"  # no alias: lldpd sends the name
    assert LEAF_MGMT_IP in swp1["mgmt_ip"] and swp1["chassis_id_type"] == "mac"
    # tx-interval 1 s x tx-hold 4; lldpd sent no maximum frame size from a 9216-byte port
    assert (swp1["ttl"], swp1["mfs"], swp1["via"]) == (4, None, "LLDP")
    as_json = real.node.lldpctl("-f", "json")
    assert as_json.returncode == 0
    assert _without_age(lldp.parse_lldpctl(as_json.stdout)) == _without_age(heard)
    checks = judged(real, monkeypatch)
    assert [c["name"] for c in checks.values()] == ["fabric.neighbor[mlx5_0]", "fabric.neighbor[mlx5_1]"]
    assert all(c["ok"] for c in checks.values()), checks
    assert checks["fabric.neighbor[mlx5_1]"]["message"] == "mlx5_1 is cabled to leaf01:swp2 as planned"


def test_a_swapped_pair_of_cables_is_named_as_swapped(real: Fabric, monkeypatch: pytest.MonkeyPatch) -> None:
    real.cable(STRAIGHT)
    real.wait_heard(STRAIGHT)
    assert all(c["ok"] for c in judged(real, monkeypatch).values())
    real.cable(CROSSED)  # maintenance put them back the other way round
    real.wait_heard(CROSSED)
    checks = judged(real, monkeypatch)
    for ibdev, netdev, planned in PORTS:
        check = checks[f"fabric.neighbor[{ibdev}]"]
        assert not check["ok"] and check["limit"] == "leaf01:" + planned
        assert check["value"] == "leaf01:" + CROSSED[netdev]
        other = next(i for i, _n, p in PORTS if p == CROSSED[netdev])
        assert check["message"] == (
            f"{ibdev} is cabled to leaf01:{CROSSED[netdev]}, the plan says leaf01:{planned}: "
            f"crossed with {other} (swap the two cables)"
        )


def test_a_quote_in_the_system_name_breaks_json_not_json0(real: Fabric) -> None:
    """Why fabric.py reads ``-f json0``: lldpd 1.0.16's ``-f json`` writes a system name that is a
    JSON key unescaped, so a ``"`` in it makes the output invalid JSON."""
    real.cable(STRAIGHT)
    real.leaf.configure("system", "hostname", 'leaf"01')
    try:
        heard = real.wait_heard(STRAIGHT, name='leaf"01')
        assert heard["ens1np0"][0]["port_id"] == "swp1"
        with pytest.raises(lldp.ParseError, match=r"^lldpctl: .*not JSON"):
            lldp.parse_lldpctl(real.node.lldpctl("-f", "json").stdout)
    finally:
        real.leaf.configure("system", "hostname", "leaf01")


def test_the_simulated_lldpctl_prints_what_the_real_one_does(
    real: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real.cable(STRAIGHT)
    real.wait_heard(STRAIGHT)
    live = json.loads(real.node.lldpctl("-f", "json0").stdout)
    state.save(tmp_path, build.build_node_state("node01", "b300-16", 1))
    assert fake_lldpctl.main(["-f", "json0"], tmp_path) == 0
    assert key_paths(json.loads(capsys.readouterr().out)) == key_paths(live)
    version = real.node.lldpctl("-v")
    assert fake_lldpctl.main(["-v"], tmp_path) == 0
    assert (version.returncode, capsys.readouterr().out) == (0, version.stdout)
