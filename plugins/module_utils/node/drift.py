# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's plan against the node in one module run (gpufleet.node.node_facts, drift).

Nothing here knows a setting: each role is its module_utils file (rdma_link, rdma_qos, gpu_power,
nccl_topology, gpu_pinning), whose ``validate`` and ``plan`` are the ones its module runs, here on a
read-only module_utils.core.plan_node.PlanNode. So a role's changes (its boot files included), checks and
failure messages are those of ``provision --check``.

The roles are planned concurrently and share one plan_node.Commands, so a command two roles need
(nvidia-smi's GPU list, topo -m) runs once; within the RDMA roles the ports are read concurrently too.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpufleet.node.plugins.module_utils.core.plan_node import (
    Commands,
    PlanNode,
    RoleFailed,
)
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import fabric
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_pinning, gpu_power
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import ParseError as SmiParseError
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_topology, topology_xml
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_link, rdma_qos
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_parse import ParseError

# Each role, in provision's order, and its module_utils file (ARGUMENT_SPEC, validate, plan: a Plan).
ROLES = {
    "rdma_link": rdma_link,
    "rdma_qos": rdma_qos,
    "fabric": fabric,
    "gpu_power": gpu_power,
    "nccl_topology": nccl_topology,
    "gpu_pinning": gpu_pinning,
}


def validate_roles(module, desired):
    """``desired`` ({role: its raw options}) checked by each role's own rules, its module's
    ARGUMENT_SPEC then its ``validate``: ``{role: options}`` with the spec's defaults and types, or the
    whole run fails as a configuration error (input_error) before anything is read, as provision's
    preflight does."""
    validated = {}
    for role, raw in desired.items():
        result = ArgumentSpecValidator(ROLES[role].ARGUMENT_SPEC).validate(raw)
        if result.error_messages:
            module.fail_json(msg="%s: %s" % (role, "; ".join(result.error_messages)), input_error=True)
        validated[role] = result.validated_parameters
        try:
            ROLES[role].validate(PlanNode(module), validated[role])
        except RoleFailed as exc:
            module.fail_json(msg="%s: %s" % (role, exc), input_error=True)
    return validated


def _compare_role(role, node, params):
    try:
        planned = ROLES[role].plan(node, params)
        return {"changes": planned.changes, "checks": planned.checks, "error": None}
    except RoleFailed as exc:
        failed = {"changes": [], "checks": exc.checks, "error": str(exc)}
        if exc.input_error:
            failed["input_error"] = True
        return failed
    except (ParseError, SmiParseError, topology_xml.TopologyError, OSError) as exc:
        return {"changes": [], "checks": [], "error": "could not read the node: %s" % exc}


def compare_roles(module, desired):
    """``{role: {changes, checks, error}}`` per role in ``desired`` ({role: its options}), in ROLES order.

    As in provision --check: a failed check (a link down) does not stop the node (the roles' verify
    steps run outside check mode only), a role that cannot be planned (its module fails) does, so the
    roles after it carry ``not_compared`` (why) and no changes or checks.
    """
    commands = Commands(module)
    roles = [role for role in ROLES if desired.get(role) is not None]
    with ThreadPoolExecutor(max_workers=max(len(roles), 1)) as pool:
        futures = [
            pool.submit(_compare_role, role, PlanNode(module, commands), desired[role]) for role in roles
        ]
        results = {role: future.result() for role, future in zip(roles, futures, strict=True)}
    stopped = None
    for role in roles:
        if stopped:
            results[role] = {
                "changes": [],
                "checks": [],
                "error": None,
                "not_compared": "%s failed first; provision stops the node there" % stopped,
            }
        elif results[role]["error"]:
            stopped = role
    return results


def fabric_refusal(results):
    """The message that stops a node before it is drained when the fabric role's judgement failed a
    check (its cabling, a leaf's side of a link, a leaf not read), else None: nothing a role changes
    on the node fixes those, and the fabric role would stop the node after the drain."""
    fabric_result = results.get("fabric") or {}
    failed = [c for c in fabric_result.get("checks") or [] if not c["ok"]]
    if not failed:
        return None
    shown = "; ".join("%s: %s" % (c["name"], c["message"]) for c in failed[:4])
    more = " and %d more" % (len(failed) - 4) if len(failed) > 4 else ""
    return (
        "fabric: %s%s. Nothing changed on this node fixes its cabling or its leaves (gpufleet switch applies "
        "a leaf's profile; a leaf that cannot be read must answer first)" % (shown, more)
    )


def left_drained(record_path, run_command=None, scheduler=None, get_bin_path=None):
    """The failed ``drain.left_drained`` check when gpufleet left the node out of service, else None:
    the drain role's record on the node, or (given ``scheduler`` {method, node_name} with method slurm)
    Slurm showing the node drained for gpufleet's reason."""
    found = drain_state.from_record(record_path) if record_path else None
    if found or not scheduler or scheduler.get("method") != "slurm":
        return found
    scontrol = get_bin_path("scontrol")
    if not scontrol:
        return None
    return drain_state.from_slurm(run_command, scontrol, scheduler["node_name"])
