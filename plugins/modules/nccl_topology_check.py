#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_topology_check
short_description: Check an NCCL topology file against the live node
version_added: "0.1.0"
description:
  - Reads an NCCL topology file (C(NCCL_TOPO_FILE); a dump NCCL wrote, one gpufleet.node.nccl_topology
    wrote, or a hand-written static one such as the cloud images ship) and compares it with the node,
    discovered as gpufleet.node.nccl_topology discovers it.
  - Every GPU and NIC bus ID of the node must be in the file, on the NUMA node the node puts it on, NICs
    under their RDMA device names, and the file must name no PCI device the node does not have.
  - An NCCL graph file (C(<graphs>), the C(NCCL_GRAPH_FILE) format) is refused with a message saying so.
  - Reports C(checks) (the gpufleet report contract) and the differences; changes nothing.
options:
  path:
    description: The topology file.
    type: path
    default: /etc/nccl/topo.xml
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.attributes.read_only,
  gpufleet.node.attributes]
notes:
  - A failed check does not fail the task; gate on RV(matches) or the checks (the nccl_topology role fails
    on RV(matches) with the module's C(msg), which names every difference).
seealso:
  - module: gpufleet.node.nccl_topology
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the topology file
  gpufleet.node.nccl_topology_check:
  register: topo

- name: Check the topology file, stopping when it does not describe this node
  gpufleet.node.nccl_topology_check:
  register: topo
  failed_when: not topo.matches
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description:
    - C(nccl_topology.file) (the file exists and is an NCCL topology), C(nccl_topology.gpus) and
      C(nccl_topology.nics) (node devices found in the file on the right NUMA node, against how many the
      node has) and C(nccl_topology.unknown_devices) (devices in the file the node lacks, limit 0).
  sample: [{"name": "nccl_topology.gpus", "ok": false, "value": 15, "limit": 16, "unit": "",
            "message": "GPU 0000:47:00.0 (NUMA 0) is on the node but not in the file"}]
hints:
  description: What to do about a file that does not match.
  returned: always
  type: list
  elements: str
  sample: ["Rewrite /etc/nccl/topo.xml from the node: the gpufleet.node.nccl_topology role."]
reboot_required:
  description: Always false.
  returned: always
  type: bool
  sample: false
matches:
  description: Whether the file describes this node (every check passed).
  returned: always
  type: bool
  sample: true
differences:
  description: Each difference ({kind, busid, message}); kind is missing, numa, net, extra or unreadable.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "extra", "busid": "0000:57:00.0",
            "message": "GPU 0000:57:00.0 in the file is not on this node"}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import topology_xml


def _check(name, ok, value, limit, message):
    return check(name, ok, value, limit, "", message)


def checks_for(path, text, parsed, bus_ids):
    """(checks, differences) for a file's text (None: no file) against the node's parsed topology."""
    if text is None:
        return [_check("nccl_topology.file", False, None, path, "no topology file at %s" % path)], [
            {"kind": "unreadable", "busid": None, "message": "no topology file at %s" % path}
        ]
    try:
        found = topology_xml.parse(text)
    except topology_xml.TopologyError as exc:
        message = "%s: %s" % (path, exc)
        return [_check("nccl_topology.file", False, None, path, message)], [
            {"kind": "unreadable", "busid": None, "message": message}
        ]
    differences = topology_xml.compare(found, parsed, bus_ids)
    checks = [_check("nccl_topology.file", True, topology_xml.digest(text), path, "an NCCL topology")]
    for kind, label in (("gpu", "gpus"), ("nic", "nics")):
        wanted = sorted(b for b, d in parsed["devices"].items() if d["kind"] == kind)
        wrong = [d for d in differences if d["busid"] in wanted and d["kind"] in ("missing", "numa", "net")]
        bad = set(d["busid"] for d in wrong)
        checks.append(
            _check(
                "nccl_topology.%s" % label,
                not wrong,
                len(wanted) - len(bad),
                len(wanted),
                "; ".join(d["message"] for d in wrong)
                or "every %s of the node, on its NUMA node" % kind.upper(),
            )
        )
    extra = [d for d in differences if d["kind"] == "extra"]
    checks.append(
        _check(
            "nccl_topology.unknown_devices",
            not extra,
            len(extra),
            0,
            "; ".join(d["message"] for d in extra) or "no device the node lacks",
        )
    )
    return checks, differences


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/nccl/topo.xml"),
            nvidia_smi_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    smi = nvidia_smi(module, module.params["nvidia_smi_path"])
    _system, _text, parsed, bus_ids, warnings = topology_xml.node_topology(module, smi)
    for warning in warnings:
        module.warn(warning)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = None
    except OSError as exc:
        module.fail_json(msg="Cannot read %s: %s" % (path, exc))
    checks, differences = checks_for(path, text, parsed, bus_ids)
    matches = all(c["ok"] for c in checks)
    module.exit_json(
        msg=(
            "%s describes this node" % path
            if matches
            else "%s does not match the node: %s" % (path, "; ".join(d["message"] for d in differences))
        ),
        changed=False,
        changes=[],
        checks=checks,
        hints=[] if matches else ["Rewrite %s from the node: the gpufleet.node.nccl_topology role." % path],
        reboot_required=False,
        matches=matches,
        differences=differences,
    )


if __name__ == "__main__":
    main()
