# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The thermal gate: the one thermal judge (thermal_verdict) and the burn-in that loads the
local vLLM instances while the GPUs are sampled.

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
