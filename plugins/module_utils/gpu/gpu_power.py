# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_power role's logic, once: its options, read + plan (:func:`plan`) and apply (:func:`apply`).

The module gpufleet.node.gpu_power runs plan then apply; node_facts (drift) runs plan only, on a
module_utils.core.plan_node.PlanNode. The plan includes the boot path that re-applies the limits at every
boot: the limits by GPU UUID (:data:`CONF`), the script that applies and verifies them
(:data:`SCRIPT_TEXT`, shipped here since a module cannot read role files) and its unit.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import FailedChecks, boot_plan
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_roles import GpuPower

__all__ = [
    "ARGUMENT_SPEC",
    "CONF",
    "FAILED_CHECKS",
    "SCRIPT",
    "SCRIPT_TEXT",
    "UNIT",
    "apply",
    "boot_texts",
    "diff",
    "plan",
    "result",
    "validate",
]

MODULE = "gpu_power"
CONF = "/etc/gpufleet/gpu-power.conf"
SCRIPT = "/usr/local/sbin/gpufleet-gpu-power"
UNIT = "gpufleet-gpu-power.service"
UNIT_PATH = "/etc/systemd/system/" + UNIT

ARGUMENT_SPEC = dict(
    limit_w=dict(type="float"),
    limits=dict(type="dict", default={}),
    persistence=dict(type="bool", default=True),
    persistenced_unit=dict(type="str", default="nvidia-persistenced.service"),
    nvidia_smi_path=dict(type="path"),
    boot_unit=dict(type="bool", default=True),
    boot_before=dict(type="list", elements="str", default=[]),
)

# A GPU that does not enforce its target (or is not in persistence mode) after the run fails the module.
FAILED_CHECKS = FailedChecks(suffix=". Check the rack's power budget and nvidia-persistenced.")

_UUID = re.compile(r"^GPU-.{36}$")

SCRIPT_TEXT = (
    "#!/bin/sh\n"
    + boot_files.header(MODULE)
    + r"""# gpufleet-gpu-power.service runs it at boot.
# Applies the power limits in CONF (default /etc/gpufleet/gpu-power.conf: "<GPU UUID> <watts>" per
# line, '#' comments) with nvidia-smi -i <uuid> -pl <watts>, then reads each GPU's enforced limit
# back. Exits 1, naming each GPU, when a limit could not be set or is not enforced.
# nvidia-smi is $NVIDIA_SMI, else the one on PATH.
set -u
conf=${1:-/etc/gpufleet/gpu-power.conf}
smi=${NVIDIA_SMI:-nvidia-smi}
if [ ! -r "$conf" ]; then
    echo "gpufleet-gpu-power: cannot read $conf" >&2
    exit 1
fi
status=0
while read -r uuid watts _; do
    case $uuid in
        '' | '#'*) continue ;;
    esac
    if ! "$smi" -i "$uuid" -pl "$watts" </dev/null >/dev/null; then
        echo "gpufleet-gpu-power: nvidia-smi -i $uuid -pl $watts failed" >&2
        status=1
        continue
    fi
    enforced=$("$smi" -i "$uuid" --query-gpu=enforced.power.limit --format=csv,noheader,nounits </dev/null)
    if ! awk -v got="$enforced" -v want="$watts" 'BEGIN { exit !(got + 0 == want + 0) }'; then
        echo "gpufleet-gpu-power: $uuid enforces ${enforced} W, not $watts W" \
            "(is the rack's power budget capping it?)" >&2
        status=1
    fi
done <"$conf"
exit "$status"
"""
)


def validate(node, params):
    """Every rule on the options, before anything is read or changed."""
    limit = params["limit_w"]
    if limit is not None and limit <= 0:
        node.fail_json(msg="limit_w: %s is not a power limit; give positive watts, or leave it unset" % limit)
    for uuid, watts in (params["limits"] or {}).items():
        try:
            ok = float(watts) > 0
        except (TypeError, ValueError):
            ok = False
        if not (isinstance(uuid, str) and _UUID.match(uuid)) or not ok:
            node.fail_json(
                msg="limits: keys must be GPU UUIDs (GPU- and 36 characters, as nvidia-smi -L prints "
                "them) and values positive watts; got %s: %s" % (uuid, watts)
            )
    bad = [unit for unit in params["boot_before"] if "." not in unit]
    if bad:
        node.fail_json(
            msg="boot_before: %s is not a unit name with its suffix (vllm@glm52.service)" % ", ".join(bad)
        )


def _watts(value):
    # As the role's Jinja template wrote them (1400.0), so the conf of a provisioned node reads the same.
    return str(float(value))


def boot_texts(params, limits, method, smi):
    """The conf, the script and the unit: ``[boot_files.boot_file(...)]``."""
    conf = (
        boot_files.header(MODULE) + '# GPU power limits by UUID, one "<GPU UUID> <watts>" per line. %s\n'
        "# applies them at every boot (%s) and fails if a GPU does not enforce its limit.\n"
        % (SCRIPT, UNIT)
        + "".join("%s %s\n" % (uuid, _watts(watts)) for uuid, watts in sorted(limits.items()))
    )
    unit = [
        boot_files.header(MODULE).rstrip("\n"),
        "[Unit]",
        "Description=Apply and verify the GPU power limits of %s (gpufleet)" % CONF,
        "# Persistence first: without it the driver may drop the limit with the GPU's state.",
        "After=%s" % params["persistenced_unit"],
    ]
    if params["boot_before"]:
        unit.append("Before=%s" % " ".join(params["boot_before"]))
    unit += ["", "[Service]", "Type=oneshot", "RemainAfterExit=yes", "Environment=NVIDIA_SMI=%s" % smi]
    if method == "nvidia-smi":
        unit += [
            "# This node has no %s: persistence comes from nvidia-smi -pm 1." % params["persistenced_unit"],
            "ExecStartPre=%s -pm 1" % smi,
        ]
    unit += ["ExecStart=%s %s" % (SCRIPT, CONF), "", "[Install]", "WantedBy=multi-user.target", ""]
    return [
        boot_files.boot_file(CONF, conf),
        boot_files.boot_file(SCRIPT, SCRIPT_TEXT, mode="0755", script=True),
        boot_files.boot_file(UNIT_PATH, "\n".join(unit), unit=UNIT),
    ]


def plan(node, params):
    """Read the GPUs, the persistence daemon and the boot files and plan; writes nothing.

    Returns a Plan whose ``state`` is ``{power, gpus, plan, method, commands, limits}``.
    """
    power = GpuPower(node, params)
    gpus = power.read_gpus()
    if not gpus:
        node.fail_json(msg="nvidia-smi lists no GPU; check the driver before setting power limits")
    entries, method, commands = power.plan(gpus)
    limits = dict((e["uuid"], e["target_w"]) for e in entries)
    files = boot_texts(params, limits, method, power.smi) if params["boot_unit"] else []
    state = dict(power=power, gpus=gpus, plan=entries, method=method, commands=commands, limits=limits)
    return boot_plan(node, MODULE, files, power.changes, hints=power.hints, **state)


def apply(node, params, planned):
    """Run the planned commands, read the GPUs back and check them, write the boot files."""
    state = planned.state
    power = state["power"]
    after = state["gpus"]
    if state["commands"]:
        for cmd, _what in state["commands"]:
            power.run(cmd)
        after = power.read_gpus()
    state["after"] = after
    planned.checks = power.verify(state["plan"], after, state["method"])
    # A limit that did not take fails the module: the boot path is left as it was until it does.
    if all(c["ok"] for c in planned.checks):
        boot_files.write(node, planned.files, planned.found)
    return planned


def result(node, params, planned):
    """The module's own return values: the limits, how persistence is kept, the GPUs after the run."""
    state, power = planned.state, planned.state["power"]
    gpus = power.summary(state["plan"], state.get("after", state["gpus"]))
    return dict(limits=state["limits"], persistence_method=state["method"], nvidia_smi=power.smi, gpus=gpus)


def diff(node, params, planned):
    """Per GPU the enforced limit and persistence before and after, then the boot files'."""
    state = planned.state
    power, entries = state["power"], state["plan"]
    return [
        dict(
            before=power.describe(entries, state["gpus"], "before"),
            after=power.describe(entries, state.get("after", state["gpus"]), "after"),
        ),
        *boot_files.diffs(planned.files, planned.found),
    ]
