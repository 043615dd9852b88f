# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The history_path and node_name options, shared by the modules that judge guardian.replace_hardware
(node_health, watch)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  history_path:
    description:
      - The node's remediation history (M(gpufleet.node.remediation_history), the inventory's
        C(guardian_history_path)). C(guardian.replace_hardware) fails while its latest V(replace_hardware)
        event has no later V(cleared) one (the node is marked "replace hardware" - never returned to
        service or remediated automatically), and fails closed when the file cannot be read or is not a
        history. A missing file is an empty history.
    type: path
    default: /var/lib/gpufleet/remediation-history.json
  node_name:
    description:
      - The node's name in the inventory, for the C(gpufleet release --limit <node>) the check's message
        names (the role gives C(inventory_hostname)). Empty, the message says C(<node>).
    type: str
    default: ""
"""
