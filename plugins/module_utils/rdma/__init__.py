# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The RDMA NICs (mlx5, RoCE): their tools and sysfs parsed and read, the rdma_link and rdma_qos
roles' logic (desired -> plan -> apply), and the RoCE port counters read and judged over a window.

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
