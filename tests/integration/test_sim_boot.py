"""Reboots and systemd on a simulated node: what a boot unit applies is really applied."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet="127.0.5")
    return started


def ssh(fleet: Fleet, command: str) -> subprocess.CompletedProcess[str]:
    argv = ["ssh", "-i", str(fleet.client_key), "-o", f"UserKnownHostsFile={fleet.known_hosts}"]
    argv += ["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", "2222"]
    argv += ["root@127.0.5.2", command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def gpu_view(fleet: Fleet) -> list[tuple[float, bool]]:
    node = state.load(fleet.root / "nodes" / "node01")
    return [(g["power"]["enforced_limit_w"], g["persistence_mode"]) for g in node["gpus"]]


def test_persistence_daemon_runs_at_boot(fleet: Fleet) -> None:
    out = ssh(fleet, "systemctl is-enabled nvidia-persistenced; systemctl is-active nvidia-persistenced")
    assert out.stdout.split() == ["enabled", "active"]
    assert {p for _, p in gpu_view(fleet)} == {True}


def test_stop_and_start_the_daemon_turns_persistence_with_it(fleet: Fleet) -> None:
    assert ssh(fleet, "systemctl stop nvidia-persistenced").returncode == 0
    assert {p for _, p in gpu_view(fleet)} == {False}
    assert ssh(fleet, "systemctl is-active nvidia-persistenced").stdout.strip() == "inactive"
    assert ssh(fleet, "systemctl start nvidia-persistenced").returncode == 0
    assert {p for _, p in gpu_view(fleet)} == {True}


def test_reboot_loses_runtime_settings_and_runs_enabled_units(fleet: Fleet) -> None:
    unit = (
        "[Unit]\nDescription=Apply GPU power limits\nAfter=nvidia-persistenced.service\n\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/nvidia-smi -pl 1300\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    setup = f"printf '%s' '{unit}' > /etc/systemd/system/power-limit.service && systemctl enable power-limit"
    assert ssh(fleet, setup).returncode == 0
    assert ssh(fleet, "nvidia-smi -pl 1200").returncode == 0
    fleet.reboot("node01")
    # the runtime 1200 W is gone; the boot unit set 1300 W, after the daemon turned persistence on
    assert set(gpu_view(fleet)) == {(1300.0, True)}
    assert ssh(fleet, "systemctl is-active power-limit").stdout.strip() == "active"
    # the unit file lives in the node's own /etc, not the host's
    assert not Path("/etc/systemd/system/power-limit.service").exists()


def test_a_failing_unit_is_failed_not_fatal(fleet: Fleet) -> None:
    unit = "[Service]\nType=oneshot\nExecStart=/bin/false\n\n[Install]\nWantedBy=multi-user.target\n"
    assert ssh(fleet, f"printf '%s' '{unit}' > /etc/systemd/system/broken.service").returncode == 0
    started = ssh(fleet, "systemctl start broken")
    assert started.returncode == 1 and "Job for broken.service failed" in started.stderr
    assert ssh(fleet, "systemctl is-active broken").stdout.strip() == "failed"


def test_reboot_from_the_cli_needs_a_supervised_fleet(fleet: Fleet) -> None:
    with pytest.raises(control.SimError, match="owned by a test process"):
        control.reboot(fleet, "node01")
    assert json.loads(fleet.fleet_file.read_text())["managed"] is False
