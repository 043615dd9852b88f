# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia_smi_path option, shared by every module that runs nvidia-smi."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  nvidia_smi_path:
    description:
      - Path to the C(nvidia-smi) binary.
      - When not set, C(nvidia-smi) is looked up on E(PATH) and the module fails if it is not found.
    type: path
notes:
  - C(nvidia-smi) runs with C(LC_ALL=C), whose messages and number formats are stable.
"""
