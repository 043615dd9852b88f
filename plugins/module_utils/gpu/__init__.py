# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUs: nvidia-smi, NVLink, Xid and DCGM parsed; the gpu_power and gpu_pinning roles' logic
(desired -> plan -> apply). The judge of the node's hardware faults (node_health) is node's.

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
