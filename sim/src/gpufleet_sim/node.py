"""One simulated node: its directory, its tools, its sshd, and the command that starts it."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpufleet_sim import build, gpudirect, sshd_config, state, sysfs, systemd_targets, toolclient, toolserver
from gpufleet_sim.tools import INSTALL_DIRS, TOOLS

SRC_DIR = Path(__file__).resolve().parents[1]
# The fake tools run on the node's own interpreter, as a real node's would.
NODE_PYTHON = "/usr/bin/python3"
SSHD = "/usr/sbin/sshd"
NODE_PYTHON_DIR = Path(__file__).resolve().parent / "node_python"


# The driver's unit as NVIDIA ships it, with the simulated daemon's path.
PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/local/sbin/nvidia-persistenced --verbose
ExecStopPost=/usr/local/sbin/nvidia-persistenced --gpufleet-sim-stopped

[Install]
WantedBy=multi-user.target
"""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    index: int
    address: str
    port: int
    profile: str
    directory: Path

    @property
    def host_key(self) -> Path:
        return self.directory / "ssh" / "ssh_host_ed25519_key"


def _tool_wrapper(command: str, node_dir: Path) -> str:
    if command in toolserver.SERVED:
        return toolserver.client_source(command, node_dir, SRC_DIR, NODE_PYTHON)
    return (
        f"#!{NODE_PYTHON} -sS\n"
        "import os, sys\n"
        f"os.environ['GPUFLEET_SIM_NODE_DIR'] = {str(node_dir)!r}\n"
        f"sys.path.insert(0, {str(SRC_DIR)!r})\n"
        "from gpufleet_sim.tools import run\n"
        f"sys.exit(run({command!r}, {str(node_dir)!r}))\n"
    )


def _sshd_config(spec: NodeSpec) -> str:
    own = [
        "MaxSessions 64",
        "MaxStartups 200:30:400",
        "Subsystem sftp internal-sftp",
        # PYTHONPATH: the node's Python keeps the bytecode of Ansible's zipped modules (node_python/).
        "SetEnv PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        f" PYTHONPATH={NODE_PYTHON_DIR}",
    ]
    return sshd_config.render(spec.address, spec.port, spec.host_key, own)


def tool_path(node_dir: Path, command: str) -> Path:
    """Where the node's ``command`` lives in its directory: bin/ (its /usr/local/sbin), or under
    opt-upper/ (its /opt) for a tool installed by path (tools.INSTALL_DIRS)."""
    install = INSTALL_DIRS.get(command)
    if install is None:
        return node_dir / "bin" / command
    return node_dir / "opt-upper" / Path(install).relative_to("/opt") / command


def _install_tool(spec: NodeSpec, command: str, client: bytes | None) -> None:
    """The tool on the node's PATH (or at its install path): the native client of its tool server when
    there is one (and a compiled client), else the Python wrapper."""
    tool = tool_path(spec.directory, command)
    tool.parent.mkdir(parents=True, exist_ok=True)
    source = _tool_wrapper(command, spec.directory)
    if client is not None and command in toolserver.SERVED:
        fallback = spec.directory / "tools-py" / command
        fallback.write_text(source, encoding="utf-8")
        fallback.chmod(0o755)
        sock = toolserver.socket_path(spec.directory)
        tool.write_bytes(toolclient.tool(client, sock, command, fallback))
    else:
        tool.write_text(source, encoding="utf-8")
    tool.chmod(0o755)


def prepare(spec: NodeSpec, authorized_key: str, client: bytes | None = None) -> None:
    """Lays out a fresh node directory: state, sysfs, tools, home, sshd. ``client``: the compiled
    tool-server client (toolclient.build), or None for Python wrappers only."""
    if spec.directory.exists():
        shutil.rmtree(spec.directory)
    for sub in (
        "sys",
        "bin",
        "root/.ssh",
        "etc-upper",
        "etc-work",
        "var-lib-upper",
        "var-lib-work",
        "opt-upper",
        "opt-work",
        "ssh",
        "units",
        "tools-py",
    ):
        (spec.directory / sub).mkdir(parents=True)
    node_state = build.build_node_state(spec.name, spec.profile, spec.index)
    state.save(spec.directory, node_state)
    sysfs.render(spec.directory / "sys", node_state)
    gpudirect.render_modules(spec.directory / "sys", node_state)
    for command in TOOLS:
        _install_tool(spec, command, client)
    (spec.directory / "units" / "nvidia-persistenced.service").write_text(PERSISTENCED_UNIT, encoding="utf-8")
    gpudirect.write_units(spec.directory / "units")
    systemd_targets.write(spec.directory / "units")
    keys = spec.directory / "root" / ".ssh" / "authorized_keys"
    keys.write_text(authorized_key, encoding="utf-8")
    keys.chmod(0o600)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", spec.name, "-f", str(spec.host_key)],
        check=True,
    )
    (spec.directory / "ssh" / "sshd_config").write_text(_sshd_config(spec), encoding="utf-8")


def launch_argv(spec: NodeSpec) -> list[str]:
    """Own PID, mount and UTS namespaces: killing unshare takes every session down with it."""
    d = spec.directory
    script = "\n".join(
        [
            "set -e",
            f"hostname {spec.name}",
            f"mount --bind {d}/sys /sys",
            f"mount -t overlay overlay -o lowerdir=/etc,upperdir={d}/etc-upper,workdir={d}/etc-work /etc",
            # the node's own /var/lib (state that survives its reboots, e.g. a drain record)
            f"mount -t overlay overlay -o lowerdir=/var/lib,upperdir={d}/var-lib-upper,"
            f"workdir={d}/var-lib-work /var/lib",
            # the node's own /opt over the host's: tools installed by path (nccl-tests' build)
            # (a host without /opt: those tools are missing on its nodes, as on a node without them)
            "if [ -d /opt ]; then mount -t overlay overlay -o "
            f"lowerdir=/opt,upperdir={d}/opt-upper,workdir={d}/opt-work /opt; fi",
            "mount -t tmpfs -o mode=755 tmpfs /run",
            "mkdir -p /run/sshd",
            f"mount --bind {d}/root /root",
            f"mount --bind {d}/bin /usr/local/sbin",
            "mkdir -p /usr/lib/systemd/system",
            f"mount --bind {d}/units /usr/lib/systemd/system",
            # the canary Ansible's service modules look for before trusting systemctl
            "mkdir -p /run/systemd/system",
            "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            # the fake tools' fork server (a speed-up: the tools run without it too)
            f"PYTHONPATH={shlex.quote(str(SRC_DIR))} {NODE_PYTHON} -sS -m gpufleet_sim.toolserver "
            f"{shlex.quote(str(d))} </dev/null >>{shlex.quote(str(d / 'toolserver.log'))} 2>&1 &",
            # boot: every enabled unit, in order, before the node is reachable
            "/usr/local/sbin/systemctl __boot",
            f"exec {SSHD} -D -e -f {d}/ssh/sshd_config",
        ]
    )
    return [
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--mount",
        "--uts",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        script,
    ]
