# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The return value every read-only module shares: its ``changes`` list, always empty (the report's
contract: each module returns checks and changes, and these change nothing)."""


class ModuleDocFragment:
    RETURN = r"""
changes:
  description: Always empty; the module changes nothing.
  returned: always
  type: list
  elements: dict
  sample: []
"""
