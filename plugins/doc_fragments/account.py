# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The password option of the modules that log in to a management device (the BMC, the switches);
each module documents its own O(username), whose rights differ."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  password:
    description: Password of O(username). Keep it in a vault.
    type: str
    required: true
"""
