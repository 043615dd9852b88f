# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every domain shares, and imports nothing else of the collection: the result contract
(results: check, change, hint), the parsers' guard (parsing), how a device tool is run
(tool_runner), how a module refuses bad input (inputs), the read-only node the roles plan against
(plan_node), their boot files, and the stop signals a module unwinds from (signals).

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
