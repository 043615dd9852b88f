# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shared vocabulary every module speaks: the result contract (check, change, hint:
results), the guard the tool output parsers share (parsing), and how a device tool is run
(tool_runner). Imports nothing else of the collection.
"""
