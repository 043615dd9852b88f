# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM instances a node serves: one HTTP client, the /metrics parser and the service
verdicts (health, prefix-cache hit rate).

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
