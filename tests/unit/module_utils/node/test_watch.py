"""module_utils/node/watch.py: the watch sample on real captures; a power cap in waves seen in one of
the samples taken every second wherever it falls in the window; a reason that came and went between
samples seen by its counter; the vLLM window's hit rate and what the instance served; fail-closed
reads."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_judge, nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.node import watch
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.thermal_verdict import LOAD_LIMITS
from ansible_collections.gpufleet.node.plugins.module_utils.vllm import vllm_metrics

from tests.unit.mutations import read_capture

H100_LOAD = "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-load-query-gpu.csv"
H200_LOAD = "nvidia-smi-csv/utku-h200-590.48.01-load-query-gpu.csv"
RH = "vllm-metrics/rh-workshop-llama-vllm-single-metrics-grep-vllm-head40.prom"
FOXHOP = "vllm-metrics/foxhop-4090-qwen3.6-27b-trimmed-cache-lines.prom"
UUID = "GPU-5d3f0000-0000-0000-0000-000000000001"


def _watch_row(capture: str) -> str:
    """The capture's one GPU row cut to the watch query's fields, as nvidia-smi prints it with units."""
    rows = list(csv.reader(io.StringIO(capture), skipinitialspace=True))
    values = dict(zip((nvidia_smi._csv_field_name(h) for h in rows[0]), rows[1], strict=True))
    values["clocks.sm"] = values["clocks.current.sm"]  # the capture asked for the long name
    return ", ".join(values[f] for f in nvidia_smi.WATCH_FIELDS) + "\n"


@pytest.mark.parametrize(
    ("capture", "power", "requested"), [(H100_LOAD, 631.95, 700.0), (H200_LOAD, None, 700.0)]
)
def test_watch_sample_reads_the_real_captures(
    read_fixture: Any, capture: str, power: Any, requested: float
) -> None:
    [gpu] = nvidia_smi.parse_watch_sample(_watch_row(read_fixture(capture)))
    assert gpu["requested_limit_w"] == requested and gpu["enforced_limit_w"] == requested
    assert gpu["reason_us"] == dict.fromkeys(nvidia_smi.REASON_COUNTERS, 0)
    assert gpu["reasons"] is not None and "sw_power_cap" not in gpu["reasons"]
    if power is not None:
        assert gpu["power_w"] == power


def test_watch_sample_refuses_a_cut_row() -> None:
    with pytest.raises(nvidia_smi.ParseError, match="nvidia-smi"):
        nvidia_smi.parse_watch_sample("GPU-1, 0, 40\n")


def sample(
    enforced: float = 1400.0, reasons: str = "0x0", cap_us: int = 0, brake_us: int = 0, temp: int = 60
) -> str:
    counters = {"sw_power_cap": cap_us, "hw_power_brake_slowdown": brake_us}
    cells = [UUID, "0", str(temp), "70", "20", reasons, "80", "1200.5", "1900", "1400.00", f"{enforced:.2f}"]
    cells += [str(counters.get(name, 0)) for name in nvidia_smi.REASON_COUNTERS]
    return ", ".join(cells) + "\n"


def summarize(*texts: str) -> dict[str, Any]:
    [gpu] = watch.summarize_gpus([nvidia_smi.parse_watch_sample(t) for t in texts])
    return gpu


def test_a_cap_in_waves_is_seen_in_the_middle_sample_and_named_with_its_cause() -> None:
    gpu = summarize(sample(), sample(1100.0, "0x4", 1_000_000), sample(1400.0, "0x0", 2_600_000))
    check = gpu_judge.power_check(gpu, 5.2)
    assert check["name"] == f"gpu_power.enforced_limit_w[{UUID}]"
    assert (check["ok"], check["value"], check["limit"], check["unit"]) == (False, 1100.0, 1400.0, "W")
    assert "in 1 of 3 samples over 5.2 s; power-capped 2.6 s of 5.2 s" in check["message"]
    assert "the rack's power budget (a PDU protection or power brake)" in check["message"]
    fact = watch.gpu_fact(gpu)
    assert fact["power_limit_w"] == {"requested": 1400.0, "enforced": 1100.0}
    assert fact["throttle_active"]["sw_power_cap"] == 1
    assert fact["throttle_seconds_total"]["sw_power_cap"] == 2.6


def test_the_requested_limit_enforced_all_window_passes() -> None:
    check = gpu_judge.power_check(summarize(sample(), sample(), sample()), 5.0)
    assert check["ok"] and check["message"] == f"{UUID} enforces its requested 1400 W"


def test_a_power_brake_between_samples_fails_by_its_counter() -> None:
    gpu = summarize(sample(), sample(), sample(brake_us=400_000))
    assert gpu["reasons"] == ["hw_power_brake_slowdown"]
    [reasons] = [c for c in watch.gpu_checks([gpu], LOAD_LIMITS) if c["name"].startswith("thermal.clocks")]
    assert not reasons["ok"] and reasons["value"] == ["hw_power_brake_slowdown"]
    assert watch.gpu_fact(gpu)["throttle_active"]["hw_power_brake_slowdown"] == 1


def test_the_hottest_sample_is_judged() -> None:
    gpu = summarize(sample(temp=60), sample(temp=88), sample(temp=61))
    [temp] = [c for c in watch.gpu_checks([gpu], LOAD_LIMITS) if c["name"].startswith("thermal.gpu_temp")]
    assert (temp["ok"], temp["value"], temp["limit"]) == (False, 88, 83.0)


def test_unreported_limits_fail_closed() -> None:
    text = sample().replace("1400.00, 1400.00", "[N/A], [N/A]")
    check = gpu_judge.power_check(summarize(text, text), 5.0)
    assert not check["ok"] and "fail closed" in check["message"]


# ---------------------------------------------------------------- vLLM


def metrics(queries: float, hits: float, tokens: float, running: float = 4) -> dict[str, Any]:
    return vllm_metrics.parse_prometheus(
        f"vllm:prefix_cache_queries_total {queries}\nvllm:prefix_cache_hits_total {hits}\n"
        f"vllm:generation_tokens_total {tokens}\nvllm:num_requests_running {running}\n"
        "vllm:num_requests_waiting 1\nvllm:num_preemptions_total 0\nvllm:kv_cache_usage_perc 0.25\n"
    )


class FakeClient:
    def __init__(self, scrapes: list[Any], health: tuple[Any, str] = (200, "")) -> None:
        self.scrapes, self.health = scrapes, health

    def get(self, path: str) -> tuple[Any, str]:
        if path == "/health":
            return self.health
        return 200, self.scrapes.pop(0)


def text(m: dict[str, Any]) -> str:
    return "".join(f"{s['name']} {s['value']}\n" for s in m["samples"])


def test_a_collapsed_hit_rate_in_the_window_is_named_with_its_likely_cause() -> None:
    # lifetime 0.89; in the window 70 of 1000 queried tokens hit
    client = FakeClient([text(metrics(100000, 89000, 5000)), text(metrics(101000, 89070, 5600))])
    instance = watch.InstanceWatch("glm52", "http://node01:8000", 0.5, client=client)
    instance.start()
    (health, cache), fact = instance.stop(5.0)
    assert health["ok"] and health["name"] == "service.health[glm52]"
    assert cache["name"] == "service.prefix_cache_hit_rate[glm52]"
    assert (cache["ok"], cache["value"], cache["limit"]) == (False, 0.07, 0.5)
    assert (
        "session id" in cache["message"]
        and "over 1000 queried tokens over 5 s of serving" in cache["message"]
    )
    assert fact["prefix_cache_hit_ratio"] == 0.07 and fact["generation_tokens_per_second"] == 120.0
    assert (fact["requests_running"], fact["requests_waiting"], fact["kv_cache_usage_ratio"]) == (4, 1, 0.25)


def test_an_idle_instance_has_no_hit_rate_to_judge() -> None:
    same = text(metrics(100, 90, 10, running=0))
    instance = watch.InstanceWatch("a", "http://x:1", 0.5, client=FakeClient([same, same]))
    instance.start()
    (_health, cache), fact = instance.stop(5.0)
    assert cache["ok"] and cache["value"] is None and "served no prompt" in cache["message"]
    assert fact["prefix_cache_hit_ratio"] is None


def test_a_down_instance_fails_health_and_its_hit_rate_closed() -> None:
    instance = watch.InstanceWatch(
        "a", "http://x:1", 0.5, client=FakeClient([None], health=(None, "refused"))
    )
    instance.client.scrapes = []
    instance.before = None
    (health, cache), fact = instance.stop(5.0)
    assert not health["ok"] and health["value"] == "refused"
    assert not cache["ok"] and "it is down" in cache["message"]
    assert fact["up"] == 0


@pytest.mark.parametrize("capture", [RH, FOXHOP])
def test_serving_reads_both_real_captures(read_fixture: Any, capture: str) -> None:
    scraped = vllm_metrics.parse_prometheus(read_fixture(capture))
    served = vllm_metrics.serving(scraped, scraped, 5.0)
    assert served["kv_cache_usage_ratio"] == 0.0
    if capture == RH:
        assert served["generation_tokens_per_second"] == 0.0 and served["requests_running"] == 0.0
    else:  # the trimmed capture kept only the cache lines
        assert served["generation_tokens_per_second"] is None and served["requests_running"] is None


def test_serving_reads_the_v0_names() -> None:
    before = vllm_metrics.parse_prometheus("vllm:num_preemptions 3\nvllm:gpu_cache_usage_perc 0.5\n")
    after = vllm_metrics.parse_prometheus("vllm:num_preemptions 13\nvllm:gpu_cache_usage_perc 0.75\n")
    served = vllm_metrics.serving(before, after, 5.0)
    assert served["preemptions_per_second"] == 2.0 and served["kv_cache_usage_ratio"] == 0.75


# ---------------------------------------------------------------- the window


class FakeNode:
    """A node whose nvidia-smi answers from a clock the watch's sleeps and reads move: each read takes
    ``read_s`` and reports the enforced limit at its middle, capped to 1100 W where ``capped(t)``."""

    def __init__(self, capped: Any, read_s: float = 0.05, fail_at: int | None = None) -> None:
        self.now, self.capped, self.read_s, self.fail_at = 0.0, capped, read_s, fail_at
        self.reads: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def run_command(self, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert argv == nvidia_smi.watch_query("nvidia-smi")
        at = self.now + self.read_s / 2
        self.now += self.read_s
        self.reads.append(at)
        if self.fail_at is not None and len(self.reads) > self.fail_at:
            return 9, "", "NVIDIA-SMI has failed"
        return 0, sample(1100.0 if self.capped(at) else 1400.0, "0x4" if self.capped(at) else "0x0"), ""

    def watch(self, window_s: float = 5.0, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        w = watch.Watch(
            self.run_command,
            "nvidia-smi",
            window_s,
            LOAD_LIMITS,
            [],
            [],
            clock=self.clock,
            sleep=self.sleep,
            **kwargs,
        )
        return w.run()


def power(checks: list[dict[str, Any]]) -> dict[str, Any]:
    [found] = [c for c in checks if c["name"] == f"gpu_power.enforced_limit_w[{UUID}]"]
    return found


def pdu_wave(phase: float, capped_s: float = 5.0, period_s: float = 10.0) -> Any:
    """The simulator's pdu-cap-in-service: capped ``capped_s`` of every ``period_s``, from ``phase``."""
    return lambda t: (t - phase) % period_s < capped_s


def test_a_cap_between_the_old_three_samples_is_seen() -> None:
    """Capped from 0.6 to 2.1 s and 3.1 to 4.4 s of a 5 s window: the start, middle and end samples
    (0, 2.5, 5 s) all read the requested limit; one a second reads the cap."""
    node = FakeNode(lambda t: 0.6 <= t < 2.1 or 3.1 <= t < 4.4)
    checks, fact = node.watch()
    assert not any(node.capped(t) for t in (0.0, 2.5, 5.0))
    capped = power(checks)
    assert (capped["ok"], capped["value"], capped["limit"]) == (False, 1100.0, 1400.0)
    assert f"in 3 of {fact['gpu_samples']} samples" in capped["message"], capped["message"]
    assert fact["gpu_samples"] == len(node.reads) == 6 and fact["sample_gap_s"] == 1.05
    assert fact["gpus"][0]["power_limit_w"] == {"requested": 1400.0, "enforced": 1100.0}


@pytest.mark.parametrize("read_s", [0.035, 0.8, 1.6])
@pytest.mark.parametrize("phase", [p / 4 for p in range(40)])
def test_a_pdu_cap_in_waves_is_never_missed_wherever_it_falls(phase: float, read_s: float) -> None:
    """The PDU's waves (5 s capped of 10 s) at every phase against a 5 s window, with reads as fast
    as a real node's and as slow as a loaded controller's simulated nodes: always a capped sample,
    and the span the samples leave unseen is reported and shorter than the capped half."""
    node = FakeNode(pdu_wave(phase), read_s=read_s)
    checks, fact = node.watch()
    assert power(checks)["ok"] is False, (phase, node.reads)
    assert fact["sample_gap_s"] < 5.0 and fact["window_s"] >= 5.0


def test_the_requested_limit_held_all_window_passes_naming_how_densely_it_was_seen() -> None:
    node = FakeNode(lambda t: False)
    checks, fact = node.watch(sample_interval_s=0.5)
    ok = power(checks)
    assert ok["ok"] is True and fact["gpu_samples"] == len(node.reads) == 11
    assert (
        ok["message"]
        == f"{UUID} enforces its requested 1400 W in all 11 samples over 5 s, at most 0.55 s apart"
    )


def test_a_cap_shorter_than_the_samples_gap_can_only_be_reported_not_promised() -> None:
    """What the gap means: a 0.3 s cap between two reads a second apart is not seen, and the reading
    says the samples were up to 1.05 s apart (the reason counters then count its power cap)."""
    node = FakeNode(lambda t: 1.3 <= t < 1.6)
    checks, fact = node.watch()
    assert power(checks)["ok"] is True and fact["sample_gap_s"] == 1.05


def gap(checks: list[dict[str, Any]]) -> dict[str, Any]:
    [found] = [c for c in checks if c["name"] == "watch.gpu_sample_gap"]
    return found


@pytest.mark.parametrize("read_s", [0.035, 0.8, 2.4])
def test_samples_close_enough_pass_the_gap_check(read_s: float) -> None:
    checks, fact = FakeNode(lambda t: False, read_s=read_s).watch()
    found = gap(checks)
    assert found["ok"] is True and found["value"] == fact["sample_gap_s"] <= 5.0
    assert (found["limit"], found["unit"]) == (5.0, "s")


def test_samples_too_far_apart_fail_closed_naming_the_slow_reads() -> None:
    """A node whose nvidia-smi takes 3 s per read: two reads span 6 s, more than the 5 s cap the watch
    must see, so a healthy-looking window is not called ok for its power caps."""
    checks, fact = FakeNode(lambda t: False, read_s=3.0).watch()
    found = gap(checks)
    assert (found["ok"], found["value"], found["limit"]) == (False, 6.0, 5.0)
    assert "the slowest read took 3.00 s" in found["message"] and "fail closed" in found["message"]
    assert "watch_max_sample_gap_s" in found["message"]
    assert power(checks)["ok"] is True and fact["sample_gap_s"] == 6.0
    # the operator's own bound, when the node is known to answer slowly
    checks, _fact = FakeNode(lambda t: False, read_s=3.0).watch(max_sample_gap_s=7.0)
    assert gap(checks)["ok"] is True


class SlowInstance:
    """A vLLM instance whose first scrape takes ``open_s`` of the node's clock (a loaded host)."""

    def __init__(self, node: FakeNode, open_s: float) -> None:
        self.node, self.open_s = node, open_s

    def start(self) -> None:
        self.node.now += self.open_s

    def stop(self, seconds: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return [], {"name": "slow", "seconds": seconds}


def test_slow_ports_or_instances_opening_do_not_widen_the_gpu_samples_gap() -> None:
    """Opening the ports and instances took 4.5 s (two /metrics scrapes on a starved host): the GPU
    samples begin once they are open, so the samples stay ~1 s apart (before: the first sample was
    taken, then the 4.5 s opening, then the second: a 5.6 s gap failed a healthy node), the GPUs are
    still watched for the whole 5 s window, and what the instances served is counted over the span
    they were open."""
    node = FakeNode(lambda t: False)
    w = watch.Watch(
        node.run_command,
        "nvidia-smi",
        5.0,
        LOAD_LIMITS,
        [],
        [SlowInstance(node, 4.5)],
        clock=node.clock,
        sleep=node.sleep,
    )
    checks, fact = w.run()
    assert gap(checks)["ok"] is True and fact["sample_gap_s"] == 1.05, fact["sample_gap_s"]
    assert node.reads[0] >= 4.5 and node.reads[-1] - node.reads[0] == 5.0 and fact["gpu_samples"] == 6
    assert fact["instances"] == [{"name": "slow", "seconds": 9.6}] and fact["window_s"] == 9.6


def test_the_window_fails_closed_on_a_tool_error_and_stops_reading() -> None:
    node = FakeNode(lambda t: False, fail_at=2)
    checks, fact = node.watch()
    assert [c["name"] for c in checks] == ["watch.gpus"]
    assert not checks[0]["ok"] and "NVIDIA-SMI has failed" in checks[0]["message"]
    # no read after the failed one, and the window still lasted its 5 s (RoCE and vLLM are read over it)
    assert len(node.reads) == 3 and fact["window_s"] == 5.0
    assert fact["gpus"] == []


def test_sample_gap_is_the_largest_span_from_a_read_s_start_to_the_next_one_s_end() -> None:
    assert watch.sample_gap([(0.0, 0.1), (1.0, 1.1), (2.0, 3.5)]) == 3.5 - 1.0
    assert watch.sample_gap([(0.0, 0.1)]) is None
    assert watch.gap_check([(0.0, 0.1)], 5.0)["ok"] is False


def test_pcie_replays_rising_over_the_window_are_named_and_published() -> None:
    """The real H200's -q -x read when the window opens (replay_counter 0) and when it closes (40):
    40 replays in 5 s, above a minute's worth (8), fail naming the GPU; the fact carries the rise."""
    first = read_capture("h200-device/nvidia-smi-q-x-idle.xml")
    assert "<replay_counter>0<" in first
    reads = [first, first.replace("<replay_counter>0<", "<replay_counter>40<")]

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert argv == ["nvidia-smi", "-q", "-x"], argv
        return 0, reads.pop(0), ""

    w = watch.Watch(run_command, "nvidia-smi", 5.0, {}, [], [], health={"nvlink": False})
    found, fact = w._health(w._health_start(), 5.0)
    uuid = "GPU-2e6e9300-13a8-2712-b2c8-503aade81b40"
    replays = next(c for c in found if c["name"] == f"health.pcie_replays[{uuid}]")
    assert (replays["ok"], replays["value"], replays["limit"]) == (False, 40, 8)
    assert "during the watch window (5 s)" in replays["message"]
    assert fact["gpus"][0]["pcie_replays_window"] == 40 and reads == []


def test_a_start_reading_that_failed_fails_the_watch_health_closed() -> None:
    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return 9, "", "NVIDIA-SMI has failed"

    w = watch.Watch(run_command, "nvidia-smi", 5.0, {}, [], [], health={"nvlink": False})
    (failed,), fact = w._health(w._health_start(), 5.0)
    assert (failed["name"], failed["ok"], fact) == ("watch.health", False, None)
    assert "when the window opened" in failed["message"]
