# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``ansible_facts`` return value of the facts modules: what it is, when and of what type. Each
module extends it from RETURN and adds its facts under ``contains`` (Ansible merges a module's keys
of the entry over the fragment's)."""


class ModuleDocFragment:
    RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: success
  type: complex
"""
