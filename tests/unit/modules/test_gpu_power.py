"""gpufleet.node.gpu_power: exact calls, refusal before any change, idempotence, check mode, fallback."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_power as power_role
from ansible_collections.gpufleet.node.plugins.modules import gpu_power
from gpufleet_sim import faults_gpu, state
from gpufleet_sim import node as sim_node

from tests.unit.modules import harness
from tests.unit.modules.simnode import SMI, SYSTEMCTL, UNIT, SimNode, run_module

QUERY = [
    SMI,
    "--query-gpu=uuid,pci.bus_id,persistence_mode,power.limit,enforced.power.limit,power.default_limit,"
    "power.min_limit,power.max_limit",
    "--format=csv,noheader,nounits",
]
SHOW = [SYSTEMCTL, "show", UNIT]


@pytest.fixture
def node(tmp_path: Path) -> SimNode:
    return SimNode(tmp_path / "node")


def uuids(node: SimNode) -> list[str]:
    return [g["uuid"] for g in state.present_gpus(node.state())]


def power_view(node: SimNode) -> set[tuple[float, float, bool]]:
    return {
        (g["power"]["enforced_limit_w"], g["power"]["requested_limit_w"], g["persistence_mode"])
        for g in node.state()["gpus"]
    }


def test_a_tuned_node_needs_nothing(node: SimNode) -> None:
    result, warnings = run_module(gpu_power.main, {"boot_unit": False, "limit_w": 1400}, node)
    assert node.calls == [QUERY, SHOW]
    assert warnings == [] and result["changed"] is False and result["changes"] == []
    assert result["persistence_method"] == "nvidia-persistenced"
    assert len(result["checks"]) == 32 and all(c["ok"] for c in result["checks"])
    assert result["limits"] == dict.fromkeys(uuids(node), 1400.0)
    assert result["reboot_required"] is False and result["nvidia_smi"] == SMI


def test_capped_and_persistence_off_node_is_fixed_in_order(node: SimNode) -> None:
    node.change(faults_gpu.power_capped)
    node.change(faults_gpu.persistence_off)
    node.units[UNIT] = {"enabled": False, "active": False}
    result, _ = run_module(gpu_power.main, {"boot_unit": False, "limit_w": 1400}, node)
    ids = uuids(node)
    assert node.calls == [
        QUERY,
        SHOW,
        [SYSTEMCTL, "enable", UNIT],
        [SYSTEMCTL, "start", UNIT],
        *([SMI, "-i", uuid, "-pl", "1400"] for uuid in ids),
        QUERY,
    ]
    assert result["changes"] == [
        {"setting": "gpu_power.nvidia_persistenced.enabled", "from": False, "to": True},
        {"setting": "gpu_power.nvidia_persistenced.active", "from": False, "to": True},
        *({"setting": f"gpu_power.persistence_mode[{u}]", "from": False, "to": True} for u in ids),
        *({"setting": f"gpu_power.enforced_limit_w[{u}]", "from": 1100.0, "to": 1400.0} for u in ids),
    ]
    assert result["hints"] == [
        f"16 GPUs enforce less than the requested limit ({ids[0]}: 1100 W < 1400 W): the rack's power budget "
        "(a PDU protection or power brake) may be capping them; check it before raising limits."
    ]
    assert power_view(node) == {(1400.0, 1400.0, True)}
    assert all(c["ok"] for c in result["checks"])


def test_check_mode_reports_exactly_and_changes_nothing(node: SimNode) -> None:
    node.change(faults_gpu.power_capped)
    before = node.state()
    result, _ = run_module(
        gpu_power.main, {"boot_unit": False, "limit_w": 1400}, node, check_mode=True, diff=True
    )
    assert node.calls == [QUERY, SHOW]
    assert node.state() == before
    assert result["changed"] is True and result["checks"] == []
    assert [c["setting"] for c in result["changes"]] == [
        f"gpu_power.enforced_limit_w[{u}]" for u in uuids(node)
    ]
    first = uuids(node)[0]
    assert f"{first} enforced_limit_w=1100.0 persistence_mode=True" in result["diff"][0]["before"]
    assert f"{first} enforced_limit_w=1400.0 persistence_mode=True" in result["diff"][0]["after"]


def test_running_daemon_with_a_gpu_out_of_persistence_is_restarted(node: SimNode) -> None:
    node.persistence(False)
    result, _ = run_module(gpu_power.main, {"boot_unit": False, "limit_w": 1400}, node)
    assert node.calls == [QUERY, SHOW, [SYSTEMCTL, "restart", UNIT], QUERY]
    assert len(result["changes"]) == 16 and {p for _, _, p in power_view(node)} == {True}


def test_out_of_range_target_is_refused_before_any_change(node: SimNode) -> None:
    node.change(faults_gpu.persistence_off)
    before = node.state()
    first = uuids(node)[0]
    result, _ = run_module(
        gpu_power.main, {"boot_unit": False, "limit_w": 1400, "limits": {first: 1500}}, node
    )
    assert node.calls == [QUERY]
    assert node.state() == before
    assert result["failed"] is True
    assert result["msg"] == (
        f"Refusing to change any GPU: {first}: target 1500 W is outside its allowed range 200-1400 W. "
        "Set gpu_power_limit_w / gpu_power_limits within the allowed range."
    )


def test_per_gpu_override_and_unknown_uuid(node: SimNode) -> None:
    first, second = uuids(node)[:2]
    stranger = "GPU-00000000-0000-0000-0000-000000000000"
    result, warnings = run_module(
        gpu_power.main,
        {"boot_unit": False, "limit_w": 1400, "limits": {second: 1250.5, stranger: 1000}},
        node,
    )
    assert node.calls == [QUERY, SHOW, [SMI, "-i", second, "-pl", "1250.5"], QUERY]
    assert result["limits"][second] == 1250.5 and result["limits"][first] == 1400.0
    assert warnings == [f"limits names {stranger}, which is not on this node; ignored"]


def test_default_limit_when_no_target_is_set(node: SimNode) -> None:
    with state.locked(node.dir) as current:
        for gpu in current["gpus"]:
            gpu["power"]["requested_limit_w"] = gpu["power"]["enforced_limit_w"] = 1000.0
    result, _ = run_module(gpu_power.main, {"boot_unit": False}, node)
    assert result["limits"] == dict.fromkeys(uuids(node), 1400.0)
    assert power_view(node) == {(1400.0, 1400.0, True)}


def test_without_the_daemon_persistence_falls_back_to_pm_and_says_so(tmp_path: Path) -> None:
    node = SimNode(tmp_path / "bare", daemon=False)
    node.change(faults_gpu.persistence_off)
    result, warnings = run_module(gpu_power.main, {"boot_unit": False, "limit_w": 1400}, node)
    ids = uuids(node)
    assert node.calls == [QUERY, SHOW, *([SMI, "-i", u, "-pm", "1"] for u in ids), QUERY]
    assert result["persistence_method"] == "nvidia-smi"
    message = (
        "The node has no nvidia-persistenced.service, so persistence mode is set with nvidia-smi -pm 1 (the "
        "driver forgets it at reload; the boot unit sets it again). Install the driver's nvidia-persistenced."
    )
    assert warnings == [message] and result["hints"] == [message]
    assert {p for _, _, p in power_view(node)} == {True}


def test_persistence_can_be_left_alone(node: SimNode) -> None:
    node.change(faults_gpu.persistence_off)
    result, _ = run_module(gpu_power.main, {"boot_unit": False, "limit_w": 1400, "persistence": False}, node)
    assert node.calls == [QUERY]
    assert result["persistence_method"] == "unmanaged" and result["changes"] == []
    assert [c["name"].split("[")[0] for c in result["checks"]] == ["gpu_power.enforced_limit_w"] * 16


class BrakedNode(SimNode):
    """A PDU power brake that stays on: every -pl is capped again at once."""

    def __call__(self, module, args, **kwargs):
        answer = super().__call__(module, args, **kwargs)
        if "-pl" in args:
            self.change(faults_gpu.power_capped)
        return answer


def test_a_limit_that_does_not_take_fails_with_the_power_budget_hint(tmp_path: Path) -> None:
    node = BrakedNode(tmp_path / "braked")
    node.change(faults_gpu.power_capped)
    result, _ = run_module(gpu_power.main, {"boot_unit": False, "limit_w": 1400}, node)
    assert result["failed"] is True
    assert "enforces 1100.0 W after nvidia-smi -pl 1400: the limit did not take" in result["msg"]
    assert any("rack's power budget" in h for h in result["hints"])
    assert len([c for c in result["checks"] if not c["ok"]]) == 16


def test_nvidia_smi_failure_is_reported_with_its_output(node: SimNode) -> None:
    result, _ = run_module(
        gpu_power.main, {"boot_unit": False, "limit_w": 1400, "nvidia_smi_path": "/nonexistent"}, node
    )
    assert result["failed"] and result["msg"].startswith("nvidia_smi_path /nonexistent is not an executable")


def boot_script(node: SimNode, tmp_path: Path, limits: dict[str, float]) -> subprocess.CompletedProcess[str]:
    """The module's boot script, run as the unit runs it, against the fake nvidia-smi of the node."""
    script = tmp_path / "gpufleet-gpu-power"
    script.write_text(power_role.SCRIPT_TEXT)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(sim_node._tool_wrapper("nvidia-smi", node.dir))
    smi.chmod(0o755)
    conf = tmp_path / "gpu-power.conf"
    conf.write_text("# Ansible managed\n" + "".join(f"{u} {w}\n" for u, w in limits.items()))
    env = {"PATH": "/usr/bin:/bin", "NVIDIA_SMI": str(smi)}
    return subprocess.run(
        ["/bin/sh", str(script), str(conf)], env=env, capture_output=True, text=True, check=False
    )


def test_boot_script_applies_and_verifies_the_limits(node: SimNode, tmp_path: Path) -> None:
    ids = uuids(node)
    done = boot_script(node, tmp_path, {ids[0]: 1300.0, ids[1]: 1250.5})
    assert (done.returncode, done.stderr) == (0, "")
    limits = {g["uuid"]: g["power"]["enforced_limit_w"] for g in node.state()["gpus"]}
    assert (limits[ids[0]], limits[ids[1]], limits[ids[2]]) == (1300.0, 1250.5, 1400.0)


def test_boot_script_fails_naming_the_gpu_it_could_not_set(node: SimNode, tmp_path: Path) -> None:
    first = uuids(node)[0]
    done = boot_script(node, tmp_path, {first: 1500.0})
    assert done.returncode == 1
    assert done.stderr == f"gpufleet-gpu-power: nvidia-smi -i {first} -pl 1500.0 failed\n"
    missing = boot_script(node, tmp_path, {})
    assert missing.returncode == 0
    (tmp_path / "gpu-power.conf").unlink()
    gone = subprocess.run(
        ["/bin/sh", str(tmp_path / "gpufleet-gpu-power"), str(tmp_path / "gpu-power.conf")],
        capture_output=True,
        text=True,
    )
    assert gone.returncode == 1 and "cannot read" in gone.stderr


BOOT_UNIT = "gpufleet-gpu-power.service"


class BootNode(SimNode):
    """A node whose systemctl also knows the boot unit, and whose sh checks scripts (sh -n)."""

    def __init__(self, node_dir: Path) -> None:
        super().__init__(node_dir)
        self.boot_enabled = False

    def __call__(self, module, args, **kwargs):
        if args[0] == SYSTEMCTL and args[1] in ("daemon-reload", "is-enabled", "enable") and args[-1] != UNIT:
            self.calls.append(list(args))
            if args[1] == "is-enabled":
                return (0, "enabled\n", "") if self.boot_enabled else (1, "disabled\n", "")
            self.boot_enabled = self.boot_enabled or args[1] == "enable"
            return 0, "", ""
        if args[0] == "/bin/sh":
            self.calls.append(list(args[:2]))
            return subprocess.run(list(args), capture_output=True, text=True, check=False).returncode, "", ""
        return super().__call__(module, args, **kwargs)


def boot_run(node: BootNode, check_mode: bool = False, diff: bool = False) -> dict[str, Any]:
    """run_module, with sh on the node's PATH too."""
    args = {"limit_w": 1400, "boot_before": ["vllm@glm52.service"]}
    paths = {"nvidia-smi": SMI, "systemctl": SYSTEMCTL, "sh": "/bin/sh"}
    return harness.run_module(
        gpu_power.main,
        args,
        check_mode,
        diff,
        run_command=node,
        get_bin_path=lambda self, name, *a, **k: paths.get(name),
        expect=harness.ExitJson,
    ).result


def test_the_boot_files_are_named_in_check_mode_written_once_and_restore_the_limits(
    tmp_path: Path, boot_root: Path
) -> None:
    node = BootNode(tmp_path / "node")
    ids = uuids(node)
    is_enabled = [SYSTEMCTL, "is-enabled", BOOT_UNIT]
    checked = boot_run(node, check_mode=True, diff=True)
    assert node.calls == [QUERY, SHOW, is_enabled]
    assert not (boot_root / "etc").exists()
    conf = "/etc/gpufleet/gpu-power.conf"
    unit = f"/etc/systemd/system/{BOOT_UNIT}"
    assert [(c["setting"], c["from"]) for c in checked["changes"]] == [
        (f"gpu_power.boot_file[{conf}]", None),
        ("gpu_power.boot_file[/usr/local/sbin/gpufleet-gpu-power]", None),
        (f"gpu_power.boot_file[{unit}]", None),
        (f"gpu_power.boot_unit_enabled[{BOOT_UNIT}]", False),
    ]
    assert [d.get("after_header") for d in checked["diff"][1:]] == [
        conf,
        "/usr/local/sbin/gpufleet-gpu-power",
        unit,
    ]

    node.calls.clear()
    applied = boot_run(node)
    assert applied["changes"] == checked["changes"]
    assert node.calls == [
        QUERY,
        SHOW,
        is_enabled,
        ["/bin/sh", "-n"],
        [SYSTEMCTL, "daemon-reload"],
        [SYSTEMCTL, "enable", BOOT_UNIT],
    ]
    written = (boot_root / conf.lstrip("/")).read_text()
    assert written.startswith("# managed by gpufleet.node.gpu_power; edits are overwritten\n")
    assert [line for line in written.splitlines() if not line.startswith("#")] == [
        f"{u} 1400.0" for u in sorted(ids)
    ]
    script = boot_root / "usr/local/sbin/gpufleet-gpu-power"
    assert script.stat().st_mode & 0o777 == 0o755 and script.read_text() == power_role.SCRIPT_TEXT
    unit_text = (boot_root / unit.lstrip("/")).read_text()
    assert "Before=vllm@glm52.service\n" in unit_text and f"Environment=NVIDIA_SMI={SMI}\n" in unit_text
    assert f"ExecStart=/usr/local/sbin/gpufleet-gpu-power {conf}\n" in unit_text

    node.calls.clear()
    again = boot_run(node)
    assert again["changed"] is False and node.calls == [QUERY, SHOW, is_enabled]

    # the written conf and script restore the limits after a reboot, as the unit runs them
    node.change(faults_gpu.power_capped)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(sim_node._tool_wrapper("nvidia-smi", node.dir))
    smi.chmod(0o755)
    done = subprocess.run(
        ["/bin/sh", str(script), str(boot_root / conf.lstrip("/"))],
        env={"PATH": "/usr/bin:/bin", "NVIDIA_SMI": str(smi)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert {p[0] for p in power_view(node)} == {1400.0}


def test_boot_before_must_name_units(node: SimNode) -> None:
    result, _ = run_module(gpu_power.main, {"boot_before": ["vllm"]}, node)
    assert result["failed"] and result["msg"].startswith(
        "boot_before: vllm is not a unit name with its suffix"
    )
    assert node.calls == []
