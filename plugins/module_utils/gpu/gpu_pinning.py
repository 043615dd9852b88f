# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_pinning role's logic, once: its options, read + plan (:func:`plan`) and apply (:func:`apply`).

The module gpufleet.node.gpu_pinning runs plan then apply; node_facts (drift) runs plan only, on a
module_utils.core.plan_node.PlanNode.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
import tempfile

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import Plan
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_judge import (
    INSTANCE_NAME,
    PlanError,
    instance_change,
    pinning_plan,
)
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_roles import pinning_gpus

ARGUMENT_SPEC = dict(
    instances=dict(
        type="list",
        elements="dict",
        required=True,
        options=dict(
            name=dict(type="str", required=True),
            nvlink_domain=dict(type="int"),
            gpus=dict(type="list", elements="str"),
            gpu_count=dict(type="int"),
        ),
        mutually_exclusive=[("nvlink_domain", "gpus")],
        required_one_of=[("nvlink_domain", "gpus")],
    ),
    gpu_count=dict(type="int", default=8),
    env_dir=dict(type="path", default="/etc/gpufleet/instances"),
    nccl_topo_file=dict(type="path", default="/etc/nccl/topo.xml"),
    nvidia_smi_path=dict(type="path"),
)


def validate(node, params):
    """Every rule on the options, before anything is read."""
    names = [i["name"] for i in params["instances"]]
    bad = [n for n in names if not INSTANCE_NAME.match(n)]
    if bad or len(set(names)) != len(names):
        node.fail_json(
            msg="instance names must be unique and made of letters, digits, '.', '_' or '-' (got %s)"
            % ", ".join(names)
        )
    if params["gpu_count"] <= 0:
        node.fail_json(msg="gpu_count: %d is not a number of GPUs; give 1 or more" % params["gpu_count"])


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def plan(node, params):
    """Pin each instance and compare its environment file; writes nothing (no instance: reads nothing).

    Returns a Plan whose ``state`` is ``{instances: {name: {gpus, nvlink_domain, path,
    cuda_visible_devices}}, writes: [(path, text)], diffs}``.
    """
    instances = params["instances"]
    planned = Plan(instances={}, writes=[], diffs=[])
    if not instances:
        return planned
    state = planned.state
    smi = nvidia_smi(node, params["nvidia_smi_path"])
    gpus, domains = pinning_gpus(node, smi, any(i.get("gpus") is None for i in instances))
    try:
        pins = pinning_plan(gpus, domains, instances, params["gpu_count"])
    except PlanError as exc:
        node.fail_json(msg="Refusing to pin: %s" % exc, checks=exc.checks, input_error=exc.input_error)
    for name, entry in pins.items():
        path = os.path.join(params["env_dir"], "%s.env" % name)
        current = _read(path)
        text, variables, change = instance_change(name, entry, params["nccl_topo_file"], current)
        state["instances"][name] = dict(
            gpus=entry["gpus"],
            nvlink_domain=entry["nvlink_domain"],
            path=path,
            cuda_visible_devices=variables["CUDA_VISIBLE_DEVICES"],
        )
        if change is None:
            continue
        planned.changes.append(change)
        state["diffs"].append(dict(before_header=path, after_header=path, before=current or "", after=text))
        state["writes"].append((path, text))
    return planned


def apply(node, params, planned):
    """Write the environment files that differ (atomically, mode 0644)."""
    writes = planned.state["writes"]
    if writes and not os.path.isdir(params["env_dir"]):
        os.makedirs(params["env_dir"], mode=0o755)
    for path, text in writes:
        fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        node.atomic_move(tmp, path)
    return planned


def result(node, params, planned):
    """The module's own return value: each instance's GPUs and file."""
    return dict(instances=planned.state["instances"])


def diff(node, params, planned):
    """One diff per instance file that changes."""
    return planned.state["diffs"]
