# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``checks`` return value every module shares (the report's contract: each module returns checks
and changes): when and of what type. Each module extends it from RETURN and gives its own description
and sample (Ansible merges a module's keys of the entry over the fragment's)."""


class ModuleDocFragment:
    RETURN = r"""
checks:
  description: Verifications, each with name, ok, value, limit, unit and message.
  returned: always
  type: list
  elements: dict
"""
