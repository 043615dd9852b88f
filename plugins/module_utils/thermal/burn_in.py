# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in: small-batch load on local vLLM instances while nvidia-smi is sampled once a second.

Pieces, each testable alone:
- ``query_argv`` / ``parse_sample``: the one cheap nvidia-smi CSV query per sample (nvidia_smi's
  thermal_query / parse_thermal_sample, the same reading the idle gate takes once);
- ``violations``: one GPU's readings against the limits (a missing reading is a violation);
- ``Load``: worker threads posting OpenAI ``/v1/completions`` requests (vllm_client, open_url);
- ``Watch``: per-GPU maxima, reasons seen, the first bad sample;
- ``run``: the loop tying them together, with the clock and sleep injectable for tests;
- ``checks``: the result as checks; the temperatures and reasons are judged by thermal_verdict,
  the gate's one thermal judge, under the same names as at idle (``thermal.gpu_temp_c[<uuid>]``);
  with a ``roce_reading.Window`` (the node's RoCE ports' counters read when the load starts and
  when it stops), its ``fabric.*`` checks too: a fabric that misbehaves under load fails the burn-in.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import threading
import time

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_judge import power_check
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    THERMAL_FIELDS,
    ParseError,
    parse_thermal_sample,
    thermal_query,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.thermal_verdict import (
    LOAD_LIMITS,
    gpu_checks,
    gpu_temp_limit,
)
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_client import VllmClient

QUERY_FIELDS = THERMAL_FIELDS
query_argv = thermal_query

# Under load: the thermal judge's load limits, and the burn-in's own utilisation floor.
DEFAULT_LIMITS = dict(LOAD_LIMITS, min_utilization_pct=None)

# Field name in the sample -> (reading name in first_bad_sample, limit key, max|min).
_TEMPS = (
    ("gpu_c", "temperature.gpu", "max_gpu_temp_c", "max"),
    ("memory_c", "temperature.memory", "max_memory_temp_c", "max"),
    ("tlimit_c", "temperature.gpu.tlimit", "min_tlimit_c", "min"),
)

# How long stop() waits for requests in flight before returning the counts it has.
_STOP_WAIT_S = 15.0

DEFAULT_PROMPT = (
    "You are checking a GPU server after maintenance. Write a short, plain paragraph about why liquid "
    "cooling loops need their flow verified before a machine goes back into service."
)


class SampleError(Exception):
    """nvidia-smi could not be run or read during the burn-in."""


class LoadError(Exception):
    """An instance could not be prepared for load (no model list)."""


# ---------------------------------------------------------------- sampling


def parse_sample(text):
    """One ``query_argv`` output -> nvidia_smi.parse_thermal_sample's readings. Raises SampleError."""
    try:
        return parse_thermal_sample(text)
    except ParseError as exc:
        raise SampleError(str(exc)) from exc


def violations(gpu, limits):
    """What is wrong with one GPU's sample: ``[{reading, value, limit}]`` (empty when all is well)."""
    found = []
    for key, reading, limit_key, kind in _TEMPS:
        limit = limits.get(limit_key)
        if limit_key == "max_gpu_temp_c":
            limit = gpu_temp_limit(limits, gpu)[0]
        if limit is None:
            continue
        value = gpu.get(key)
        if value is None or (value > limit if kind == "max" else value < limit):
            found.append({"reading": reading, "value": value, "limit": limit})
    enforced, requested = gpu.get("enforced_limit_w"), gpu.get("requested_limit_w")
    if enforced is not None and requested is not None and round(enforced, 2) < round(requested, 2):
        # a rack's power budget (PDU protection, power brake) holding the GPU below its limit
        found.append({"reading": "enforced.power.limit", "value": enforced, "limit": requested})
    forbidden = limits.get("forbidden_reasons") or []
    reasons = gpu.get("reasons")
    if reasons is None:
        found.append({"reading": "clocks_event_reasons", "value": None, "limit": []})
    else:
        active = [r for r in reasons if r in forbidden]
        if active:
            found.append({"reading": "clocks_event_reasons", "value": active, "limit": []})
    return found


# The readings a burn-in keeps per GPU per sample (the report's traces).
TRACED = ("gpu_c", "memory_c", "sm_mhz", "power_w")


class Watch:
    """Everything the samples showed: per-GPU extremes, reasons seen, the first bad sample."""

    def __init__(self, limits, gpus=None):
        self.limits = limits
        self.expected = list(gpus or [])
        self.count = 0
        self.gpus = {}
        self.first_bad = None
        self.error = None
        # per GPU, every sample's readings over time: the report draws them (gpufleet_burn_in)
        self.traces = {}

    def _gpu(self, uuid, index):
        return self.gpus.setdefault(
            uuid,
            {
                "index": index,
                "max_gpu_c": None,
                "max_memory_c": None,
                "min_tlimit_c": None,
                "max_utilization_pct": None,
                "reasons_seen": [],
                # per reason, how many samples showed it (the report words allowed ones too)
                "reason_samples": {},
                "samples": 0,
                "max_power_w": None,
                # the power limits when the sample has them (the watch sample): lowest enforced
                "requested_limit_w": None,
                "enforced_limit_w": None,
                "capped_samples": 0,
                # its own slowdown temperature (thermal/slowdown.py), when read
                "slowdown_c": None,
                "missing": {"gpu_c": 0, "memory_c": 0, "tlimit_c": 0, "reasons": 0, "gpu": 0},
            },
        )

    @staticmethod
    def _extreme(current, value, pick):
        if value is None:
            return current
        return value if current is None else pick(current, value)

    def _bad(self, t, uuid, problem):
        if self.first_bad is None:
            self.first_bad = {"t": round(t, 1), "uuid": uuid, **problem}

    def add(self, t, sample):
        """Record one sample taken t seconds into the burn-in; True when it was bad."""
        self.count += 1
        bad = False
        seen = set()
        for gpu in sample:
            uuid = gpu["uuid"]
            if self.expected and uuid not in self.expected:
                continue
            seen.add(uuid)
            acc = self._gpu(uuid, gpu["index"])
            self._trace(t, gpu)
            acc["max_gpu_c"] = self._extreme(acc["max_gpu_c"], gpu["gpu_c"], max)
            acc["max_memory_c"] = self._extreme(acc["max_memory_c"], gpu["memory_c"], max)
            acc["min_tlimit_c"] = self._extreme(acc["min_tlimit_c"], gpu["tlimit_c"], min)
            acc["max_utilization_pct"] = self._extreme(
                acc["max_utilization_pct"], gpu["utilization_pct"], max
            )
            for key in ("gpu_c", "memory_c", "tlimit_c", "reasons"):
                if gpu[key] is None:
                    acc["missing"][key] += 1
            acc["samples"] += 1
            if gpu.get("slowdown_c") is not None:
                acc["slowdown_c"] = gpu["slowdown_c"]
            acc["max_power_w"] = self._extreme(acc["max_power_w"], gpu.get("power_w"), max)
            self._power(acc, gpu)
            for reason in gpu["reasons"] or []:
                if reason not in acc["reasons_seen"]:
                    acc["reasons_seen"].append(reason)
                acc["reason_samples"][reason] = acc["reason_samples"].get(reason, 0) + 1
            problems = violations(gpu, self.limits)
            if problems:
                bad = True
                self._bad(t, uuid, problems[0])
        for uuid in self.expected:
            if uuid not in seen:
                self._gpu(uuid, None)["missing"]["gpu"] += 1
                bad = True
                self._bad(t, uuid, {"reading": "uuid", "value": None, "limit": uuid})
        return bad

    def _power(self, acc, gpu):
        requested, enforced = gpu.get("requested_limit_w"), gpu.get("enforced_limit_w")
        if requested is not None:
            acc["requested_limit_w"] = requested
        acc["enforced_limit_w"] = self._extreme(acc["enforced_limit_w"], enforced, min)
        if enforced is not None and requested is not None and round(enforced, 2) < round(requested, 2):
            acc["capped_samples"] += 1

    def _trace(self, t, gpu):
        trace = self.traces.get(gpu["uuid"])
        if trace is None:
            trace = dict(uuid=gpu["uuid"], index=gpu["index"], t=[], events=[])
            trace.update((key, []) for key in TRACED)
            self.traces[gpu["uuid"]] = trace
        trace["t"].append(round(t, 1))
        for key in TRACED:
            trace[key].append(gpu.get(key))
        # a clock event reason other than idle is an event on the chart
        active = [r for r in gpu.get("reasons") or [] if r != "gpu_idle"]
        if active:
            trace["events"].append({"t": round(t, 1), "reasons": active})

    def trace_fact(self, interval, duration):
        """``gpufleet_burn_in``: every sample per GPU over time with the limits, for the report."""
        limits = {k: self.limits.get(k) for k in ("max_gpu_temp_c", "max_memory_temp_c", "min_tlimit_c")}
        # relative to each GPU's slowdown temperature: the lowest of the GPUs' limits
        own = [gpu_temp_limit(self.limits, acc)[0] for acc in self.gpus.values()]
        own = [limit for limit in own if limit is not None]
        if own:
            limits["max_gpu_temp_c"] = min(own)
        return {
            "interval_s": interval,
            "duration_s": duration,
            "limits": limits,
            "gpus": sorted(
                self.traces.values(), key=lambda g: (g["index"] is None, g["index"] or 0, g["uuid"])
            ),
        }

    def failed(self, t, message):
        """nvidia-smi failed during the burn-in: a bad sample of its own."""
        self.error = message
        self._bad(t, None, {"reading": "nvidia-smi", "value": message, "limit": None})

    def summary(self):
        reasons = []
        for acc in self.gpus.values():
            reasons.extend(r for r in acc["reasons_seen"] if r not in reasons)
        return {"count": self.count, "gpus": self.gpus, "reasons_seen": reasons, "error": self.error}


# ---------------------------------------------------------------- load


class Load:
    """Worker threads sending completions to each URL until stop(); counts per URL."""

    def __init__(self, urls, model=None, concurrency=4, max_tokens=64, prompt=DEFAULT_PROMPT, timeout=120):
        self.urls = [u.rstrip("/") for u in urls]
        self.model = model
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.prompt = prompt
        self.timeout = timeout
        self.clients = {u: VllmClient(u, timeout=timeout) for u in self.urls}
        self.models = {}
        self.stats = {
            u: {"model": None, "sent": 0, "ok": 0, "failed": 0, "last_error": None} for u in self.urls
        }
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = []

    def resolve_models(self):
        """The model each URL serves (``model`` when given, else the first id of /v1/models)."""
        for url in self.urls:
            if self.model is not None:
                self.models[url] = self.model
            else:
                status, ids, text = self.clients[url].models()
                if status != 200:
                    raise LoadError(
                        "instance %s did not list its models (%s); is it started and healthy?"
                        % (url, text if status is None else "HTTP %d" % status)
                    )
                if not ids:
                    raise LoadError("instance %s serves no model (/v1/models is empty)" % url)
                self.models[url] = ids[0]
            self.stats[url]["model"] = self.models[url]

    def _request(self, url):
        """None when the completion came back, else the error text."""
        status, text = self.clients[url].post_json(
            "/v1/completions",
            {
                "model": self.models[url],
                "prompt": self.prompt,
                "max_tokens": self.max_tokens,
                "temperature": 0,
                # vLLM's extension: generate max_tokens every time, so each request loads the GPUs alike.
                "ignore_eos": True,
            },
        )
        if status == 200:
            return None
        return text if status is None else "HTTP %d" % status

    def _worker(self, url):
        while not self._stop.is_set():
            with self._lock:
                self.stats[url]["sent"] += 1
            error = self._request(url)
            if error is not None:
                with self._lock:
                    self.stats[url]["failed"] += 1
                    self.stats[url]["last_error"] = error
                # Do not spin on a dead instance.
                self._stop.wait(1.0)
            else:
                with self._lock:
                    self.stats[url]["ok"] += 1

    def start(self):
        for url in self.urls:
            for n in range(self.concurrency):
                thread = threading.Thread(
                    target=self._worker, args=(url,), name="burn-in-%s-%d" % (url, n), daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def stop(self, wait=None):
        """Stop sending; wait a little for requests in flight (the threads are daemons)."""
        self._stop.set()
        deadline = time.monotonic() + (min(self.timeout, _STOP_WAIT_S) if wait is None else wait)
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        with self._lock:
            return {u: dict(s) for u, s in self.stats.items()}


# ---------------------------------------------------------------- the loop


def run(
    sample,
    load,
    seconds,
    interval,
    watch,
    stop_on_bad=True,
    clock=time.monotonic,
    sleep=time.sleep,
    counters=None,
    under_load=None,
    health=None,
):
    """Load on, sample every ``interval`` s for ``seconds`` s, load off.

    ``sample()`` returns parse_sample()'s list or raises SampleError. ``counters`` (a
    roce_reading.Window, or None) is read just before the load starts and just before it stops,
    and once more at the first sample past its settling time (Window.settle).
    ``health`` (a node_health.AfterLoad, or None) is started just before the load starts and
    stopped once the load has stopped: the node's health when the load ended.
    ``under_load()`` (or None) is called once just before the load stops, while it still runs
    (the PCIe links' sample: a link trains up only under load); its result is returned as is.
    Returns ``{duration_s, stopped_early, samples, first_bad_sample, requests, roce, under_load}``
    (``roce``: the window's summary, None without one).
    """
    if counters is not None:
        counters.start()
    if health is not None:
        health.start()
    load.start()
    start = clock()
    next_at = start
    stopped_early = False
    try:
        while True:
            t = clock() - start
            if t >= seconds:
                break
            if counters is not None:
                # the links read once more when the fabric's settling time has passed
                counters.settle(t)
            try:
                bad = watch.add(t, sample())
            except SampleError as exc:
                watch.failed(t, str(exc))
                stopped_early = True
                break
            if bad and stop_on_bad:
                stopped_early = True
                break
            next_at += interval
            delay = next_at - clock()
            if delay > 0:
                sleep(delay)
    finally:
        loaded = None if under_load is None else under_load()
        if counters is not None:
            counters.stop()
        requests = load.stop()
        if health is not None:
            health.stop()
    return {
        "duration_s": round(clock() - start, 1),
        "stopped_early": stopped_early,
        "samples": watch.summary(),
        "first_bad_sample": watch.first_bad,
        "requests": requests,
        "roce": None if counters is None else counters.summary(),
        "under_load": loaded,
        "health": None if health is None else health.summary(),
    }


def _readings(summary):
    """The thermal judge's readings of a Watch summary: per GPU its peaks, lowest margin, reasons seen."""
    return [
        {
            "uuid": uuid,
            "index": acc["index"],
            "gpu_c": acc["max_gpu_c"],
            "memory_c": acc["max_memory_c"],
            "tlimit_c": acc["min_tlimit_c"],
            "slowdown_c": acc.get("slowdown_c"),
            "reasons": acc["reasons_seen"],
            "reason_samples": acc.get("reason_samples"),
            "samples": acc.get("samples"),
            "max_power_w": acc.get("max_power_w"),
            "missing": acc["missing"],
        }
        for uuid, acc in summary["gpus"].items()
    ]


def _power_reading(uuid, acc):
    """gpu_judge.power_check's reading of one GPU over the burn-in: its lowest enforced limit against
    the requested one, in how many of its samples."""
    return {
        "uuid": uuid,
        "enforced_limit_w": acc["enforced_limit_w"],
        "requested_limit_w": acc["requested_limit_w"],
        "capped_samples": acc["capped_samples"],
        "samples": acc["samples"],
        "reason_seconds": None,
    }


def _utilization_why(ok, floor, acc, result):
    """Why a GPU stayed below the floor: the load did not reach it, or - the burn-in stopped early -
    it was not loaded long enough to tell (still failed: it was never seen loaded)."""
    if ok:
        return ""
    if not result.get("stopped_early"):
        return ", below %s%%: the load did not reach it" % floor
    bad = result.get("first_bad_sample") or {}
    return (
        ", below %s%% in the %d sample(s) taken before the burn-in stopped at %ss on its first bad sample: "
        "stopped before the load could be seen reaching it, so not known to reach it"
        % (floor, acc.get("samples") or 0, bad.get("t", result.get("duration_s")))
    )


def checks(result, limits, max_failed_requests=0, counters=None, health=None):
    """Checks of a run() result: samples; per GPU its presence, the thermal judge's checks of its
    peaks and reasons (``thermal.*``, as at idle) and its utilisation; per URL its requests; with
    ``counters`` (the run's roce_reading.Window) its checks of each RoCE port (``fabric.*``); with
    ``health`` (the run's node_health.AfterLoad) the node's health when the load ended (``health.*``)."""
    out = []
    summary = result["samples"]
    if summary["error"]:
        out.append(
            check(
                "burn_in.samples",
                False,
                summary["count"],
                None,
                "samples",
                "nvidia-smi failed: %s" % summary["error"],
            )
        )
    elif summary["count"] == 0:
        out.append(
            check("burn_in.samples", False, 0, 1, "samples", "no nvidia-smi sample taken (fail closed)")
        )
    else:
        out.append(
            check("burn_in.samples", True, summary["count"], 1, "samples", "%d samples" % summary["count"])
        )
    thermal = gpu_checks(_readings(summary), limits, under_load=True) if summary["gpus"] else []
    for uuid, acc in summary["gpus"].items():
        label = "GPU %s" % uuid
        if acc["missing"]["gpu"]:
            out.append(
                check(
                    "burn_in.gpu_present[%s]" % uuid,
                    False,
                    acc["missing"]["gpu"],
                    0,
                    "samples",
                    "%s missing from %d samples (fell off the bus?)" % (label, acc["missing"]["gpu"]),
                )
            )
        out.extend(c for c in thermal if c["name"].endswith("[%s]" % uuid))
        if acc.get("requested_limit_w") is not None:
            out.append(power_check(_power_reading(uuid, acc), result["duration_s"]))
        floor = limits.get("min_utilization_pct")
        if floor is not None:
            util = acc["max_utilization_pct"]
            ok = util is not None and util >= floor
            out.append(
                check(
                    "burn_in.utilization_pct[%s]" % uuid,
                    ok,
                    util,
                    floor,
                    "%",
                    "%s peaked at %s%% utilization%s"
                    % (label, util, _utilization_why(ok, floor, acc, result)),
                )
            )
    for url, stats in result["requests"].items():
        ok = stats["ok"] > 0 and stats["failed"] <= max_failed_requests
        msg = "%s answered %d of %d requests" % (url, stats["ok"], stats["sent"])
        if stats["failed"]:
            msg += "; %d failed, last: %s" % (stats["failed"], stats["last_error"])
        if stats["ok"] == 0:
            msg += " (no load reached it; fail closed)"
        out.append(
            check(
                "burn_in.requests[%s]" % url, ok, stats["failed"], max_failed_requests, "failed requests", msg
            )
        )
    if counters is not None:
        out.extend(counters.checks())
    if health is not None:
        out.extend(health.checks())
    return out
