#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_power
short_description: Keep NVIDIA GPUs in persistence mode at their power limits
version_added: "0.1.0"
description:
  - Reads every GPU with C(nvidia-smi -q -x), works out the power limit each must enforce
    (O(limit_w), or the GPU's override in O(limits), or its default limit), and refuses the whole run,
    before changing anything, when any target is outside that GPU's [min, max] range. The message
    names the GPU UUID, the target and the allowed range.
  - Persistence first. When the node has the driver's C(nvidia-persistenced) unit, it is enabled and
    started (restarted if it runs while a GPU is not in persistence mode). Only when the node has no
    such unit is persistence set with C(nvidia-smi -i <uuid> -pm 1); the result says so in
    RV(persistence_method), a warning and a hint.
  - Then every GPU whose enforced or requested limit differs from its target gets
    C(nvidia-smi -i <uuid> -pl <watts>). Afterwards the GPUs are read again and the module fails if a
    GPU does not enforce its target or is not in persistence mode.
  - A GPU enforcing less than software requested is being capped from outside the driver (a PDU
    protection or power brake); the result carries a hint that the rack's power budget may be the cause.
  - Returns the gpufleet report keys C(changes), C(checks), C(hints) and C(reboot_required).
options:
  limit_w:
    description:
      - Power limit in watts for every GPU without an entry in O(limits).
      - When not set, each GPU's default limit (C(Default Power Limit)).
    type: float
  limits:
    description:
      - Per-GPU overrides, GPU UUID (C(GPU-...), as C(nvidia-smi -L) prints it) to watts.
      - An override for a GPU this node does not have is ignored with a warning.
    type: dict
    default: {}
  persistence:
    description:
      - Whether to put every GPU in persistence mode (see the description for how).
      - V(false) leaves persistence as it is.
    type: bool
    default: true
  persistenced_unit:
    description: The driver's persistence daemon unit.
    type: str
    default: nvidia-persistenced.service
  nvidia_smi_path:
    description:
      - Path to the C(nvidia-smi) binary.
      - When not set, C(nvidia-smi) is looked up on E(PATH) and the module fails if it is not found.
    type: path
extends_documentation_fragment:
  - action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the GPUs and the daemon's unit, reports in RV(changes) exactly what a run would change.
  diff_mode:
    support: full
    details: Per GPU, the enforced limit and persistence mode before and after.
  platform:
    platforms: posix
notes:
  - Commands run as argument lists with C(LC_ALL=C); needs root.
  - C(nvidia-smi -pl) is lost at every reboot and driver reload. The gpufleet.node.gpu_power role
    installs a boot unit that re-applies the limits this module returns in RV(limits).
seealso:
  - name: nvidia-smi documentation
    description: C(-pl) and C(-pm), and the meaning of enforced versus requested power limits.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
  - name: NVIDIA persistence daemon
    description: Why persistence mode should come from nvidia-persistenced rather than C(-pm 1).
    link: https://docs.nvidia.com/deploy/driver-persistence/index.html
author:
  - gpufleet developers
"""

EXAMPLES = r"""
- name: Every GPU at 1400 W, persistence from nvidia-persistenced
  gpufleet.node.gpu_power:
    limit_w: 1400

- name: 1400 W except one GPU that runs hot
  gpufleet.node.gpu_power:
    limit_w: 1400
    limits:
      GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b: 1200

- name: Back to each GPU's default limit, leave persistence alone
  gpufleet.node.gpu_power:
    persistence: false
"""

RETURN = r"""
changes:
  description:
    - What changed (in check mode, what would change), one entry per setting.
    - Settings are C(gpu_power.enforced_limit_w[<uuid>]) (C(gpu_power.requested_limit_w[<uuid>]) when only
      the request differs), C(gpu_power.persistence_mode[<uuid>]), C(gpu_power.nvidia_persistenced.enabled)
      and C(gpu_power.nvidia_persistenced.active).
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "gpu_power.enforced_limit_w[GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b]",
            "from": 1100.0, "to": 1400.0}]
checks:
  description:
    - After a run (not in check mode), per GPU the enforced limit against its target
      (C(gpu_power.enforced_limit_w[<uuid>])) and persistence mode (C(gpu_power.persistence_mode[<uuid>])).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "gpu_power.enforced_limit_w[GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b]", "ok": true,
            "value": 1400.0, "limit": 1400.0, "unit": "W", "message": "enforces its target"}]
hints:
  description: What an operator should look at (a limit capped from outside the driver, the -pm fallback).
  returned: always
  type: list
  elements: str
  sample: ["16 GPUs enforce less than the requested limit (GPU-3f5c...: 1100 W < 1400 W): the rack's power
            budget (a PDU protection) may be capping them."]
reboot_required:
  description: Always false; power limits and persistence take effect at once.
  returned: always
  type: bool
  sample: false
limits:
  description: The limit each GPU must enforce, by UUID (what the boot unit re-applies).
  returned: success
  type: dict
  sample: {"GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b": 1400.0}
persistence_method:
  description:
    - V(nvidia-persistenced) when the daemon's unit keeps persistence, V(nvidia-smi) when the fallback
      C(-pm 1) was (or would be) used, V(unmanaged) when O(persistence=false).
  returned: success
  type: str
  sample: nvidia-persistenced
nvidia_smi:
  description: The nvidia-smi binary used.
  returned: success
  type: str
  sample: /usr/bin/nvidia-smi
gpus:
  description: Per GPU after the run (in check mode, as found), in nvidia-smi order.
  returned: success
  type: list
  elements: dict
  sample: [{"uuid": "GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b", "pci_bus_id": "00000000:13:00.0",
            "target_w": 1400.0, "enforced_w": 1400.0, "requested_w": 1400.0, "min_w": 200.0,
            "max_w": 1400.0, "persistence_mode": true}]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.gpu_desired import (
    PlanError,
    capped,
    daemon_state,
    parse_systemctl_show,
    power_changes,
    power_plan,
    same_watts,
    watts_arg,
)
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import ParseError, parse_query_xml

_ENV = {"LC_ALL": "C"}


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return "no output"


class GpuPower:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.smi = self._nvidia_smi()
        self.changes = []
        self.hints = []

    def _nvidia_smi(self):
        path = self.params["nvidia_smi_path"]
        if path is None:
            return self.module.get_bin_path("nvidia-smi", required=True)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            self.module.fail_json(
                msg="nvidia_smi_path %s is not an executable file; point it at nvidia-smi" % path
            )
        return path

    def run(self, cmd, what):
        rc, out, err = self.module.run_command(cmd, environ_update=_ENV)
        if rc != 0:
            self.module.fail_json(
                msg="%s failed (rc=%d): %s" % (what, rc, _first_line(out, err)),
                cmd=cmd,
                rc=rc,
                stdout=out,
                stderr=err,
                changes=self.changes,
                hints=self.hints,
            )
        return out

    def read_gpus(self):
        cmd = [self.smi, "-q", "-x"]
        out = self.run(cmd, "nvidia-smi -q -x")
        try:
            return parse_query_xml(out)["gpus"]
        except ParseError as exc:
            self.module.fail_json(
                msg="Could not read nvidia-smi -q -x output: %s. Run it by hand on this node." % exc,
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
        cmd = [systemctl, "show", unit]
        rc, out, err = self.module.run_command(cmd, environ_update=_ENV)
        if rc != 0:
            return "nvidia-smi", "systemctl show %s failed: %s" % (unit, _first_line(err, out)), None, None
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
                self.changes.append(
                    {"setting": "gpu_power.nvidia_persistenced.enabled", "from": False, "to": True}
                )
                commands.append(([systemctl, "enable", unit], "systemctl enable %s" % unit))
            if not active:
                self.changes.append(
                    {"setting": "gpu_power.nvidia_persistenced.active", "from": False, "to": True}
                )
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
                {
                    "setting": "gpu_power.persistence_mode[%s]" % gpu["uuid"],
                    "from": gpu["persistence_mode"],
                    "to": True,
                }
            )
        return method, commands

    # -- main -------------------------------------------------------------
    def main(self):
        gpus = self.read_gpus()
        try:
            plan, unknown = power_plan(gpus, self.params["limit_w"], self.params["limits"])
        except PlanError as exc:
            self.module.fail_json(
                msg="Refusing to change any GPU: %s. Set gpu_power_limit_w / gpu_power_limits within the "
                "allowed range." % exc
            )
        for uuid in unknown:
            self.module.warn("limits names %s, which is not on this node; ignored" % uuid)
        method, commands = self.plan_persistence(gpus)
        self.changes.extend(power_changes(plan))
        low = capped(plan)
        if low:
            first = low[0]
            self.hints.append(
                "%d GPU%s enforce%s less than the requested limit (%s: %s W < %s W): the rack's power budget "
                "(a PDU protection or power brake) may be capping them; check it before raising limits."
                % (
                    len(low),
                    "s" if len(low) > 1 else "",
                    "" if len(low) > 1 else "s",
                    first["uuid"],
                    watts_arg(first["enforced_w"]),
                    watts_arg(first["requested_w"]),
                )
            )
        commands.extend(
            ([self.smi, "-i", e["uuid"], "-pl", watts_arg(e["target_w"])], "nvidia-smi -i %s -pl" % e["uuid"])
            for e in plan
            if e["change"]
        )
        after = gpus
        if commands and not self.module.check_mode:
            for cmd, what in commands:
                self.run(cmd, what)
            after = self.read_gpus()
        checks = [] if self.module.check_mode else self.verify(plan, after, method)
        result = dict(
            changed=bool(self.changes),
            changes=self.changes,
            checks=checks,
            hints=self.hints,
            reboot_required=False,
            limits=dict((e["uuid"], e["target_w"]) for e in plan),
            persistence_method=method,
            nvidia_smi=self.smi,
            gpus=self.summary(plan, after),
        )
        if self.module._diff:
            result["diff"] = dict(
                before=self.describe(plan, gpus, "before"), after=self.describe(plan, after, "after")
            )
        failed = [c for c in checks if not c["ok"]]
        if failed:
            self.module.fail_json(
                msg="; ".join(c["message"] for c in failed)
                + ". Check the rack's power budget and nvidia-persistenced.",
                **result,
            )
        self.module.exit_json(**result)

    def verify(self, plan, after, method):
        by_uuid = dict((g["uuid"], g) for g in after)
        checks = []
        for entry in plan:
            gpu = by_uuid.get(entry["uuid"], {})
            enforced = (gpu.get("power") or {}).get("enforced_limit_w")
            ok = same_watts(enforced, entry["target_w"])
            checks.append(
                {
                    "name": "gpu_power.enforced_limit_w[%s]" % entry["uuid"],
                    "ok": ok,
                    "value": enforced,
                    "limit": entry["target_w"],
                    "unit": "W",
                    "message": "enforces its target"
                    if ok
                    else "%s enforces %s W after nvidia-smi -pl %s: the limit did not take (the rack's power "
                    "budget may be capping it)" % (entry["uuid"], enforced, watts_arg(entry["target_w"])),
                }
            )
            if method != "unmanaged":
                on = gpu.get("persistence_mode") is True
                checks.append(
                    {
                        "name": "gpu_power.persistence_mode[%s]" % entry["uuid"],
                        "ok": on,
                        "value": gpu.get("persistence_mode"),
                        "limit": True,
                        "unit": "",
                        "message": "in persistence mode"
                        if on
                        else "%s is not in persistence mode after %s" % (entry["uuid"], method),
                    }
                )
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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            limit_w=dict(type="float"),
            limits=dict(type="dict", default={}),
            persistence=dict(type="bool", default=True),
            persistenced_unit=dict(type="str", default="nvidia-persistenced.service"),
            nvidia_smi_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    GpuPower(module).main()


if __name__ == "__main__":
    main()
