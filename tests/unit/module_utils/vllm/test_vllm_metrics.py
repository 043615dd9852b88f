"""vLLM /metrics parsing and the prefix-cache hit rate, on both real captures, table-driven edges and
the vLLM stand-in's 0.11 exposition."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.vllm import vllm_metrics as vm
from gpufleet_sim import build, state
from gpufleet_sim.tools import vllm_engine, vllm_exposition

from tests.unit.sim.test_vllm_standin import config as standin_config
from tests.unit.sim.test_vllm_standin import uuids as standin_gpus

FOXHOP = "vllm-metrics/foxhop-4090-qwen3.6-27b-trimmed-cache-lines.prom"
RH = "vllm-metrics/rh-workshop-llama-vllm-single-metrics-grep-vllm-head40.prom"


def test_foxhop_capture(read_fixture: Any) -> None:
    metrics = vm.parse_prometheus(read_fixture(FOXHOP))
    assert len(metrics["samples"]) == 6
    assert metrics["types"]["vllm:prefix_cache_queries_total"] == "counter"
    cache = vm.prefix_cache(metrics)
    assert cache["queries"] == 1.0931263819e10
    assert cache["hits"] == 6.3046928e08
    assert cache["hit_rate"] == pytest.approx(630469280 / 10931263819)
    assert round(cache["hit_rate"], 4) == 0.0577  # a cliff: below any sensible floor
    assert cache["source"] == "vllm:prefix_cache_queries_total"
    assert cache["models"] == ["Lorbus/Qwen3.6-27B-int4-AutoRound"]
    # The _created gauges are unix timestamps, not counts: never summed into the counters.
    created = [s for s in metrics["samples"] if s["name"] == "vllm:prefix_cache_queries_created"]
    assert created[0]["value"] == pytest.approx(1.7869106011177013e09)
    config = vm.cache_config(metrics)
    assert config == {
        "block_size": "1568",
        "cache_dtype": "fp8",
        "enable_prefix_caching": "True",
        "engine": "0",
        "kv_cache_size_tokens": "66901",
        "num_gpu_blocks": "49",
    }


def test_rh_capture_without_traffic(read_fixture: Any) -> None:
    metrics = vm.parse_prometheus(read_fixture(RH))
    names = [s["name"] for s in metrics["samples"]]
    assert names[:3] == ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"]
    assert len(metrics["samples"]) == 13  # the capture ends in a lone # HELP cut by `head`
    running = metrics["samples"][0]
    assert running == {
        "name": "vllm:num_requests_running",
        "labels": {"engine": "0", "model_name": "llama-vllm-single"},
        "value": 0.0,
    }
    cache = vm.prefix_cache(metrics)
    assert (cache["queries"], cache["hits"], cache["hit_rate"]) == (0.0, 0.0, None)
    assert cache["models"] == ["llama-vllm-single"]
    assert vm.cache_config(metrics) is None
    # Filtering by a model the server does not have finds nothing.
    assert vm.prefix_cache(metrics, model_name="other")["source"] is None


def test_model_filter(read_fixture: Any) -> None:
    both = read_fixture(FOXHOP) + read_fixture(RH)
    metrics = vm.parse_prometheus(both)
    everything = vm.prefix_cache(metrics)
    assert everything["queries"] == 1.0931263819e10  # the RH series add 0
    assert everything["models"] == ["Lorbus/Qwen3.6-27B-int4-AutoRound", "llama-vllm-single"]
    one = vm.prefix_cache(metrics, model_name="llama-vllm-single")
    assert (one["queries"], one["hit_rate"]) == (0.0, None)


def text(*lines: str) -> str:
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("body", "queries", "hits", "rate", "source"),
    [
        # Two engines (data parallel): summed.
        (
            text(
                'vllm:prefix_cache_queries_total{engine="0",model_name="glm"} 1000',
                'vllm:prefix_cache_queries_total{engine="1",model_name="glm"} 3000',
                'vllm:prefix_cache_hits_total{engine="0",model_name="glm"} 900',
                'vllm:prefix_cache_hits_total{engine="1",model_name="glm"} 2700',
            ),
            4000.0,
            3600.0,
            0.9,
            "vllm:prefix_cache_queries_total",
        ),
        # vLLM 0.8-0.9 names.
        (
            text(
                'vllm:gpu_prefix_cache_queries_total{model_name="glm"} 200',
                'vllm:gpu_prefix_cache_hits_total{model_name="glm"} 14',
            ),
            200.0,
            14.0,
            0.07,
            "vllm:gpu_prefix_cache_queries_total",
        ),
        # vLLM V0: only the hit-rate gauge.
        (
            text(
                "# TYPE vllm:gpu_prefix_cache_hit_rate gauge",
                'vllm:gpu_prefix_cache_hit_rate{model_name="glm"} 0.91',
            ),
            None,
            None,
            0.91,
            "vllm:gpu_prefix_cache_hit_rate",
        ),
        # Counters win over the gauge when a server exports both.
        (
            text(
                'vllm:gpu_prefix_cache_hit_rate{model_name="glm"} 0.91',
                'vllm:prefix_cache_queries_total{model_name="glm"} 100',
                'vllm:prefix_cache_hits_total{model_name="glm"} 7',
            ),
            100.0,
            7.0,
            0.07,
            "vllm:prefix_cache_queries_total",
        ),
        # Not vLLM at all.
        (text("process_cpu_seconds_total 12.5"), None, None, None, None),
    ],
)
def test_prefix_cache_sources(
    body: str, queries: float | None, hits: float | None, rate: float | None, source: str | None
) -> None:
    cache = vm.prefix_cache(vm.parse_prometheus(body))
    assert (cache["queries"], cache["hits"], cache["source"]) == (queries, hits, source)
    assert cache["hit_rate"] == (None if rate is None else pytest.approx(rate))


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ((1000, 900), (3000, 1040), {"queries": 2000, "hits": 140, "hit_rate": 0.07, "reset": False}),
        ((1000, 900), (1000, 900), {"queries": 0, "hits": 0, "hit_rate": None, "reset": False}),
        # The server restarted between the scrapes: the second scrape is all there is.
        ((5000, 4500), (400, 360), {"queries": 400, "hits": 360, "hit_rate": 0.9, "reset": True}),
    ],
)
def test_hit_rate_between(
    before: tuple[float, float], after: tuple[float, float], expected: dict[str, Any]
) -> None:
    def scrape(q: float, h: float) -> dict[str, Any]:
        return {"queries": float(q), "hits": float(h), "hit_rate": h / q, "source": vm.QUERIES[0]}

    got = vm.hit_rate_between(scrape(*before), scrape(*after))
    assert got["reset"] is expected["reset"]
    assert (got["queries"], got["hits"]) == (expected["queries"], expected["hits"])
    assert got["hit_rate"] == (None if expected["hit_rate"] is None else pytest.approx(expected["hit_rate"]))


def test_hit_rate_between_gauge_uses_the_latest() -> None:
    gauge = {"queries": None, "hits": None, "hit_rate": 0.4, "source": vm.GAUGE}
    assert vm.hit_rate_between(gauge, gauge)["hit_rate"] == 0.4


def test_values_labels_and_timestamps() -> None:
    metrics = vm.parse_prometheus(
        text(
            'a_bucket{le="+Inf",path="/v1/\\"x\\"\\\\y"} 3 1712345678000',
            "b +Inf",
            "c NaN",
            'd{le="0.5",} -1.5e-3',
            "   ",
            "# a comment that is not HELP or TYPE",
        )
    )
    a, b, c, d = metrics["samples"]
    assert a["labels"] == {"le": "+Inf", "path": '/v1/"x"\\y'} and a["value"] == 3.0
    assert b["value"] == math.inf and math.isnan(c["value"])
    assert d == {"name": "d", "labels": {"le": "0.5"}, "value": -0.0015}


@pytest.mark.parametrize(
    "body",
    ["", "   \n", "<html>502 Bad Gateway</html>\n", 'x{a="1} 2\n', "x 12abc\n", "# HELP only comments\n"],
)
def test_not_prometheus(body: str) -> None:
    with pytest.raises(vm.MetricsError):
        vm.parse_prometheus(body)


def standin_scrape(tmp_path: Path, accept: str | None) -> str:
    """What the vLLM stand-in (vLLM 0.11's exposition: histograms, no V0 gauge) serves after traffic."""
    state.save(tmp_path, build.build_node_state("node01", "b300-16", 1))
    engine = vllm_engine.Engine(tmp_path, standin_config(), standin_gpus(tmp_path, 0))
    for _ in range(10):
        engine.complete(["p" * 400], 2)
    return vllm_exposition.render(engine, accept)[0]


@pytest.mark.parametrize("accept", [None, "application/openmetrics-text"])
def test_a_0_11_scrape_without_the_v0_gauge_gives_the_hit_rate_from_the_counters(
    tmp_path: Path, accept: str | None
) -> None:
    body = standin_scrape(tmp_path, accept)
    assert vm.GAUGE not in body and "vllm:e2e_request_latency_seconds_bucket{" in body
    metrics = vm.parse_prometheus(body)
    cache = vm.prefix_cache(metrics)
    assert (cache["queries"], cache["hits"], cache["source"]) == (1000.0, 900.0, vm.QUERIES[0])
    assert cache["hit_rate"] == pytest.approx(0.9) and cache["models"] == ["glm52"]
    assert vm.cache_config(metrics)["enable_prefix_caching"] == "True"  # type: ignore[index]
