# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a node's RoCE port counters (the I/O around roce_counters, which parses and judges).

- :func:`roce_ports`: the node's RoCE ports, from sysfs: every RDMA port whose link layer is
  Ethernet and that has a netdev (``[{ibdev, port, netdev}]``, in device order);
- :func:`read_hw_counters`: ``/sys/class/infiniband/<dev>/ports/<n>/hw_counters/*`` -> ``{name: int}``;
- :func:`read_port_counters`: the physical-layer PortCounters of ``ports/<n>/counters/`` (symbol
  errors, link error recovery, link integrity, buffer overruns) -> ``{name: int}``;
- :func:`read_port`: one reading of one port: ``ethtool -S <netdev>`` (run first), then its
  hw_counters, merged in one dict (mlx5's two sets of names do not overlap), as
  roce_counters.judge_port takes it;
- :func:`read_ports`: one reading of every port given;
- :func:`read_links`: every port's link (state, physical state, rate) from sysfs;
- :func:`judge`: roce_counters.judge_port over every port of two readings;
- :class:`Window`: the counters and the links when a load starts and when it stops, judged (the
  burn-in's and the watch's): the counters (judge_port), each link up at the end at the rate it
  started with and without a flap (judge_link), its physical layer's errors (judge_phy), each
  port's share of the load (judge_traffic).

Tools run through ``run_command`` (AnsibleModule.run_command, or a test's) in the C locale with
tool_runner.read_command's retry of an empty read. What cannot be read raises ReadError, whose
message names the tool (``ethtool -S ens21np0 ...``) or the sysfs file, with the command's
``cmd``, ``rc``, ``stdout`` and ``stderr`` for fail_json.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse, rdma_read
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_counters import (
    BUFFER_OVERRUN_COUNTERS,
    DEFAULT_THRESHOLDS,
    ECN_LOOP_COUNTERS,
    LINK_DOWN_COUNTERS,
    LINK_INTEGRITY_COUNTERS,
    PAUSE_STORM_COUNTERS,
    PORT_COUNTERS,
    QP_FAILURE_COUNTERS,
    RDMA_BYTES_COUNTERS,
    RETRANSMIT_COUNTERS,
    SYMBOL_ERROR_COUNTERS,
    ParseError,
    judge_link,
    judge_phy,
    judge_port,
    judge_traffic,
    parse_ethtool_stats,
    rdma_bytes_per_s,
)

RunCommand = Callable[..., tuple[int, str, str]]
Port = dict[str, Any]
Reading = dict[str, dict[str, int]]
Links = dict[str, dict[str, Any]]

# The RoCE priority of the fleet's lossless profile (rdma_qos: PFC and ECN on priority 3).
DEFAULT_PRIORITY = 3


class ReadError(Exception):
    """A RoCE port's counters could not be read: the message names the tool or file and why."""

    def __init__(
        self,
        message: str,
        cmd: list[str] | None = None,
        rc: int | None = None,
        stdout: str | None = None,
        stderr: str | None = None,
    ) -> None:
        super().__init__(message)
        self.cmd, self.rc, self.stdout, self.stderr = cmd, rc, stdout, stderr

    def details(self) -> dict[str, Any]:
        """What fail_json takes besides msg: the command and its output, when a command failed."""
        if self.cmd is None:
            return {}
        return {"cmd": self.cmd, "rc": self.rc, "stdout": self.stdout, "stderr": self.stderr}


# ---------------------------------------------------------------- the ports


def roce_ports(root: str | None = None) -> list[Port]:
    """Every RDMA port with an Ethernet link layer and a netdev: ``[{ibdev, port, netdev}]``."""
    ports = []
    for ibdev in rdma_read.list_ib_devices(root):
        for port in rdma_read.ib_ports(ibdev, root):
            try:
                info = rdma_read.read_ib_port(ibdev, port, root)
            except rdma_parse.ParseError as exc:
                raise ReadError(str(exc)) from exc
            if info["link_layer"] == "Ethernet" and info["netdev"]:
                ports.append({"ibdev": ibdev, "port": port, "netdev": info["netdev"]})
    return ports


# ---------------------------------------------------------------- one reading


def read_hw_counters(ibdev: str, port: int = 1, root: str | None = None) -> dict[str, int]:
    """The port's hw_counters files (empty when the driver exports none); each one unsigned integer."""
    directory = rdma_read.sysfs_path(
        "class", "infiniband", ibdev, "ports", str(port), "hw_counters", root=root
    )
    if not os.path.isdir(directory):
        return {}
    counters = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        value = _read_counter(path) if os.path.isfile(path) else None
        if value is not None:
            counters[name] = value
    return counters


def read_port_counters(ibdev: str, port: int = 1, root: str | None = None) -> dict[str, int]:
    """The port's physical-layer PortCounters in ``ports/<n>/counters/`` (roce_counters.PORT_COUNTERS:
    symbol_error, link_error_recovery, local_link_integrity_errors, excessive_buffer_overrun_errors),
    those present; empty when the driver exports no counters/ directory."""
    directory = rdma_read.sysfs_path("class", "infiniband", ibdev, "ports", str(port), "counters", root=root)
    counters = {}
    for name in PORT_COUNTERS:
        value = _read_counter(os.path.join(directory, name))
        if value is not None:
            counters[name] = value
    return counters


def _read_counter(path: str) -> int | None:
    """One sysfs counter file: an unsigned integer, None when the file is not there, else ReadError
    naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReadError("sysfs: %s could not be read (%s)" % (path, exc.strerror or exc)) from exc
    if not text.isdigit() or not text.isascii():
        raise ReadError("sysfs: %s holds %r, not a counter (an unsigned integer)" % (path, text[:40]))
    return int(text)


def ethtool_argv(netdev: str, ethtool: str = "ethtool") -> list[str]:
    return [ethtool, "-S", netdev]


def read_ethtool(run_command: RunCommand, netdev: str, ethtool: str = "ethtool") -> dict[str, int]:
    """``ethtool -S <netdev>`` parsed (roce_counters.parse_ethtool_stats)."""
    cmd = ethtool_argv(netdev, ethtool)
    rc, out, err = tool_runner.read_command(run_command, cmd, environ_update=tool_runner.ENV)
    shown = "ethtool -S %s" % netdev
    if rc != 0:
        raise ReadError(
            "%s failed (rc=%d): %s" % (shown, rc, tool_runner.first_line(err, out)),
            cmd,
            rc,
            out,
            err,
        )
    try:
        return parse_ethtool_stats(out)
    except ParseError as exc:
        raise ReadError("could not read the output of %s: %s" % (shown, exc), cmd, rc, out, err) from exc


def read_carrier_down(netdev: str, root: str | None = None) -> dict[str, int]:
    """``{carrier_down_count: n}`` from the netdev's sysfs (Linux 4.16+); empty where absent."""
    path = rdma_read.sysfs_path("class", "net", netdev, "carrier_down_count", root=root)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError:
        return {}
    if not text.isdigit() or not text.isascii():
        raise ReadError("sysfs: %s holds %r, not a counter (an unsigned integer)" % (path, text[:40]))
    return {"carrier_down_count": int(text)}


def read_port(
    run_command: RunCommand,
    ibdev: str,
    netdev: str,
    port: int = 1,
    ethtool: str = "ethtool",
    root: str | None = None,
) -> dict[str, int]:
    """One reading of one RoCE port: its netdev's ``ethtool -S``, its hw_counters, its physical-layer
    PortCounters and its netdev's carrier_down_count, merged (the sets of names do not overlap)."""
    stats = read_ethtool(run_command, netdev, ethtool)
    merged = read_hw_counters(ibdev, port, root)
    merged.update(read_port_counters(ibdev, port, root))
    merged.update(read_carrier_down(netdev, root))
    merged.update(stats)
    return merged


def read_links(ports: list[Port], root: str | None = None) -> Links:
    """Every port's link from sysfs: ``{ibdev: {state, phys_state, rate_gbps}}`` (rdma_read.read_ib_port)."""
    links = {}
    for p in ports:
        try:
            info = rdma_read.read_ib_port(p["ibdev"], p["port"], root)
        except rdma_parse.ParseError as exc:
            raise ReadError(str(exc)) from exc
        links[p["ibdev"]] = {k: info.get(k) for k in ("state", "phys_state", "rate_gbps")}
    return links


def read_ports(
    run_command: RunCommand, ports: list[Port], ethtool: str = "ethtool", root: str | None = None
) -> Reading:
    """One reading of every port of ``ports`` (roce_ports' entries): ``{ibdev: counters}``."""
    return {
        p["ibdev"]: read_port(run_command, p["ibdev"], p["netdev"], p["port"], ethtool, root) for p in ports
    }


# ---------------------------------------------------------------- the judgement


def threshold_errors(thresholds: Mapping[str, Any] | None) -> list[str]:
    """What is wrong with a thresholds option: unknown keys, values that are not numbers >= 0."""
    errors = []
    for key, value in (thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            errors.append("%s is not a threshold (known: %s)" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            errors.append("%s must be a number, not %r" % (key, value))
        elif value < 0:
            errors.append("%s must be 0 or more, not %g" % (key, value))
        elif key in THRESHOLD_MAXIMA and value > THRESHOLD_MAXIMA[key][0]:
            errors.append(
                "%s must be 0..%g %s, not %g"
                % (key, THRESHOLD_MAXIMA[key][0], THRESHOLD_MAXIMA[key][1], value)
            )
    return errors


# The thresholds with an upper end too: (highest, unit). A settling time past an hour is longer than any
# burn-in (thermal_gate_burn_in_seconds is at most 3600 s): it would allow every flap of the window.
THRESHOLD_MAXIMA = {"link_flap_settle_s": (3600.0, "s")}


def thresholds_from(option: Mapping[str, Any] | None) -> dict[str, float]:
    """A thresholds option with its numbers as floats (YAML may hand over strings of digits)."""
    out = {}
    for key, value in (option or {}).items():
        try:
            out[key] = float(value) if not isinstance(value, bool) else value
        except (TypeError, ValueError):
            out[key] = value
    return out


# The counters judge_port reads, for the deltas a module returns.
JUDGED = (
    *RETRANSMIT_COUNTERS,
    *QP_FAILURE_COUNTERS,
    *PAUSE_STORM_COUNTERS,
    *ECN_LOOP_COUNTERS,
    *LINK_DOWN_COUNTERS,
    *RDMA_BYTES_COUNTERS,
    *SYMBOL_ERROR_COUNTERS,
    *LINK_INTEGRITY_COUNTERS,
    *BUFFER_OVERRUN_COUNTERS,
    "rx_discards_phy",
    "rx_out_of_buffer",
)


def deltas(before: Reading, after: Reading, priority: int = DEFAULT_PRIORITY) -> dict[str, dict[str, int]]:
    """Per port, how much each judged counter grew (a counter that went backwards counts from 0)."""
    names = (
        *JUDGED,
        "rx_prio%d_pause" % priority,
        "tx_prio%d_pause" % priority,
        "rx_prio%d_pause_duration" % priority,
        "tx_prio%d_pause_duration" % priority,
    )
    out = {}
    for ibdev, new in after.items():
        old = before.get(ibdev, {})
        out[ibdev] = {
            n: (new[n] - old[n] if new[n] >= old[n] else new[n]) for n in names if n in new and n in old
        }
    return out


def judge(
    before: Reading,
    after: Reading,
    seconds: float,
    priority: int = DEFAULT_PRIORITY,
    thresholds: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """roce_counters.judge_port's checks of every port read twice, in the order of ``after``."""
    checks: list[dict[str, Any]] = []
    for ibdev, new in after.items():
        if ibdev in before:
            checks.extend(judge_port(ibdev, before[ibdev], new, seconds, priority, thresholds))
    return checks


class Window:
    """The RoCE ports' counters and links read when a load starts (:meth:`start`) and when it
    stops (:meth:`stop`), judged over the time between (:meth:`checks`).

    ``during`` words the window in the checks' messages ("during the burn-in"); ``peers`` maps a
    port to the leaf port the cabling plan gives it ("leaf02:swp8"), named when its link fails.
    A read that fails is kept as the error (``burn_in.roce_counters`` fails, naming the tool)
    rather than raised: the load it brackets still stops as it should.
    """

    def __init__(
        self,
        run_command: RunCommand,
        ports: list[Port],
        ethtool: str = "ethtool",
        priority: int = DEFAULT_PRIORITY,
        thresholds: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        root: str | None = None,
        name: str = "burn_in.roce_counters",
        during: str = "during the burn-in",
        peers: Mapping[str, str] | None = None,
    ) -> None:
        # the check a failed read fails, named for the command that reads (burn_in, watch)
        self.name, self.during, self.peers = name, during, dict(peers or {})
        self.run_command, self.ports, self.ethtool = run_command, ports, ethtool
        self.priority, self.thresholds, self.clock, self.root = priority, thresholds, clock, root
        self.before: Reading | None = None
        self.after: Reading | None = None
        self.links_before: Links | None = None
        self.links_after: Links | None = None
        self.started: float | None = None
        self.seconds: float | None = None
        self.error: str | None = None
        # the links and counters read when the settling time ended (settle), and when that was
        limits = dict(DEFAULT_THRESHOLDS)
        limits.update(thresholds or {})
        self.settle_s = float(limits["link_flap_settle_s"])
        self.settled: Reading | None = None
        self.links_settled: Links | None = None
        self.settled_at: float | None = None

    def _read(self) -> tuple[Reading | None, Links | None]:
        try:
            # the links first: a port that drops while ethtool runs shows down, not up
            links = read_links(self.ports, self.root)
            return read_ports(self.run_command, self.ports, self.ethtool, self.root), links
        except ReadError as exc:
            self.error = str(exc)
            return None, None

    def start(self) -> None:
        self.before, self.links_before = self._read()
        self.started = self.clock()

    def settle(self, elapsed: float) -> None:
        """Called as the load runs (``elapsed`` s since it started): once the settling time
        (``link_flap_settle_s``) has passed, the links and counters are read once more. Link-down
        events before that reading are the fabric settling (judge_link allows them when none
        follow); a load that ends first has no such reading, and every down event in it counts.
        The watch never calls it: a link that flaps in service flapped."""
        if self.settle_s <= 0 or elapsed < self.settle_s or self.settled_at is not None:
            return
        if self.before is None or self.started is None or self.error is not None:
            return
        self.settled_at = self.clock() - self.started
        self.settled, self.links_settled = self._read()

    def _settled(self, ibdev: str) -> dict[str, Any] | None:
        """judge_link's ``settled`` for one port: its reading at the settling time, or None."""
        if self.settled is None or self.settled_at is None or self.seconds is None:
            return None
        return {
            "link": (self.links_settled or {}).get(ibdev, {}),
            "counters": self.settled.get(ibdev, {}),
            "at_s": self.settled_at,
            "window_s": self.seconds,
        }

    def stop(self) -> None:
        if self.before is None or self.started is None:
            return
        self.after, self.links_after = self._read()
        # a window is never 0 s long (judge_port divides by it): a millisecond at least
        self.seconds = max(self.clock() - self.started, 0.001)

    def checks(self) -> list[dict[str, Any]]:
        if self.error is not None:
            return [
                check(
                    self.name,
                    False,
                    self.error,
                    None,
                    "",
                    "the RoCE ports' counters could not be read: %s" % self.error,
                )
            ]
        if self.before is None or self.after is None or self.seconds is None:
            return []
        out = judge(self.before, self.after, self.seconds, self.priority, self.thresholds)
        for ibdev, link in (self.links_after or {}).items():
            out.extend(
                judge_link(
                    ibdev,
                    (self.links_before or {}).get(ibdev, {}),
                    link,
                    self.before.get(ibdev, {}),
                    self.after.get(ibdev, {}),
                    self.during,
                    self.peers.get(ibdev),
                    self.thresholds,
                    self._settled(ibdev),
                )
            )
            if ibdev in self.before:
                out.extend(
                    judge_phy(
                        ibdev,
                        self.before[ibdev],
                        self.after.get(ibdev, {}),
                        self.seconds,
                        self.during,
                        self.peers.get(ibdev),
                        self.thresholds,
                    )
                )
        rates = {
            ibdev: rdma_bytes_per_s(self.before[ibdev], new, self.seconds)
            for ibdev, new in self.after.items()
            if ibdev in self.before
        }
        out.extend(judge_traffic(rates, self.during, self.peers, self.thresholds))
        return out

    def summary(self) -> dict[str, Any]:
        """``{ports, window_s, deltas, links, error}`` for the module's result (``links``: each
        port's link when the window opened and when it closed)."""
        both = self.before is not None and self.after is not None
        links = {
            ibdev: {"start": (self.links_before or {}).get(ibdev), "end": link}
            for ibdev, link in (self.links_after or {}).items()
        }
        return {
            "ports": [dict(p) for p in self.ports],
            "window_s": None if self.seconds is None else round(self.seconds, 1),
            # when the links were read at the settling time (None: the load ended first, or no settling)
            "settled_at_s": None if self.settled_at is None else round(self.settled_at, 1),
            "deltas": deltas(self.before or {}, self.after or {}, self.priority) if both else {},
            "links": links,
            "error": self.error,
        }


# How a module judges the RoCE ports it reads (doc fragment gpufleet.node.roce_window.judge): the
# burn-in and the all-reduce around their load, watch over its window.
JUDGE_OPTIONS = dict(
    roce_priority=dict(type="int", default=DEFAULT_PRIORITY),
    roce_thresholds=dict(type="dict", default={}),
    roce_cabling=dict(type="dict", default={}),
)
# The options of a module that reads a Window around its load (doc fragment gpufleet.node.roce_window).
WINDOW_OPTIONS = dict(roce_ports=dict(type="bool", default=True), **JUDGE_OPTIONS)


class OptionError(ValueError):
    """A roce_* option out of its range: the message names it and the range."""


def window_for(
    run_command: RunCommand,
    params: Mapping[str, Any],
    ethtool: Callable[[], str],
    name: str,
    during: str,
    root: str | None = None,
) -> Window | None:
    """The Window a module's WINDOW_OPTIONS ask for over the node's RoCE ports, or None (roce_ports
    off, or a node without RoCE ports). ``ethtool`` finds the tool, asked only when there are ports to
    read. OptionError for a bad priority or threshold; ReadError when the ports cannot be listed."""
    if not params["roce_ports"]:
        return None
    if not 0 <= params["roce_priority"] <= 7:
        raise OptionError(
            "roce_priority is %d; the RoCE priority is 0..7 (3 in the fleet's profile)"
            % params["roce_priority"]
        )
    thresholds = thresholds_from(params["roce_thresholds"])
    errors = threshold_errors(thresholds)
    if errors:
        raise OptionError("roce_thresholds: %s" % "; ".join(errors))
    ports = roce_ports(root)
    if not ports:
        return None
    return Window(
        run_command,
        ports,
        ethtool(),
        params["roce_priority"],
        thresholds,
        root=root,
        name=name,
        during=during,
        peers={str(k): str(v) for k, v in params["roce_cabling"].items()},
    )
