# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's driver, CUDA, VBIOS and NIC firmware for drift's comparison across the run's nodes.

node_facts reads them when drift asks (the gate has them from node_health): node_health's own read,
one ``nvidia-smi -q -x`` and the RDMA devices' sysfs ``fw_ver``, into the same ``gpufleet_versions``
fact. The controller compares them (module_utils/node/fleet_versions.py). A node whose versions cannot be
read fails ``fleet.versions`` naming the tool, rather than dropping out of the comparison unseen.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.plan_node import PlanNode, RoleFailed
from ansible_collections.gpufleet.node.plugins.module_utils.node import fleet_versions, node_health
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse


def read(module: Any, smi_path: str | None = None) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(gpufleet_versions, [])``, or ``(None, [the failed fleet.versions check])``.

    Safe beside the roles' plans in other threads: a missing nvidia-smi raises here (PlanNode), it
    does not end the module run.
    """
    try:
        smi = tool_runner.nvidia_smi(PlanNode(module), smi_path)
        found = node_health.read(module.run_command, smi, None, False)["versions"]
    except (RoleFailed, node_health.ReadError, rdma_parse.ParseError, OSError) as exc:
        return None, [
            fleet_versions.not_compared(
                False,
                None,
                None,
                "",
                "the driver, CUDA, VBIOS and NIC firmware could not be read (%s): the node is not compared "
                "with its peers" % exc,
            )
        ]
    return found, []
