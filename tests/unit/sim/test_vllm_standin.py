"""The stand-in vLLM: OpenAI-compatible API, vLLM's metric names, load on exactly its GPUs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import build, faults, state, thermal
from gpufleet_sim.ports import free_port
from gpufleet_sim.tools import vllm, vllm_engine, vllm_exposition, vllm_http

SRC = Path(__file__).resolve().parents[3] / "sim" / "src"
NODE_PYTHON = "/usr/bin/python3"
FIXTURES = (
    "vllm-metrics/rh-workshop-llama-vllm-single-metrics-grep-vllm-head40.prom",
    "vllm-metrics/foxhop-4090-qwen3.6-27b-trimmed-cache-lines.prom",
)


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    current = build.build_node_state("node01", "b300-16", 1)
    current["serving"]["startup_s"] = 0.2
    state.save(tmp_path, current)
    return tmp_path


def uuids(node_dir: Path, domain: int) -> list[str]:
    return [g["uuid"] for g in state.present_gpus(state.load(node_dir)) if g["nvlink_domain"] == domain]


def config(**changes: Any) -> vllm_engine.Config:
    values: dict[str, Any] = {
        "model": "zai-org/GLM-5.2-NVFP4",
        "served_name": "glm52",
        "tensor_parallel_size": 8,
        "max_model_len": 131072,
        "max_num_seqs": 768,
        "max_num_batched_tokens": 6144,
        "gpu_memory_utilization": 0.91,
        "prefix_caching": True,
        "swap_space": 8.0,
    }
    values.update(changes)
    return vllm_engine.Config(**values)


class Api:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, raw = self.call(method, path, body)
        return status, json.loads(raw)

    def metrics(self) -> dict[str, float]:
        text = self.call("GET", "/metrics")[1].decode()
        return {
            m.group(1): float(m.group(2)) for m in re.finditer(r"^([^#\s{]+)\{[^}]*\} (\S+)$", text, re.M)
        }


def serving(
    node_dir: Path, cfg: vllm_engine.Config, domain: int = 0
) -> Iterator[tuple[Api, vllm_engine.Engine]]:
    engine = vllm_engine.Engine(node_dir, cfg, uuids(node_dir, domain))
    server = vllm_http.Server(("127.0.0.1", 0), engine)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Api(server.server_address[1]), engine
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def api(node_dir: Path) -> Iterator[tuple[Api, vllm_engine.Engine]]:
    yield from serving(node_dir, config())


# -- the API ----------------------------------------------------------------------------------
def test_health_models_and_a_completion(api: tuple[Api, vllm_engine.Engine]) -> None:
    client, _ = api
    assert client.call("GET", "/health") == (200, b"")
    status, models = client.json("GET", "/v1/models")
    assert status == 200 and models["object"] == "list"
    card = models["data"][0]
    assert (card["id"], card["root"], card["max_model_len"], card["owned_by"]) == (
        "glm52",
        "zai-org/GLM-5.2-NVFP4",
        131072,
        "vllm",
    )
    status, done = client.json(
        "POST", "/v1/completions", {"model": "glm52", "prompt": ["a" * 40, "b" * 8], "max_tokens": 4}
    )
    assert status == 200 and done["object"] == "text_completion" and len(done["choices"]) == 2
    assert done["usage"] == {
        "prompt_tokens": 12,
        "completion_tokens": 8,
        "total_tokens": 20,
        "prompt_tokens_details": None,
    }
    assert [c["finish_reason"] for c in done["choices"]] == ["length", "length"]
    assert len(done["choices"][0]["text"].split()) == 4


def test_errors_look_like_vllms(api: tuple[Api, vllm_engine.Engine]) -> None:
    client, _ = api
    status, body = client.json("POST", "/v1/completions", {"model": "other", "prompt": "hi"})
    assert (
        status == 404
        and body["error"]["type"] == "NotFoundError"
        and "`other` does not exist" in body["error"]["message"]
    )
    status, body = client.json("POST", "/v1/completions", {"prompt": "x" * 40, "max_tokens": 131070})
    assert status == 400 and "maximum context length is 131072 tokens" in body["error"]["message"]
    assert client.json("GET", "/v1/completions") == (405, {"detail": "Method Not Allowed"})
    assert client.json("GET", "/nope") == (404, {"detail": "Not Found"})


def test_an_unexpected_error_is_a_500_not_a_dropped_connection(
    api: tuple[Api, vllm_engine.Engine], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """uvicorn answers an exception in a route with 500 and logs it; http.server drops the connection."""
    client, _ = api

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a bug in the stand-in")

    monkeypatch.setattr(vllm_http.vllm_openai, "parse", broken)
    assert client.call("POST", "/v1/completions", {"prompt": "x"}) == (500, b"Internal Server Error")
    assert "a bug in the stand-in" in capsys.readouterr().err


def fixture_families(read_fixture: Any) -> dict[str, str]:
    """metric name -> HELP text (or "" where the capture dropped it), from the real captures."""
    found: dict[str, str] = {}
    for name in FIXTURES:
        for line in read_fixture(name).splitlines():
            if line.startswith("# HELP ") and len(line.split(" ", 3)) == 4:
                _, _, metric, text = line.split(" ", 3)
                found[metric] = text
            elif line and not line.startswith("#"):
                found.setdefault(line.split("{", 1)[0], "")
    return found


def test_metrics_use_vllms_names_and_format(api: tuple[Api, vllm_engine.Engine], read_fixture: Any) -> None:
    client, _ = api
    client.json("POST", "/v1/completions", {"prompt": "p" * 4000, "max_tokens": 2})
    text = client.call("GET", "/metrics")[1].decode()
    helps = dict(line.split(" ", 3)[2:] for line in text.splitlines() if line.startswith("# HELP "))
    for metric, help_text in fixture_families(read_fixture).items():
        assert metric in helps, f"{metric} is in the real capture but not served"
        assert not help_text or helps[metric] == help_text
    assert 'vllm:prefix_cache_queries_total{engine="0",model_name="glm52"} 1000.0' in text
    assert "# TYPE vllm:prefix_cache_hits_total counter" in text
    # vLLM 0.11 has no V0 hit-rate gauge: the hit rate is the counters' ratio
    assert "vllm:gpu_prefix_cache_hit_rate" not in text
    assert 'enable_prefix_caching="True"' in text
    go_float = vllm_exposition.go_float
    assert go_float(1.0931263819e10) == "1.0931263819e+10" and go_float(0) == "0.0"
    assert go_float(1786910601.1177013) == "1.7869106011177013e+09" and go_float(float("inf")) == "+Inf"


def test_prefix_cache_hit_rate_and_its_cliff(node_dir: Path, api: tuple[Api, vllm_engine.Engine]) -> None:
    client, _ = api
    for _ in range(10):
        client.json("POST", "/v1/completions", {"prompt": "p" * 400, "max_tokens": 1})
    before = client.metrics()
    assert before["vllm:prefix_cache_hits_total"] / before[
        "vllm:prefix_cache_queries_total"
    ] == pytest.approx(0.9)
    faults.inject(node_dir, "prefix-cache-cliff")
    for _ in range(10):
        client.json("POST", "/v1/completions", {"prompt": "p" * 400, "max_tokens": 1})
    after = client.metrics()
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    assert hits / queries == pytest.approx(0.07, abs=0.001)


def test_requests_load_exactly_the_instances_gpus(
    node_dir: Path, api: tuple[Api, vllm_engine.Engine]
) -> None:
    client, _ = api
    worker = threading.Thread(
        target=client.json, args=("POST", "/v1/completions", {"prompt": "x", "max_tokens": 100})
    )
    worker.start()
    time.sleep(0.4)
    view = thermal.live(state.load(node_dir), time.time())
    busy = {g["uuid"]: g["utilization_pct"] for g in view["gpus"]}
    assert client.metrics()["vllm:num_requests_running"] == 1
    worker.join()
    assert {busy[u] for u in uuids(node_dir, 0)} == {75} and {busy[u] for u in uuids(node_dir, 1)} == {0}
    assert {g["load"]["requests"] for g in state.load(node_dir)["gpus"]} == {0}
    assert client.metrics()["vllm:num_requests_running"] == 0


def test_requests_past_max_num_seqs_wait(node_dir: Path) -> None:
    for client, _ in serving(node_dir, config(max_num_seqs=1)):
        body = {"prompt": "x", "max_tokens": 60}
        workers = [
            threading.Thread(target=client.json, args=("POST", "/v1/completions", body)) for _ in range(2)
        ]
        for worker in workers:
            worker.start()
        time.sleep(0.3)
        seen = client.metrics()
        for worker in workers:
            worker.join()
        assert (seen["vllm:num_requests_running"], seen["vllm:num_requests_waiting"]) == (1, 1)


def test_throttled_gpus_serve_slower(node_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request takes what the engine sleeps for its prefill and decode: counted from its sleeps (which
    still happen), as a busy machine's wall clock stretches either request by more than the sleeps."""
    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(vllm_engine.time, "sleep", sleep)
    engine = vllm_engine.Engine(node_dir, config(), uuids(node_dir, 0))
    engine.complete(["x"], 20)
    healthy = sum(slept)
    with state.locked(node_dir) as current:
        # the model moved to now before the dies change (thermal.advance, as before any input changes):
        # on a busy machine the time since the first request's end would otherwise cool them first
        thermal.advance(current, time.time())
        for gpu in current["gpus"]:
            # past slowdown, latched: HW halves clocks until the die is 1.5 K below it
            gpu["thermal"].update(die_c=88.0, hw_slowdown=True)
    slept.clear()
    engine.complete(["x"], 20)
    assert healthy > 0 and sum(slept) > 1.8 * healthy


# -- the command ------------------------------------------------------------------------------
def test_cuda_visible_devices_selection(node_dir: Path) -> None:
    current = state.load(node_dir)
    present = state.present_gpus(current)
    ids = [g["uuid"] for g in present]
    assert vllm.visible_gpus(current, None) == present
    assert [g["uuid"] for g in vllm.visible_gpus(current, f"{ids[9]},{ids[3][:12]},2")] == [
        ids[9],
        ids[3],
        ids[2],
    ]
    # CUDA stops at the first entry that names no device
    assert [g["uuid"] for g in vllm.visible_gpus(current, f"{ids[1]},GPU-nope,{ids[2]}")] == [ids[1]]
    assert vllm.visible_gpus(current, "") == []
    assert vllm.bind_host({"address": "127.0.9.2"}, "0.0.0.0") == "127.0.9.2"
    assert vllm.bind_host({"address": "127.0.9.2"}, None) == "127.0.9.2"
    assert vllm.bind_host({"address": "127.0.9.2"}, "127.0.0.1") == "127.0.0.1"


def command(node_dir: Path, *args: str, devices: str | None) -> subprocess.Popen[str]:
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); from pathlib import Path; "
    code += "from gpufleet_sim.tools import vllm; "
    code += f"sys.exit(vllm.main(sys.argv[1:], Path({str(node_dir)!r})))"
    env = {"PATH": os.environ["PATH"]} | ({"CUDA_VISIBLE_DEVICES": devices} if devices is not None else {})
    return subprocess.Popen(
        [NODE_PYTHON, "-sS", "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out + err


@pytest.mark.parametrize(
    ("devices", "extra", "message"),
    [
        ("", [], "RuntimeError: No CUDA GPUs are available"),
        ("0,1,2", [], "World size (8) is larger than the number of available GPUs (3)"),
        (None, ["--gpu-memory-utilization", "1.5"], "is less than desired GPU memory utilization (1.5"),
    ],
)
def test_the_command_fails_as_vllm_does(
    node_dir: Path, devices: str | None, extra: list[str], message: str
) -> None:
    rc, output = finished(
        command(node_dir, "serve", "m", "--tensor-parallel-size", "8", *extra, devices=devices)
    )
    assert rc == 1 and message in output
    assert {g["memory_used_mib"] for g in state.load(node_dir)["gpus"]} == {0}


def test_unknown_options_are_usage_errors(node_dir: Path) -> None:
    rc, output = finished(command(node_dir, "serve", "m", "--no-such-flag", devices=None))
    assert rc == 2 and "unrecognized arguments: --no-such-flag" in output


def test_the_command_serves_holds_memory_and_stops_cleanly_on_sigterm(node_dir: Path) -> None:
    port = free_port()
    devices = ",".join(uuids(node_dir, 1))
    flags = ["--tensor-parallel-size", "8", "--max-model-len", "65536", "--gpu-memory-utilization", "0.9"]
    flags += [
        "--enable-prefix-caching",
        "--swap-space",
        "8",
        "--trust-remote-code",
        "--served-model-name",
        "kimik3",
    ]
    proc = command(
        node_dir,
        "serve",
        "moonshotai/Kimi-K3-NVFP4",
        *flags,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        devices=devices,
    )
    try:
        client = Api(port)
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.call("GET", "/health")[0] == 200:
                    break
            except urllib.error.URLError:
                assert time.monotonic() < deadline and proc.poll() is None, "the server did not come up"
                time.sleep(0.05)
        assert client.json("GET", "/v1/models")[1]["data"][0]["id"] == "kimik3"
        used = {g["uuid"]: g["memory_used_mib"] for g in state.load(node_dir)["gpus"]}
        assert {used[u] for u in uuids(node_dir, 1)} == {round(0.9 * 275040)}
        assert {used[u] for u in uuids(node_dir, 0)} == {0}
    finally:
        proc.send_signal(signal.SIGTERM)
        rc, output = finished(proc)
    assert rc == 0 and "Application startup complete." in output
    assert {g["memory_used_mib"] for g in state.load(node_dir)["gpus"]} == {0}
