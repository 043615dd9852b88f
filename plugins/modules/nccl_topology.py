#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_topology
short_description: Write the node's NCCL topology file (NCCL_TOPO_FILE) from what the node is
version_added: "0.1.0"
description:
  - Discovers the node as NCCL does and writes the topology XML NCCL reads with C(NCCL_TOPO_FILE)
    (C(<system version="1">)), in NCCL's own element and attribute formats.
  - C(<cpu>) per NUMA node with C(numaid), C(affinity) (the node's cpumap), C(arch) and, on x86_64, the
    C(vendor), C(familyid) and C(modelid) of C(/proc/cpuinfo).
  - The PCI tree from C(/sys) as NCCL builds it (switch upstream ports and endpoints, a switch's
    downstream ports folded away), each C(<pci>) with C(busid), C(class), vendor/device/subsystem ids,
    C(link_speed) and C(link_width) (the lower of the device's and its port's maximum).
  - C(<gpu dev sm rank gdr>) from C(nvidia-smi --query-gpu=index,uuid,pci.bus_id,compute_cap), with
    C(<nvlink>) edges from the NV# cells of C(nvidia-smi topo -m). A GPU whose NV# counts add up to more
    links than it has is on NVSwitches, written as one edge to C(fffffff:ffff:ff) with tclass
    C(0x068000) as NCCL does for switches it cannot see.
  - C(<nic>) with one C(<net name dev speed port latency guid maxconn gdr>) per RDMA device of
    C(/sys/class/infiniband); a port that is not ACTIVE gets no speed, so NCCL probes it.
  - The new file is parsed back and compared with the node (every GPU and NIC there, NUMA ids right,
    nothing the node lacks) before it atomically replaces the old one. When the old file is stale the
    result says what differed. The module never writes an NCCL graph (C(NCCL_GRAPH_FILE)).
options:
  path:
    description: The topology file.
    type: path
    default: /etc/nccl/topo.xml
  gdr:
    description:
      - Whether GPUDirect RDMA works on this node (C(nvidia-peermem) or dma-buf); sets C(gdr) on every
        C(<gpu>) and C(<net>).
    type: bool
    default: true
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.attributes.writes,
  gpufleet.node.attributes]
attributes:
  check_mode:
    details: Discovers, renders and validates; writes nothing.
  diff_mode:
    details: The old and new file.
notes:
  - The file has no C(host_hash) (NCCL computes it at run time from the host name and boot ID) and no
    timestamp, so it only changes when the node does.
  - A PCIe re-enumeration that swaps GPUs between bus IDs without changing what sits at each bus ID
    leaves the file as it is.
seealso:
  - module: gpufleet.node.nccl_topology_check
  - name: NCCL environment variables
    description: NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Write /etc/nccl/topo.xml
  gpufleet.node.nccl_topology:

- name: A node without GPUDirect RDMA
  gpufleet.node.nccl_topology:
    path: /etc/nccl/topo.xml
    gdr: false
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.checks]
changes:
  description:
    - C(nccl_topology.file) when the file changed (would change in check mode); from and to are content
      digests (from is null when there was no file).
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "nccl_topology.file", "from": "sha256:9f2c4e1b7a3d5c60",
            "to": "sha256:0b1d2e3f4a5b6c7d"}]
checks:
  description: Always empty here; gpufleet.node.nccl_topology_check reports checks.
  sample: []
hints:
  description: What was wrong with the old file, one line per difference.
  returned: always
  type: list
  elements: str
  sample: ["/etc/nccl/topo.xml was stale: GPU 0000:47:00.0 (NUMA 0) is on the node but not in the file"]
reboot_required:
  description: Always false; NCCL reads the file when a process initialises.
  returned: always
  type: bool
  sample: false
differences:
  description: How the old file differed from the node ({kind, busid, message}); empty when it matched.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "missing", "busid": "0000:47:00.0",
            "message": "GPU 0000:47:00.0 (NUMA 0) is on the node but not in the file"}]
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/nccl/topo.xml
sha256:
  description: Digest of the file's new content, as in RV(changes).
  returned: success
  type: str
  sample: "sha256:0b1d2e3f4a5b6c7d"
gpus:
  description: Number of GPUs in the topology.
  returned: success
  type: int
  sample: 16
nics:
  description: Number of RDMA devices in the topology.
  returned: success
  type: int
  sample: 8
"""

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_topology as role


def main():
    run(role)


if __name__ == "__main__":
    main()
