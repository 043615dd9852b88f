# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_power module's reads, plan and changes, shared with node_facts (one read of the node).

The GPUs are read with one CSV query (nvidia_smi.power_query: persistence and power limits), before
and after the limits are set; the full -q -x read is gpu_facts', once per run.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import change
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import (
    first_line,
    nvidia_smi,
    run,
)
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_judge import (
    POWER_BUDGET_CAUSE,
    PlanError,
    capped,
    daemon_state,
    parse_systemctl_show,
    persistence_check,
    power_changes,
    power_check,
    power_plan,
    watts_arg,
)
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    GPU_LIST_FIELDS,
    ParseError,
    build_topology,
    gpu_list_query,
    parse_power_sample,
    parse_query_csv,
    parse_topo_matrix,
    power_query,
)

__all__ = ["GpuPower", "pinning_gpus"]


class GpuPower:
    """The gpu_power reads, plan and commands over a node (the module, or node_facts' PlanNode)."""

    def __init__(self, module, params):
        self.module = module
        self.params = params
        self.smi = nvidia_smi(module, params["nvidia_smi_path"])
        self.changes = []
        self.hints = []

    def run(self, cmd):
        """Run one of the plan's commands; a failure carries the changes and hints so far."""
        return run(self.module, cmd, changes=self.changes, hints=self.hints)[1]

    def read_gpus(self):
        """``[{uuid, pci_bus_id, persistence_mode, power: {...}}]`` of every GPU, from one CSV query."""
        cmd = power_query(self.smi)
        out = self.run(cmd)
        try:
            return parse_power_sample(out)
        except ParseError as exc:
            self.module.fail_json(
                msg="Could not read the GPUs' power limits: %s. Run %s by hand on this node."
                % (exc, " ".join(cmd)),
                cmd=cmd,
                stdout=out,
            )

    # -- persistence ------------------------------------------------------
    def persistence_daemon(self):
        """(method, enabled, active) for the daemon's unit, or ('nvidia-smi', ...) when there is none."""
        systemctl = self.module.get_bin_path("systemctl")
        unit = self.params["persistenced_unit"]
        if systemctl is None:
            return "nvidia-smi", "systemctl is not on this node", None, None
        rc, out, err = run(self.module, [systemctl, "show", unit], check=False)
        if rc != 0:
            return "nvidia-smi", "systemctl show %s failed: %s" % (unit, first_line(err, out)), None, None
        installed, enabled, active = daemon_state(parse_systemctl_show(out))
        if not installed:
            return "nvidia-smi", "the node has no %s" % unit, None, None
        return "nvidia-persistenced", None, enabled, active

    def plan_persistence(self, gpus):
        """The persistence changes and the commands that make them."""
        if not self.params["persistence"]:
            return "unmanaged", []
        method, reason, enabled, active = self.persistence_daemon()
        off = [g for g in gpus if g["persistence_mode"] is not True]
        commands = []
        unit = self.params["persistenced_unit"]
        if method == "nvidia-persistenced":
            systemctl = self.module.get_bin_path("systemctl", required=True)
            if not enabled:
                self.changes.append(change("gpu_power.nvidia_persistenced.enabled", False, True))
                commands.append(([systemctl, "enable", unit], "systemctl enable %s" % unit))
            if not active:
                self.changes.append(change("gpu_power.nvidia_persistenced.active", False, True))
                commands.append(([systemctl, "start", unit], "systemctl start %s" % unit))
            elif off:
                # Running, yet a GPU lost persistence (someone ran -pm 0): the daemon sets it on start.
                commands.append(([systemctl, "restart", unit], "systemctl restart %s" % unit))
        else:
            reason = reason[0].upper() + reason[1:]
            message = (
                "%s, so persistence mode is set with nvidia-smi -pm 1 (the driver forgets it at reload; "
                "the boot unit sets it again). Install the driver's nvidia-persistenced." % reason
            )
            self.module.warn(message)
            self.hints.append(message)
            commands.extend(
                ([self.smi, "-i", g["uuid"], "-pm", "1"], "nvidia-smi -i %s -pm 1" % g["uuid"]) for g in off
            )
        for gpu in off:
            self.changes.append(
                change("gpu_power.persistence_mode[%s]" % gpu["uuid"], gpu["persistence_mode"], True)
            )
        return method, commands

    # -- main -------------------------------------------------------------
    def plan(self, gpus):
        """Changes (in self.changes), hints and commands for these GPUs: ``(plan, method, commands)``."""
        try:
            plan, unknown = power_plan(gpus, self.params["limit_w"], self.params["limits"])
        except PlanError as exc:
            self.module.fail_json(
                msg="Refusing to change any GPU: %s. Set gpu_power_limit_w / gpu_power_limits within the "
                "allowed range." % exc,
                input_error=True,
            )
        for uuid in unknown:
            self.module.warn("limits names %s, which is not on this node; ignored" % uuid)
        method, commands = self.plan_persistence(gpus)
        self.changes.extend(power_changes(plan))
        low = capped(plan)
        if low:
            first = low[0]
            self.hints.append(
                "%d GPU%s enforce%s less than the requested limit (%s: %s W < %s W): %s may be capping "
                "them; check it before raising limits."
                % (
                    len(low),
                    "s" if len(low) > 1 else "",
                    "" if len(low) > 1 else "s",
                    first["uuid"],
                    watts_arg(first["enforced_w"]),
                    watts_arg(first["requested_w"]),
                    POWER_BUDGET_CAUSE,
                )
            )
        commands.extend(
            ([self.smi, "-i", e["uuid"], "-pl", watts_arg(e["target_w"])], "nvidia-smi -i %s -pl" % e["uuid"])
            for e in plan
            if e["change"]
        )
        return plan, method, commands

    def verify(self, plan, after, method):
        by_uuid = dict((g["uuid"], g) for g in after)
        checks = []
        for entry in plan:
            gpu = by_uuid.get(entry["uuid"], {})
            reading = {
                "uuid": entry["uuid"],
                "enforced_limit_w": (gpu.get("power") or {}).get("enforced_limit_w"),
                "requested_limit_w": entry["target_w"],
            }
            checks.append(power_check(reading, after="nvidia-smi -pl %s" % watts_arg(entry["target_w"])))
            if method != "unmanaged":
                checks.append(persistence_check(entry["uuid"], gpu.get("persistence_mode"), method))
        return checks

    @staticmethod
    def summary(plan, gpus):
        by_uuid = dict((g["uuid"], g) for g in gpus)
        rows = []
        for entry in plan:
            gpu = by_uuid.get(entry["uuid"], {})
            power = gpu.get("power") or {}
            rows.append(
                dict(
                    uuid=entry["uuid"],
                    pci_bus_id=entry["pci_bus_id"],
                    target_w=entry["target_w"],
                    enforced_w=power.get("enforced_limit_w"),
                    requested_w=power.get("requested_limit_w"),
                    min_w=entry["min_w"],
                    max_w=entry["max_w"],
                    persistence_mode=gpu.get("persistence_mode"),
                )
            )
        return rows

    def describe(self, plan, gpus, side):
        by_uuid = dict((g["uuid"], g) for g in gpus)
        lines = []
        for entry in plan:
            gpu = by_uuid.get(entry["uuid"], {})
            if side == "after" and self.module.check_mode:
                limit, mode = (
                    entry["target_w"],
                    True if self.params["persistence"] else gpu.get("persistence_mode"),
                )
            else:
                limit, mode = (gpu.get("power") or {}).get("enforced_limit_w"), gpu.get("persistence_mode")
            lines.append("%s enforced_limit_w=%s persistence_mode=%s" % (entry["uuid"], limit, mode))
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- gpu_pinning (and node_facts)


def pinning_gpus(module, smi, need_domains):
    """The gpu_pinning inputs: ``([{index, uuid, pci_bus_id}], nvlink domains)``.

    Fails the module on a tool error.
    """
    query = gpu_list_query(smi)
    out = run(module, query)[1]
    try:
        rows = parse_query_csv(out, fields=GPU_LIST_FIELDS)
    except ParseError as exc:
        module.fail_json(msg="Could not read nvidia-smi's GPU list: %s" % exc, cmd=query, stdout=out)
    gpus = [{"index": r["index"], "uuid": r["uuid"], "pci_bus_id": r["pci.bus_id"]} for r in rows]
    if not need_domains:
        return gpus, []
    topo_cmd = [smi, "topo", "-m"]
    out = run(module, topo_cmd)[1]
    try:
        topology, warnings = build_topology(gpus, parse_topo_matrix(out))
    except ParseError as exc:
        module.fail_json(msg="Could not read nvidia-smi topo -m: %s" % exc, cmd=topo_cmd, stdout=out)
    if topology is None:
        module.fail_json(msg="Cannot tell the NVLink domains: %s" % "; ".join(warnings), cmd=topo_cmd)
    return gpus, topology["nvlink_domains"]
