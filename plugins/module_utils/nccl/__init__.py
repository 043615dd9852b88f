# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL: the topology file (topology_xml, the nccl_topology role) and nccl-tests' all-reduce
bandwidth, parsed and judged against the node's profile.

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
