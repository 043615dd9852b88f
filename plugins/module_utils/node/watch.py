# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet watch: one read-only look at a node in service, over a short window.

Three of the incidents this toolkit exists for happened while the node served: a PDU's protection
lowered every GPU's enforced power limit in waves, RoCE retransmits stalled NCCL, a prompt template
collapsed the prefix-cache hit rate with no error anywhere. A watch reads, over ``window_s``:

- the GPUs: nvidia-smi's watch sample (nvidia_smi.watch_query) every ``sample_interval_s`` from
  the window's start to its end (back to back when a read takes longer), so a PDU cap that comes
  and goes in waves is seen in a sample wherever its capped phase falls in the window (three
  samples at the start, middle and end once all fell in the uncapped half of 10 s waves when slow
  reads shifted them); the largest span between two reads is reported (``sample_gap_s``): a cap
  that lasts longer is never missed, and ``watch.gpu_sample_gap`` fails when it exceeds
  ``max_sample_gap_s`` (a cap that long could have gone unseen). The clock event reason counters
  add a reason that came and went between samples (a power brake) and how long the power cap held
  the clocks;
- the RoCE ports: roce_reading.Window around the window (the burn-in's reader and judge: counters,
  each link's state, rate and flaps, each port's share of the traffic);
- the hardware's health (node_health, the gate's judge): the GPU count, PCIe width, row remaps,
  uncorrectable ECC, NVLink links, the GPU Recovery Action, the NVSwitch fabric's state, Xid and SXid
  events since boot, and each GPU's PCIe replays and NVLink errors over the window (-q -x and nvlink -e
  read when it opens and when it closes);
- each vLLM instance: ``/health`` and ``/metrics`` at the start and the end (the hit rate of the
  queries served in between, as the gate judges it, and what the instance served).

What a watch that acts decides from is in the reading too: the node's remediation history (its
events, remediation_history.read; ``guardian.replace_hardware`` fails on a node marked "replace
hardware", judged with node_health's checks) and the drain role's record (its text: gpufleet left the
node out of service), two small file reads.

Nothing is written, no load is generated, nothing is restarted. The checks carry the names the
other commands use (``gpu_power.enforced_limit_w[<uuid>]``, ``thermal.*[<uuid>]``,
``fabric.*[<ibdev>]``, ``service.*[<instance>]``); :func:`fact` is the ``gpufleet_watch``
reading the report and gpufleet.prom show.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import itertools
import os
import stat
import time

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import HARMFUL_REASONS, check
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi, nvlink
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_judge import power_check
from ansible_collections.gpufleet.node.plugins.module_utils.node import (
    gpudirect,
    node_health,
    remediation_history,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import roce_reading
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_counters import (
    BUFFER_OVERRUN_COUNTERS,
    ECN_LOOP_COUNTERS,
    LINK_DOWN_COUNTERS,
    LINK_INTEGRITY_COUNTERS,
    RETRANSMIT_COUNTERS,
    SYMBOL_ERROR_COUNTERS,
    link_up,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.thermal_verdict import gpu_checks
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_client import VllmClient
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_metrics import (
    MetricsError,
    hit_rate_between,
    parse_prometheus,
    prefix_cache,
    serving,
)
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_service import (
    health_check,
    prefix_cache_check,
)

# The throttle reasons a watch reports per GPU: the power cap (a limit at work: harmful only when
# the enforced limit is below the requested one, which gpu_power.enforced_limit_w judges) and the
# harmful ones.
WATCHED_REASONS = ("sw_power_cap", *HARMFUL_REASONS)
WINDOW_RANGE = (1.0, 300.0)
# One GPU sample per second: a PDU protection's waves last seconds (the reference incident's: 5 s capped
# of every 10 s), and one nvidia-smi query of a node's GPUs takes ~35 ms on a real H200 node.
DEFAULT_SAMPLE_INTERVAL_S = 1.0
SAMPLE_INTERVAL_RANGE = (0.2, 60.0)
# The shortest cap the watch promises to see: the reference PDU's capped phase. Samples further apart
# (a node whose nvidia-smi takes seconds to answer) fail watch.gpu_sample_gap rather than pass unseen.
DEFAULT_MAX_SAMPLE_GAP_S = 5.0
MAX_SAMPLE_GAP_RANGE = (1.0, 300.0)


class GpuReadError(Exception):
    """nvidia-smi's watch sample could not be run or read; the message names the command."""


def read_gpus(run_command, smi):
    """One watch sample of every GPU (nvidia_smi.parse_watch_sample's records)."""
    argv = nvidia_smi.watch_query(smi)
    rc, out, err = tool_runner.read_command(run_command, argv, environ_update=tool_runner.ENV)
    if rc != 0:
        raise GpuReadError("%s failed (rc %s): %s" % (" ".join(argv[:2]), rc, (err or out).strip()))
    try:
        return nvidia_smi.parse_watch_sample(out)
    except nvidia_smi.ParseError as exc:
        raise GpuReadError(str(exc)) from None


# ---------------------------------------------------------------- GPUs


def _mean(values):
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 2) if known else None


def _extreme(values, pick):
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def _counter_seconds(first, last):
    """Seconds each reason was active between two samples (a counter that went down counts from 0)."""
    out = {}
    for name in nvidia_smi.REASON_COUNTERS:
        old, new = first["reason_us"].get(name), last["reason_us"].get(name)
        if old is None or new is None:
            out[name] = None
        else:
            out[name] = round((new - old if new >= old else new) / 1e6, 3)
    return out


def summarize_gpus(samples, gap_s=None):
    """Per GPU (by UUID, in the last sample's order), the window's readings: the hottest
    temperatures, the smallest T.Limit margin, the lowest enforced limit, every reason seen in a
    sample or whose counter moved, the counters' totals; ``gap_s``, the largest span between two
    samples' reads, is kept with each (what a cap must outlast to be seen)."""
    by_uuid = {}
    for sample in samples:
        for gpu in sample:
            by_uuid.setdefault(gpu["uuid"], []).append(gpu)
    summary = []
    for gpu in samples[-1]:
        seen = by_uuid[gpu["uuid"]]
        counted = _counter_seconds(seen[0], seen[-1]) if len(seen) > 1 else {}
        reasons = []
        for s in seen:
            reasons.extend(r for r in (s["reasons"] or []) if r not in reasons)
        reasons.extend(r for r, secs in sorted(counted.items()) if secs and r not in reasons)
        summary.append(
            {
                "uuid": gpu["uuid"],
                "index": gpu["index"],
                "gpu_c": _extreme([s["gpu_c"] for s in seen], max),
                "memory_c": _extreme([s["memory_c"] for s in seen], max),
                "tlimit_c": _extreme([s["tlimit_c"] for s in seen], min),
                # a sample that did not report its reasons fails the reasons check closed
                "reasons": None if any(s["reasons"] is None for s in seen) else reasons,
                # the window's mean draw: one sample may fall on a wave's crest or its trough
                "power_w": _mean([s["power_w"] for s in seen]),
                "requested_limit_w": gpu["requested_limit_w"],
                "enforced_limit_w": _extreme([s["enforced_limit_w"] for s in seen], min),
                "capped_samples": sum(1 for s in seen if _capped(s)),
                "samples": len(seen),
                "sample_gap_s": gap_s,
                "reason_seconds": counted,
                "reason_us": gpu["reason_us"],
            }
        )
    return summary


def _capped(gpu):
    enforced, requested = gpu["enforced_limit_w"], gpu["requested_limit_w"]
    return enforced is not None and requested is not None and round(enforced, 2) < round(requested, 2)


def gpu_fact(gpu):
    """A GPU's entry in the gpufleet_watch reading."""
    reasons = gpu["reasons"] or []
    return {
        "index": gpu["index"],
        "uuid": gpu["uuid"],
        "power_limit_w": {"requested": gpu["requested_limit_w"], "enforced": gpu["enforced_limit_w"]},
        "power_draw_w": gpu["power_w"],
        "temperature_c": {"gpu": gpu["gpu_c"], "memory": gpu["memory_c"]},
        "tlimit_c": gpu["tlimit_c"],
        "throttle_active": {r: int(r in reasons) for r in WATCHED_REASONS},
        "throttle_seconds_total": {
            r: (None if us is None else round(us / 1e6, 3)) for r, us in (gpu["reason_us"] or {}).items()
        },
    }


def nvlink_errors_per_minute(before, after, seconds):
    """Per GPU (by UUID) its NVLink errors a minute over the window, ``{crc, replay, recovery}`` (a kind
    either reading lacks left out; a counter that went down counts from 0); {} when not read."""
    if not before or not after or not seconds:
        return {}
    first = {g["uuid"]: g for g in before}
    out = {}
    for gpu in after:
        start = first.get(gpu["uuid"])
        if start is None:
            continue
        rates = {}
        for kind in nvlink.ERROR_KINDS:
            old, new = start.get(kind), gpu.get(kind)
            if old is not None and new is not None:
                rates[kind] = round((new - old if new >= old else new) * 60.0 / seconds, 3)
        out[gpu["uuid"]] = rates
    return out


# ---------------------------------------------------------------- RoCE ports


def _rate(delta, names, seconds):
    known = [delta[n] for n in names if n in delta]
    return round(sum(known) / seconds, 3) if known else None


def port_facts(window):
    """Per port, the rates the window measured (None where the port lacks the counter)."""
    summary = window.summary()
    seconds = summary["window_s"]
    if not seconds:
        return []
    out = []
    for port in summary["ports"]:
        delta = summary["deltas"].get(port["ibdev"], {})
        rx_pause = "rx_prio%d_pause_duration" % window.priority
        # pause durations are microseconds: seconds paused per second of the window
        paused = {}
        if rx_pause in delta:
            paused[str(window.priority)] = round(delta[rx_pause] / 1e6 / seconds, 6)
        link = (summary["links"].get(port["ibdev"]) or {}).get("end") or {}
        flaps = [delta[n] for n in LINK_DOWN_COUNTERS if n in delta]
        # the physical layer (roce_counters.judge_phy's counters): symbol errors counted at two
        # layers, the larger; the others summed, None where the port has none of them
        symbols = [delta[n] for n in SYMBOL_ERROR_COUNTERS if n in delta]
        phy = {
            kind: sum(delta[n] for n in names if n in delta)
            for kind, names in (
                ("link_integrity", LINK_INTEGRITY_COUNTERS),
                ("buffer_overrun", BUFFER_OVERRUN_COUNTERS),
            )
            if any(n in delta for n in names)
        }
        out.append(
            {
                "ibdev": port["ibdev"],
                "link_up": int(link_up(link)) if link else None,
                "rate_gbps": link.get("rate_gbps") if link and link_up(link) else None,
                "link_down_events": max(flaps) if flaps else None,
                "retransmits_per_second": _rate(delta, RETRANSMIT_COUNTERS, seconds),
                "pause_seconds_per_second": paused,
                "rx_discards_per_second": _rate(delta, ("rx_discards_phy",), seconds),
                "cnp_sent_per_second": _rate(delta, (ECN_LOOP_COUNTERS[1],), seconds),
                "ecn_marked_per_second": _rate(delta, (ECN_LOOP_COUNTERS[0],), seconds),
                "symbol_errors_per_minute": round(max(symbols) * 60.0 / seconds, 3) if symbols else None,
                "phy_errors": phy,
            }
        )
    return out


# ---------------------------------------------------------------- vLLM instances


def _scrape(client):
    status, text = client.get("/metrics")
    if status != 200:
        return None
    try:
        return parse_prometheus(text)
    except MetricsError:
        return None


class InstanceWatch:
    """One vLLM instance: /health and /metrics when the window opens and when it closes."""

    def __init__(self, name, url, min_hit_ratio, timeout=5, client=None):
        self.name, self.url, self.min_hit_ratio = name, url, min_hit_ratio
        self.client = client or VllmClient(url, timeout)
        self.before = None
        self.health = (None, "")

    def start(self):
        self.before = _scrape(self.client)

    def stop(self, seconds):
        """(checks, fact) over the window of ``seconds``."""
        status, text = self.client.get("/health")
        health = health_check(self.name, status, text)
        after = _scrape(self.client) if status == 200 else None
        fact = {"name": self.name, "up": int(status == 200), "prefix_cache_hit_ratio": None}
        if self.before is None or after is None:
            fact.update(dict.fromkeys(serving_keys()))
            why = "its /metrics could not be read twice" if status == 200 else "it is down"
            cache = prefix_cache_check(
                self.name,
                None,
                self.min_hit_ratio,
                None,
                "over %g s of serving" % seconds,
                unread="prefix-cache hit rate unknown: %s" % why,
            )
            return [health, cache], fact
        judged = hit_rate_between(prefix_cache(self.before), prefix_cache(after))
        rate = judged["hit_rate"]
        fact["prefix_cache_hit_ratio"] = None if rate is None else round(rate, 4)
        served = serving(self.before, after, seconds)
        fact.update({k: (None if v is None else round(v, 4)) for k, v in served.items()})
        # an idle instance has no hit rate to judge; that is not a failure of the node
        cache = prefix_cache_check(
            self.name,
            rate,
            self.min_hit_ratio,
            judged["queries"],
            "in the %g s window" % seconds if rate is None else "over %g s of serving" % seconds,
            idle=rate is None and not fact.get("requests_running"),
        )
        return [health, cache], fact


def serving_keys():
    return (
        "generation_tokens_per_second",
        "preemptions_per_second",
        "requests_running",
        "requests_waiting",
        "kv_cache_usage_ratio",
    )


# ---------------------------------------------------------------- what a watch that acts reads

DEFAULT_DRAIN_RECORD_PATH = "/var/lib/gpufleet/drained"
# The drain role's record is one reason line (drain_state.MAX_REASON); more is not a record's.
MAX_DRAIN_RECORD_BYTES = 4096


def read_drain_record(path):
    """The text of the drain role's record at ``path`` (whitespace folded to one line), None when there
    is none. A record that is there but cannot be read (not a regular file, no permission) is still a
    record: its text says so, so a watch that acts never takes such a node for one in service. Opened
    without following a link and without waiting (a FIFO is never read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "record unreadable: %s (%s)" % (exc.strerror or exc, path)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "record unreadable: not a regular file (%s)" % path
        data = os.read(fd, MAX_DRAIN_RECORD_BYTES)
    except OSError as exc:
        return "record unreadable: %s (%s)" % (exc.strerror or exc, path)
    finally:
        os.close(fd)
    return " ".join(data.decode("utf-8", "replace").split()) or "drained"


# ---------------------------------------------------------------- the window


def sample_gap(reads):
    """The largest span between two consecutive reads, from the first's start to the second's end
    (when each read's instant fell is not known): a cap lasting longer falls on a read. None for
    fewer than two reads."""
    spans = [after[1] - before[0] for before, after in itertools.pairwise(reads)]
    return round(max(spans), 2) if spans else None


def gap_check(reads, max_gap_s):
    """``watch.gpu_sample_gap``: the GPUs' samples were close enough that a cap lasting ``max_gap_s``
    fell on one of them (fail closed when they were not, or when fewer than two were read)."""
    gap = sample_gap(reads)
    slowest = max((end - start for start, end in reads), default=0.0)
    if gap is None:
        why = "fewer than two GPU samples were read: a power cap in the window could be missed (fail closed)"
        return check("watch.gpu_sample_gap", False, None, max_gap_s, "s", why)
    said = "the GPUs' %d samples were at most %g s apart (the slowest read took %.2f s)" % (
        len(reads),
        gap,
        slowest,
    )
    if gap <= max_gap_s:
        return check(
            "watch.gpu_sample_gap",
            True,
            gap,
            max_gap_s,
            "s",
            "%s: a power cap lasting %g s or more falls on one" % (said, max_gap_s),
        )
    return check(
        "watch.gpu_sample_gap",
        False,
        gap,
        max_gap_s,
        "s",
        "%s, above %g s: a power cap that short could have been missed (fail closed); nvidia-smi answers "
        "slowly on this node (a GPU or driver in trouble, or a loaded host): run the watch again, or raise "
        "watch_max_sample_gap_s" % (said, max_gap_s),
    )


class Watch:
    """Reads a node over ``window_s`` seconds: :meth:`run` -> ``(checks, fact)``."""

    def __init__(
        self,
        run_command,
        smi,
        window_s,
        limits,
        ports,
        instances,
        ethtool="ethtool",
        priority=roce_reading.DEFAULT_PRIORITY,
        thresholds=None,
        clock=time.monotonic,
        sleep=time.sleep,
        root=None,
        peers=None,
        health=None,
        sample_interval_s=DEFAULT_SAMPLE_INTERVAL_S,
        max_sample_gap_s=DEFAULT_MAX_SAMPLE_GAP_S,
        history_path=None,
        drain_record_path=None,
        node_name="",
    ):
        # health: node_health's options ({expected_gpu_count, dmesg, nvlink, limits, turned_off}), or None
        self.health = health
        # the remediation history and the drain record (None: not read, the reading's entries null)
        self.history_path, self.drain_record_path, self.node_name = history_path, drain_record_path, node_name
        self.sample_interval_s, self.max_sample_gap_s = sample_interval_s, max_sample_gap_s
        self.run_command, self.smi, self.window_s, self.limits = run_command, smi, window_s, limits
        self.instances = instances
        self.clock, self.sleep = clock, sleep
        self.roce = roce_reading.Window(
            run_command,
            ports,
            ethtool,
            priority,
            thresholds,
            clock,
            root,
            name="watch.roce_counters",
            during="during the watch window",
            peers=peers,
        )

    def _sample(self, samples, errors, reads):
        began = self.clock()
        try:
            samples.append(read_gpus(self.run_command, self.smi))
        except GpuReadError as exc:
            errors.append(str(exc))
        reads.append((began, self.clock()))

    def _sample_until(self, end, samples, errors, reads):
        """A sample every sample_interval_s after the last one began (at once when a read overran) until
        the window's end, then one at its end. Stops at a failed read (the GPUs fail closed anyway)."""
        while not errors:
            due = reads[-1][0] + self.sample_interval_s
            if due >= end:
                break
            self.sleep(max(due - self.clock(), 0))
            self._sample(samples, errors, reads)
        self.sleep(max(end - self.clock(), 0))
        if not errors:
            self._sample(samples, errors, reads)

    def _health_start(self):
        """The GPUs' -q -x reading when the window opens (their PCIe replay counters) and their NVLink
        error counters (when NVLink is expected), or the error: ``(gpus, error, link_errors)``."""
        try:
            gpus = node_health.read_gpus(self.run_command, self.smi)
            links = None
            if self.health.get("nvlink", True):
                links = node_health.read_link_errors(self.run_command, self.smi)
            return gpus, None, links
        except node_health.ReadError as exc:
            return None, str(exc), None

    def _health(self, before=None, seconds=0.0, history=None):
        """node_health's checks and reading, the gate's judge on the serving node: a GPU that fell off
        the bus, a row remap pending, uncorrectable ECC, an NVLink link down, a recovery action, Xid
        events since boot, PCIe replays over the window (``before``: _health_start's; None: not read,
        replays not judged)."""
        h = self.health
        gpus_before, start_error, links_before = before or ([], None, None)
        try:
            if start_error is not None:
                raise node_health.ReadError("when the window opened: %s" % start_error)
            readings = node_health.read(self.run_command, self.smi, h.get("dmesg"), h.get("nvlink", True))
            # GPUDirect RDMA's host pieces (auto: where the node has RDMA devices) and any units asked for
            readings["gpudirect"] = gpudirect.read(
                self.run_command,
                h.get("gpudirect_rdma", "auto"),
                h.get("lspci", "lspci"),
                h.get("systemctl", "systemctl"),
                h.get("expected_services") or [],
            )
        except (node_health.ReadError, gpudirect.ReadError) as exc:
            why = "the node's health could not be read: %s (fail closed)" % exc
            found = [check("watch.health", False, str(exc), None, "", why)]
            if history is not None:
                # the mark is the history's, read apart from the tools: still judged
                found.append(remediation_history.replace_hardware_check(history))
            return found, None
        # the replace-hardware mark, judged with the rest (remediation_history.reading, or None: not read)
        readings["history"] = history
        found = node_health.judge(readings, h.get("expected_gpu_count"), h.get("limits"), h.get("turned_off"))
        replays = node_health.pcie_replay_checks(
            gpus_before, readings["gpus"], seconds, "during the watch window"
        )
        link_errors = node_health.nvlink_error_checks(
            links_before or [], readings.get("link_errors") or [], seconds, "during the watch window"
        )
        found.extend(node_health.turned_off(replays + link_errors, h.get("turned_off") or {}))
        fact = node_health.fact(readings)
        rises = {c["name"]: c["value"] for c in replays}
        per_minute = nvlink_errors_per_minute(links_before, readings.get("link_errors"), seconds)
        for gpu in fact["gpus"]:
            gpu["pcie_replays_window"] = rises.get("health.pcie_replays[%s]" % gpu["uuid"])
            gpu["nvlink_errors_per_minute"] = per_minute.get(gpu["uuid"])
        return found, fact

    def run(self):
        # first, the two small files a watch that acts decides from (before the window: what it finds
        # then is what the node was when the watch began)
        history = None
        if self.history_path:
            history = remediation_history.reading(self.history_path, self.node_name)
        drain_record = read_drain_record(self.drain_record_path) if self.drain_record_path else None
        samples, errors, reads = [], [], []
        health_before = self._health_start() if self.health is not None else None
        opened = self.clock()
        self.roce.start()
        for instance in self.instances:
            instance.start()
        # The GPUs' window begins once the ports and instances are open: their first reads (ethtool per
        # port, each instance's /metrics) take seconds on a loaded host and, between two GPU samples,
        # widened the gap past max_sample_gap_s with nothing wrong on the GPUs.
        started = self.clock()
        self._sample(samples, errors, reads)
        self._sample_until(started + self.window_s, samples, errors, reads)
        self.roce.stop()
        # the counters' span (replays, NVLink errors, what the instances served): since the ports opened
        seconds = round(max(self.clock() - opened, 0.001), 1)
        gap = sample_gap(reads)
        checks = []
        fact = {
            "window_s": seconds,
            "gpu_samples": len(samples),
            "sample_gap_s": gap,
            "gpus": [],
            "ports": port_facts(self.roce),
            "instances": [],
            "history": history["events"] if history else None,
            "drain_record": drain_record,
        }
        if errors or not samples:
            checks.append(
                check(
                    "watch.gpus",
                    False,
                    errors[0] if errors else None,
                    None,
                    "",
                    "the GPUs could not be read: %s (fail closed)" % (errors[0] if errors else "no sample"),
                )
            )
        else:
            gpus = summarize_gpus(samples, gap)
            checks.extend(power_check(g, seconds) for g in gpus)
            checks.append(gap_check(reads, self.max_sample_gap_s))
            checks.extend(gpu_checks(gpus, self.limits))
            fact["gpus"] = [gpu_fact(g) for g in gpus]
        checks.extend(self.roce.checks())
        if self.health is not None:
            found, fact["health"] = self._health(health_before, seconds, history)
            checks.extend(found)
        elif history is not None:
            # the hardware's health not judged: the replace-hardware mark still is
            checks.append(remediation_history.replace_hardware_check(history))
        for instance in self.instances:
            found, entry = instance.stop(seconds)
            checks.extend(found)
            fact["instances"].append(entry)
        return checks, fact
