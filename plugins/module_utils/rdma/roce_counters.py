# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCE port counters: ``ethtool -S`` and ``rdma statistic show link`` parsed, and judged over a window.

- :func:`parse_ethtool_stats`: ``ethtool -S <netdev>`` -> ``{counter: int}`` (mlx5 names:
  ``rx_discards_phy``, ``rx_prio3_pause``, ``tx_pause_storm_error_events``...). The "NIC
  statistics:" header and the leading spaces ethtool prints are optional.
- :func:`parse_rdma_statistic`: ``rdma statistic show link`` (iproute2) -> ``{(dev, port):
  {counter: int}}``, the same names as ``/sys/class/infiniband/<dev>/ports/<n>/hw_counters/``.
- :func:`judge_port`: two readings of one RoCE port's counters (hw_counters and ``ethtool -S``
  merged in one dict; their names do not overlap) taken ``seconds`` apart under load -> a list of
  checks (results.check) named ``fabric.<reading>[<dev>]``, with the default limits of
  DEFAULT_THRESHOLDS (a reason next to each).
- :func:`judge_phy`: the port's physical-layer error counters over a window (symbol errors, link
  error recovery and local link integrity, excessive buffer overruns).

What the counters mean (the kernel's Documentation/networking/device_drivers/ethernet/mellanox/
mlx5/counters.rst and the RDMA core): ``out_of_sequence``, ``packet_seq_err``,
``implied_nak_seq_err``, ``local_ack_timeout_err``, ``roce_adp_retrans`` count lost packets and
the retransmits they cost; ``rnr_nak_retry_err`` and ``req_transport_retries_exceeded`` a queue
pair that gave up (moved to the error state: the job using it fails or hangs);
``np_ecn_marked_roce_packets`` -> ``np_cnp_sent`` -> ``rp_cnp_handled`` are the ECN loop (marks
received, CNPs sent back, CNPs acted on); mlx5's ethtool prints ``rx_prioN_pause``,
``tx_prioN_pause`` and their ``_duration`` (microseconds) only for priorities with PFC on.

A parser raises ParseError, whose message starts with the tool's name ("ethtool -S: ",
"rdma statistic: "), on empty, cut or malformed output; counters are unsigned 64-bit integers.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import allowed_in_window, check

Func = TypeVar("Func", bound=Callable[..., Any])


class ParseError(ValueError):
    """Raised when ethtool -S or rdma statistic output is empty, cut or not in the tool's format."""


def _guard(tool: str) -> Callable[[Func], Func]:
    """parsing.guard with this module's ParseError; both tools end every line with a newline."""
    return guard(ParseError, tool, complete=True)


# A counter name as drivers print them ([a-z0-9_] on mlx5; some drivers add '.', '-', '[n]').
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\[\]-]*"
# ethtool prints each counter as "     %.*s: %llu" (ethtool.c dump_stats): ASCII digits only.
_ETHTOOL_LINE = re.compile(r"^(" + _NAME + r"): ([0-9]+)$")
_COUNTER_NAME = re.compile(r"^" + _NAME + r"$")
_VALUE = re.compile(r"^[0-9]+$")
_LINK = re.compile(r"^([^\s/]+)/([0-9]{1,5})$")


# ------------------------------------------------------------------ ethtool -S


@_guard("ethtool -S")
def parse_ethtool_stats(text: str) -> dict[str, int]:
    """``ethtool -S <netdev>`` -> ``{counter: int}``, in the order printed.

    A repeated counter name is refused (mlx5 names are unique: a repeated line is damaged
    output), and so is a line that is not "<name>: <unsigned integer>".
    """
    stats: dict[str, int] = {}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0] == "NIC statistics:":
        lines = lines[1:]
    if not lines:
        raise ParseError("ethtool -S: no counters after 'NIC statistics:' (the driver exports none?)")
    for line in lines:
        match = _ETHTOOL_LINE.match(line)
        if not match:
            raise ParseError("ethtool -S: line %r is not '<counter>: <unsigned integer>'" % line[:120])
        name, value = match.groups()
        if name in stats:
            raise ParseError("ethtool -S: counter %s is printed twice" % name)
        stats[name] = int(value)
    return stats


# ------------------------------------------------------------------ rdma statistic show link


@_guard("rdma statistic")
def parse_rdma_statistic(text: str) -> dict[tuple[str, int], dict[str, int]]:
    """``rdma statistic show [link [DEV/PORT]]`` -> ``{(dev, port): {counter: int}}``.

    iproute2 prints one line per link: ``link <dev>/<port>`` then ``<counter> <value>`` pairs. A
    line that does not start with ``link`` continues the one before (the only real capture is a
    mail, wrapped at 100 columns); pairs must be complete, each counter once per link.
    """
    links: dict[tuple[str, int], list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        tokens = raw.split()
        if not tokens:
            continue
        if tokens[0] == "link":
            match = _LINK.match(tokens[1]) if len(tokens) > 1 else None
            if not match:
                raise ParseError(
                    "rdma statistic: %r is not 'link <dev>/<port> <counter> <value> ...'" % raw[:120]
                )
            key = (match.group(1), int(match.group(2)))
            if key in links:
                raise ParseError("rdma statistic: link %s/%d is printed twice" % key)
            current = links[key] = []
            tokens = tokens[2:]
        elif current is None:
            raise ParseError("rdma statistic: line %r comes before any 'link <dev>/<port>'" % raw[:120])
        current.extend(tokens)
    if not links:
        raise ParseError("rdma statistic: no 'link <dev>/<port>' line")
    result: dict[tuple[str, int], dict[str, int]] = {}
    for (dev, port), tokens in links.items():
        if len(tokens) % 2:
            raise ParseError("rdma statistic: link %s/%d has a counter without a value (cut?)" % (dev, port))
        counters: dict[str, int] = {}
        for name, value in zip(tokens[::2], tokens[1::2], strict=True):
            if not _COUNTER_NAME.match(name) or not _VALUE.match(value):
                raise ParseError(
                    "rdma statistic: link %s/%d: %r %r is not '<counter> <unsigned integer>'"
                    % (dev, port, name, value[:40])
                )
            if name in counters:
                raise ParseError("rdma statistic: link %s/%d prints %s twice" % (dev, port, name))
            counters[name] = int(value)
        if not counters:
            raise ParseError("rdma statistic: link %s/%d has no counters" % (dev, port))
        result[(dev, port)] = counters
    return result


# ------------------------------------------------------------------ the judgement

# The retransmit family: each counts a lost or out-of-order packet and the resend it cost.
RETRANSMIT_COUNTERS = (
    "packet_seq_err",
    "out_of_sequence",
    "local_ack_timeout_err",
    "implied_nak_seq_err",
    "roce_adp_retrans",
)
# A queue pair that ran out of retries and moved to the error state.
QP_FAILURE_COUNTERS = ("rnr_nak_retry_err", "req_transport_retries_exceeded")
# The ECN loop: marks seen by the receiver (NP), CNPs it sent, CNPs the sender (RP) acted on.
ECN_LOOP_COUNTERS = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled")
# mlx5's PFC pause-storm prevention events (ethtool -S, per physical port).
PAUSE_STORM_COUNTERS = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")

DEFAULT_THRESHOLDS: dict[str, float] = {
    # A lossless fabric resends next to nothing; a few per second over a burn-in (a QP's start, a
    # link retrain) are noise, a steady stream means drops on the path (the incident's stall).
    "retransmits_per_s": 1.0,
    # Any increase: each one is a queue pair in the error state, so a job failed or hangs.
    "qp_failures": 0,
    # Share of the window the RoCE priority spent paused (either direction, in %): PFC pausing
    # now and then is how lossless works; a port paused a tenth of the time loses as much
    # bandwidth and spreads the congestion (head-of-line blocking) to its neighbours.
    "pause_pct": 10.0,
    # Any increase: the NIC could not drain its buffers for hundreds of milliseconds and its
    # storm prevention stopped sending pauses (drops follow).
    "pause_storm_events": 0,
    # Drops in the port's buffers: with PFC on the RoCE priority none should happen under the
    # burn-in's load (raise it for a port that also carries lossy bulk traffic).
    "rx_discards_per_s": 0.0,
    # Receive rings found empty by the NIC: the host is not keeping up, packets dropped before the
    # fabric is to blame; a healthy host under the burn-in's load keeps up.
    "rx_out_of_buffer_per_s": 0.0,
    # Any link-down event in the window: a link that flapped under load drops every queue pair on
    # it (NCCL aborts or hangs), and a cable or transceiver that flaps once flaps again.
    "link_flaps": 0,
    # Seconds at the start of a window whose link-down events are the fabric settling, not a fault:
    # a ConnectX-8 port retrains once or twice while its fabric comes up (leptonai/gpud#1247, CX8 and
    # Q3400). A window that runs longer reads the links again at this time (Window.settle): down
    # events before that reading pass when none follow it and the link is up at the end; every one
    # after it counts against link_flaps. A window no longer than this has no such reading and every
    # down event in it counts. 0: no settling, every down event counts. At most 3600 s.
    "link_flap_settle_s": 30.0,
    # A port that moved less than this share of its loaded siblings' median RDMA bytes: the load
    # did not reach it (link down, wrong route, a GID or ToS the traffic does not use).
    "min_traffic_share": 0.1,
    # ECN-marked packets per second arriving with no CNP sent back: a notification point that is off.
    # A working one answers within microseconds, but it coalesces CNPs per queue pair and the two
    # counters are read apart, so a mark or two in a window can still be unanswered; the incident's
    # dead notification point left hundreds a second unanswered.
    "unanswered_ecn_marks_per_s": 5.0,
    # Uncorrected symbol errors a minute on the port's physical layer (judge_phy): NVIDIA's
    # NVSentinel marks a port fatal above 120 an hour (2 a minute); a window under a minute is
    # allowed a minute's worth.
    "symbol_errors_per_min": 2.0,
    # Any link error recovery or local link integrity error in the window (judge_phy): the link
    # retrained or saw a burst of physical errors under load. ibqueryerrors' default threshold is
    # 0 (rdma-core); NVSentinel's 5 a minute is a fatal rate in service, not a gate's limit.
    "link_integrity_errors": 0,
    # Any excessive buffer overrun (judge_phy): the port's receive buffer overran on consecutive
    # flow-control updates, a link-level credit fault (0: ibqueryerrors' default; no vendor rate).
    "buffer_overrun_errors": 0,
}

# The link-down counters: mlx5's physical port (ethtool -S) and the kernel's netdev (sysfs
# carrier_down_count). Both count the same events at two layers: the larger is the flap count.
LINK_DOWN_COUNTERS = ("link_down_events_phy", "carrier_down_count")
# The physical layer's error counters (judge_phy). The InfiniBand PortCounters an RDMA port shows in
# /sys/class/infiniband/<dev>/ports/<n>/counters/ (IBTA; mlx5 fills them from the port's PPCNT
# register) and mlx5's ethtool -S physical-port counters count the same events at two layers: the
# larger rise is the count. rx_symbol_err_phy: packets the PHY received with a symbol error;
# rx_pcs_symbol_err_phy: symbol errors FEC did not correct (mlx5 counters.rst).
SYMBOL_ERROR_COUNTERS = ("symbol_error", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy")
LINK_INTEGRITY_COUNTERS = ("link_error_recovery", "local_link_integrity_errors")
BUFFER_OVERRUN_COUNTERS = ("excessive_buffer_overrun_errors",)
# The sysfs counters/ files judge_phy reads (roce_reading.read_port_counters).
PORT_COUNTERS = ("symbol_error", *LINK_INTEGRITY_COUNTERS, *BUFFER_OVERRUN_COUNTERS)
# The RDMA bytes a port moved (mlx5's vport counters in ethtool -S), each way.
RDMA_BYTES_COUNTERS = ("rx_vport_rdma_unicast_bytes", "tx_vport_rdma_unicast_bytes")
# Below this many RDMA bytes per second the siblings count as idle: no load to compare against
# (about one 4 KiB RDMA frame every 4 ms; the burn-in's load moves gigabytes a second per port).
LOADED_BYTES_PER_S = 1.0e6
# The share of a window the RoCE priority must spend paused before an ECN loop that marked
# nothing is a fault: a few microseconds of pause as a load stops are not congestion.
CONGESTED_PAUSE_PCT = 1.0


def _delta(before: Mapping[str, int], after: Mapping[str, int], name: str) -> int | None:
    """How much ``name`` grew; None when either reading lacks it. A counter that went backwards
    was reset (driver reload, port reset) in the window: it counted ``after`` since then."""
    old, new = before.get(name), after.get(name)
    if old is None or new is None:
        return None
    return new - old if new >= old else new


def _sum(before: Mapping[str, int], after: Mapping[str, int], names: tuple[str, ...]) -> int | None:
    deltas = [d for d in (_delta(before, after, n) for n in names) if d is not None]
    return sum(deltas) if deltas else None


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 3)


def _at_most(name: str, value: float, limit: float, unit: str, message: str) -> dict[str, Any]:
    """A counter's verdict: what grew over the window passes at or below its limit."""
    return check(name, value <= limit, value, limit, unit, message)


# The checks that count events: name -> the counters summed, the limit's key, what they count.
_EVENT_CHECKS = {
    "fabric.qp_failures": (QP_FAILURE_COUNTERS, "qp_failures", "queue pairs ran out of retries"),
    "fabric.pause_storm": (PAUSE_STORM_COUNTERS, "pause_storm_events", "pause storm events"),
}


def _events(
    name: str,
    device: str,
    where: str,
    before: Mapping[str, int],
    after: Mapping[str, int],
    limits: Mapping[str, float],
) -> list[dict[str, Any]]:
    """``<name>[<device>]`` (``fabric.qp_failures``, ``fabric.pause_storm``): the events its counters
    counted over the window, at most their limit; no check when the port has none of them."""
    counters, key, what = _EVENT_CHECKS[name]
    count = _sum(before, after, counters)
    if count is None:
        return []
    message = "%s: %d %s (%s), limit %g" % (where, count, what, ", ".join(counters), limits[key])
    return [_at_most("%s[%s]" % (name, device), count, limits[key], "", message)]


def judge_port(
    device: str,
    before: Mapping[str, int],
    after: Mapping[str, int],
    seconds: float,
    priority: int = 3,
    thresholds: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Checks of one RoCE port (``device`` as in the names, e.g. mlx5_3) from two readings.

    ``before``/``after`` hold that port's hw_counters and its netdev's ``ethtool -S`` counters,
    read ``seconds`` apart (> 0) under load; ``priority`` is the RoCE priority with PFC;
    ``thresholds`` overrides DEFAULT_THRESHOLDS key by key. A check is returned only when its
    counters are in both readings, except ``fabric.host_pfc``, judged whenever the ethtool
    counters are there (``rx_packets_phy``): no ``rx_prio<N>_pause`` means PFC is off on N.
    """
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("seconds must be a finite number > 0, not %r" % (seconds,))
    if not isinstance(priority, int) or not 0 <= priority <= 7:
        raise ValueError("priority must be 0..7, not %r" % (priority,))
    limits = dict(DEFAULT_THRESHOLDS)
    for key, value in (thresholds or {}).items():
        if key not in limits:
            raise ValueError("unknown threshold %r (known: %s)" % (key, ", ".join(sorted(limits))))
        limits[key] = value
    where = "%s over %gs" % (device, seconds)
    checks: list[dict[str, Any]] = []

    retransmits = _sum(before, after, RETRANSMIT_COUNTERS)
    if retransmits is not None:
        rate = _rate(retransmits, seconds)
        checks.append(
            _at_most(
                "fabric.retransmits[%s]" % device,
                rate,
                limits["retransmits_per_s"],
                "1/s",
                "%s: %d lost packets and retransmits (%s), %g/s, limit %g/s"
                % (where, retransmits, ", ".join(RETRANSMIT_COUNTERS), rate, limits["retransmits_per_s"]),
            )
        )

    checks += _events("fabric.qp_failures", device, where, before, after, limits)

    pause_names = ("rx_prio%d_pause" % priority, "tx_prio%d_pause" % priority)
    rx_us = _delta(before, after, "rx_prio%d_pause_duration" % priority)
    tx_us = _delta(before, after, "tx_prio%d_pause_duration" % priority)
    if rx_us is not None or tx_us is not None:
        paused_pct = round(max(rx_us or 0, tx_us or 0) / (seconds * 1e6) * 100, 3)
        checks.append(
            _at_most(
                "fabric.pause_duration[%s]" % device,
                paused_pct,
                limits["pause_pct"],
                "%",
                "%s: priority %d paused %g%% of the time (received %s us, sent %s us), limit %g%%"
                % (where, priority, paused_pct, rx_us, tx_us, limits["pause_pct"]),
            )
        )

    checks += _events("fabric.pause_storm", device, where, before, after, limits)

    for counter, key, name in (
        ("rx_discards_phy", "rx_discards_per_s", "fabric.rx_discards"),
        ("rx_out_of_buffer", "rx_out_of_buffer_per_s", "fabric.rx_out_of_buffer"),
    ):
        grew = _delta(before, after, counter)
        if grew is None:
            continue
        rate = _rate(grew, seconds)
        checks.append(
            _at_most(
                "%s[%s]" % (name, device),
                rate,
                limits[key],
                "1/s",
                "%s: %s grew by %d, %g/s, limit %g/s" % (where, counter, grew, rate, limits[key]),
            )
        )

    ecn_check = _ecn_loop_check(device, where, before, after, seconds, retransmits, rx_us, tx_us, limits)
    if ecn_check is not None:
        checks.append(ecn_check)

    if "rx_packets_phy" in after:
        present = pause_names[0] in after
        checks.append(
            check(
                "fabric.host_pfc[%s]" % device,
                present,
                present,
                True,
                "",
                "%s: ethtool -S has %s: PFC is on for priority %d" % (device, pause_names[0], priority)
                if present
                else "%s: ethtool -S has no %s: host PFC is off on priority %d"
                % (device, pause_names[0], priority),
            )
        )
    return checks


def _ecn_loop_check(
    device: str,
    where: str,
    before: Mapping[str, int],
    after: Mapping[str, int],
    seconds: float,
    retransmits: int | None,
    rx_us: int | None,
    tx_us: int | None,
    limits: Mapping[str, float],
) -> dict[str, Any] | None:
    """``fabric.ecn_loop[<dev>]``: the DCQCN loop works when there is congestion to signal.

    Broken two ways: congestion (PFC pausing the priority at least CONGESTED_PAUSE_PCT of the
    window, or retransmits above their limit) with no ECN mark or CNP at all (the switch is not
    marking), or ECN-marked packets arriving with no CNP sent back, more than
    ``unanswered_ecn_marks_per_s`` of them (the host's notification point is off: the senders never
    slow down). No traffic, or a few microseconds of pause as a load
    stops, is not congestion: nothing to judge, and the check passes saying so.
    """
    ecn = _sum(before, after, ECN_LOOP_COUNTERS)
    if ecn is None:
        return None
    chain = " -> ".join(ECN_LOOP_COUNTERS)
    paused_pct = max(rx_us or 0, tx_us or 0) / (seconds * 1e6) * 100
    resending = retransmits is not None and _rate(retransmits, seconds) > limits["retransmits_per_s"]
    congested = paused_pct >= CONGESTED_PAUSE_PCT or resending
    marked = _delta(before, after, ECN_LOOP_COUNTERS[0])
    sent = _delta(before, after, ECN_LOOP_COUNTERS[1])
    name = "fabric.ecn_loop[%s]" % device
    unanswered = marked if marked and sent == 0 else 0
    unanswered_rate = _rate(unanswered, seconds)
    if unanswered and unanswered_rate > limits["unanswered_ecn_marks_per_s"]:
        return check(
            name,
            False,
            0,
            1,
            "CNPs",
            "%s: %d ECN-marked packets arrived (%g/s) and the host sent no CNP (np_cnp_sent did not "
            "grow): its ECN notification point is off on the RoCE priority, so the senders never slow "
            "down (see rdma_qos.ecn_np)" % (where, marked, _rate(marked, seconds)),
        )
    if congested and ecn == 0:
        return check(
            name,
            False,
            ecn,
            1,
            "",
            "%s: the RoCE priority paused %.3g%% of the time%s but no ECN mark or CNP (%s): the switch "
            "is not marking" % (where, paused_pct, " and packets were resent" if resending else "", chain),
        )
    trickle = (
        "; %d marks not answered yet, %g/s, within the %g/s a live notification point can leave"
        % (unanswered, unanswered_rate, limits["unanswered_ecn_marks_per_s"])
        if unanswered
        else ""
    )
    return check(
        name,
        True,
        ecn,
        1 if congested else 0,
        "",
        "%s: %d ECN marks and CNPs (%s)%s%s"
        % (where, ecn, chain, " under congestion" if congested else " (no congestion to signal)", trickle),
    )


# ------------------------------------------------------------------ the link over a window


def link_up(link: Mapping[str, Any]) -> bool:
    """An RDMA port's sysfs state is ACTIVE and its physical state LinkUp (when reported)."""
    return link.get("state") == "ACTIVE" and link.get("phys_state") in (None, "LinkUp")


def link_state_check(
    device: str, link: Mapping[str, Any], up_message: str, down_message: str
) -> dict[str, Any]:
    """``rdma_link.link_state[<device>]``, the one judge: the port is up (link_up) in this reading;
    the message for either outcome is the caller's (one reading, or a window's last)."""
    up = link_up(link)
    return check(
        "rdma_link.link_state[%s]" % device,
        up,
        link.get("state"),
        "ACTIVE",
        "",
        up_message if up else down_message,
    )


def _link_text(link: Mapping[str, Any]) -> str:
    rate = link.get("rate_gbps")
    shown = "%s / %s" % (link.get("state") or "unknown", link.get("phys_state") or "unknown")
    return shown + (" at %s Gb/s" % rate if rate and link_up(link) else "")


def link_downs(before: Mapping[str, int], after: Mapping[str, int]) -> int | None:
    """The link-down events between two readings (LINK_DOWN_COUNTERS count the same events at two
    layers: the larger rise); None when neither reading has them."""
    known = [f for f in (_delta(before, after, n) for n in LINK_DOWN_COUNTERS) if f is not None]
    return max(known) if known else None


def judge_link(
    device: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    counters_before: Mapping[str, int],
    counters_after: Mapping[str, int],
    during: str,
    peer: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    settled: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """A RoCE port's link over a window: up at its end, at the rate it started with, no flap.

    ``before``/``after`` are the port's link readings (rdma.read_ib_port's ``state``,
    ``phys_state``, ``rate_gbps``) when the window opened and closed; ``counters_*`` its counters
    (LINK_DOWN_COUNTERS among them when the port has them); ``during`` says what the window was
    ("during the burn-in"); ``peer`` is the leaf port the cabling plan gives it ("leaf02:swp8").
    A port that went down and came back shows as a flap; one that went down stays failed as
    ``rdma_link.link_state[<dev>]``, the name the link role gives the same condition.

    ``settled`` is the port's reading when the window's settling time ended (Window.settle:
    ``{"link", "counters", "at_s", "window_s"}``), or None: when the link was up in it, the down
    events before it are the fabric settling and pass when none follow it and the link is up at the
    end (``link_flap_settle_s``); those after it are judged against ``link_flaps``. Without it, or
    with the link not up in it, every down event in the window is judged.
    """
    limits = dict(DEFAULT_THRESHOLDS)
    limits.update(thresholds or {})
    label = device + (" (cabled to %s)" % peer if peer else " (no cabling plan names its leaf port)")
    checks = []
    up_before, up_after = link_up(before), link_up(after)
    if up_after:
        state_msg = "%s link is up %s: %s" % (label, during, _link_text(after))
    elif up_before:
        state_msg = (
            "%s went down %s: %s when it started, %s when it ended; configuration cannot fix this: check "
            "the cable, the transceiver and the leaf port"
            % (label, during, _link_text(before), _link_text(after))
        )
    else:
        state_msg = (
            "%s link was down for the whole window %s (%s): check the cable, the transceiver and "
            "the leaf port"
            % (
                label,
                during,
                _link_text(after),
            )
        )
    checks.append(link_state_check(device, after, state_msg, state_msg))
    rate_before, rate_after = before.get("rate_gbps"), after.get("rate_gbps")
    if up_before and up_after and rate_before:
        slower = rate_after is None or rate_after < rate_before
        checks.append(
            check(
                "fabric.link_rate[%s]" % device,
                not slower,
                rate_after,
                rate_before,
                "Gb/s",
                "%s ran at %s Gb/s %s, down from %s Gb/s when it started: the link retrained to a lower "
                "rate (a dirty or failing cable or transceiver; mlxlink -d %s shows the lanes)"
                % (label, rate_after, during, rate_before, device)
                if slower
                else "%s held %s Gb/s %s" % (label, rate_after, during),
            )
        )
    went_down = up_before and not up_after
    flaps = _flap_count(
        label, (counters_before, counters_after), during, limits=limits, went_down=went_down, settled=settled
    )
    if flaps is not None:
        count, ok, said = flaps
        checks.append(
            check("fabric.link_flaps[%s]" % device, ok, count, limits["link_flaps"], "link-down events", said)
        )
    return checks


def _flap_count(
    label: str,
    counters: tuple[Mapping[str, int], Mapping[str, int]],
    during: str,
    *,
    limits: Mapping[str, float],
    went_down: bool,
    settled: Mapping[str, Any] | None,
) -> tuple[int, bool, str] | None:
    """``fabric.link_flaps[<device>]``'s ``(count, ok, message)``: the down events judged (those after
    the settling reading when there is one, else all of them) between the port's ``counters`` (before,
    after), at most ``link_flaps``; None when the port counts none and did not go down."""
    counters_before, counters_after = counters
    total = link_downs(counters_before, counters_after)
    settling, judged = None, total
    if settled is not None and not link_up(settled.get("link") or {}):
        # still down (or training) when the settling time ended: it did not settle, all of them count
        return _flap_count(label, counters, during, limits=limits, went_down=went_down, settled=None)
    if settled is not None:
        settling = link_downs(counters_before, settled["counters"])
        judged = link_downs(settled["counters"], counters_after)
    if total is None and judged is None and not went_down:
        return None
    count = max(judged or 0, 1 if went_down else 0)
    ok = count <= limits["link_flaps"]
    counted = ", ".join(LINK_DOWN_COUNTERS)
    if settled is None:
        said = "%s: %d link-down events %s (%s), limit %g" % (
            label,
            count,
            during,
            counted,
            limits["link_flaps"],
        )
    else:
        said = (
            "%s: %d link-down events %s after its first %s s (%s), limit %g; %d in those first %s s while "
            "the fabric settled (link_flap_settle_s %g: allowed when none follow)"
            % (
                label,
                count,
                during,
                _fmt_s(settled["at_s"]),
                counted,
                limits["link_flaps"],
                settling or 0,
                _fmt_s(settled["at_s"]),
                limits["link_flap_settle_s"],
            )
        )
        if ok and settling:
            said += "; the link then held up for %s s" % _fmt_s(settled["window_s"] - settled["at_s"])
    if not ok:
        said += (
            ": every queue pair on the link was torn down; reseat or replace the cable and transceiver, "
            "then run the gate again"
        )
    return count, ok, said


def _fmt_s(seconds: float) -> str:
    return "%g" % round(seconds, 1)


def _largest(before: Mapping[str, int], after: Mapping[str, int], names: tuple[str, ...]) -> int | None:
    """The largest rise of ``names`` (one event counted at several layers); None when none is read."""
    known = [d for d in (_delta(before, after, n) for n in names) if d is not None]
    return max(known) if known else None


def judge_phy(
    device: str,
    before: Mapping[str, int],
    after: Mapping[str, int],
    seconds: float,
    during: str,
    peer: str | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """A RoCE port's physical layer over a window: ``fabric.symbol_errors[<dev>]`` (uncorrected symbol
    errors, ``symbol_errors_per_min`` a minute, a window under a minute allowed a minute's worth),
    ``fabric.link_integrity[<dev>]`` (link error recoveries and local link integrity errors, at most
    ``link_integrity_errors``) and ``fabric.buffer_overrun[<dev>]`` (excessive buffer overruns, at
    most ``buffer_overrun_errors``). Each is judged only where the port has one of its counters in
    both readings (PORT_COUNTERS from sysfs, the ``*_phy`` ones from ``ethtool -S``)."""
    limits = dict(DEFAULT_THRESHOLDS)
    limits.update(thresholds or {})
    label = device + (" (cabled to %s)" % peer if peer else "")
    fix = (
        ": the link between the NIC and its leaf is corrupting symbols; clean or replace the cable and "
        "transceiver (mlxlink -d %s shows the BER and the lanes), then run the gate again" % device
    )
    checks = []
    symbols = _largest(before, after, SYMBOL_ERROR_COUNTERS)
    if symbols is not None:
        allowed = allowed_in_window(limits["symbol_errors_per_min"], seconds)
        ok = symbols <= allowed
        checks.append(
            check(
                "fabric.symbol_errors[%s]" % device,
                ok,
                symbols,
                allowed,
                "symbol errors",
                "%s: %d symbol errors %s (%g s; %s), limit %d (%g a minute, NVSentinel's 120 an hour)%s"
                % (
                    label,
                    symbols,
                    during,
                    seconds,
                    ", ".join(SYMBOL_ERROR_COUNTERS),
                    allowed,
                    limits["symbol_errors_per_min"],
                    "" if ok else fix,
                ),
            )
        )
    for name, counters, key, what in (
        (
            "fabric.link_integrity[%s]" % device,
            LINK_INTEGRITY_COUNTERS,
            "link_integrity_errors",
            "link error recoveries and local link integrity errors",
        ),
        (
            "fabric.buffer_overrun[%s]" % device,
            BUFFER_OVERRUN_COUNTERS,
            "buffer_overrun_errors",
            "excessive buffer overruns",
        ),
    ):
        count = _sum(before, after, counters)
        if count is None:
            continue
        ok = count <= limits[key]
        checks.append(
            check(
                name,
                ok,
                count,
                limits[key],
                "errors",
                "%s: %d %s %s (%s), limit %g%s"
                % (label, count, what, during, ", ".join(counters), limits[key], "" if ok else fix),
            )
        )
    return checks


def rdma_bytes_per_s(before: Mapping[str, int], after: Mapping[str, int], seconds: float) -> float | None:
    """RDMA bytes the port moved per second, both ways (None without the vport counters)."""
    moved = _sum(before, after, RDMA_BYTES_COUNTERS)
    return None if moved is None else moved / seconds


def judge_traffic(
    rates: Mapping[str, float | None],
    during: str,
    peers: Mapping[str, str] | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """``fabric.traffic[<dev>]``: each port carried its share while its siblings carried load.

    ``rates`` is every RoCE port's RDMA bytes per second over one window (rdma_bytes_per_s). A
    port's zero counters say nothing about its health when it carried nothing: next to siblings
    that carried load (median of the others at least LOADED_BYTES_PER_S), a port below
    ``min_traffic_share`` of their median fails. With no sibling loaded (an idle node) nothing is
    judged: no traffic is not a fault. A single port has no sibling to compare with.
    """
    limits = dict(DEFAULT_THRESHOLDS)
    limits.update(thresholds or {})
    share = limits["min_traffic_share"]
    known = {dev: rate for dev, rate in rates.items() if rate is not None}
    checks = []
    for device, rate in known.items():
        others = sorted(r for d, r in known.items() if d != device)
        if not others:
            continue
        median = (
            others[len(others) // 2]
            if len(others) % 2
            else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
        )
        if median < LOADED_BYTES_PER_S:
            continue
        ratio = round(rate / median, 4)
        peer = (peers or {}).get(device)
        label = device + (" (cabled to %s)" % peer if peer else "")
        ok = ratio >= share
        checks.append(
            check(
                "fabric.traffic[%s]" % device,
                ok,
                ratio,
                share,
                "of siblings' median",
                "%s moved %.3g MB/s of RDMA %s, %.3g of its %d siblings' median %.3g MB/s%s"
                % (
                    label,
                    rate / 1e6,
                    during,
                    ratio,
                    len(others),
                    median / 1e6,
                    ""
                    if ok
                    else " (limit %g): the load did not reach it, so its counters prove nothing; check its "
                    "link, its route to the leaf and its GID/ToS" % share,
                ),
            )
        )
    return checks
