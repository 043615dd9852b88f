"""systemd's own verifier (`systemd-analyze verify`) on the unit files gpufleet ships and writes:
contrib/systemd/*, the GPU power boot unit (both persistence methods) and the RoCE re-apply units.
They are verified in a root this test lays out: the standard targets a simulated node holds
(gpufleet_sim.systemd_targets) and an executable stub for every command the units run. The units the
roles write on a node (vLLM instances included) are verified inside a simulated node by
tests/integration/test_gate_faults.py."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_power
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_link, rdma_qos
from gpufleet_sim import systemd_targets

REPO = Path(__file__).resolve().parents[2]
UUID = "GPU-5a3d8e2c-1b4f-4e6a-9c7d-2f8e1a0b3c4d"
EXEC_KEYS = ("ExecStart=", "ExecStartPre=", "ExecStartPost=", "ExecStop=", "ExecStopPost=")


def _root(tmp_path: Path, units: dict[str, str]) -> tuple[Path, list[str]]:
    """A root with the standard targets, the units under /etc/systemd/system and a stub for every
    command they run: (root, the units' paths inside it)."""
    root = tmp_path / "root"
    systemd_targets.write(root / "usr/lib/systemd/system")
    paths = []
    for name, text in units.items():
        unit = root / "etc/systemd/system" / name
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text(text, encoding="utf-8")
        paths.append(str(unit))
        for line in text.splitlines():
            if line.startswith(EXEC_KEYS):
                command = shlex.split(line.split("=", 1)[1])[0].lstrip("-@+!:")
                stub = root / command.lstrip("/")
                stub.parent.mkdir(parents=True, exist_ok=True)
                stub.write_text("#!/bin/sh\n", encoding="utf-8")
                stub.chmod(0o755)
    return root, paths


def _verify(root: Path, paths: list[str]) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: `make setup` installs Debian's systemd package"
    return subprocess.run(
        [analyze, "verify", f"--root={root}", "--man=no", *paths],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _boot_units() -> dict[str, str]:
    params = {"persistenced_unit": "nvidia-persistenced.service", "boot_before": ["vllm-glm52.service"]}
    units = {}
    for method in ("persistenced", "nvidia-smi"):
        files = gpu_power.boot_texts(params, {UUID: 1400}, method, "/usr/bin/nvidia-smi")
        units[f"{method}-{gpu_power.UNIT}"] = next(f["text"] for f in files if f["unit"])
    link = rdma_link.boot_texts(["ip link set dev eth2 mtu 9000"])
    qos = rdma_qos.boot_texts(
        [{"interface": "eth2", "ibdev": "mlx5_0", "boot_commands": ["mlnx_qos -i eth2 --trust dscp"]}]
    )
    for files in (link, qos):
        unit = next(f for f in files if f["unit"])
        units[unit["unit"]] = unit["text"]
    return units


def _contrib_units() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((REPO / "contrib/systemd").iterdir())}


@pytest.mark.parametrize("units", [_boot_units, _contrib_units], ids=["boot-units", "contrib"])
def test_the_units_pass_systemds_verifier(tmp_path: Path, units) -> None:
    written = units()
    assert written
    root, paths = _root(tmp_path, written)
    done = _verify(root, paths)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_verifier_fails_a_broken_unit(tmp_path: Path) -> None:
    """The check can fail: a misspelt key and a command that is not there are both refused."""
    text = _contrib_units()["gpufleet-watch.service"]
    root, paths = _root(tmp_path, {"gpufleet-watch.service": text.replace("ExecStart=", "ExecStrat=")})
    done = _verify(root, paths)
    assert done.returncode != 0 and "Unknown key 'ExecStrat'" in done.stderr
    root, paths = _root(tmp_path / "b", {"gpufleet-watch.service": text})
    (root / "opt/gpufleet/.venv/bin/gpufleet").unlink()
    done = _verify(root, paths)
    assert done.returncode != 0 and "is not executable" in done.stderr


def test_a_node_holds_the_targets_the_verifier_needs(tmp_path: Path) -> None:
    """Without sysinit.target, basic.target and shutdown.target every service fails to verify."""
    root, paths = _root(tmp_path, {"x.service": "[Service]\nType=oneshot\nExecStart=/usr/bin/x\n"})
    assert _verify(root, paths).returncode == 0
    (root / "usr/lib/systemd/system/sysinit.target").unlink()
    done = _verify(root, paths)
    assert done.returncode != 0 and "sysinit.target not found" in done.stderr
