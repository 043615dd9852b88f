# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_topology role's logic, once: its options, read + plan (:func:`plan`) and apply (:func:`apply`).

The module gpufleet.node.nccl_topology runs plan then apply; node_facts (drift) runs plan only, on a
module_utils.core.plan_node.PlanNode. The topology is read and rendered from the node
(module_utils.nccl.topology_xml: the XML's reader, parser and renderer) and validated before it may
replace the file.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
import tempfile

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import Plan
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import topology_xml

ARGUMENT_SPEC = dict(
    path=dict(type="path", default="/etc/nccl/topo.xml"),
    gdr=dict(type="bool", default=True),
    nvidia_smi_path=dict(type="path"),
)


def validate(node, params):
    """Every rule on the options, before anything is read."""
    path = params["path"]
    if not (path.startswith("/") and path.endswith(".xml")):
        node.fail_json(msg="path: %s is not an absolute path ending in .xml" % path)


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _old_differences(path, current, parsed, bus_ids):
    """What was wrong with the file in place, as differences and hint lines."""
    if current is None:
        return [], []
    try:
        found = topology_xml.parse(current)
    except topology_xml.TopologyError as exc:
        return [{"kind": "unreadable", "busid": None, "message": str(exc)}], [
            "%s was not a usable NCCL topology: %s" % (path, exc)
        ]
    differences = topology_xml.compare(found, parsed, bus_ids)
    return differences, ["%s was stale: %s" % (path, d["message"]) for d in differences]


def plan(node, params):
    """Render the node's topology, validate it and compare it with the file; writes nothing.

    Returns a Plan (its ``refused``: a port down, the file is left as it is) whose ``state`` is
    ``{text, current, differences, gpus, nics}``.
    """
    path = params["path"]
    smi = nvidia_smi(node, params["nvidia_smi_path"])
    _system, text, parsed, bus_ids, warnings = topology_xml.node_topology(node, smi, params["gdr"])
    # Validate what would be written: it must read back as a topology that matches the node.
    problems = topology_xml.compare(topology_xml.parse(text), parsed, bus_ids)
    gpus = sum(1 for d in parsed["devices"].values() if d["kind"] == "gpu")
    if problems or not gpus:
        node.fail_json(
            msg="The rendered topology does not describe this node (%s); %s left as it is."
            % ("; ".join(p["message"] for p in problems) or "no GPU found", path)
        )
    current = read_text(path)
    differences, hints = _old_differences(path, current, parsed, bus_ids)
    change = topology_xml.file_change(current, text)
    # A port that is not ACTIVE has no speed: never rewrite the topology around a dead port (the
    # rdma_link role names the link; this role leaves the file as it is until the link is back).
    down = sorted(name for name, net in parsed["nets"].items() if net.get("speed") is None)
    refused = None
    if down:
        change = None
        refused = (
            "%s left as it is: not ACTIVE: %s (see rdma_link.link_state); bring the link up, run again"
            % (
                path,
                ", ".join(down),
            )
        )
        hints.append(refused)
    state = dict(text=text, current=current, differences=differences, gpus=gpus, nics=len(parsed["nets"]))
    return Plan([change] if change else [], hints=hints, warnings=warnings, refused=refused, **state)


def apply(node, params, planned):
    """Replace the file (atomically, mode 0644) when the plan changes it."""
    if not planned.changes:
        return planned
    path = params["path"]
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o755)
    fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(planned.state["text"])
    os.chmod(tmp, 0o644)
    node.atomic_move(tmp, path)
    return planned


def result(node, params, planned):
    """The module's own return values: what was wrong with the file, its path and digest, what it holds."""
    state = planned.state
    digest = topology_xml.digest(state["text"])
    return dict(
        {key: state[key] for key in ("differences", "gpus", "nics")}, path=params["path"], sha256=digest
    )


def diff(node, params, planned):
    """The file before and after, when it changes."""
    if not planned.changes:
        return None
    path = params["path"]
    return dict(
        before_header=path,
        after_header=path,
        before=planned.state["current"] or "",
        after=planned.state["text"],
    )
