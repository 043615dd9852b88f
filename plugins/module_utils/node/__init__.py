# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node as a whole, on top of the device domains: node_health (the gate's and the watch's judge
of the hardware faults: GPUs, PCIe, memory, NVLink, Xid, DCGM, NIC firmware), drift (every role's
plan in one run), watch (a node in service, read over a window), the versions compared across
nodes, the run lock and the drain record.

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
