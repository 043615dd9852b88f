"""gpufleet.node.thermal_gate: its one nvidia-smi sample, verdicts, blocking, overrides, check mode.

The module reads the GPUs itself; each test gives it the CSV sample nvidia-smi would print for a list
of GPUs (gpu_facts' shape, from real captures), and asserts the exact argv.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    REASON_BITS,
    THERMAL_FIELDS,
    parse_query_text,
)
from ansible_collections.gpufleet.node.plugins.modules import thermal_gate

from tests.unit.modules import harness

HGX_Q = "nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt"
SMI = "/usr/bin/nvidia-smi"
QUERY = [SMI, "--query-gpu=" + ",".join(THERMAL_FIELDS), "--format=csv,noheader,nounits"]


def _cell(value: Any) -> str:
    return "[N/A]" if value is None else str(value)


def sample_csv(gpus: list[dict[str, Any]]) -> str:
    """What ``nvidia-smi --query-gpu=<THERMAL_FIELDS> --format=csv,noheader,nounits`` prints for them."""
    lines = []
    for gpu in gpus:
        temp = gpu.get("temperature") or {}
        mask = sum(REASON_BITS[r] for r in gpu.get("clocks_event_reasons") or [])
        row = [gpu["uuid"], gpu["index"], temp.get("gpu_c"), temp.get("memory_c"), temp.get("tlimit_c")]
        lines.append(", ".join([*map(_cell, row), f"0x{mask:016x}", "0", "90.5", "345"]))
    return "\n".join(lines) + "\n"


def run_module(
    args: dict[str, Any], answer: tuple[int, str, str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Runs the module with ``gpus`` (gpu_facts' shape) turned into nvidia-smi's answer."""
    args = dict(args)
    gpus = args.pop("gpus", [])
    reply = answer or (0, sample_csv(gpus), "")
    calls: list[list[str]] = []

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert kwargs.get("environ_update") == {"LC_ALL": "C"}
        calls.append(argv)
        return reply

    run = harness.run_module(thermal_gate.main, args, run_command=run_command, get_bin_path=SMI)
    # One cheap sample per run, never nvidia-smi -q -x.
    assert calls in ([], [QUERY])
    return run.result, run.warnings


def coolant(flow: float) -> dict[str, Any]:
    return {
        "connectors": [
            {
                "key": f"1/Board{i}",
                "state": "Enabled",
                "health": "OK",
                "flow_lpm": flow,
                "supply_c": 25.0,
                "return_c": 27.0,
                "delta_c": 2.0,
                "leak": "OK",
            }
            for i in (0, 1)
        ],
        "cdus": [],
    }


@pytest.fixture
def cool_gpus(read_fixture: Any) -> list[dict[str, Any]]:
    """The 8xH100 capture with its power-brake flags cleared (a healthy idle HGX)."""
    gpus = parse_query_text(read_fixture(HGX_Q))["gpus"]
    for gpu in gpus:
        gpu["clocks_event_reasons"] = [r for r in gpu["clocks_event_reasons"] if "slowdown" not in r]
    return gpus


@pytest.mark.parametrize("check_mode", [False, True])
def test_pass(cool_gpus: list[dict[str, Any]], check_mode: bool) -> None:
    result, warnings = run_module(
        {"gpus": cool_gpus, "coolant": coolant(19.2), "min_flow_lpm": 14.0, "_ansible_check_mode": check_mode}
    )
    assert "failed" not in result and result["changed"] is False
    assert result["verdict"] == "pass" and result["failed_checks"] == [] and result["override"] is None
    assert len(result["checks"]) == 8 * 4 + 2 * 5
    assert result["changes"] == [] and warnings == []
    assert result["msg"] == "thermal gate pass: 42 checks"


def test_low_flow_blocks_and_names_reading_and_limit(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(6.2), "min_flow_lpm": 14.0})
    assert result["failed"] is True and result["verdict"] == "blocked"
    assert result["msg"].startswith(
        "thermal gate blocked 2 of 42 checks: coolant connector 1/Board0 flow 6.2 L/min, below the 14 L/min "
        "minimum; coolant connector 1/Board1 flow 6.2 L/min, below the 14 L/min minimum."
    )
    assert "override_reason" in result["msg"]
    # The checks travel with the failure, for the fleet report.
    assert [c["name"] for c in result["checks"] if not c["ok"]] == [
        "coolant.flow_lpm[1/Board0]",
        "coolant.flow_lpm[1/Board1]",
    ]


def test_hot_gpu_blocks(cool_gpus: list[dict[str, Any]]) -> None:
    cool_gpus[3]["temperature"]["gpu_c"] = 92
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2)})
    uuid = cool_gpus[3]["uuid"]
    assert result["verdict"] == "blocked"
    assert result["failed_checks"] == [f"thermal.gpu_temp_c[{uuid}]"]
    assert f"GPU {uuid} temperature 92 C, above the 60 C limit" in result["msg"]


def test_the_real_power_brake_capture_blocks(read_fixture: Any) -> None:
    gpus = parse_query_text(read_fixture(HGX_Q))["gpus"]
    result, _ = run_module({"gpus": gpus, "coolant": coolant(19.2)})
    # Every GPU of that HGX board shows HW Slowdown with HW Power Brake Slowdown.
    assert result["failed_checks"] == [f"thermal.clocks_event_reasons[{g['uuid']}]" for g in gpus]


def test_missing_coolant_blocks(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module({"gpus": cool_gpus})
    assert result["failed_checks"] == ["coolant.facts"]
    result, _ = run_module({"gpus": cool_gpus, "require_coolant": False})
    assert result["verdict"] == "pass"


def test_override_is_recorded_and_warned(cool_gpus: list[dict[str, Any]]) -> None:
    reason = "CHG-4711: loop B flow meter replaced, flow verified with a clamp-on meter"
    result, warnings = run_module(
        {"gpus": cool_gpus, "coolant": coolant(6.2), "min_flow_lpm": 14.0, "override_reason": reason}
    )
    assert "failed" not in result
    assert result["verdict"] == "overridden"
    assert result["override"] == {
        "reason": reason,
        "failed_checks": ["coolant.flow_lpm[1/Board0]", "coolant.flow_lpm[1/Board1]"],
    }
    assert warnings == [
        f"thermal gate overridden ({reason}); failed checks let pass: coolant.flow_lpm[1/Board0], "
        "coolant.flow_lpm[1/Board1]"
    ]
    assert len(result["checks"]) == 42


def test_blank_override_does_not_override(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module(
        {"gpus": cool_gpus, "coolant": coolant(6.2), "min_flow_lpm": 14.0, "override_reason": "  "}
    )
    assert result["failed"] is True and result["verdict"] == "blocked"


def test_skip_checks_turns_checks_off(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module(
        {"gpus": cool_gpus, "coolant": coolant(19.2), "skip_checks": ["memory_temp_c", "tlimit_c"]}
    )
    assert len(result["checks"]) == 8 * 2 + 2 * 5
    assert not any("memory" in c["name"] or "tlimit" in c["name"] for c in result["checks"])
    # A null limit is no way to skip a check: ansible-core refuses it.
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2), "min_tlimit_c": None})
    assert result["failed"] is True and "min_tlimit_c" in result["msg"]


def test_unknown_reason_is_refused(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2), "forbidden_reasons": ["too_hot"]})
    assert result["failed"] is True
    assert "forbidden_reasons" in result["msg"] and "too_hot" in result["msg"]


def test_many_failures_are_summarised() -> None:
    gpus = [
        {
            "uuid": f"GPU-{i}",
            "index": i,
            "temperature": {"gpu_c": 95, "memory_c": 40, "tlimit_c": 40},
            "clocks_event_reasons": [],
        }
        for i in range(16)
    ]
    result, _ = run_module({"gpus": gpus, "coolant": coolant(19.2)})
    assert "blocked 16 of 74 checks" in result["msg"]
    assert result["msg"].count("above the 60 C limit") == 8
    assert "(and 8 more)" in result["msg"]


def test_a_failed_nvidia_smi_blocks_with_its_error() -> None:
    result, _ = run_module(
        {"coolant": coolant(19.2)}, answer=(15, "", "Unable to determine the device handle")
    )
    assert result["failed"] is True and result["verdict"] == "blocked"
    assert result["failed_checks"] == ["thermal.gpus"]
    (gpus,) = [c for c in result["checks"] if c["name"] == "thermal.gpus"]
    assert "rc=15" in gpus["message"] and "Unable to determine the device handle" in gpus["message"]


def test_the_burn_in_judges_the_same_names(cool_gpus: list[dict[str, Any]]) -> None:
    """Idle and under load, one thermal judge: the same check names per GPU."""
    from ansible_collections.gpufleet.node.plugins.module_utils.thermal import burn_in

    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2)})
    idle = {c["name"] for c in result["checks"] if c["name"].startswith("thermal.")}
    watch = burn_in.Watch(burn_in.DEFAULT_LIMITS)
    watch.add(0.0, burn_in.parse_sample(sample_csv(cool_gpus)))
    run = {"samples": watch.summary(), "requests": {}}
    loaded = {
        c["name"] for c in burn_in.checks(run, burn_in.DEFAULT_LIMITS) if c["name"].startswith("thermal.")
    }
    assert idle == loaded and len(idle) == 8 * 4


# ---------------------------------------------------------------- issue 11: physical ranges of the limits


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        # thermal_gate_min_flow_lpm: -1 was accepted and the flow check passed at 4.8 L/min
        ("min_flow_lpm", -1.0, "above 0 and at most 10000 L/min"),
        ("min_flow_lpm", 0.0, "above 0 and at most 10000 L/min"),
        ("min_flow_lpm", 1e6, "above 0 and at most 10000 L/min"),
        ("min_flow_lpm", float("nan"), "above 0 and at most 10000 L/min"),
        ("max_supply_c", -5.0, "at least 0 and at most 100 C"),
        ("max_supply_c", float("inf"), "at least 0 and at most 100 C"),
        ("max_delta_c", -0.5, "at least 0 and at most 100 K"),
        ("max_gpu_temp_c", 900.0, "at least 0 and at most 150 C"),
        ("max_memory_temp_c", -1.0, "at least 0 and at most 150 C"),
        ("min_tlimit_c", 0.0, "above 0 and at most 150 C"),
        ("min_tlimit_c", -3.0, "above 0 and at most 150 C"),
    ],
)
def test_a_limit_outside_its_physical_range_is_refused(
    cool_gpus: list[dict[str, Any]], option: str, value: float, allowed: str
) -> None:
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(4.8), option: value})
    assert result["failed"] is True and result["verdict"] == "blocked"
    assert result["msg"].startswith("thermal gate limits outside their physical range: ")
    assert f"{option} (thermal_gate_{option}) must be {allowed}" in result["msg"]
    assert f"got {value}" in result["msg"]
    assert result["checks"] == []  # refused before anything was read or judged


def test_every_limit_at_its_range_ends_is_accepted(cool_gpus: list[dict[str, Any]]) -> None:
    ends = {"min_flow_lpm": 0.001, "max_supply_c": 100.0, "max_delta_c": 0.0, "min_tlimit_c": 150.0}
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2), **ends, "max_gpu_temp_c": 0.0})
    assert result["verdict"] == "blocked" and "physical range" not in result["msg"]
    assert set(result["failed_checks"]) >= {f"thermal.gpu_temp_c[{g['uuid']}]" for g in cool_gpus}


def test_several_bad_limits_are_named_together(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module(
        {"gpus": cool_gpus, "coolant": coolant(4.8), "min_flow_lpm": -1, "max_gpu_temp_c": -60}
    )
    assert "max_gpu_temp_c (thermal_gate_max_gpu_temp_c)" in result["msg"]
    assert "min_flow_lpm (thermal_gate_min_flow_lpm)" in result["msg"]


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        ("max_gpu_temp_c", 300.0, "at least 0 and at most 150 C"),
        ("min_tlimit_c", -1.0, "above 0 and at most 150 C"),
        ("min_utilization_pct", 0.0, "above 0 and at most 100 %"),
        ("min_utilization_pct", 101.0, "above 0 and at most 100 %"),
    ],
)
def test_the_burn_in_refuses_the_same_ranges(option: str, value: float, allowed: str) -> None:
    """burn_in takes its GPU limits from thermal_verdict too: a direct call is refused before any load."""
    from ansible_collections.gpufleet.node.plugins.modules import burn_in

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        raise AssertionError(f"nothing may run: {argv}")

    run = harness.run_module(
        burn_in.main,
        {"urls": ["http://127.0.0.1:9"], option: value},
        run_command=run_command,
        get_bin_path=SMI,
    )
    assert run.result["failed"] is True
    assert f"{option} (thermal_gate_burn_in_{option}) must be {allowed}" in run.result["msg"]


# ---------------------------------------------------------------- the role's preflight refuses the same


PREFLIGHT_PLAY = """
- name: The thermal_gate preflight alone
  hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Check the inputs
      ansible.builtin.include_role:
        name: gpufleet.node.thermal_gate
        tasks_from: preflight
"""


def preflight(tmp_path: Any, **extra: Any) -> tuple[int, str]:
    """Runs roles/thermal_gate's preflight entry point on localhost with these inputs; (rc, output)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from gpufleet import runner

    runner.ensure_collection_link()
    play = Path(tmp_path) / "preflight.yml"
    play.write_text(PREFLIGHT_PLAY)
    inputs = {"thermal_gate_bmc_address": "https://10.20.1.11", "thermal_gate_bmc_username": "gate", **extra}
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            str(play),
            "-e",
            json.dumps(inputs),
        ],
        cwd=runner.REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_role_preflight_accepts_the_defaults(tmp_path: Any) -> None:
    rc, out = preflight(tmp_path)
    assert rc == 0, out


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        # accepted before: the flow check then passed at 4.8 L/min
        (
            {"thermal_gate_min_flow_lpm": -1},
            "thermal_gate_min_flow_lpm must be above 0 (0 passes a loop with no flow)",
        ),
        ({"thermal_gate_min_flow_lpm": 0}, "thermal_gate_min_flow_lpm must be above 0"),
        (
            {"thermal_gate_max_supply_c": 180},
            "thermal_gate_max_supply_c must be between 0 and 100 C, got 180",
        ),
        ({"thermal_gate_max_delta_c": -2}, "thermal_gate_max_delta_c must be between 0 and 100 K, got -2"),
        ({"thermal_gate_max_gpu_temp_c": "nan"}, "thermal_gate_max_gpu_temp_c must be between 0 and 150 C"),
        ({"thermal_gate_burn_in_min_tlimit_c": 0}, "thermal_gate_burn_in_min_tlimit_c must be above 0"),
        (
            {"thermal_gate_burn_in_min_utilization_pct": 150},
            "thermal_gate_burn_in_min_utilization_pct must be",
        ),
        ({"thermal_gate_start_timeout": 0}, "thermal_gate_start_timeout must be between 1 and 7200 s"),
        (
            {"thermal_gate_bmc_address": "http://10.20.1.11"},
            "plain HTTP would send the BMC password in clear text",
        ),
    ],
)
def test_the_role_preflight_refuses_a_setting_outside_its_range(
    tmp_path: Any, extra: dict[str, Any], said: str
) -> None:
    rc, out = preflight(tmp_path, **extra)
    assert rc == 2 and " ".join(said.split()) in " ".join(out.split()), out


def test_the_role_preflight_lets_plain_http_with_a_reason(tmp_path: Any) -> None:
    rc, out = preflight(
        tmp_path,
        thermal_gate_bmc_address="http://10.20.1.11",
        thermal_gate_bmc_insecure_http_reason="CHG-4711 lab BMC without TLS",
    )
    assert rc == 0, out
