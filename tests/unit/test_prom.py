"""gpufleet_<command>.prom: bounded label sets, read back by promtool and prometheus_client."""

from __future__ import annotations

import copy
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import gpu_facts, rdma_facts
from prometheus_client.parser import text_string_to_metric_families

from gpufleet import atomic_file, checks, prom
from gpufleet.report import HostReport, Report
from gpufleet.report_files import FILES, render, write

FINISHED = "2026-12-02T10:00:05Z"
STAMP = 1796205605.0  # FINISHED as Unix time
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: `make setup` installs it (Debian's prometheus package)")
    return path


def check_metrics(text: str) -> None:
    """promtool's parser and its lint (names, units, _total for counters only, HELP)."""
    done = subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def parsed(text: str) -> Series:
    """Every sample, as prometheus_client's text parser reads it back."""
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in out, f"{key} twice"
            out[key] = sample.value
    return out


def series(text: str, metric: str, **match: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric whose labels include ``match``, keyed by their other labels."""
    found = {}
    for (name, labels), value in parsed(text).items():
        if name == metric and all((k, v) in labels for k, v in match.items()):
            found[tuple((k, v) for k, v in labels if k not in match)] = value
    return found


def L(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _gpu(index: int, uuid: str, enforced: float | None, requested: float = 1400.0) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": uuid,
        "persistence_mode": True,
        "power": {"enforced_limit_w": enforced, "requested_limit_w": requested},
        "clocks_event_reasons": [],
        "ecc": {"volatile_uncorrected": 0},
    }


def _report(command: str) -> Report:
    return Report(command=command, started="2026-12-02T10:00:00Z", finished=FINISHED)


def facts_report() -> Report:
    report = _report("facts")
    facts = {
        "gpufleet_gpus": [_gpu(0, "GPU-a", 1400.0), _gpu(1, "GPU-b", 1100.0)],
        "gpufleet_gpu_topology": {"nvlink_domains": [["GPU-a", "GPU-b"]]},
        "gpufleet_rdma": {"devices": {"mlx5_0": {"state": "ACTIVE", "netdev": "ens1np0"}}},
    }
    judged = [  # the modules' checks (gpu_facts, rdma_facts with judge), then the controller's
        *gpu_facts.judged(facts["gpufleet_gpus"]),
        *rdma_facts.judged(facts["gpufleet_rdma"]["devices"]),
        *checks.facts_checks(facts, expected_gpus=2),
    ]
    report.hosts["node01"] = HostReport(status="failed", checks=judged, facts=facts)
    report.hosts["node02"] = HostReport(status="unreachable", message="ssh: connect timed out")
    return report


def drift_report(command: str = "drift") -> Report:
    report = _report(command)
    link = checks.check("rdma_link.link_state[mlx5_0]", True, "ACTIVE", "ACTIVE", "", "up")
    report.hosts["node01"] = HostReport(
        status="drifted",
        checks=[link],
        changes=[
            checks.change("rdma_qos.trust[mlx5_0]", "pcp", "dscp"),
            checks.change("rdma_qos.pfc[mlx5_0]", "00000000", "00010000"),
            checks.change("gpu_power.enforced_limit_w[GPU-a]", 1100.0, 1400.0),
        ],
    )
    report.hosts["node02"] = HostReport(status="ok", checks=[link])
    report.hosts["node03"] = HostReport(status="unreachable")
    report.hosts["leaf02"] = HostReport(
        status="drifted",
        checks=[checks.check("switch.nvue[leaf02]", True, 200, 200, "", "answered")],
        changes=[checks.change("qos/pfc/default-global/switch-priority/3", "off", "on")],
    )
    return report


def gate_report() -> Report:
    """The gate judges thermal.* at idle and under load: one condition, failed once."""
    report = _report("gate")
    idle = checks.check("thermal.gpu_temp_c[GPU-a]", True, 31, 60, "C", "idle")
    load = checks.check("thermal.gpu_temp_c[GPU-a]", False, 86, 83, "C", "under load")
    tlimit = [checks.check("thermal.tlimit_c[GPU-a]", True, v, 3, "C", str(v)) for v in (40, 12)]
    burn = checks.check("burn_in.completed", True, 1, 1, "", "ran")
    report.hosts["node01"] = HostReport(
        status="blocked",
        checks=[idle, load, *tlimit, burn],
        changes=[checks.change("gpu_power.enforced_limit_w[GPU-a]", 1100.0, 1400.0)],
        facts={"gpufleet_gpus": [_gpu(0, "GPU-a", 1400.0)]},
    )
    return report


WATCH: dict[str, Any] = {
    "window_s": 5.0,
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-a",
            "power_limit_w": {"requested": 1400.0, "enforced": 1100.0},
            "power_draw_w": 812.0,
            "temperature_c": {"gpu": 61.0, "memory": 58.0},
            "tlimit_c": 24.0,
            "throttle_active": {
                "sw_power_cap": 1,
                "hw_slowdown": 0,
                "hw_power_brake_slowdown": 0,
                "hw_thermal_slowdown": 0,
                "sw_thermal_slowdown": 0,
            },
            "throttle_seconds_total": {
                "sw_power_cap": 123.4,
                "sync_boost": 0.0,
                "sw_thermal_slowdown": 0.0,
                "hw_thermal_slowdown": 0.0,
                "hw_power_brake_slowdown": 0.0,
            },
        }
    ],
    "ports": [
        {
            "ibdev": "mlx5_0",
            "retransmits_per_second": 0.5,
            "pause_seconds_per_second": {"3": 0.02},
            "rx_discards_per_second": 0.0,
            "cnp_sent_per_second": 12.0,
            "ecn_marked_per_second": 11.0,
            "symbol_errors_per_minute": 150.0,
            "phy_errors": {"link_integrity": 1, "buffer_overrun": 0},
        }
    ],
    "instances": [
        {
            "name": "a",
            "up": 1,
            "prefix_cache_hit_ratio": 0.9,
            "generation_tokens_per_second": 120.0,
            "requests_running": 4,
            "requests_waiting": 0,
            "preemptions_per_second": 0.0,
            "kv_cache_usage_ratio": 0.12,
        }
    ],
}


def watch_report(watch: dict[str, Any] | None = None) -> Report:
    report = _report("watch")
    report.hosts["node01"] = HostReport(status="ok", facts={"gpufleet_watch": watch or WATCH})
    return report


def provision_report(command: str = "provision") -> Report:
    report = _report(command)
    report.hosts["node01"] = HostReport(
        status="drifted" if "--check" in command else "changed",
        checks=[checks.check("gpu_power.enforced_limit_w[GPU-a]", True, 1400.0, 1400.0, "W", "ok")],
        changes=[checks.change("gpu_power.enforced_limit_w[GPU-a]", 1100.0, 1400.0)],
        facts={"gpufleet_gpus": [_gpu(0, "GPU-a", 1400.0)]},
    )
    return report


ALL = {
    "facts": facts_report,
    "provision": provision_report,
    "provision --check": lambda: provision_report("provision --check"),
    "drift": drift_report,
    "drift --fix": lambda: drift_report("drift --fix"),
    "gate": gate_report,
    "watch": watch_report,
}


@pytest.mark.parametrize("name", ALL)
def test_every_commands_file_passes_promtool_and_reads_back(name: str) -> None:
    text = prom.render(ALL[name]())
    check_metrics(text)
    samples = parsed(text)
    # What the parser read is what the lines say, value for value.
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(lines) == len(samples)
    assert {v for v in samples.values()} == {float(line.rsplit(" ", 1)[1]) for line in lines}
    assert render(ALL[name](), "prom") == text


def test_facts() -> None:
    text = prom.render(facts_report())
    assert series(text, "gpufleet_host_status", host="node01", command="facts") == {
        L(status=s): float(s == "failed") for s in checks.STATUSES
    }
    assert series(text, "gpufleet_host_status", host="node02", status="unreachable") == {
        L(command="facts"): 1.0
    }
    assert series(text, "gpufleet_failed_checks", command="facts") == {
        L(host="node01", area="gpu"): 0.0,
        L(host="node01", area="gpu_power"): 1.0,
        L(host="node01", area="thermal"): 0.0,
        L(host="node01", area="rdma_link"): 0.0,
    }
    assert series(text, "gpufleet_gpu_power_limit_watts", host="node01", command="facts") == {
        L(gpu="0", uuid="GPU-a", kind="enforced"): 1400.0,
        L(gpu="0", uuid="GPU-a", kind="requested"): 1400.0,
        L(gpu="1", uuid="GPU-b", kind="enforced"): 1100.0,
        L(gpu="1", uuid="GPU-b", kind="requested"): 1400.0,
    }
    assert series(text, "gpufleet_drifted_settings") == {}
    assert series(text, "gpufleet_last_run_timestamp_seconds") == {L(command="facts"): STAMP}
    assert f'gpufleet_last_run_timestamp_seconds{{command="facts"}} {STAMP:.0f}\n' in text
    assert series(text, "gpufleet_last_run_hosts", command="facts") == {
        L(status=s): float(s in ("failed", "unreachable")) for s in checks.STATUSES
    }


def test_drift_counts_settings_per_role_and_a_total_for_every_host_read() -> None:
    text = prom.render(drift_report())
    assert series(text, "gpufleet_drifted_settings", command="drift") == {
        L(host="node01", role="all"): 3.0,
        L(host="node01", role="rdma_qos"): 2.0,
        L(host="node01", role="gpu_power"): 1.0,
        # nothing drifted: 0, so "no drift" is a value, not a missing series
        L(host="node02", role="all"): 0.0,
        # a leaf's settings are NVUE paths: switch_qos's
        L(host="leaf02", role="all"): 1.0,
        L(host="leaf02", role="switch_qos"): 1.0,
    }
    assert series(text, "gpufleet_failed_checks", command="drift") == {
        L(host="leaf02", area="switch"): 0.0,
        L(host="node01", area="rdma_link"): 0.0,
        L(host="node02", area="rdma_link"): 0.0,
    }
    assert series(text, "gpufleet_host_status", host="node01", status="drifted") == {L(command="drift"): 1.0}


def test_drift_fix_leaves_nothing_drifted_on_the_hosts_it_fixed() -> None:
    report = drift_report("drift --fix")
    report.hosts["node01"].status = "changed"
    report.hosts["leaf02"].status = "interrupted"  # its batch never started: still drifted
    text = prom.render(report)
    assert series(text, "gpufleet_drifted_settings", command="drift", role="all") == {
        L(host="node01"): 0.0,
        L(host="node02"): 0.0,
        L(host="leaf02"): 1.0,
    }
    assert prom.textfile_name(report) == "gpufleet_drift.prom"


def test_provision_changes_are_not_drift_but_provision_check_is() -> None:
    applied = prom.render(provision_report())
    assert series(applied, "gpufleet_drifted_settings") == {}
    assert series(applied, "gpufleet_host_status", status="changed") == {
        L(host="node01", command="provision"): 1
    }
    checked = prom.render(provision_report("provision --check"))
    assert series(checked, "gpufleet_drifted_settings") == {
        L(host="node01", command="provision", role="all"): 1.0,
        L(host="node01", command="provision", role="gpu_power"): 1.0,
    }


def test_gate_counts_a_condition_judged_twice_once() -> None:
    text = prom.render(gate_report())
    assert series(text, "gpufleet_failed_checks", host="node01", command="gate") == {
        L(area="thermal"): 1.0,
        L(area="burn_in"): 0.0,
    }
    assert series(text, "gpufleet_host_status", host="node01", command="gate", status="blocked") == {(): 1.0}
    assert series(text, "gpufleet_drifted_settings") == {}


def test_watch_readings() -> None:
    text = prom.render(watch_report())
    gpu = {"host": "node01", "command": "watch", "gpu": "0", "uuid": "GPU-a"}
    assert series(text, "gpufleet_gpu_power_limit_watts", **gpu) == {
        L(kind="enforced"): 1100.0,
        L(kind="requested"): 1400.0,
    }
    assert series(text, "gpufleet_gpu_power_draw_watts", **gpu) == {(): 812.0}
    assert series(text, "gpufleet_gpu_temperature_celsius", **gpu) == {
        L(sensor="gpu"): 61.0,
        L(sensor="memory"): 58.0,
    }
    assert series(text, "gpufleet_gpu_tlimit_margin_celsius", **gpu) == {(): 24.0}
    assert series(text, "gpufleet_gpu_throttle_active", **gpu) == {
        L(reason=r): float(r == "sw_power_cap") for r in WATCH["gpus"][0]["throttle_active"]
    }
    assert series(text, "gpufleet_gpu_throttle_seconds_total", **gpu) == {
        L(reason=r): v for r, v in WATCH["gpus"][0]["throttle_seconds_total"].items()
    }
    assert "# TYPE gpufleet_gpu_throttle_seconds_total counter\n" in text
    port = {"host": "node01", "command": "watch", "port": "mlx5_0"}
    assert series(text, "gpufleet_rdma_retransmits_per_second", **port) == {(): 0.5}
    assert series(text, "gpufleet_rdma_pause_seconds_per_second", **port) == {L(priority="3"): 0.02}
    assert series(text, "gpufleet_rdma_rx_discards_per_second", **port) == {(): 0.0}
    assert series(text, "gpufleet_rdma_cnp_sent_per_second", **port) == {(): 12.0}
    assert series(text, "gpufleet_rdma_ecn_marked_per_second", **port) == {(): 11.0}
    assert series(text, "gpufleet_rdma_symbol_errors_per_minute", **port) == {(): 150.0}
    assert series(text, "gpufleet_rdma_phy_errors", **port) == {
        L(kind="buffer_overrun"): 0.0,
        L(kind="link_integrity"): 1.0,
    }
    vllm = {"host": "node01", "command": "watch", "vllm_instance": "a"}
    assert series(text, "gpufleet_vllm_up", **vllm) == {(): 1.0}
    assert series(text, "gpufleet_vllm_prefix_cache_hit_ratio", **vllm) == {(): 0.9}
    assert series(text, "gpufleet_vllm_generation_tokens_per_second", **vllm) == {(): 120.0}
    assert series(text, "gpufleet_vllm_requests", **vllm) == {
        L(state="running"): 4.0,
        L(state="waiting"): 0.0,
    }
    assert series(text, "gpufleet_vllm_preemptions_per_second", **vllm) == {(): 0.0}
    assert series(text, "gpufleet_vllm_kv_cache_usage_ratio", **vllm) == {(): 0.12}
    assert series(text, "gpufleet_host_status", host="node01", command="watch", status="ok") == {(): 1.0}
    assert series(text, "gpufleet_last_run_timestamp_seconds") == {L(command="watch"): STAMP}


def test_the_recovery_action_is_1_with_its_name_0_when_none_and_absent_when_not_reported() -> None:
    """node_health.fact's recovery_action per GPU: the driver's words in the action label."""
    watch = copy.deepcopy(WATCH)
    watch["health"] = {
        "gpu_count": 3,
        "gpus": [
            {"uuid": "GPU-a", "index": 0, "recovery_action": "None", "pcie_replays_window": 40},
            {"uuid": "GPU-b", "index": 1, "recovery_action": "Node Reboot"},
            {"uuid": "GPU-c", "index": 2, "recovery_action": None},
        ],
        "xids": [],
    }
    text = prom.render(watch_report(watch))
    check_metrics(text)
    assert series(text, "gpufleet_gpu_recovery_action", host="node01", command="watch") == {
        L(gpu="0", uuid="GPU-a", action="None"): 0.0,
        L(gpu="1", uuid="GPU-b", action="Node Reboot"): 1.0,
    }
    assert series(text, "gpufleet_gpu_pcie_replays", host="node01", command="watch") == {
        L(gpu="0", uuid="GPU-a"): 40.0
    }


def test_gpudirect_and_nic_firmware_readings_are_series_by_bridge_and_port() -> None:
    """node_health.fact's gpudirect (peermem, ACS per switch port) and nic_firmware_errors per port;
    peermem not judged (None): no series."""
    watch = copy.deepcopy(WATCH)
    watch["health"] = {
        "gpu_count": 1,
        "gpus": [{"uuid": "GPU-a", "index": 0}],
        "xids": [],
        "gpudirect": {"peermem_loaded": 0, "acs_enabled": {"0000:1a:00.0": 1, "0000:1b:00.0": 0}},
        "nic_firmware_errors": {"mlx5_0": 0, "mlx5_1": 3},
    }
    text = prom.render(watch_report(watch))
    check_metrics(text)
    assert series(text, "gpufleet_nvidia_peermem_loaded", host="node01", command="watch") == {(): 0.0}
    assert series(text, "gpufleet_pcie_acs_enabled", host="node01", command="watch") == {
        L(bridge="0000:1a:00.0"): 1.0,
        L(bridge="0000:1b:00.0"): 0.0,
    }
    assert series(text, "gpufleet_rdma_firmware_errors", host="node01", command="watch") == {
        L(port="mlx5_0"): 0.0,
        L(port="mlx5_1"): 3.0,
    }
    watch["health"]["gpudirect"] = {"peermem_loaded": None, "acs_enabled": {}}
    assert series(prom.render(watch_report(watch)), "gpufleet_nvidia_peermem_loaded") == {}


def test_a_reading_not_taken_is_no_series() -> None:
    watch = copy.deepcopy(WATCH)
    watch["gpus"][0]["power_draw_w"] = None
    watch["gpus"][0]["temperature_c"]["memory"] = None
    watch["ports"][0]["pause_seconds_per_second"] = None
    watch["instances"][0]["prefix_cache_hit_ratio"] = "n/a"
    text = prom.render(watch_report(watch))
    check_metrics(text)
    assert series(text, "gpufleet_gpu_power_draw_watts") == {}
    assert set(series(text, "gpufleet_gpu_temperature_celsius", host="node01")) == {
        L(command="watch", gpu="0", uuid="GPU-a", sensor="gpu")
    }
    assert series(text, "gpufleet_rdma_pause_seconds_per_second") == {}
    assert series(text, "gpufleet_vllm_prefix_cache_hit_ratio") == {}
    assert "gpufleet_gpu_power_draw_watts" not in text  # no HELP for a metric with no series


def test_no_label_value_is_a_check_or_a_setting() -> None:
    for make in ALL.values():
        report = make()
        names = {c["name"] for h in report.hosts.values() for c in h.checks}
        names |= {ch["setting"] for h in report.hosts.values() for ch in h.changes}
        values = {v for _, labels in parsed(prom.render(report)) for _, v in labels}
        assert not values & names
        assert not any("[" in v or "/" in v for v in values), values


def test_files_of_every_command_share_one_directory(tmp_path: Path) -> None:
    """node_exporter reads them all: one HELP and TYPE per metric, no label set twice."""
    helps: dict[str, set[str]] = {}
    for make in ALL.values():
        text = prom.write_textfile(make(), tmp_path).read_text()
        for line in text.splitlines():
            if line.startswith("# "):
                kind, metric, rest = line[2:].split(" ", 2)
                helps.setdefault(f"{kind} {metric}", set()).add(rest)
    assert all(len(texts) == 1 for texts in helps.values()), helps
    # provision --check rewrites provision's file, drift --fix drift's
    files = sorted(tmp_path.iterdir())
    assert [p.name for p in files] == [
        "gpufleet_drift.prom",
        "gpufleet_facts.prom",
        "gpufleet_gate.prom",
        "gpufleet_provision.prom",
        "gpufleet_watch.prom",
    ]
    keys = [key for path in files for key in parsed(path.read_text())]
    assert len(keys) == len(set(keys))


def _big_watch(gpus: int, ports: int, instances: int) -> dict[str, Any]:
    return {
        "window_s": 5.0,
        "gpus": [dict(copy.deepcopy(WATCH["gpus"][0]), index=i, uuid=f"GPU-{i:04x}") for i in range(gpus)],
        "ports": [dict(copy.deepcopy(WATCH["ports"][0]), ibdev=f"mlx5_{i}") for i in range(ports)],
        "instances": [dict(copy.deepcopy(WATCH["instances"][0]), name=f"i{i}") for i in range(instances)],
    }


def test_series_per_node_stay_bounded() -> None:
    """A 16-GPU node with 8 RoCE ports and 2 vLLM instances, however many checks it ran."""
    report = watch_report(_big_watch(gpus=16, ports=8, instances=2))
    many = [
        checks.check(f"{area}.reading[GPU-{i:04x}]", i % 7 != 0, i, 0, "", "")
        for area in ("gpu_power", "thermal", "fabric", "rdma_link", "service")
        for i in range(200)
    ]
    report.hosts["node01"].checks = many
    text = prom.render(report)
    check_metrics(text)
    per_node = [key for key in parsed(text) if ("host", "node01") in key[1]]
    # status 7 + areas 5 + GPUs 16 x 16 + ports 8 x 8 (5 rates, symbol errors, 2 phy error kinds)
    # + instances 2 x 7 + unsafe 1 (no unsafe class: none of these checks is of one)
    assert len(per_node) == 7 + 5 + 16 * 16 + 8 * 8 + 2 * 7 + 1 == 347
    assert series(text, "gpufleet_failed_checks", host="node01", area="thermal") == {L(command="watch"): 29.0}


def test_labels_are_escaped_and_read_back() -> None:
    report = _report("facts")
    odd = 'node"01\\a'
    report.hosts[odd] = HostReport(status="ok")
    text = prom.render(report)
    check_metrics(text)
    assert series(text, "gpufleet_host_status", status="ok") == {L(host=odd, command="facts"): 1.0}


def test_control_characters_in_a_label_are_written_out_and_the_file_stays_valid() -> None:
    """A host name, port or instance from a node with a terminal's escape codes, a carriage return or a
    new line: none reaches the file raw (whoever reads it with cat), promtool still reads it."""
    report = _report("watch")
    hostile = "node01\x1b[2J\x1b[H\r\nfake 1\u202e"
    report.hosts[hostile] = HostReport(
        status="ok",
        facts={"gpufleet_watch": {"ports": [{"ibdev": "mlx5_0\x07", "link_up": True}], "instances": []}},
    )
    text = prom.render(report)
    check_metrics(text)
    assert not any(c in text for c in "\x1b\r\x07\u202e")
    written = "node01\\x1b[2J\\x1b[H\\x0d\\x0afake 1\\u202e"
    assert series(text, "gpufleet_host_status", status="ok") == {L(host=written, command="watch"): 1.0}
    assert series(text, "gpufleet_rdma_link_up") == {
        L(host=written, command="watch", port="mlx5_0\\x07"): 1.0
    }


def test_an_unknown_metric_is_a_bug_not_a_dropped_series() -> None:
    with pytest.raises(KeyError):
        prom.Samples().add("gpufleet_typo", {}, 1)


def test_write_textfile_is_atomic_and_readable_by_node_exporter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renamed: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        renamed.append((Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(atomic_file.os, "replace", replace)
    (tmp_path / "gpufleet_drift.prom").write_text("old\n")
    path = prom.write_textfile(drift_report(), tmp_path)
    assert path == tmp_path / "gpufleet_drift.prom"
    assert path.read_text() == prom.render(drift_report())
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    [(tmp, target)] = renamed
    # node_exporter reads *.prom: the half-written file must never match
    assert target == "gpufleet_drift.prom" and not tmp.endswith(".prom") and tmp.startswith(".")
    assert [p.name for p in tmp_path.iterdir()] == ["gpufleet_drift.prom"]


def test_write_textfile_into_a_missing_directory_fails_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        prom.write_textfile(drift_report(), tmp_path / "typo")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_render_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gpufleet_gate.prom").write_text("old\n")

    def broken(report: Report) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(prom, "render", broken)
    with pytest.raises(RuntimeError):
        prom.write_textfile(gate_report(), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["gpufleet_gate.prom"]
    assert (tmp_path / "gpufleet_gate.prom").read_text() == "old\n"


def test_report_write_still_writes_gpufleet_prom(tmp_path: Path) -> None:
    paths = write(gate_report(), tmp_path, kinds=("prom",))
    assert paths == {"prom": tmp_path / FILES["prom"]}
    assert paths["prom"].read_text() == prom.render(gate_report())
