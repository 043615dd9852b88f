"""Burn-in pieces: the nvidia-smi sample, limits, the watch, the load threads and the loop.

Samples come from the simulator's fake nvidia-smi (the real CSV format, a b300-16 node) and
from the real H100 captures; the load goes to FakeVllm, an OpenAI-compatible server on
127.0.0.1 started by the test, which also serves vLLM's /metrics names.
"""

from __future__ import annotations

import copy
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.core import results
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    decode_reasons,
    parse_query_csv,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import burn_in as bi
from gpufleet_sim import build, state
from gpufleet_sim.tools import nvidia_smi

from tests.unit.fake_clock import FakeClock
from tests.unit.local_server import LocalServer

LOAD_CSV = "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-load-query-gpu.csv"
IDLE_CSV = "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv"
SMI = "/usr/bin/nvidia-smi"


class FakeVllm(LocalServer):
    """/health, /v1/models, /v1/completions and /metrics of one instance, on 127.0.0.1."""

    def __init__(self, model: str = "GLM-5.2-NVFP4", hit_rate: float = 0.9) -> None:
        self.model = model
        self.hit_rate = hit_rate
        self.health = 200
        self.completion_status = 200
        self.delay = 0.0
        self.queries = 0.0
        self.hits = 0.0
        self.metrics_text: str | Callable[[], str] | None = None
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        vllm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with vllm.lock:
                    vllm.paths.append(self.path)
                if self.path == "/health":
                    return self._send(vllm.health, b"")
                if self.path == "/v1/models":
                    doc = {
                        "object": "list",
                        "data": [{"id": vllm.model, "object": "model"}] if vllm.model else [],
                    }
                    return self._send(200, json.dumps(doc).encode())
                if self.path == "/metrics":
                    return self._send(200, vllm.metrics().encode(), "text/plain; version=0.0.4")
                return self._send(404, b'{"detail":"Not Found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with vllm.lock:
                    vllm.paths.append(self.path)
                    vllm.bodies.append(body)
                if vllm.delay:
                    time.sleep(vllm.delay)
                if self.path != "/v1/completions" or vllm.completion_status != 200:
                    return self._send(
                        vllm.completion_status if self.path == "/v1/completions" else 404, b"{}"
                    )
                with vllm.lock:
                    vllm.queries += 100
                    vllm.hits += 100 * vllm.hit_rate
                doc = {"object": "text_completion", "choices": [{"text": " ok" * body["max_tokens"]}]}
                return self._send(200, json.dumps(doc).encode())

        self.serve(Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def metrics(self) -> str:
        if callable(self.metrics_text):
            return self.metrics_text()
        if self.metrics_text is not None:
            return self.metrics_text
        labels = f'engine="0",model_name="{self.model}"'
        with self.lock:
            return (
                "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of "
                "queried tokens.\n"
                "# TYPE vllm:prefix_cache_queries_total counter\n"
                f"vllm:prefix_cache_queries_total{{{labels}}} {self.queries:.1f}\n"
                "# TYPE vllm:prefix_cache_hits_total counter\n"
                f"vllm:prefix_cache_hits_total{{{labels}}} {self.hits:.1f}\n"
                'vllm:cache_config_info{block_size="16",enable_prefix_caching="True",engine="0"} 1.0\n'
            )

    def completions(self) -> int:
        return sum(1 for p in self.paths if p == "/v1/completions")


@pytest.fixture
def vllm() -> Iterator[FakeVllm]:
    with FakeVllm() as server:
        yield server


def sim_sample(tmp_path: Path, change: Callable[[state.State], None] | None = None) -> str:
    """What the simulator's nvidia-smi prints for the burn-in query on a b300-16 node."""
    node = tmp_path / "node"
    node.mkdir(exist_ok=True)
    node_state = build.build_node_state("node01", "b300-16", 1)
    if change:
        change(node_state)
    state.save(node, node_state)
    out = io.StringIO()
    with redirect_stdout(out):
        rc = nvidia_smi.main(bi.query_argv(SMI)[1:], node)
    assert rc == 0, out.getvalue()
    return out.getvalue()


# ---------------------------------------------------------------- sampling


def test_query_argv() -> None:
    assert bi.query_argv(SMI) == [
        SMI,
        "--query-gpu=uuid,index,temperature.gpu,temperature.memory,temperature.gpu.tlimit,"
        "clocks_event_reasons.active,utilization.gpu,power.draw,clocks.sm",
        "--format=csv,noheader,nounits",
    ]


@pytest.mark.parametrize(
    ("mask", "expected"),
    [
        ("0x0000000000000000", []),
        ("0x0000000000000001", ["gpu_idle"]),  # the real idle H100 capture
        ("0x0000000000000004", ["sw_power_cap"]),
        ("0x0000000000000088", ["hw_slowdown", "hw_power_brake_slowdown"]),
        ("0x0000000000000060", ["hw_thermal_slowdown", "sw_thermal_slowdown"]),
        # every supported bit: each of NVML's nine reasons, in nvidia-smi's order (results.py's table)
        ("0x00000000000001FF", list(results.CLOCK_EVENT_REASONS)),
        (0x20, ["sw_thermal_slowdown"]),
        ("[N/A]", None),
        (None, None),
    ],
)
def test_decode_reasons(mask: Any, expected: list[str] | None) -> None:
    assert decode_reasons(mask) == expected


@pytest.mark.parametrize(("capture", "reasons"), [(IDLE_CSV, ["gpu_idle"]), (LOAD_CSV, [])])
def test_real_capture_values_through_the_burn_in_fields(
    read_fixture: Any, capture: str, reasons: list[str]
) -> None:
    """The real H100 row, cut to the burn-in's fields and printed noheader,nounits as nvidia-smi would."""
    row = parse_query_csv(read_fixture(capture))[0]
    header = read_fixture(capture).splitlines()[0].split(", ")
    raw = dict(zip(header, read_fixture(capture).splitlines()[1].split(", "), strict=True))
    units = {
        "power.draw [W]": "power.draw",
        "utilization.gpu [%]": "utilization.gpu",
        "clocks.current.sm [MHz]": "clocks.sm",
    }
    values = {units.get(k, k): v.split(" ")[0] for k, v in raw.items()}
    line = ", ".join(values[f] for f in bi.QUERY_FIELDS)
    (gpu,) = bi.parse_sample(line + "\n")
    assert gpu["uuid"] == row["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert (gpu["gpu_c"], gpu["memory_c"], gpu["tlimit_c"]) == (
        row["temperature.gpu"],
        row["temperature.memory"],
        row["temperature.gpu.tlimit"],
    )
    assert gpu["reasons"] == reasons
    assert gpu["utilization_pct"] == row["utilization.gpu"]
    if capture == LOAD_CSV:
        assert (gpu["gpu_c"], gpu["memory_c"], gpu["tlimit_c"], gpu["power_w"], gpu["sm_mhz"]) == (
            59,
            54,
            26,
            631.95,
            1980,
        )
        assert bi.violations(gpu, bi.DEFAULT_LIMITS) == []


def test_simulated_b300_sample(tmp_path: Path) -> None:
    gpus = bi.parse_sample(sim_sample(tmp_path))
    assert len(gpus) == 16 and len({g["uuid"] for g in gpus}) == 16
    assert [g["index"] for g in gpus] == list(range(16))
    first = gpus[0]
    assert (first["gpu_c"], first["memory_c"], first["tlimit_c"]) == (31, 36, 54)  # 85 C max operating - 31
    assert first["reasons"] == ["gpu_idle"]
    assert all(bi.violations(g, bi.DEFAULT_LIMITS) == [] for g in gpus)


def test_simulated_throttling_is_seen(tmp_path: Path) -> None:
    def hot(node: state.State) -> None:
        node["gpus"][5]["clocks_event_reasons"] = ["sw_thermal_slowdown"]

    gpus = bi.parse_sample(sim_sample(tmp_path, hot))
    assert gpus[5]["reasons"] == ["sw_thermal_slowdown"]
    assert bi.violations(gpus[5], bi.DEFAULT_LIMITS) == [
        {"reading": "clocks_event_reasons", "value": ["sw_thermal_slowdown"], "limit": []}
    ]


@pytest.mark.parametrize(
    "text", ["", "GPU-1, 0, 40\n", "NVIDIA-SMI has failed because it couldn't communicate\n"]
)
def test_unreadable_sample(text: str) -> None:
    with pytest.raises(bi.SampleError):
        bi.parse_sample(text)


def reading(**change: Any) -> dict[str, Any]:
    gpu = {
        "uuid": "GPU-1",
        "index": 0,
        "gpu_c": 65,
        "memory_c": 74,
        "tlimit_c": 20,
        "reasons": [],
        "utilization_pct": 90,
        "power_w": 1300.0,
        "sm_mhz": 1965,
    }
    gpu.update(change)
    return gpu


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, []),
        ({"gpu_c": 84}, [{"reading": "temperature.gpu", "value": 84, "limit": 83.0}]),
        ({"gpu_c": 83}, []),
        ({"memory_c": 91}, [{"reading": "temperature.memory", "value": 91, "limit": 90.0}]),
        ({"tlimit_c": 2}, [{"reading": "temperature.gpu.tlimit", "value": 2, "limit": 3.0}]),
        ({"tlimit_c": None}, [{"reading": "temperature.gpu.tlimit", "value": None, "limit": 3.0}]),
        ({"reasons": ["sw_power_cap"]}, []),
        (
            {"reasons": ["hw_slowdown", "hw_power_brake_slowdown"]},
            [
                {
                    "reading": "clocks_event_reasons",
                    "value": ["hw_slowdown", "hw_power_brake_slowdown"],
                    "limit": [],
                }
            ],
        ),
        ({"reasons": None}, [{"reading": "clocks_event_reasons", "value": None, "limit": []}]),
    ],
)
def test_violations(change: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert bi.violations(reading(**change), bi.DEFAULT_LIMITS) == expected


def test_watch_records_the_first_bad_sample_and_extremes() -> None:
    watch = bi.Watch(bi.DEFAULT_LIMITS)
    assert watch.add(0.0, [reading(gpu_c=40), reading(uuid="GPU-2", gpu_c=41)]) is False
    assert watch.add(
        1.0, [reading(gpu_c=70, tlimit_c=15), reading(uuid="GPU-2", reasons=["sw_thermal_slowdown"])]
    )
    assert watch.add(2.0, [reading(gpu_c=90), reading(uuid="GPU-2")])
    assert watch.first_bad == {
        "t": 1.0,
        "uuid": "GPU-2",
        "reading": "clocks_event_reasons",
        "value": ["sw_thermal_slowdown"],
        "limit": [],
    }
    summary = watch.summary()
    assert summary["count"] == 3
    assert summary["gpus"]["GPU-1"]["max_gpu_c"] == 90 and summary["gpus"]["GPU-1"]["min_tlimit_c"] == 15
    assert summary["gpus"]["GPU-2"]["reasons_seen"] == ["sw_thermal_slowdown"]
    assert summary["reasons_seen"] == ["sw_thermal_slowdown"]


def test_watch_keeps_every_sample_per_gpu_for_the_report() -> None:
    watch = bi.Watch(bi.DEFAULT_LIMITS)
    watch.add(0.0, [reading(uuid="GPU-2", index=1), reading(gpu_c=40, reasons=["gpu_idle"])])
    watch.add(
        1.04,
        [reading(uuid="GPU-2", index=1, power_w=None), reading(gpu_c=88, reasons=["hw_thermal_slowdown"])],
    )
    fact = watch.trace_fact(1.0, 2.1)
    assert (fact["interval_s"], fact["duration_s"]) == (1.0, 2.1)
    assert fact["limits"] == {"max_gpu_temp_c": 83.0, "max_memory_temp_c": 90.0, "min_tlimit_c": 3.0}
    first, second = fact["gpus"]  # in index order
    assert (first["uuid"], first["t"], first["gpu_c"], first["sm_mhz"]) == (
        "GPU-1",
        [0.0, 1.0],
        [40, 88],
        [1965, 1965],
    )
    assert first["events"] == [{"t": 1.0, "reasons": ["hw_thermal_slowdown"]}]  # gpu_idle is no event
    assert (second["uuid"], second["power_w"], second["events"]) == ("GPU-2", [1300.0, None], [])


def test_watch_only_the_listed_gpus_and_miss_a_lost_one() -> None:
    watch = bi.Watch(bi.DEFAULT_LIMITS, gpus=["GPU-1", "GPU-9"])
    assert watch.add(0.5, [reading(), reading(uuid="GPU-2", gpu_c=99)]) is True
    assert set(watch.gpus) == {"GPU-1", "GPU-9"}  # GPU-2 is not watched, its 99 C does not count
    assert watch.first_bad == {"t": 0.5, "uuid": "GPU-9", "reading": "uuid", "value": None, "limit": "GPU-9"}


# ---------------------------------------------------------------- load


def test_load_sends_small_batches_and_counts(vllm: FakeVllm) -> None:
    load = bi.Load([vllm.url + "/"], concurrency=3, max_tokens=8, timeout=5)
    load.resolve_models()
    assert load.models == {vllm.url: "GLM-5.2-NVFP4"}
    load.start()
    deadline = time.monotonic() + 5
    while vllm.completions() < 12 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = load.stop()[vllm.url]
    assert stats["ok"] >= 12 and stats["failed"] == 0 and stats["last_error"] is None
    assert stats["sent"] == stats["ok"] == vllm.completions()
    assert stats["model"] == "GLM-5.2-NVFP4"
    body = vllm.bodies[0]
    assert body == {
        "model": "GLM-5.2-NVFP4",
        "prompt": bi.DEFAULT_PROMPT,
        "max_tokens": 8,
        "temperature": 0,
        "ignore_eos": True,
    }
    assert all(t.name.startswith("burn-in-") and not t.is_alive() for t in load._threads)
    assert len(load._threads) == 3


def test_load_counts_failures(vllm: FakeVllm) -> None:
    vllm.completion_status = 500
    load = bi.Load([vllm.url], model="given-model", concurrency=2, timeout=5)
    load.resolve_models()
    assert load.models[vllm.url] == "given-model" and "/v1/models" not in vllm.paths
    load.start()
    deadline = time.monotonic() + 5
    while vllm.completions() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = load.stop(wait=3)[vllm.url]
    assert stats["ok"] == 0 and stats["failed"] >= 2 and stats["last_error"] == "HTTP 500"


def test_resolve_models_fails_on_a_dead_instance() -> None:
    with FakeVllm() as gone:
        url = gone.url
    load = bi.Load([url], timeout=2)
    with pytest.raises(bi.LoadError) as err:
        load.resolve_models()
    assert url in str(err.value) and "is it started and healthy?" in str(err.value)


def test_resolve_models_fails_on_an_empty_list() -> None:
    with FakeVllm(model="") as empty, pytest.raises(bi.LoadError) as err:
        bi.Load([empty.url], timeout=2).resolve_models()
    assert "serves no model" in str(err.value)


# ---------------------------------------------------------------- the loop


class NoLoad:
    def __init__(self) -> None:
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self) -> dict[str, Any]:
        self.stopped = True
        return {
            "http://127.0.0.1:8000": {"model": "m", "sent": 10, "ok": 10, "failed": 0, "last_error": None}
        }


def run_on_fake_clock(
    sample: Callable[[], list[dict[str, Any]]], seconds: int, load: Any = None, **options: Any
) -> dict[str, Any]:
    """bi.run with the default limits, a sample a second for ``seconds`` on a clock no test waits for."""
    clock = FakeClock()
    load = NoLoad() if load is None else load
    return bi.run(
        sample, load, seconds, 1.0, bi.Watch(bi.DEFAULT_LIMITS), clock=clock, sleep=clock.sleep, **options
    )


def reasons_check(result: dict[str, Any]) -> dict[str, Any]:
    return next(
        c for c in bi.checks(result, bi.DEFAULT_LIMITS) if c["name"] == "thermal.clocks_event_reasons[GPU-1]"
    )


def test_run_samples_every_interval_for_the_duration() -> None:
    load = NoLoad()
    result = run_on_fake_clock(lambda: [reading()], 10, load)
    assert load.started and load.stopped
    assert result["samples"]["count"] == 10
    assert (result["duration_s"], result["stopped_early"], result["first_bad_sample"]) == (10.0, False, None)
    assert all(c["ok"] for c in bi.checks(result, bi.DEFAULT_LIMITS))


def test_run_stops_at_the_first_bad_sample() -> None:
    temps = iter([60, 70, 80, 86, 88])
    result = run_on_fake_clock(lambda: [reading(gpu_c=next(temps))], 180)
    assert result["stopped_early"] is True
    assert result["first_bad_sample"] == {
        "t": 3.0,
        "uuid": "GPU-1",
        "reading": "temperature.gpu",
        "value": 86,
        "limit": 83.0,
    }
    assert result["samples"]["count"] == 4
    failed = [c for c in bi.checks(result, bi.DEFAULT_LIMITS) if not c["ok"]]
    assert [c["name"] for c in failed] == ["thermal.gpu_temp_c[GPU-1]"]
    assert failed[0]["message"] == "GPU GPU-1 temperature under load peaked at 86 C, above the 83 C limit"


def test_run_keeps_going_without_stop_on_bad() -> None:
    result = run_on_fake_clock(lambda: [reading(reasons=["hw_thermal_slowdown"])], 5, stop_on_bad=False)
    assert result["samples"]["count"] == 5 and result["first_bad_sample"]["t"] == 0.0


def test_run_when_nvidia_smi_fails() -> None:
    calls = iter([[reading()], bi.SampleError("nvidia-smi --query-gpu failed (rc=15): GPU is lost")])

    def sample() -> list[dict[str, Any]]:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    load = NoLoad()
    result = run_on_fake_clock(sample, 60, load)
    assert load.stopped and result["stopped_early"]
    assert result["first_bad_sample"]["reading"] == "nvidia-smi"
    assert "GPU is lost" in result["first_bad_sample"]["value"]
    check = bi.checks(result, bi.DEFAULT_LIMITS)[0]
    assert (check["name"], check["ok"]) == ("burn_in.samples", False)


@pytest.mark.parametrize(
    ("stats", "max_failed", "ok"),
    [
        ({"sent": 10, "ok": 10, "failed": 0}, 0, True),
        ({"sent": 10, "ok": 9, "failed": 1}, 0, False),
        ({"sent": 10, "ok": 9, "failed": 1}, 2, True),
        ({"sent": 3, "ok": 0, "failed": 0}, 0, False),  # nothing answered: no load, fail closed
    ],
)
def test_request_checks(stats: dict[str, int], max_failed: int, ok: bool) -> None:
    result = {
        "samples": {"count": 5, "gpus": {}, "reasons_seen": [], "error": None},
        "requests": {"http://127.0.0.1:8000": {"model": "m", "last_error": "HTTP 500", **stats}},
    }
    (_, check) = bi.checks(result, bi.DEFAULT_LIMITS, max_failed)
    assert check["name"] == "burn_in.requests[http://127.0.0.1:8000]" and check["ok"] is ok


def test_utilization_floor() -> None:
    watch = bi.Watch({**bi.DEFAULT_LIMITS, "min_utilization_pct": 50.0})
    watch.add(0.0, [reading(utilization_pct=0), reading(uuid="GPU-2", utilization_pct=95)])
    result = {"samples": watch.summary(), "requests": {}}
    checks = {c["name"]: c for c in bi.checks(result, {**bi.DEFAULT_LIMITS, "min_utilization_pct": 50.0})}
    assert checks["burn_in.utilization_pct[GPU-1]"]["ok"] is False
    assert "the load did not reach it" in checks["burn_in.utilization_pct[GPU-1]"]["message"]
    assert checks["burn_in.utilization_pct[GPU-2]"]["ok"] is True


def failed_check(name: str, value: float, limit: float, unit: str, message: str) -> dict[str, Any]:
    return {"name": name, "ok": False, "value": value, "limit": limit, "unit": unit, "message": message}


class AroundLoad:
    """A stand-in for a reading taken before the load starts and after it ends (roce_reading.Window,
    node_health.AfterLoad): records when it is read, relative to the load, in ``events``; its summary
    and its one failed check are the subclass's ``SUMMARY`` and ``CHECK``."""

    NAME = ""  # also bi.run's keyword for it
    SUMMARY: ClassVar[dict[str, Any]]
    CHECK: ClassVar[dict[str, Any]]

    def __init__(self, load: NoLoad, events: list[str]) -> None:
        self.load, self.events = load, events

    def start(self) -> None:
        self.events.append(f"{self.NAME} before" + (" (load on)" if self.load.started else ""))

    def stop(self) -> None:
        self.events.append(f"{self.NAME} after" + self.stop_note())

    def stop_note(self) -> str:
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        return copy.deepcopy(self.SUMMARY)

    def checks(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(self.CHECK)]


class Counters(AroundLoad):
    """roce_reading.Window's stand-in."""

    NAME = "counters"
    SUMMARY: ClassVar[dict[str, Any]] = {"ports": [], "window_s": 10.0, "deltas": {}, "error": None}
    CHECK = failed_check(
        "fabric.retransmits[mlx5_0]", 12.0, 1.0, "1/s", "mlx5_0 over 10s: 120 lost packets and retransmits"
    )

    def stop_note(self) -> str:
        return " (load off)" if self.load.stopped else ""

    def settle(self, elapsed: float) -> None:
        """Window.settle: its reading once past its settling time (4 s here), while the load runs."""
        if elapsed >= 4.0 and not any(e.startswith("counters settled") for e in self.events):
            self.events.append(
                f"counters settled at {elapsed:g}s" + (" (load on)" if not self.load.stopped else "")
            )


class Health(AroundLoad):
    """node_health.AfterLoad's stand-in."""

    NAME = "health"
    SUMMARY: ClassVar[dict[str, Any]] = {"gpu_count": 15, "gpus": [], "xids": [], "error": None}
    CHECK = failed_check("health.gpu_count", 15, 16, "GPUs", "15")

    def stop_note(self) -> str:
        return "" if self.load.stopped else " (load still on)"


def run_around_load(
    kind: type[AroundLoad], temps: list[int], seconds: int
) -> tuple[Any, NoLoad, list[str], dict[str, Any]]:
    """(the reader, the load, the reader's events, the result) of run_on_fake_clock with a ``kind``
    reading around the load and a sample at each of ``temps`` in turn."""
    load = NoLoad()
    events: list[str] = []
    reader = kind(load, events)
    values = iter(temps)
    result = run_on_fake_clock(lambda: [reading(gpu_c=next(values))], seconds, load, **{kind.NAME: reader})
    return reader, load, events, result


@pytest.mark.parametrize("temps", [[60] * 10, [60, 90]])
def test_run_reads_the_counters_just_before_the_load_starts_and_stops(temps: list[int]) -> None:
    counters, load, events, result = run_around_load(Counters, temps, 10)
    # the load is on for the whole window (and still on at its end), even when a bad sample ends it early
    # and once more at the first sample past the settling time, under load, when the run gets there
    settled = ["counters settled at 4s (load on)"] if temps[-1] == 60 else []
    assert events == ["counters before", *settled, "counters after"] and load.stopped
    assert result["roce"] == counters.summary()
    names = [c["name"] for c in bi.checks(result, bi.DEFAULT_LIMITS, counters=counters)]
    assert names[-1] == "fabric.retransmits[mlx5_0]" and "fabric.retransmits[mlx5_0]" not in [
        c["name"] for c in bi.checks(result, bi.DEFAULT_LIMITS)
    ]


def test_run_without_counters_returns_no_roce() -> None:
    result = run_on_fake_clock(lambda: [reading()], 2)
    assert result["roce"] is None


def test_an_allowed_reason_is_still_said_with_how_often() -> None:
    """The real H200 under full load: sw_power_cap in 44 of 45 samples at its 700 W limit. Allowed, so
    the check passes, but the report says so instead of "did not throttle"."""
    samples = iter(
        [[reading(reasons=[], power_w=310.0)]]
        + [[reading(reasons=["sw_power_cap"], power_w=699.0 - (n % 3))] for n in range(44)]
    )
    reasons = reasons_check(run_on_fake_clock(lambda: next(samples), 45))
    assert reasons["ok"] is True
    assert reasons["message"] == (
        "GPU GPU-1: no forbidden clock event reason under load; power-capped at its power limit in 44 of 45 "
        "samples, drawing up to 699 W (allowed)"
    )
    # a forbidden reason still fails
    failed = reasons_check(
        run_on_fake_clock(lambda: [reading(reasons=["hw_thermal_slowdown"])], 3, stop_on_bad=False)
    )
    assert failed["ok"] is False and failed["value"] == ["hw_thermal_slowdown"]


@pytest.mark.parametrize("temps", [[60] * 5, [60, 90]])
def test_the_health_is_read_before_the_load_starts_and_after_it_stopped(temps: list[int]) -> None:
    """Also when a bad sample ends the burn-in early: the health when the load ended is still judged."""
    health, _, events, result = run_around_load(Health, temps, 5)
    assert events == ["health before", "health after"]
    assert result["health"] == health.summary()
    names = [c["name"] for c in bi.checks(result, bi.DEFAULT_LIMITS, health=health)]
    assert names[-1] == "health.gpu_count"


def test_a_burn_in_stopped_at_its_first_sample_does_not_say_the_load_missed_a_gpu() -> None:
    """GPU-2 idles in the only sample taken (the load had not reached it yet): not known to be loaded
    (failed, fail closed), and the message says why, not that the load did not reach it."""
    limits = {**bi.DEFAULT_LIMITS, "min_utilization_pct": 50.0}
    clock = FakeClock()
    watch = bi.Watch(limits)
    sample = [reading(gpu_c=95, utilization_pct=90), reading(uuid="GPU-2", utilization_pct=0)]
    result = bi.run(lambda: sample, NoLoad(), 30, 1.0, watch, clock=clock, sleep=clock.sleep)
    assert result["stopped_early"] is True and result["samples"]["count"] == 1
    util = {c["name"]: c for c in bi.checks(result, limits)}["burn_in.utilization_pct[GPU-2]"]
    assert util["ok"] is False and (util["value"], util["limit"]) == (0, 50.0)
    assert "the load did not reach it" not in util["message"]
    assert "1 sample(s) taken before the burn-in stopped at 0.0s" in util["message"]
    assert "not known to reach it" in util["message"]
