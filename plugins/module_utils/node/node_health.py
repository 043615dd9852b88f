# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hardware faults a maintenance window leaves behind, judged: one judge for the gate and the watch.

Readings (each from one tool run, parsed by its module):
- ``nvidia-smi -q -x`` -> gpu_health_readings: per GPU its PCIe link, remapped rows, ECC counts;
- ``nvidia-smi nvlink -s`` -> nvlink.parse_status: per GPU each link active and its speed;
- ``nvidia-smi nvlink -e`` -> nvlink.error_totals: per GPU its CRC, replay and recovery errors, summed
  over its links (read with nvlink -s, and when a load or the watch window starts);
- ``dmesg`` -> xid.parse_kernel_events: the Xid and NVSwitch SXid events since boot;
  the same text -> mlx5_health.parse_kernel_log: mlx5_core's firmware error lines;
- gpudirect.read (the modules add it as ``readings["gpudirect"]``): nvidia_peermem, the PCIe switch
  ports' ACS (lspci), the expected units (systemctl is-active);
- the same -q -x and sysfs ``fw_ver``: the versions that must match across a profile's nodes
  (fleet_versions judges them on the controller, across the run's hosts).

Checks, one name per condition (results.check), per GPU by UUID:
- ``health.gpu_count``: the GPUs nvidia-smi lists against the profile's count;
- ``health.pcie_width[<uuid>]``: the link's current width against its maximum. The generation is
  judged only under load (``health.pcie_gen[<uuid>]``, the burn-in's samples): a healthy GPU
  lowers its link to Gen1 at idle to save power;
- ``health.row_remap_pending[<uuid>]``, ``health.row_remap_failure[<uuid>]``: a remap waiting for a
  GPU reset, or a bank out of spare rows;
- ``health.ecc_uncorrectable[<uuid>]``: volatile (since the driver loaded) and, when a limit is
  set, aggregate (lifetime) uncorrectable ECC errors;
- ``health.nvlink[<uuid>]``: every NVLink link of the GPU active (a GPU that reports all links
  inactive fails when the profile expects NVLink);
- ``health.recovery_action[<uuid>]``: the GPU Recovery Action the driver reports (``-q -x``
  gpu_recovery_action): None passes, any other fails naming what NVIDIA says to do;
- ``health.pcie_replays[<uuid>]`` (the burn-in and the watch): the rise of the GPU's PCIe replay
  counter (-q -x replay_counter) between the load's start and end, or the watch window's, against
  DCGM's limit of 8 a minute (a window under a minute is allowed a minute's worth);
- ``health.xid[<bus id>]``: Xid events in the kernel log, per GPU, blocking or warning as
  xid.XID_CATALOG says; the message names the Xid, the GPU's bus id and UUID, and what it means;
- ``health.fabric_manager[<uuid>]``: the GPU's NVSwitch fabric registration (-q -x fabric state and
  status) Completed and Success; not judged where the GPU reports none (no NVSwitch fabric);
- ``health.sxid[<switch bus id>]``: NVSwitch SXid events in the kernel log, per switch: a fatal one
  blocks, a non-fatal one warns (xid.describe_sxid);
- ``health.nvlink_errors[<uuid>]`` (the burn-in and the watch): the rise of the GPU's NVLink CRC,
  replay and recovery errors (nvlink -e, summed over its links) between the load's start and end, or
  over the watch window, against DCGM's NVLink health watch (CRC 100 a second, replay and recovery 0);
- ``fabric.mlx5_firmware[<dev>]``: mlx5_core firmware error lines for the RDMA device in the kernel
  log (since boot; the burn-in: during its load), mlx5_health.firmware_checks;
- ``health.nvidia_peermem``, ``health.acs[<bdf>]``, ``health.service[<unit>]``: gpudirect.judge;
- ``guardian.replace_hardware`` (the modules add the node's remediation history as
  ``readings["history"]``): remediation_history.replace_hardware_check, the node marked "replace
  hardware" by the guardian until ``gpufleet release`` clears it (not a family a profile turns off);
- ``health.dcgm_diag[<test>]`` (the gate only, when the profile sets a level): each test of DCGM's
  diagnostic (``dcgmi diag -r N -j``, dcgm.parse_diag_json) failing, warning (reported, does not
  block), passing or skipped, naming the GPUs DCGM names; ``health.dcgm_diag`` when DCGM could not run
  it. The watch never runs it: from level 2 it loads the GPUs for minutes.

The gate judges the node twice: on the drained node before anything starts (node_health), and
again when the burn-in's load ends (:class:`AfterLoad`, the burn-in module): the same reads and the
same judge, the Xids those logged during the load.

A check the profile turns off (``off``: {check family: reason}) is returned passing with the reason,
so the report shows it was not judged and why.

Pure judgement plus a small reader (:func:`read`); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import allowed_in_window, check
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import (
    dcgm,
    gpu_health_readings,
    nvidia_smi,
    nvlink,
    xid,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node import gpudirect, remediation_history
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import mlx5_health, rdma_read

RunCommand = Callable[..., tuple[int, str, str]]

# The check families a profile may turn off, each with a reason the report shows.
FAMILIES = (
    "health.gpu_count",
    "health.pcie_width",
    "health.pcie_gen",
    "health.row_remap_pending",
    "health.row_remap_failure",
    "health.ecc_uncorrectable",
    "health.ecc_uncorrectable_aggregate",
    "health.nvlink",
    "health.xid",
    "health.dcgm_diag",
    "health.recovery_action",
    "health.pcie_replays",
    "health.nvidia_peermem",
    "health.acs",
    "health.service",
    "fabric.mlx5_firmware",
    "health.fabric_manager",
    "health.sxid",
    "health.nvlink_errors",
)

DEFAULT_LIMITS: dict[str, int | None] = {
    # Any uncorrectable error since the driver loaded: the GPU's memory returned bad data.
    "max_volatile_uncorrectable_ecc": 0,
    # Lifetime errors stay after the row was remapped (NVIDIA: a remapped GPU is healthy): off by default.
    "max_aggregate_uncorrectable_ecc": None,
}


# The judge's options, one spec for every module that runs it (node_health, watch).
OPTIONS_SPEC: dict[str, dict[str, Any]] = {
    "expected_gpu_count": {"type": "int"},
    "nvlink": {"type": "bool", "default": True},
    "max_volatile_uncorrectable_ecc": {"type": "int", "default": 0},
    "max_aggregate_uncorrectable_ecc": {"type": "int"},
    "turned_off": {"type": "dict", "default": {}},
}


def limits_from(p: Mapping[str, Any]) -> dict[str, int | None]:
    """The ECC limits of a module's parameters (OPTIONS_SPEC's)."""
    return {key: p[key] for key in DEFAULT_LIMITS}


def input_errors(p: Mapping[str, Any], prefix: str) -> list[str]:
    """Every bad health option, named with its role input (``<prefix><option>``) and its range."""
    errors = []
    count = p["expected_gpu_count"]
    if count is not None and not 1 <= count <= 64:
        errors.append("expected_gpu_count (%sexpected_gpu_count) must be 1..64, got %s" % (prefix, count))
    for key in ("max_volatile_uncorrectable_ecc", "max_aggregate_uncorrectable_ecc"):
        if p[key] is not None and p[key] < 0:
            errors.append("%s (%s%s) must be 0 or more, got %s" % (key, prefix, key, p[key]))
    for family, reason in (p["turned_off"] or {}).items():
        if family not in FAMILIES:
            errors.append(
                "turned_off (%sturned_off): %s is not a health check (known: %s)"
                % (prefix, family, ", ".join(FAMILIES))
            )
        elif not isinstance(reason, str) or not reason.strip():
            errors.append("turned_off (%sturned_off): %s needs a reason the report shows" % (prefix, family))
    return errors


class ReadError(Exception):
    """A health tool could not be run or read: the message names the tool."""


def _run(run_command: RunCommand, argv: list[str], tool: str) -> str:
    rc, out, err = tool_runner.read_command(run_command, argv, environ_update=tool_runner.ENV)
    if rc != 0:
        raise ReadError("%s failed (rc=%s): %s" % (tool, rc, tool_runner.first_line(err, out)))
    return out


def versions(xml_text: str, root: str | None = None) -> dict[str, Any]:
    """What must match across the nodes of a profile: ``{gpu_product, gpu_count, driver, cuda, vbios,
    nic_firmware}`` (vbios and nic_firmware: the sorted distinct values of the node's GPUs and RDMA
    devices). ``xml_text`` is a -q -x document already read well (parse_health_xml)."""
    doc = nvidia_smi._safe_xml_root(xml_text)
    gpus = doc.findall("gpu")
    firmware = {
        rdma_read.read_ib_device(dev, root).get("fw_version") for dev in rdma_read.list_ib_devices(root)
    }
    return {
        "gpu_product": sorted({nvidia_smi._xtext(g, "product_name") or "" for g in gpus}),
        "gpu_count": len(gpus),
        "driver": nvidia_smi._xtext(doc, "driver_version"),
        "cuda": nvidia_smi._xtext(doc, "cuda_version"),
        "vbios": sorted({nvidia_smi._xtext(g, "vbios_version") or "" for g in gpus}),
        "nic_firmware": sorted(f for f in firmware if f),
    }


def read(run_command: RunCommand, smi: str, dmesg: str | None, nvlink_expected: bool) -> dict[str, Any]:
    """The readings: ``{gpus, links, link_errors, xids, sxids, versions}`` (``links``/``link_errors``
    None when NVLink is not expected, ``xids``/``sxids`` None when the kernel log is not read)."""
    try:
        xml_text = _run(run_command, [smi, "-q", "-x"], "nvidia-smi -q -x")
        gpus = gpu_health_readings.parse_health_xml(xml_text)
        found_versions = versions(xml_text)
        links = link_errors = None
        if nvlink_expected:
            links = nvlink.parse_status(_run(run_command, [smi, "nvlink", "-s"], nvlink.STATUS_TOOL))
            link_errors = read_link_errors(run_command, smi)
    except (nvidia_smi.ParseError, nvlink.ParseError) as exc:
        raise ReadError(str(exc)) from exc
    log = (
        {"xids": None, "sxids": None, "mlx5": None} if dmesg is None else read_kernel_log(run_command, dmesg)
    )
    return {
        "gpus": gpus,
        "links": links,
        "link_errors": link_errors,
        "xids": log["xids"],
        "sxids": log["sxids"],
        "mlx5": log["mlx5"],
        "nic_devices": {} if dmesg is None else gpudirect.rdma_devices(),
        "versions": found_versions,
    }


def read_link_errors(run_command: RunCommand, smi: str) -> list[dict[str, Any]]:
    """Per GPU its NVLink CRC, replay and recovery errors (nvlink.error_totals of nvidia-smi nvlink -e).
    Raises ReadError naming the tool."""
    try:
        return nvlink.error_totals(
            nvlink.parse_error_counters(_run(run_command, [smi, "nvlink", "-e"], nvlink.ERRORS_TOOL))
        )
    except nvlink.ParseError as exc:
        raise ReadError(str(exc)) from exc


def read_gpus(run_command: RunCommand, smi: str) -> list[dict[str, Any]]:
    """One ``nvidia-smi -q -x`` health reading of every GPU (gpu_health_readings). Raises ReadError."""
    try:
        return gpu_health_readings.parse_health_xml(_run(run_command, [smi, "-q", "-x"], "nvidia-smi -q -x"))
    except nvidia_smi.ParseError as exc:
        raise ReadError(str(exc)) from exc


def read_xids(run_command: RunCommand, dmesg: str) -> list[dict[str, Any]]:
    """The Xid events of the kernel log (xid.parse_kernel_log). Raises ReadError naming the tool."""
    return read_kernel_log(run_command, dmesg)["xids"]


def read_kernel_log(run_command: RunCommand, dmesg: str) -> dict[str, list[dict[str, Any]]]:
    """The kernel log's Xid and SXid events, ``{xids, sxids}`` (xid.parse_kernel_events). Raises
    ReadError naming the tool."""
    try:
        text = _run(run_command, [dmesg], "dmesg")
        events: dict[str, list[dict[str, Any]]] = xid.parse_kernel_events(text)
        # the same text: mlx5_core's firmware error lines (one read of the log serves both)
        events["mlx5"] = mlx5_health.parse_kernel_log(text)
        return events
    except (xid.ParseError, mlx5_health.ParseError) as exc:
        raise ReadError(str(exc)) from exc


def xids_since(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of ``after`` that ``before`` does not hold: the kernel log read twice, the Xids
    logged between the two reads. An event is its whole line (timestamp, GPU, Xid, pid, message), so
    a line logged again later is new; one the ring buffer dropped since is simply not in ``after``."""
    seen: dict[tuple[Any, ...], int] = {}
    for event in before:
        key = _event_key(event)
        seen[key] = seen.get(key, 0) + 1
    out = []
    for event in after:
        key = _event_key(event)
        if seen.get(key):
            seen[key] -= 1
        else:
            out.append(event)
    return out


def _event_key(event: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((str(k), str(v)) for k, v in event.items()))


class AfterLoad:
    """The node's health read again when a load ends and judged by :func:`judge`, under the same check
    names as before it: a GPU that fell off the bus, an uncorrectable ECC error, a row remap or an
    NVLink link lost under the load. The kernel log is read when the load starts (``start``) and again
    when it ends (``stop``): only the Xids logged between are judged (:func:`xids_since`). A read that
    fails is a failed check of its own (``check_name``), never a pass."""

    def __init__(
        self,
        run_command: RunCommand,
        smi: str,
        dmesg: str,
        options: Mapping[str, Any],
        check_name: str,
        during: str,
    ) -> None:
        # options: OPTIONS_SPEC's keys (expected_gpu_count, nvlink, the ECC limits, turned_off)
        self.run_command, self.smi, self.dmesg = run_command, smi, dmesg
        self.options, self.check_name, self.during = options, check_name, during
        self.before: list[dict[str, Any]] | None = None
        self.sxids_before: list[dict[str, Any]] | None = None
        self.mlx5_before: list[dict[str, Any]] | None = None
        self.gpus_before: list[dict[str, Any]] | None = None
        self.link_errors_before: list[dict[str, Any]] | None = None
        self.readings: dict[str, Any] | None = None
        self.error: str | None = None
        self.started = self.seconds = 0.0

    def start(self) -> None:
        try:
            log = read_kernel_log(self.run_command, self.dmesg)
        except ReadError as exc:
            self.error = "the kernel log could not be read when the load started: %s" % exc
            return
        self.before, self.sxids_before, self.mlx5_before = log["xids"], log["sxids"], log["mlx5"]
        try:
            self.gpus_before = read_gpus(self.run_command, self.smi)
        except ReadError as exc:
            self.error = "the GPUs' PCIe replay counters could not be read when the load started: %s" % exc
        if self.error is None and self.options.get("nvlink", True):
            try:
                self.link_errors_before = read_link_errors(self.run_command, self.smi)
            except ReadError as exc:
                why = "the GPUs' NVLink error counters could not be read when the load started"
                self.error = "%s: %s" % (why, exc)
        self.started = time.monotonic()

    def stop(self) -> None:
        if self.error is not None:
            return
        try:
            readings = read(self.run_command, self.smi, self.dmesg, self.options.get("nvlink", True))
        except ReadError as exc:
            self.error = "the node's health could not be read when the load ended: %s" % exc
            return
        readings["xids"] = xids_since(self.before or [], readings["xids"] or [])
        readings["sxids"] = xids_since(self.sxids_before or [], readings["sxids"] or [])
        readings["mlx5"] = xids_since(self.mlx5_before or [], readings["mlx5"] or [])
        self.readings = readings
        self.seconds = round(time.monotonic() - self.started, 1)

    def checks(self) -> list[dict[str, Any]]:
        if self.readings is None:
            why = self.error or "the node's health was not read when the load ended"
            return [check(self.check_name, False, why, None, "", "%s (fail closed)" % why)]
        o = self.options
        found = judge(
            self.readings,
            o.get("expected_gpu_count"),
            {key: o.get(key, default) for key, default in DEFAULT_LIMITS.items()},
            o.get("turned_off"),
            xids_since_text=self.during,
        )
        replays = pcie_replay_checks(self.gpus_before or [], self.readings["gpus"], self.seconds, self.during)
        links_before, links_after = self.link_errors_before or [], self.readings.get("link_errors") or []
        replays.extend(nvlink_error_checks(links_before, links_after, self.seconds, self.during))
        return found + turned_off(replays, o.get("turned_off") or {})

    def summary(self) -> dict[str, Any] | None:
        """What was read when the load ended (fact()'s shape, its ``xids`` those logged during the
        load), and the error that kept it from being read."""
        if self.readings is None:
            return {"error": self.error}
        return dict(fact(self.readings), error=None)


# The PCIe link under load, one cheap CSV query (the burn-in takes it while its load runs).
PCIE_FIELDS = (
    "uuid",
    "pci.bus_id",
    "pcie.link.gen.gpucurrent",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
)


def pcie_query(smi: str) -> list[str]:
    return [smi, "--query-gpu=" + ",".join(PCIE_FIELDS), "--format=csv,noheader,nounits"]


def _count(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        raise nvidia_smi.ParseError("nvidia-smi --query-gpu: %r is not a PCIe generation or width" % (value,))
    return int(value)


def parse_pcie_sample(text: str) -> list[dict[str, Any]]:
    """``pcie_query``'s output -> ``[{uuid, pci_bus_id, pcie: {gen_current, gen_max, width_current,
    width_max}}]``, the shape pcie_checks takes. Raises nvidia_smi.ParseError."""
    out = []
    for row in nvidia_smi.parse_query_csv(text, fields=list(PCIE_FIELDS)):
        out.append(
            {
                "uuid": row["uuid"],
                "pci_bus_id": row["pci.bus_id"],
                "pcie": {
                    "gen_current": _count(row["pcie.link.gen.gpucurrent"]),
                    "gen_max": _count(row["pcie.link.gen.max"]),
                    "width_current": _count(row["pcie.link.width.current"]),
                    "width_max": _count(row["pcie.link.width.max"]),
                },
            }
        )
    return out


def read_pcie(run_command: RunCommand, smi: str) -> list[dict[str, Any]]:
    """One PCIe sample of every GPU (parse_pcie_sample). Raises ReadError naming the query."""
    try:
        return parse_pcie_sample(_run(run_command, pcie_query(smi), "nvidia-smi --query-gpu (PCIe)"))
    except nvidia_smi.ParseError as exc:
        raise ReadError(str(exc)) from exc


def under_load_checks(sample: list[dict[str, Any]] | None, error: str | None) -> list[dict[str, Any]]:
    """The burn-in's PCIe checks: each GPU's link generation and width while the load ran."""
    if error is not None:
        return [
            check(
                "health.pcie_gen",
                False,
                error,
                None,
                "",
                "the PCIe link under load could not be read: %s" % error,
            )
        ]
    out: list[dict[str, Any]] = []
    for gpu in sample or []:
        out.extend(pcie_checks(gpu, under_load=True))
    return out


# ---------------------------------------------------------------- DCGM's diagnostic (the gate only)

# dcgmi diag -r N: 1 the deployment (software) checks, ~1 min; 2 adds PCIe/NVLink and GPU memory, a few
# minutes; 3 adds the stress, power and compute tests, ~30 min; 4 adds memtest and the pulse test, 1.5-2 h.
DIAG_LEVELS = (0, 1, 2, 3, 4)
# How long each level may run before the gate gives up on it (s), when the profile sets no timeout.
DIAG_TIMEOUT_S = {1: 600, 2: 1800, 3: 5400, 4: 14400}
DIAG_TIMEOUT_RANGE = (60, 86400)
# dcgmi's exit status when a test failed (DCGM_ST_NVVS_ERROR, -30, as an unsigned byte).
DIAG_RC_FAILED = 226

# What a failed test usually means and what to do, by words of its name (DCGM 3 and 4 spellings), first
# match wins.
DIAG_ADVICE = (
    (
        ("page retirement", "row remap"),
        "a GPU has a row remap pending (reset the GPU) or one that failed (the GPU needs service); "
        "see health.row_remap_pending and health.row_remap_failure",
    ),
    (
        ("memory bandwidth",),
        "the GPU's memory bandwidth is below its model's: check its clocks and power (gpu_power.*, "
        "thermal.*), then have the GPU serviced",
    ),
    (
        ("memory", "memtest"),
        "the GPU's memory returned wrong data: it must not serve; reset it and run the diagnostic again, "
        "replace the GPU if it fails again",
    ),
    (
        ("pcie", "nvlink"),
        "the GPU's PCIe or NVLink links fall short (width, generation, replays or bandwidth): reseat the "
        "GPU, its riser or NVLink bridge; see health.pcie_width and health.nvlink",
    ),
    (
        ("stress", "power", "pulse"),
        "the GPU could not hold its clocks or power under load: check its cooling and power delivery "
        "(thermal.*, coolant.*, gpu_power.*), then have it serviced",
    ),
    (("inforom",), "the GPU's InfoROM is corrupt or unreadable: the GPU needs service"),
    (("diagnostic", "eud"), "the GPU computed wrong results under load: it must not serve; have it serviced"),
    (
        ("software", "denylist", "nvml", "cuda", "permission", "persistence", "environment", "process"),
        "DCGM rejects the node's driver, libraries, a setting or a process on the GPUs (not the GPU "
        "itself): fix what it names, then gate the node again",
    ),
)


def diag_input_errors(level: Any, timeout_s: Any) -> list[str]:
    """The diagnostic's options (node_health's dcgm_diag_level, dcgm_diag_timeout_s), named with their
    role inputs and ranges."""
    errors = []
    if isinstance(level, bool) or level not in DIAG_LEVELS:
        errors.append(
            "dcgm_diag_level (thermal_gate_dcgm_diag_level) must be 0 (off) or a DCGM level 1..4, got %r"
            % (level,)
        )
    low, high = DIAG_TIMEOUT_RANGE
    if timeout_s is not None and not low <= timeout_s <= high:
        errors.append(
            "dcgm_diag_timeout_s (thermal_gate_dcgm_diag_timeout_s) must be %d..%d seconds or unset (by "
            "level), got %s" % (low, high, timeout_s)
        )
    return errors


def diag_argv(dcgmi: str, level: int, timeout_s: int, timeout: str = "timeout") -> list[str]:
    """``timeout -k 10 <s> dcgmi diag -r <level> -j`` (coreutils' timeout: a wedged diagnostic ends)."""
    return [timeout, "-k", "10", str(timeout_s), dcgmi, "diag", "-r", str(level), "-j"]


def read_diag(
    run_command: RunCommand, dcgmi: str, level: int, timeout_s: int | None = None, timeout: str = "timeout"
) -> dict[str, Any]:
    """One run of DCGM's diagnostic: dcgm.parse_diag_json's result with ``level`` and ``rc``. dcgmi
    exits 226 when a test failed and still prints its JSON, so any exit status with a readable document
    is a reading; a run that timed out, or printed no document, raises ReadError naming the tool."""
    seconds = timeout_s or DIAG_TIMEOUT_S[level]
    tool = "dcgmi diag -r %d -j" % level
    rc, out, err = run_command(diag_argv(dcgmi, level, seconds, timeout), environ_update=tool_runner.ENV)
    if rc in (124, 137):
        raise ReadError(
            "%s did not finish in %d s (thermal_gate_dcgm_diag_timeout_s): the diagnostic hung"
            % (tool, seconds)
        )
    try:
        found = dcgm.parse_diag_json(out)
    except dcgm.ParseError as exc:
        if rc != 0:
            raise ReadError("%s failed (rc=%s): %s" % (tool, rc, tool_runner.first_line(err, out))) from exc
        raise ReadError(str(exc)) from exc
    return dict(found, level=level, rc=rc)


def _gpu_names(ids: list[int], gpus: list[dict[str, Any]]) -> str:
    """DCGM's GPU ids (NVML's indices) as ``GPU 2 (GPU-…, 00000000:3A:00.0)``, every GPU when all."""
    by_index = {g.get("index"): g for g in gpus}
    if len(ids) > 1 and set(ids) == set(by_index):
        return "every GPU"
    names = []
    for gpu_id in ids:
        gpu = by_index.get(gpu_id)
        names.append(
            "GPU %d (%s, %s)" % (gpu_id, gpu["uuid"], gpu.get("pci_bus_id"))
            if gpu
            else "GPU %d (not listed by nvidia-smi)" % gpu_id
        )
    return ", ".join(names) or "no GPU named"


def _advice(test: str) -> str:
    lowered = test.lower()
    for words, advice in DIAG_ADVICE:
        if any(word in lowered for word in words):
            return advice
    return (
        "read DCGM's messages and its log (/var/log/nvidia-dcgm/nvvs.log); service the GPU if it fails again"
    )


def _diag_test_check(
    name: str, rows: list[dict[str, Any]], level: Any, gpus: list[dict[str, Any]]
) -> dict[str, Any]:
    """One test's check: its worst result over the GPUs (Fail > Warn > Pass > Skip)."""
    statuses = {row["status"] for row in rows}
    status = next((s for s in ("Fail", "Warn", "Pass") if s in statuses), "Skip")
    where = "DCGM diagnostic (level %s) test %s" % (level, name)
    found = [
        "%s: %s" % (_gpu_names(row["gpu_ids"], gpus), " ".join(row["warnings"]) or "no message")
        for row in rows
        if row["status"] == status and status in ("Fail", "Warn")
    ]
    if status == "Fail":
        message = "%s failed on %s. %s" % (where, "; ".join(found), _advice(name))
    elif status == "Warn":
        message = "%s warns on %s (a warning: it does not block)" % (where, "; ".join(found))
    elif status == "Pass":
        ran = sorted({gpu for row in rows if row["status"] == "Pass" for gpu in row["gpu_ids"]})
        message = "%s passed on %d GPUs" % (where, len(ran))
    else:
        message = "%s was skipped by DCGM (not judged on these GPUs)" % where
    return check("health.dcgm_diag[%s]" % name, status != "Fail", status, "Pass", "", message)


def diag_checks(diag: Mapping[str, Any] | None, gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``health.dcgm_diag[<test>]`` per test of read_diag's result (a test name DCGM repeats is judged
    once over all its results); ``health.dcgm_diag`` fails when DCGM could not run the diagnostic, or
    exited with an error while its document names no failed test."""
    if diag is None:
        return []
    level = diag.get("level")
    out = []
    error = diag.get("runtime_error")
    if error is not None:
        out.append(
            check(
                "health.dcgm_diag",
                False,
                error,
                "no runtime error",
                "",
                "DCGM's diagnostic (level %s) could not run: %s. Is nv-hostengine running? Run "
                "dcgmi diag -r %s by hand on this node (fail closed)" % (level, error, level),
            )
        )
    by_test: dict[str, list[dict[str, Any]]] = {}
    for test in diag.get("tests") or []:
        by_test.setdefault(test["name"], []).extend(test["results"])
    for name, rows in by_test.items():
        out.append(_diag_test_check(name, rows, level, gpus))
    rc = diag.get("rc", 0)
    if rc and error is None and not diag.get("failed"):
        out.append(
            check(
                "health.dcgm_diag",
                False,
                rc,
                0,
                "exit status",
                "dcgmi diag -r %s exited %s%s though its JSON names no failed test: run it by hand and read "
                "/var/log/nvidia-dcgm/nvvs.log (fail closed)"
                % (level, rc, " (DCGM_ST_NVVS_ERROR)" if rc == DIAG_RC_FAILED else ""),
            )
        )
    return out


# ---------------------------------------------------------------- the judgement


def _bus(bus_id: Any) -> str:
    """A PCI bus id as the kernel log prints it (0000:18:00), from nvidia-smi's (00000000:18:00.0)."""
    text = str(bus_id or "").lower()
    if text.count(":") == 2:
        domain, rest = text.split(":", 1)
        text = "%04x:%s" % (int(domain, 16), rest) if domain.isascii() and domain.isalnum() else text
    return text.split(".")[0]


def gpu_count_check(gpus: list[dict[str, Any]], expected: int | None) -> dict[str, Any]:
    found = len(gpus)
    ok = expected is None or found == expected
    return check(
        "health.gpu_count",
        ok,
        found,
        expected,
        "GPUs",
        "nvidia-smi lists %d GPUs%s" % (found, "" if expected is None else ", the profile %d" % expected)
        + ("" if ok else ": a GPU fell off the bus or was not seated (see health.xid, Xid 79); reseat it"),
    )


# DCGM's PCIe health watch warns above 8 replays a minute, "the maximum recommended by RM"
# (DCGM_LIMIT_MAX_PCIREPLAY_RATE, NVIDIA/DCGM's dcgm_gpu_hardware_limits.h). A window shorter than a
# minute is allowed one minute's worth, so a short watch does not fail on a single replay.
MAX_PCIE_REPLAYS_PER_MINUTE = 8


def pcie_replay_checks(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    seconds: float,
    during: str,
    max_per_minute: int = MAX_PCIE_REPLAYS_PER_MINUTE,
) -> list[dict[str, Any]]:
    """``health.pcie_replays[<uuid>]``: per GPU in both readings, how far its PCIe replay counter rose
    between them (``seconds`` apart; a counter that went down, a GPU reset, counts from 0)."""
    first = {g["uuid"]: (g.get("pcie") or {}).get("replay_counter") for g in before}
    allowed = allowed_in_window(max_per_minute, seconds)
    out = []
    for gpu in after:
        start, end = first.get(gpu["uuid"]), (gpu.get("pcie") or {}).get("replay_counter")
        if start is None or end is None:
            continue
        rise = end - start if end >= start else end
        ok = rise <= allowed
        out.append(
            check(
                "health.pcie_replays[%s]" % gpu["uuid"],
                ok,
                rise,
                allowed,
                "replays",
                "%s (%s) PCIe link replayed %d packets %s (%g s), limit %d (%d a minute, DCGM's PCIe watch)%s"
                % (
                    gpu["uuid"],
                    gpu.get("pci_bus_id"),
                    rise,
                    during,
                    seconds,
                    allowed,
                    max_per_minute,
                    ""
                    if ok
                    else ": the link is resending corrupted packets; usually a GPU or riser not fully "
                    "seated, a damaged slot or cable: reseat it and check the slot, then run the gate again",
                ),
            )
        )
    return out


# DCGM's NVLink health watch (NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp, MonitorNvLink, with
# dcgm_gpu_hardware_limits.h): over its window a GPU fails on any replay or recovery error
# (DCGM_FR_NVLINK_ERROR_CRITICAL) and on CRC errors (flit and data) at 100 a second or more
# (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR, "RM has informed us that CRC errors only matter at rates of 100+ per
# second"); fewer CRC errors only warn there. gpufleet takes the same limits: 6000 CRC errors a minute
# (a window under a minute allowed a minute's worth, results.allowed_in_window) and none of the others.
# Each kind (nvlink.ERROR_KINDS): as the message names it, its limit (CRC's a minute), where that comes from.
_NVLINK_KINDS = {
    "crc": ("CRC", 6000, "DCGM's 100 a second"),
    "replay": ("replay", 0, "DCGM: any"),
    "recovery": ("recovery", 0, "DCGM: any"),
}


def nvlink_error_checks(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    seconds: float,
    during: str,
) -> list[dict[str, Any]]:
    """``health.nvlink_errors[<uuid>]``: per GPU in both readings (nvlink.error_totals'), how far its
    NVLink CRC, replay and recovery errors rose between them (``seconds`` apart; a counter that went
    down, a driver reload, counts from 0). The value and limit are those of the first kind over its limit
    (CRC when none is)."""
    first = {g["uuid"]: g for g in before}
    limits = dict((kind, entry[1]) for kind, entry in _NVLINK_KINDS.items())
    limits["crc"] = allowed_in_window(limits["crc"], seconds)
    out = []
    for gpu in after:
        start = first.get(gpu["uuid"])
        if start is None:
            continue
        rises: dict[str, int] = {}
        for kind in nvlink.ERROR_KINDS:
            old, new = start.get(kind), gpu.get(kind)
            if old is not None and new is not None:
                rises[kind] = new - old if new >= old else new
        if not rises:
            continue
        over = [kind for kind in nvlink.ERROR_KINDS if rises.get(kind, 0) > limits[kind]]
        shown = over[0] if over else ("crc" if "crc" in rises else next(iter(rises)))
        parts = []
        for kind in nvlink.ERROR_KINDS:
            if kind in rises:
                label, source = _NVLINK_KINDS[kind][0], _NVLINK_KINDS[kind][2]
                parts.append("%s %d (limit %d, %s)" % (label, rises[kind], limits[kind], source))
        said = ", ".join(parts)
        message = "%s (GPU %s) NVLink errors %s (%g s), summed over its links: %s" % (
            gpu["uuid"],
            gpu.get("index"),
            during,
            seconds,
            said,
        )
        if over:
            message += (
                ": an NVLink link of the GPU is corrupting or resending traffic, usually a marginal link, "
                "connector or NVSwitch port. Find the link with nvidia-smi nvlink -e -i %s, look for Xid 74 "
                "and SXids in the kernel log and nvidia-smi -q -d FABRIC, reseat the GPU or its baseboard's "
                "NVLink connections at the next drain, then run the gate again" % gpu.get("index")
            )
        out.append(
            check(
                "health.nvlink_errors[%s]" % gpu["uuid"],
                not over,
                rises[shown],
                limits[shown],
                "%s errors" % _NVLINK_KINDS[shown][0],
                message,
            )
        )
    return out


def pcie_checks(gpu: Mapping[str, Any], under_load: bool = False) -> list[dict[str, Any]]:
    """The link's width (always) and generation (under load only) against their maximum."""
    uuid, pcie = gpu["uuid"], gpu.get("pcie") or {}
    out = []
    width, width_max = pcie.get("width_current"), pcie.get("width_max")
    if width is not None and width_max is not None:
        ok = width >= width_max
        out.append(
            check(
                "health.pcie_width[%s]" % uuid,
                ok,
                width,
                width_max,
                "lanes",
                "%s (%s) PCIe link x%d of x%d%s"
                % (
                    uuid,
                    gpu.get("pci_bus_id"),
                    width,
                    width_max,
                    ""
                    if ok
                    else ": degraded, usually a GPU or riser not fully seated, or a damaged slot; "
                    "reseat it and check the slot",
                ),
            )
        )
    gen, gen_max = pcie.get("gen_current"), pcie.get("gen_max")
    if under_load and gen is not None and gen_max is not None:
        ok = gen >= gen_max
        out.append(
            check(
                "health.pcie_gen[%s]" % uuid,
                ok,
                gen,
                gen_max,
                "",
                "%s (%s) PCIe link at Gen%d of Gen%d under load%s"
                % (
                    uuid,
                    gpu.get("pci_bus_id"),
                    gen,
                    gen_max,
                    "" if ok else ": it did not train up; check the slot, riser and cable signal integrity",
                ),
            )
        )
    return out


# The remapped-rows flags, each a fault when set (health.row_remap_<flag>): the message when set,
# when clear. A GPU that does not report a flag is not judged on it.
_ROW_REMAP_FLAGS = (
    (
        "pending",
        "%s has a row remap pending: it takes effect at the next GPU reset; reset the GPU before it serves",
        "%s has no row remap pending",
    ),
    (
        "failure",
        "%s row remapping failed: a memory bank ran out of spare rows; the GPU needs service",
        "%s row remapping has not failed",
    ),
)


def memory_checks(gpu: Mapping[str, Any], limits: Mapping[str, int | None]) -> list[dict[str, Any]]:
    uuid, out = gpu["uuid"], []
    rows = gpu.get("remapped_rows") or {}
    for key, bad, good in _ROW_REMAP_FLAGS:
        flag = rows.get(key)
        if flag is not None:
            out.append(
                check(
                    "health.row_remap_%s[%s]" % (key, uuid),
                    not flag,
                    flag,
                    False,
                    "",
                    (bad if flag else good) % uuid,
                )
            )
    ecc = gpu.get("ecc") or {}
    for scope, key in (
        ("volatile", "max_volatile_uncorrectable_ecc"),
        ("aggregate", "max_aggregate_uncorrectable_ecc"),
    ):
        limit = limits.get(key)
        count = (ecc.get(scope) or {}).get("uncorrectable")
        if limit is None or count is None:
            continue
        ok = count <= limit
        out.append(
            check(
                "health.ecc_uncorrectable[%s]" % uuid
                if scope == "volatile"
                else "health.ecc_uncorrectable_aggregate[%s]" % uuid,
                ok,
                count,
                limit,
                "errors",
                "%s: %d %s uncorrectable ECC errors, limit %d%s"
                % (
                    uuid,
                    count,
                    scope,
                    limit,
                    ""
                    if ok
                    else ": the GPU's memory returned bad data; look for Xid 48/63/94/95 and a pending "
                    "row remap, reset the GPU, replace it if they come back",
                ),
            )
        )
    return out


# What NVIDIA says to do for each GPU Recovery Action (NVML's nvmlDeviceGpuRecoveryAction_t, the
# "Recovery action flag" of NVIDIA's GPU memory error management guide); an action a newer driver adds
# is not known here and fails with its own name.
RECOVERY_ACTIONS = {
    "GPU Reset": "the GPU needs a reset to recover: drain the node, end the GPU's processes, reset it "
    "(nvidia-smi -r -i <index>), then run the gate again",
    "Node Reboot": "the fault may have left the operating system inconsistent: drain the node and reboot "
    "it, then run the gate again",
    "Drain P2P": "the GPU's peer-to-peer (NVLink/PCIe P2P) traffic must stop: drain the node, end every "
    "process using P2P on it, then reset the GPU (nvidia-smi -r) and run the gate again",
    "Drain and Reset": "drain the node, end every process using the GPU's peer-to-peer traffic, then "
    "reset the GPU (nvidia-smi -r -i <index>) and run the gate again",
}


def recovery_action_checks(gpu: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``health.recovery_action[<uuid>]``: the driver's GPU Recovery Action, None passing (a GPU that
    does not report one is not judged: an older driver)."""
    action = gpu.get("recovery_action")
    if action is None:
        return []
    uuid, ok = gpu["uuid"], action == "None"
    where = "%s (%s, GPU %s)" % (uuid, gpu.get("pci_bus_id"), gpu.get("index"))
    if ok:
        message = "%s: the driver reports no recovery action pending" % where
    else:
        unknown = "an action this gate does not know: follow NVIDIA's guidance for it, then gate it again"
        advice = RECOVERY_ACTIONS.get(action, unknown).replace("<index>", str(gpu.get("index")))
        message = "%s: the driver's GPU Recovery Action is %s after an uncorrectable fault; %s" % (
            where,
            action,
            advice,
        )
    return [check("health.recovery_action[%s]" % uuid, ok, action, "None", "", message)]


# The GPU's NVSwitch fabric registration that passes: Fabric Manager configured the fabric and the GPU
# joined it (nvidia-smi -q: "Fabric / State : Completed, Status : Success", as on a real 8x H100 HGX).
FABRIC_OK = ("Completed", "Success")


def fabric_checks(gpu: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``health.fabric_manager[<uuid>]``: the GPU's fabric state Completed and status Success; a GPU on
    no NVSwitch fabric (no section, state N/A) is not judged."""
    fabric = gpu.get("fabric")
    if not fabric:
        return []
    state, status = fabric.get("state"), fabric.get("status")
    ok = (state, status) == FABRIC_OK
    value = "%s/%s" % (state, status if status is not None else "N/A")
    where = "%s (%s, GPU %s)" % (gpu["uuid"], gpu.get("pci_bus_id"), gpu.get("index"))
    if ok:
        message = "%s: its NVSwitch fabric registration is Completed (Success)" % where
    else:
        message = (
            "%s: its NVSwitch fabric registration is %s (status %s), not Completed/Success: Fabric Manager "
            "has not set up the NVLink fabric (CUDA fails with 'system not yet initialized' until it has). "
            "Check systemctl status nvidia-fabricmanager and its log (/var/log/fabricmanager.log), "
            "nvidia-smi -q -d FABRIC, the NVLink links (nvidia-smi nvlink -s) and SXids in the kernel log; "
            "restart nvidia-fabricmanager (or reboot the node), then run the gate again"
            % (where, state, status if status is not None else "N/A")
        )
    return [check("health.fabric_manager[%s]" % gpu["uuid"], ok, value, "%s/%s" % FABRIC_OK, "", message)]


def nvlink_checks(gpus: list[dict[str, Any]], links: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Per GPU, every NVLink link active (by UUID; a GPU nvlink -s does not list fails)."""
    if links is None:
        return []
    by_uuid = {g["uuid"]: g for g in links}
    out = []
    for gpu in gpus:
        uuid = gpu["uuid"]
        entry = by_uuid.get(uuid)
        if entry is None:
            out.append(
                check(
                    "health.nvlink[%s]" % uuid,
                    False,
                    None,
                    "active",
                    "",
                    "%s is not in nvidia-smi nvlink -s" % uuid,
                )
            )
            continue
        down = [str(link["link"]) for link in entry.get("links") or [] if not link.get("active")]
        total = len(entry.get("links") or [])
        ok = not down and not entry.get("all_inactive") and total > 0
        out.append(
            check(
                "health.nvlink[%s]" % uuid,
                ok,
                total - len(down),
                total,
                "links active",
                "%s: %d of %d NVLink links active" % (uuid, total - len(down), total)
                + (
                    ""
                    if ok
                    else "; inactive: %s. Tensor parallel falls back to slower paths; reseat the GPU or its "
                    "NVLink bridge/tray, check nvidia-smi nvlink -e"
                    % (", ".join("link %s" % d for d in down) or "all links")
                ),
            )
        )
    return out


# Which part of the kernel log an Xid check judged: the whole of it, or what came during a load.
XIDS_SINCE_BOOT = "since boot"


def xid_checks(
    gpus: list[dict[str, Any]], xids: list[dict[str, Any]] | None, since: str = XIDS_SINCE_BOOT
) -> list[dict[str, Any]]:
    """One check per GPU with Xid events (by bus id), failing when any of them blocks; ``since`` says
    which part of the kernel log the events are from."""
    if xids is None:
        return []
    uuids = {_bus(g.get("pci_bus_id")): g["uuid"] for g in gpus}
    by_bus: dict[str, list[dict[str, Any]]] = {}
    for event in xids:
        by_bus.setdefault(_bus(event["pci_bus_id"]), []).append(event)
    out = []
    for bus, events in sorted(by_bus.items()):
        blocking = [e for e in events if xid.describe(e["xid"]).severity == "block"]
        worst = (blocking or events)[0]
        info = xid.describe(worst["xid"])
        uuid = uuids.get(bus, "a GPU nvidia-smi no longer lists")
        numbers = sorted({e["xid"] for e in events})
        out.append(
            check(
                "health.xid[%s]" % bus,
                not blocking,
                worst["xid"],
                "no blocking Xid",
                "",
                "GPU %s (%s): Xid %s in the kernel log %s (%d events); Xid %d: %s. %s%s"
                % (
                    bus,
                    uuid,
                    ", ".join(str(n) for n in numbers),
                    since,
                    len(events),
                    worst["xid"],
                    info.meaning,
                    info.action[:1].upper() + info.action[1:],
                    "" if blocking else " (a warning: it does not block)",
                ),
            )
        )
    return out


def sxid_checks(sxids: list[dict[str, Any]] | None, since: str = XIDS_SINCE_BOOT) -> list[dict[str, Any]]:
    """One check per NVSwitch with SXid events (by its PCI bus id), failing when one of them blocks
    (xid.describe_sxid: fatal, or never said)."""
    if sxids is None:
        return []
    by_switch: dict[str, list[dict[str, Any]]] = {}
    for event in sxids:
        by_switch.setdefault(event["pci_bus_id"], []).append(event)
    out = []
    for bus, events in sorted(by_switch.items()):
        # an SXid's severity is on its first line; its Severity/Data lines repeat the number only
        said: dict[int, str | None] = {}
        for event in events:
            said[event["sxid"]] = said.get(event["sxid"]) or event["severity"]
        infos = {n: xid.describe_sxid(n, severity) for n, severity in said.items()}
        blocking = sorted(n for n, info in infos.items() if info.severity == "block")
        worst = (blocking or sorted(infos))[0]
        info = infos[worst]
        message = "NVSwitch %s (%s): SXid %s in the kernel log %s (%d lines); SXid %d (%s): %s. %s%s" % (
            events[0]["device"],
            bus,
            ", ".join(str(n) for n in sorted(infos)),
            since,
            len(events),
            worst,
            said[worst] or "severity not said",
            info.meaning,
            info.action[:1].upper() + info.action[1:],
            "" if blocking else " (a warning: it does not block)",
        )
        out.append(check("health.sxid[%s]" % bus, not blocking, worst, "no fatal SXid", "", message))
    return out


def judge(
    readings: Mapping[str, Any],
    expected_gpu_count: int | None = None,
    limits: Mapping[str, int | None] | None = None,
    off: Mapping[str, str] | None = None,
    under_load: bool = False,
    xids_since_text: str = XIDS_SINCE_BOOT,
) -> list[dict[str, Any]]:
    """Every health check of one reading (read()'s), with the profile's families turned off;
    ``xids_since_text`` says which part of the kernel log ``readings["xids"]`` holds."""
    merged = dict(DEFAULT_LIMITS)
    merged.update(limits or {})
    gpus = readings["gpus"]
    out = [gpu_count_check(gpus, expected_gpu_count)]
    for gpu in gpus:
        out.extend(pcie_checks(gpu, under_load))
        out.extend(memory_checks(gpu, merged))
        out.extend(recovery_action_checks(gpu))
        out.extend(fabric_checks(gpu))
    out.extend(nvlink_checks(gpus, readings.get("links")))
    out.extend(xid_checks(gpus, readings.get("xids"), xids_since_text))
    nics = readings.get("nic_devices") or {}
    out.extend(mlx5_health.firmware_checks(readings.get("mlx5"), nics, xids_since_text))
    out.extend(gpudirect.judge(readings.get("gpudirect")))
    out.extend(sxid_checks(readings.get("sxids"), xids_since_text))
    out.extend(diag_checks(readings.get("diag"), gpus))
    if readings.get("history") is not None:
        # the replace-hardware mark (the modules add remediation_history.reading as readings["history"]):
        # never turned off, so neither the gate nor the guardian returns a marked node
        out.append(remediation_history.replace_hardware_check(readings["history"]))
    return turned_off(out, off or {})


def turned_off(checks: list[dict[str, Any]], off: Mapping[str, str]) -> list[dict[str, Any]]:
    """The checks of a family the profile turned off pass, their message giving its reason."""
    out = []
    for c in checks:
        family = c["name"].split("[")[0]
        reason = off.get(family)
        if reason is None or c["ok"]:
            out.append(c)
        else:
            out.append(dict(c, ok=True, message="%s (not judged: %s)" % (c["message"], reason)))
    return out


def fact(readings: Mapping[str, Any]) -> dict[str, Any]:
    """The readings as the watch publishes them (gpufleet_watch's ``health``; gpufleet.prom's series):
    the GPU count, per GPU its PCIe width, pending remap, uncorrectable ECC, active NVLink links,
    recovery action, fabric state and status, and per GPU and Xid the events since boot, per NVSwitch
    and SXid its lines since boot and the severity its first line said (None: not said)."""
    links = {g["uuid"]: g.get("links") or [] for g in readings.get("links") or []}
    gpus = []
    for gpu in readings["gpus"]:
        pcie, ecc = gpu.get("pcie") or {}, gpu.get("ecc") or {}
        entry = {
            "uuid": gpu["uuid"],
            "index": gpu.get("index"),
            "pcie_width": pcie.get("width_current"),
            "pcie_width_max": pcie.get("width_max"),
            "row_remap_pending": (gpu.get("remapped_rows") or {}).get("pending"),
            "ecc_uncorrectable_volatile": (ecc.get("volatile") or {}).get("uncorrectable"),
            "ecc_uncorrectable_aggregate": (ecc.get("aggregate") or {}).get("uncorrectable"),
            "nvlink_active": None,
            "recovery_action": gpu.get("recovery_action"),
            "fabric_state": (gpu.get("fabric") or {}).get("state"),
            "fabric_status": (gpu.get("fabric") or {}).get("status"),
        }
        if readings.get("links") is not None:
            entry["nvlink_active"] = sum(1 for link in links.get(gpu["uuid"], []) if link.get("active"))
        gpus.append(entry)
    xids: dict[tuple[str, int], int] = {}
    for event in readings.get("xids") or []:
        key = (_bus(event["pci_bus_id"]), int(event["xid"]))
        xids[key] = xids.get(key, 0) + 1
    sxids: dict[tuple[str, str, int], dict[str, Any]] = {}
    for event in readings.get("sxids") or []:
        key = (event["pci_bus_id"], event["device"], int(event["sxid"]))
        entry = sxids.setdefault(key, {"events": 0, "severity": None})
        entry["events"] += 1
        entry["severity"] = entry["severity"] or event["severity"]
    nic_errors = None
    if readings.get("mlx5") is not None:
        names = dict(readings.get("nic_devices") or {})
        nic_errors = dict.fromkeys(names.values(), 0)
        for event in readings["mlx5"]:
            dev = names.get(event["pci_bus_id"], event["pci_bus_id"])
            nic_errors[dev] = nic_errors.get(dev, 0) + 1
    return {
        "gpudirect": gpudirect.fact(readings.get("gpudirect")),
        "nic_firmware_errors": nic_errors,
        "gpu_count": len(readings["gpus"]),
        "gpus": gpus,
        "xids": [
            {"pci_bus_id": bus, "xid": number, "events": n} for (bus, number), n in sorted(xids.items())
        ],
        "sxids": [
            {"pci_bus_id": bus, "device": device, "sxid": number, **entry}
            for (bus, device, number), entry in sorted(sxids.items())
        ],
    }
