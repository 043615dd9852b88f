"""A simulated SONiC leaf switch: a real sshd whose PATH has a fake ``sonic-cfggen``.

gpufleet reads a SONiC leaf with ``sonic-cfggen -d --print-data`` over SSH (the switch_qos action
plugin). Here that command prints CONFIG_DB in config_db.json's nested layout (tables, then keys,
then string fields; ``json.dumps(..., indent=4, sort_keys=True)`` as sonic-cfggen prints it), built
from the same leaf state file the NVUE leaves keep (sim/nvue_state.py's operational view), so the
leaf faults (sim/faults_switch.py: switch-pfc-off, -ecn-off, -dscp-lossy, -mtu-low) show up in it
and in the nodes' RoCE counters alike, and ``switch-down`` stops the sshd.

NVUE's objects in SONiC's tables (the sonic-utilities captures in tests/fixtures/real/sonic show the
shapes; the names follow SONiC's AZURE QoS templates):

- each ``swpN`` is ``PORT|Ethernet<8(N-1)>`` with ``alias`` swpN (lldpmgrd advertises the alias as the
  LLDP port id, so the nodes' lldpctl still hears swpN), ``mtu``, ``speed``, ``lanes``, ``index``;
- ``mapping.dscp`` is ``DSCP_TO_TC_MAP|AZURE`` (NVUE's switch priority is SONiC's traffic class), bound
  to every port in ``PORT_QOS_MAP`` when the leaf trusts DSCP (``l3`` or ``both``);
- ``egress-queue-mapping`` is ``TC_TO_QUEUE_MAP|AZURE`` (NVUE's traffic class is SONiC's queue);
- PFC's priorities (when it both receives and sends) are each port's ``pfc_enable``;
- a traffic class with ECN on is its queue's ``wred_profile`` AZURE_LOSSLESS (``ecn: ecn_all``, the
  thresholds NVUE holds); one without has no WRED profile.

Not modelled: Redis, ``sonic-cfggen``'s other options (anything but ``-d --print-data`` is a usage
error), ``config`` commands (gpufleet never changes a SONiC leaf), tables gpufleet does not read
beyond DEVICE_METADATA, SCHEDULER and BUFFER_PG.

Run: ``python -m gpufleet_sim.sonic --state S --dir D --name leaf01``: watches the state file and runs
the leaf's sshd (own PID and mount namespaces, as a node's) while the leaf is not down.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from gpufleet_sim import nvue_state, sshd_config

SRC_DIR = Path(__file__).resolve().parents[1]
NODE_PYTHON = "/usr/bin/python3"
SSHD = "/usr/sbin/sshd"
OS = "sonic"
COMMAND = "sonic-cfggen"
MAP = "AZURE"
LOSSLESS_WRED = "AZURE_LOSSLESS"
_ON = ("enable", "on")

Tree = dict[str, Any]


def _profile(qos: Tree, branch: str) -> Tree:
    node = (qos.get(branch) or {}).get("default-global")
    return node if isinstance(node, dict) else {}


def _swp_number(name: str) -> int:
    return int(name.removeprefix("swp"))


def port_name(swp: str) -> str:
    """``swp1`` -> ``Ethernet0``: eight lanes a port, as a 400G SONiC port is numbered."""
    return f"Ethernet{(_swp_number(swp) - 1) * 8}"


def config_db(tree: Tree, hostname: str) -> dict[str, dict[str, dict[str, str]]]:
    """CONFIG_DB (the tables gpufleet reads, and DEVICE_METADATA) of a leaf whose NVUE tree is ``tree``."""
    qos = tree.get("qos") or {}
    mapping = _profile(qos, "mapping")
    pfc = _profile(qos, "pfc")
    lossless = (
        sorted(int(p) for p in (pfc.get("switch-priority") or {}))
        if pfc.get("rx", "enable") in _ON and pfc.get("tx", "enable") in _ON
        else []
    )
    dscp = {
        d: str(entry["switch-priority"])
        for d, entry in (mapping.get("dscp") or {}).items()
        if isinstance(entry, dict) and "switch-priority" in entry
    }
    egress = {
        p: str(entry["traffic-class"])
        for p, entry in (_profile(qos, "egress-queue-mapping").get("switch-priority") or {}).items()
        if isinstance(entry, dict) and "traffic-class" in entry
    }
    classes = _profile(qos, "congestion-control").get("traffic-class") or {}
    marked = {
        int(tc): entry for tc, entry in classes.items() if isinstance(entry, dict) and entry.get("ecn") in _ON
    }
    swps = sorted((n for n in tree.get("interface", {}) if n.startswith("swp")), key=_swp_number)
    db: dict[str, dict[str, dict[str, str]]] = {
        "DEVICE_METADATA": {
            "localhost": {"hostname": hostname, "type": "LeafRouter", "platform": "x86_64-gpufleet_sim-r0"}
        },
        "DSCP_TO_TC_MAP": {MAP: dscp},
        "TC_TO_QUEUE_MAP": {MAP: egress},
        "TC_TO_PRIORITY_GROUP_MAP": {MAP: {str(tc): str(tc) for tc in range(8)}},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: {str(p): str(p) for p in range(8)}},
        "SCHEDULER": {"scheduler.0": {"type": "DWRR", "weight": "14"}},
        "WRED_PROFILE": {},
        "PORT": {},
        "PORT_QOS_MAP": {},
        "QUEUE": {},
        "BUFFER_PG": {},
    }
    if marked:
        entry = next(iter(marked.values()))
        db["WRED_PROFILE"][LOSSLESS_WRED] = {
            "ecn": "ecn_all",
            "wred_green_enable": "true",
            "green_min_threshold": str(entry.get("min-threshold", 153600)),
            "green_max_threshold": str(entry.get("max-threshold", 1536000)),
            "green_drop_probability": str(entry.get("probability", 100)),
        }
    for swp in swps:
        name, number = port_name(swp), _swp_number(swp)
        link = (tree["interface"][swp] or {}).get("link") or {}
        db["PORT"][name] = {
            "admin_status": "up",
            "alias": swp,
            "index": str(number),
            "lanes": ",".join(str((number - 1) * 8 + lane) for lane in range(8)),
            "mtu": str(link.get("mtu", nvue_state.DEFAULT_MTU)),
            "speed": "400000",
        }
        port_qos = {"tc_to_queue_map": MAP, "tc_to_pg_map": MAP, "pfc_to_queue_map": MAP}
        if mapping.get("trust") in ("l3", "both"):
            port_qos["dscp_to_tc_map"] = MAP
        if lossless:
            port_qos["pfc_enable"] = ",".join(map(str, lossless))
        db["PORT_QOS_MAP"][name] = port_qos
        for queue in range(8):
            fields = {"scheduler": "scheduler.0"}
            if queue in marked:
                fields["wred_profile"] = LOSSLESS_WRED
            db["QUEUE"][f"{name}|{queue}"] = fields
        db["BUFFER_PG"][f"{name}|0"] = {"profile": "ingress_lossy_profile"}
        for priority in lossless:
            db["BUFFER_PG"][f"{name}|{priority}"] = {"profile": "pg_lossless_400000_300m_profile"}
    return db


def cfggen(argv: list[str], state_path: Path) -> int:
    """The fake ``sonic-cfggen``: ``-d --print-data`` prints CONFIG_DB; anything else is a usage error."""
    if sorted(argv) != ["--print-data", "-d"]:
        print(
            f"usage: sonic-cfggen -d --print-data (the simulated leaf answers nothing else, got {argv})",
            file=sys.stderr,
        )
        return 2
    state = nvue_state.load(state_path)
    tree = nvue_state.view(state, "operational") or {}
    print(json.dumps(config_db(tree, str(state["hostname"])), indent=4, sort_keys=True))
    return 0


# ---------------------------------------------------------------- the leaf's files and its sshd


def _files(directory: Path, name: str) -> Path:
    return directory / f"{name}-sonic"


def host_key(directory: Path, name: str) -> Path:
    return _files(directory, name) / "ssh_host_ed25519_key"


def _sshd_config(directory: Path, name: str, address: str, port: int) -> str:
    files = _files(directory, name)
    own = [
        f"AuthorizedKeysFile {files / 'authorized_keys'}",
        "MaxSessions 16",
        # no Subsystem sftp: nothing is copied to a switch
        f"SetEnv PATH={files / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    ]
    return sshd_config.render(address, port, host_key(directory, name), own)


def prepare(directory: Path, name: str, address: str, port: int, authorized_key: str) -> None:
    """The SONiC side of a leaf already prepared by nvue.prepare (its state file): host key, the
    fleet's client key authorized, sshd_config, and ``sonic-cfggen`` on the sshd's PATH."""
    files = _files(directory, name)
    (files / "bin").mkdir(parents=True, exist_ok=True)
    if not host_key(directory, name).exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(host_key(directory, name))],
            check=True,
        )
    keys = files / "authorized_keys"
    keys.write_text(authorized_key, encoding="utf-8")
    keys.chmod(0o600)
    (files / "sshd_config").write_text(_sshd_config(directory, name, address, port), encoding="utf-8")
    tool = files / "bin" / COMMAND
    tool.write_text(
        f"#!{NODE_PYTHON} -sS\n"
        "import sys\n"
        f"sys.path.insert(0, {str(SRC_DIR)!r})\n"
        "from pathlib import Path\n"
        "from gpufleet_sim.sonic import cfggen\n"
        f"sys.exit(cfggen(sys.argv[1:], Path({str(nvue_state_path(directory, name))!r})))\n",
        encoding="utf-8",
    )
    tool.chmod(0o755)


def nvue_state_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.json"


def known_host(directory: Path, name: str, address: str, port: int) -> str:
    """The leaf's line in the fleet's known_hosts."""
    key_type, key_data = host_key(directory, name).with_suffix(".pub").read_text(encoding="utf-8").split()[:2]
    return f"[{address}]:{port} {key_type} {key_data}"


def argv(directory: Path, name: str) -> list[str]:
    """The command line of a SONiC leaf prepared under ``directory`` (the Fleet runs one per leaf)."""
    return [sys.executable, "-m", "gpufleet_sim.sonic", "--dir", str(directory), "--name", name]


def sshd_argv(directory: Path, name: str) -> list[str]:
    """The leaf's sshd in its own PID and mount namespaces (a /run of its own for sshd's privilege
    separation directory); killing unshare takes every session with it."""
    config = _files(directory, name) / "sshd_config"
    script = "; ".join(
        [
            "set -e",
            "mount -t tmpfs -o mode=755 tmpfs /run",
            "mkdir -p /run/sshd",
            f"exec {SSHD} -D -e -f {shlex.quote(str(config))}",
        ]
    )
    return [
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--mount",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        script,
    ]


def _dies_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _down(path: Path) -> bool:
    try:
        return bool(nvue_state.load(path).get("down"))
    except (OSError, ValueError):
        return False


def main(args_in: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpufleet-sim-sonic")
    parser.add_argument("--dir", type=Path, required=True, help="the fleet's leaves/ directory")
    parser.add_argument("--name", required=True, help="the leaf's name (leaf01)")
    args = parser.parse_args(args_in)
    state = nvue_state_path(args.dir, args.name)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: stopping.set())
    sshd: subprocess.Popen[bytes] | None = None
    seen = -1
    try:
        # switch-down stops the sshd (connections refused, as of a switch that is off); its clear restarts it
        while True:
            stamp = state.stat().st_mtime_ns
            if stamp != seen or (sshd is not None and sshd.poll() is not None):
                seen = stamp
                down = _down(state)
                if down and sshd is not None:
                    sshd.kill()
                    sshd.wait()
                    sshd = None
                    print(f"sonic: {args.name} down (switch-down)", file=sys.stderr, flush=True)
                elif not down and (sshd is None or sshd.poll() is not None):
                    sshd = subprocess.Popen(sshd_argv(args.dir, args.name), preexec_fn=_dies_with_parent)
                    print(f"sonic: {args.name} sshd pid {sshd.pid}", file=sys.stderr, flush=True)
            if stopping.wait(0.25):
                break
    finally:
        if sshd is not None:
            sshd.kill()
            sshd.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
