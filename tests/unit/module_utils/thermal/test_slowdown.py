"""Thermal limits relative to each GPU's own slowdown temperature (issue 38 item 5).

thermal/slowdown.py reads the slowdown temperature from nvidia-smi -q (tested first on the real
captures in tests/fixtures/real/nvidia-smi-text: the absolute "GPU Slowdown Temp" of the A100 and H800
drivers, the T.Limit form of the H100 and H200 ones, then on the simulator's -q -d TEMPERATURE);
thermal_verdict.gpu_temp_limit is the one place the limit is computed from it; the idle gate's and the
burn-in's checks name both the slowdown temperature and the margin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import burn_in as bi
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import slowdown
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import thermal_verdict as tv
from gpufleet_sim import build, state, sysfs
from gpufleet_sim.tools import nvidia_smi as fake_smi

from tests.unit.mutations import FIXTURES
from tests.unit.sim.fake_node import run

TEXT = FIXTURES / "nvidia-smi-text"


def _parse(name: str) -> list[dict[str, Any]]:
    return slowdown.parse((TEXT / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("capture", "count", "first", "source"),
    [
        # T.Limit: 29 C + 56 C - (-2 C)
        ("gpud-8xH100-80GB-HBM3-535.161.08-q.txt", 8, 87.0, "T.Limit"),
        # 28 + 59 + 2 idle; the same GPU under load: 52 + 35 + 2, the same 89 C
        ("utku-h200-590.48.01-idle-q.txt", 1, 89.0, "T.Limit"),
        ("utku-h200-590.48.01-load-q.txt", 1, 89.0, "T.Limit"),
        # 41 + 46 + 2 idle, 59 + 26 + 2 under load: T.Limit follows the hottest sensor, so the idle read
        # (the one the gate and the burn-in take, before the load) is 2 C higher on this H100
        ("utku-h100-80gb-hbm3-590.48.01-idle-q.txt", 1, 89.0, "T.Limit"),
        ("utku-h100-80gb-hbm3-590.48.01-load-q.txt", 1, 87.0, "T.Limit"),
        # the absolute form wins where the driver prints it (beside T.Limit on the H800)
        ("llm-action-h800-q-i0.txt", 1, 89.0, "GPU Slowdown Temp"),
        ("azhpc-diag-ndv4-8xA100-SXM4-40GB-460.32.03-q.txt", 8, 89.0, "GPU Slowdown Temp"),
    ],
)
def test_the_slowdown_temperature_of_every_gpu_of_the_real_captures(
    capture: str, count: int, first: float, source: str
) -> None:
    gpus = _parse(capture)
    assert len(gpus) == count
    assert (gpus[0]["slowdown_c"], gpus[0]["source"]) == (first, source)
    assert all(g["slowdown_c"] is not None and g["bus_id"] for g in gpus)


def test_a_gpu_that_reports_neither_form_has_none() -> None:
    text = "GPU 00000000:19:00.0\n    Temperature\n        GPU Current Temp : 30 C\n"
    text += "        GPU T.Limit Temp : N/A\n"
    assert slowdown.parse(text) == [{"bus_id": "00000000:19:00.0", "slowdown_c": None, "source": None}]


@pytest.mark.parametrize(("profile", "expected"), [("b300-16", 87.0), ("h200", 89.0), ("h100-8", 87.0)])
def test_the_simulators_temperature_query_gives_each_profiles_slowdown(
    tmp_path: Path, profile: str, expected: float
) -> None:
    node_state = build.build_node_state("node01", profile, 1)
    state.save(tmp_path, node_state)
    sysfs.render(tmp_path / "sys", node_state)
    rc, out, _ = run(fake_smi, tmp_path, *slowdown.ARGS)
    assert rc == 0
    gpus = slowdown.parse(out)
    assert len(gpus) == len(node_state["gpus"]) and {g["slowdown_c"] for g in gpus} == {expected}


def test_merge_matches_by_index() -> None:
    readings = [{"uuid": "GPU-b", "index": 1}, {"uuid": "GPU-a", "index": 0}, {"uuid": "GPU-c", "index": 7}]
    slowdown.merge(readings, [{"slowdown_c": 87.0}, {"slowdown_c": 89.0}])
    assert [r["slowdown_c"] for r in readings] == [89.0, 87.0, None]


# ------------------------------------------------------------------ the one limit


LIMITS = dict(tv.IDLE_LIMITS, max_gpu_temp_c=55.0, slowdown_margin_c=32.0)


@pytest.mark.parametrize(
    ("limits", "gpu", "limit", "basis"),
    [
        (LIMITS, {"slowdown_c": 87.0}, 55.0, "its slowdown temperature 87 C less the margin 32 C"),
        (LIMITS, {"slowdown_c": 89.0}, 57.0, "its slowdown temperature 89 C less the margin 32 C"),
        (LIMITS, {"slowdown_c": None}, 55.0, "the profile's 55 C: the GPU reports no slowdown temperature"),
        (LIMITS, {}, 55.0, "the profile's 55 C: the GPU reports no slowdown temperature"),
        # no margin: the absolute number alone (an operator who pins one sets the margin to null)
        (dict(LIMITS, slowdown_margin_c=None), {"slowdown_c": 89.0}, 55.0, None),
        # the absolute limit off: the slowdown-relative one still judges a GPU that reports it
        (dict(LIMITS, max_gpu_temp_c=None), {"slowdown_c": 89.0}, 57.0, "its slowdown temperature 89 C less"),
        (dict(LIMITS, max_gpu_temp_c=None), {}, None, None),
    ],
)
def test_gpu_temp_limit(
    limits: dict[str, Any], gpu: dict[str, Any], limit: float | None, basis: str | None
) -> None:
    got = tv.gpu_temp_limit(limits, gpu)
    assert got[0] == limit
    assert got[1] == basis if basis is None else got[1].startswith(basis)


def reading(gpu_c: float, slowdown_c: float | None) -> dict[str, Any]:
    return {
        "uuid": "GPU-1",
        "index": 0,
        "gpu_c": gpu_c,
        "memory_c": 40.0,
        "tlimit_c": 40.0,
        "reasons": [],
        "utilization_pct": 90.0,
        "slowdown_c": slowdown_c,
    }


def temp_check(
    gpus: list[dict[str, Any]], limits: dict[str, Any], under_load: bool = False
) -> dict[str, Any]:
    return next(
        c for c in tv.gpu_checks(gpus, limits, under_load) if c["name"] == "thermal.gpu_temp_c[GPU-1]"
    )


def test_the_idle_check_names_the_slowdown_temperature_and_the_margin() -> None:
    passed = temp_check([reading(56.0, 89.0)], LIMITS)
    assert passed["ok"] is True and passed["limit"] == 57.0
    assert passed["message"] == (
        "GPU GPU-1 temperature 56 C, within the 57 C limit "
        "(its slowdown temperature 89 C less the margin 32 C)"
    )
    failed = temp_check([reading(56.0, 87.0)], LIMITS)
    assert failed["ok"] is False and (failed["value"], failed["limit"]) == (56.0, 55.0)
    assert "above the 55 C limit (its slowdown temperature 87 C less the margin 32 C)" in failed["message"]


def test_a_gpu_without_a_slowdown_temperature_falls_back_to_the_profiles_number() -> None:
    check = temp_check([reading(56.0, None)], LIMITS)
    assert check["ok"] is False and check["limit"] == 55.0
    assert check["message"].endswith("(the profile's 55 C: the GPU reports no slowdown temperature)")


def test_skipping_the_gpu_temperature_drops_the_margin_too() -> None:
    params = {"max_gpu_temp_c": 55.0, "slowdown_margin_c": 32.0, "skip_checks": ["gpu_temp_c"]}
    limits = tv.limits_from_params(params, ("max_gpu_temp_c",), tv.GPU_SKIPS)
    assert limits == {"max_gpu_temp_c": None, "slowdown_margin_c": None}
    assert not [c for c in tv.gpu_checks([reading(99.0, 87.0)], limits) if "gpu_temp_c" in c["name"]]


@pytest.mark.parametrize(
    ("margin", "error"),
    [
        (32.0, None),
        (0.0, "slowdown_margin_c (thermal_gate_slowdown_margin_c) must be above 0 and at most 150 C"),
        (151.0, "slowdown_margin_c (thermal_gate_slowdown_margin_c) must be above 0 and at most 150 C"),
        (float("nan"), "slowdown_margin_c (thermal_gate_slowdown_margin_c) must be above 0"),
    ],
)
def test_the_margin_is_checked_in_the_modules(margin: float, error: str | None) -> None:
    errors = tv.limit_errors({"slowdown_margin_c": margin}, "thermal_gate_")
    assert errors == [] if error is None else errors[0].startswith(error)


def test_the_burn_in_judges_each_sample_against_the_gpus_own_limit() -> None:
    limits = dict(bi.DEFAULT_LIMITS, max_gpu_temp_c=80.0, slowdown_margin_c=7.0)
    # 81 C passes a GPU that slows down at 89 C (limit 82), fails one at 87 C (limit 80)
    assert bi.violations(reading(81.0, 89.0), limits) == []
    assert bi.violations(reading(81.0, 87.0), limits) == [
        {"reading": "temperature.gpu", "value": 81.0, "limit": 80.0}
    ]
    watch = bi.Watch(limits)
    watch.add(0.0, [reading(81.0, 89.0)])
    summary = {"gpus": watch.summary()["gpus"]}
    check = temp_check(bi._readings(summary), limits, under_load=True)
    assert check["ok"] is True and check["limit"] == 82.0 and "slowdown temperature 89 C" in check["message"]
    assert watch.trace_fact(1.0, 1.0)["limits"]["max_gpu_temp_c"] == 82.0
