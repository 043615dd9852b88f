"""gpufleet.node.service_check against FakeVllm on 127.0.0.1, with the real /metrics captures served."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.vllm import vllm_service
from ansible_collections.gpufleet.node.plugins.modules import service_check

from tests.unit.module_utils.thermal.test_burn_in import FakeVllm
from tests.unit.module_utils.vllm.test_vllm_metrics import standin_scrape
from tests.unit.modules import harness

FOXHOP = "vllm-metrics/foxhop-4090-qwen3.6-27b-trimmed-cache-lines.prom"
RH = "vllm-metrics/rh-workshop-llama-vllm-single-metrics-grep-vllm-head40.prom"


def run_module(args: dict[str, Any]) -> dict[str, Any]:
    return harness.run_module(service_check.main, args).result


@pytest.fixture
def vllm() -> Iterator[FakeVllm]:
    with FakeVllm(model="GLM-5.2-NVFP4") as server:
        yield server


def healthy_after(vllm: FakeVllm, waits: int, polls: list[float]) -> Callable[[float], None]:
    """A stand-in for service_check._sleep: each wait appended to ``polls``; after the ``waits``-th
    the instance answers /health with 200."""

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == waits:
            vllm.health = 200

    return sleep


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"]}


def test_healthy_instance_with_a_steady_hit_rate(vllm: FakeVllm) -> None:
    vllm.queries, vllm.hits = 184320.0, 165888.0
    result = run_module({"url": vllm.url, "name": "glm52", "model": "GLM-5.2-NVFP4"})
    assert "failed" not in result and result["changed"] is False
    assert [c["name"] for c in result["checks"]] == [
        "service.health[glm52]",
        "service.models[glm52]",
        "service.prefix_cache_hit_rate[glm52]",
    ]
    assert all(c["ok"] for c in result["checks"])
    assert result["health"] == 200 and result["models"] == ["GLM-5.2-NVFP4"]
    assert result["prefix_cache"] == {
        "queries": 184320.0,
        "hits": 165888.0,
        "source": "vllm:prefix_cache_queries_total",
        "hit_rate": 0.9,
        "window": "lifetime",
        "window_queries": 184320.0,
        "window_hits": 165888.0,
        "reset": False,
        "prefix_caching_enabled": True,
    }
    assert vllm.paths == ["/health", "/v1/models", "/metrics"]


def test_the_real_cliff_capture_is_flagged(vllm: FakeVllm, read_fixture: Any) -> None:
    vllm.metrics_text = read_fixture(FOXHOP)
    result = run_module({"url": vllm.url, "name": "qwen"})
    assert result["failed"] is True
    check = by_name(result)["service.prefix_cache_hit_rate[qwen]"]
    assert (check["ok"], check["value"], check["limit"], check["unit"]) == (False, 0.0577, 0.5, "ratio")
    assert check["message"] == (
        "qwen prefix-cache hit rate 0.05768 over 10931263819 queried tokens since the server started, below "
        "the 0.5 floor (a prompt template that varies the prefix - a timestamp, a session id - does this)"
    )
    assert result["msg"] == check["message"]


def test_a_0_11_server_without_the_v0_gauge_is_judged_on_its_counters(vllm: FakeVllm, tmp_path: Path) -> None:
    vllm.metrics_text = standin_scrape(tmp_path, None)
    assert "vllm:gpu_prefix_cache_hit_rate" not in vllm.metrics_text
    result = run_module({"url": vllm.url, "name": "glm52"})
    assert "failed" not in result
    check = by_name(result)["service.prefix_cache_hit_rate[glm52]"]
    assert check["ok"] is True and check["value"] == 0.9
    assert result["prefix_cache"]["source"] == "vllm:prefix_cache_queries_total"


def test_no_queries_yet_fails_closed(vllm: FakeVllm, read_fixture: Any) -> None:
    vllm.metrics_text = read_fixture(RH)
    result = run_module({"url": vllm.url, "name": "llama"})
    check = by_name(result)["service.prefix_cache_hit_rate[llama]"]
    assert check["ok"] is False and check["value"] is None
    assert (
        "had no prefix-cache queries since the server started; send traffic first (fail closed)"
        in check["message"]
    )


def test_wait_healthy_step_takes_the_baseline_without_judging(vllm: FakeVllm) -> None:
    result = run_module({"url": vllm.url, "check_prefix_cache": False, "warmup_seconds": 30})
    assert "failed" not in result
    assert [c["name"] for c in result["checks"]] == [
        f"service.health[127.0.0.1:{vllm.port}]",
        f"service.models[127.0.0.1:{vllm.port}]",
    ]
    # No traffic yet (a 0/0 rate would fail the check): the totals come back as a baseline, unjudged,
    # and the warm-up is not waited for.
    cache = result["prefix_cache"]
    assert (cache["queries"], cache["hits"], cache["hit_rate"], cache["window"]) == (
        0.0,
        0.0,
        None,
        "lifetime",
    )
    assert vllm.paths.count("/metrics") == 1
    # Traffic, then the judged run against that baseline.
    vllm.queries, vllm.hits = 1000.0, 910.0
    after = run_module({"url": vllm.url, "baseline": cache})
    assert "failed" not in after
    assert (after["prefix_cache"]["window"], after["prefix_cache"]["hit_rate"]) == ("since_baseline", 0.91)


def test_unreadable_metrics_is_no_failure_without_the_check(vllm: FakeVllm) -> None:
    vllm.metrics_text = "<html>oops</html>\n"
    result = run_module({"url": vllm.url, "check_prefix_cache": False})
    assert "failed" not in result and len(result["checks"]) == 2
    assert result["prefix_cache"]["source"] is None


def test_baseline_judges_only_the_queries_since(vllm: FakeVllm) -> None:
    """A server that was at 0.9 for a long time and broke since the baseline: the window shows it."""
    vllm.queries, vllm.hits = 1_000_000.0, 900_000.0
    before = run_module({"url": vllm.url, "name": "glm52"})
    assert before["prefix_cache"]["hit_rate"] == 0.9
    vllm.queries += 20_000
    vllm.hits += 1_400
    after = run_module({"url": vllm.url, "name": "glm52", "baseline": before["prefix_cache"]})
    assert after["failed"] is True
    cache = after["prefix_cache"]
    assert (cache["window"], cache["window_queries"], cache["window_hits"], cache["hit_rate"]) == (
        "since_baseline",
        20_000.0,
        1_400.0,
        0.07,
    )
    # Lifetime it would still look fine.
    assert (cache["hits"] / cache["queries"]) > 0.85


def test_warmup_scrapes_twice(vllm: FakeVllm) -> None:
    vllm.queries, vllm.hits = 500.0, 50.0

    def sleep(seconds: float) -> None:
        # The traffic of the warm-up: 1000 queried tokens, 950 of them cached.
        vllm.queries += 1000
        vllm.hits += 950

    with mock.patch.object(service_check, "_sleep", side_effect=sleep) as slept:
        result = run_module({"url": vllm.url, "warmup_seconds": 30})
    slept.assert_called_once_with(30)
    assert "failed" not in result
    cache = result["prefix_cache"]
    assert (cache["window"], cache["window_queries"], cache["hit_rate"]) == ("warmup", 1000.0, 0.95)
    assert vllm.paths.count("/metrics") == 2


def test_instance_down_fails_every_check() -> None:
    with FakeVllm() as gone:
        url = gone.url
    result = run_module({"url": url, "name": "glm52", "timeout": 2})
    assert result["failed"] is True
    assert [c["ok"] for c in result["checks"]] == [False, False, False]
    assert result["health"] is None
    assert "glm52 /health did not answer" in result["msg"]
    assert "(fail closed)" in by_name(result)["service.prefix_cache_hit_rate[glm52]"]["message"]


def test_wait_timeout_polls_until_healthy(vllm: FakeVllm) -> None:
    vllm.health = 503
    polls: list[float] = []
    with mock.patch.object(service_check, "_sleep", side_effect=healthy_after(vllm, 3, polls)):
        result = run_module({"url": vllm.url, "wait_timeout": 600, "check_prefix_cache": False})
    assert "failed" not in result and polls == [2.0, 2.0, 2.0]
    assert vllm.paths.count("/health") == 4


def test_unhealthy_within_the_wait(vllm: FakeVllm) -> None:
    vllm.health = 503
    with (
        mock.patch.object(service_check, "_monotonic", side_effect=[0.0, 1.0, 31.0]),
        mock.patch.object(service_check, "_sleep"),
    ):
        result = run_module({"url": vllm.url, "wait_timeout": 30, "check_prefix_cache": False})
    check = result["checks"][0]
    assert (check["ok"], check["value"], check["message"]) == (
        False,
        503,
        f"127.0.0.1:{vllm.port} /health answers 503 after 30 s",
    )


def test_wrong_model(vllm: FakeVllm) -> None:
    result = run_module({"url": vllm.url, "model": "Kimi-K3-NVFP4", "check_prefix_cache": False})
    check = result["checks"][1]
    assert check["ok"] is False and check["value"] == ["GLM-5.2-NVFP4"]
    assert check["message"].endswith("does not serve Kimi-K3-NVFP4; it lists: GLM-5.2-NVFP4")


def test_prefix_caching_off_is_named(vllm: FakeVllm) -> None:
    vllm.metrics_text = 'vllm:cache_config_info{enable_prefix_caching="False",engine="0"} 1.0\n'
    result = run_module({"url": vllm.url, "name": "glm52"})
    check = result["checks"][2]
    assert (
        check["message"] == "glm52 runs with prefix caching off (enable_prefix_caching=False) (fail closed)"
    )
    assert result["prefix_cache"]["prefix_caching_enabled"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"url": "127.0.0.1:8000"}, "is not an http(s) URL"),
        ({"url": "http://127.0.0.1:8000", "min_prefix_cache_hit_rate": 1.5}, "a hit rate floor is 0..1"),
    ],
)
def test_bad_arguments(args: dict[str, Any], message: str) -> None:
    """Refused before any request is made."""
    result = run_module({"timeout": 1, **args})
    assert result["failed"] is True and message in result["msg"]


def test_bad_baseline(vllm: FakeVllm) -> None:
    result = run_module({"url": vllm.url, "baseline": {"hits": 1}})
    assert result["failed"] is True and "baseline must be the prefix_cache dict" in result["msg"]


# ---------------------------------------------------------------- the units while the wait lasts

# `systemctl show <unit>` (systemd 252, the keys unit_down reads among the ~200 it prints)
RUNNING = "Id=vllm-glm52.service\nLoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n"
STARTING = "Id=vllm-glm52.service\nLoadState=loaded\nActiveState=activating\nSubState=start\nResult=success\n"
FAILED = (
    "Type=simple\nRestart=on-failure\nResult=exit-code\nId=vllm-kimik3.service\nLoadState=loaded\n"
    "ActiveState=failed\nSubState=failed\nExecMainCode=1\nExecMainStatus=1\nMainPID=0\n"
)
AUTO_RESTART = (
    "Id=vllm-kimik3.service\nLoadState=loaded\nActiveState=activating\nSubState=auto-restart\n"
    "Result=exit-code\nExecMainStatus=134\n"
)
STOPPED = "Id=vllm-kimik3.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead\nExecMainStatus=0\n"
MISSING = "Id=vllm-kimik3.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (RUNNING, None),
        (STARTING, None),
        (FAILED, "failed (Result=exit-code): its process exited with status 1"),
        (AUTO_RESTART, "is waiting to restart (SubState=auto-restart): its process exited with status 134"),
        (STOPPED, "is inactive (stopped): its process exited"),
        (MISSING, "is not installed (LoadState=not-found)"),
    ],
)
def test_unit_down_names_why_a_unit_will_not_become_healthy(text: str, why: str | None) -> None:
    assert vllm_service.unit_down(vllm_service.unit_properties(text)) == why


class Units:
    """systemctl show answers: glm52 starting, kimik3 as ``kimik3`` says from the ``after``-th poll."""

    def __init__(self, kimik3: str, after: int = 2) -> None:
        self.kimik3, self.after, self.calls = kimik3, after, []

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append(list(args))
        assert args[:2] == ["/usr/bin/systemctl", "show"] and kwargs["environ_update"] == {"LC_ALL": "C"}
        if args[2] == "vllm-glm52.service":
            return 0, STARTING, ""
        polls = sum(1 for a in self.calls if a[2] == "vllm-kimik3.service")
        return 0, self.kimik3 if polls >= self.after else STARTING.replace("glm52", "kimik3"), ""


def run_waiting(vllm: FakeVllm, units: Units) -> tuple[dict[str, Any], list[float]]:
    polls: list[float] = []
    with mock.patch.object(service_check, "_sleep", side_effect=polls.append):
        result = harness.run_module(
            service_check.main,
            {
                "url": vllm.url,
                "name": "glm52",
                "wait_timeout": 900,
                "check_prefix_cache": False,
                "units": ["vllm-glm52.service", "vllm-kimik3.service"],
            },
            run_command=units,
            get_bin_path="/usr/bin/systemctl",
        ).result
    return result, polls


def test_an_instance_whose_process_exited_ends_the_wait_at_once(vllm: FakeVllm) -> None:
    """A GPU lost while the instances start: kimik3's process is gone, glm52 never answers. The wait
    ends at the poll that sees it (it used to wait out the 900 s), naming the unit and why."""
    vllm.health = 503
    result, polls = run_waiting(vllm, Units(FAILED))
    assert result["failed"] is True and polls == [2.0]
    check = result["checks"][0]
    assert check["name"] == "service.health[glm52]" and check["ok"] is False
    assert check["value"] == "vllm-kimik3.service failed (Result=exit-code): its process exited with status 1"
    assert (
        "stopped waiting after" in check["message"]
        and "journalctl -u vllm-kimik3.service" in check["message"]
    )


def test_a_unit_waiting_to_restart_ends_the_wait_too(vllm: FakeVllm) -> None:
    vllm.health = 503
    result, _ = run_waiting(vllm, Units(AUTO_RESTART, after=3))
    assert result["checks"][0]["value"].startswith("vllm-kimik3.service is waiting to restart")


def test_starting_units_are_waited_for_until_healthy(vllm: FakeVllm) -> None:
    vllm.health = 503
    units = Units(STARTING.replace("glm52", "kimik3"))
    polls: list[float] = []
    with mock.patch.object(service_check, "_sleep", side_effect=healthy_after(vllm, 4, polls)):
        result = harness.run_module(
            service_check.main,
            {
                "url": vllm.url,
                "wait_timeout": 900,
                "check_prefix_cache": False,
                "units": ["vllm-kimik3.service"],
            },
            run_command=units,
            get_bin_path="/usr/bin/systemctl",
        ).result
    assert "failed" not in result and len(polls) == 4 and len(units.calls) == 4
