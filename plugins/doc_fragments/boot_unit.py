# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot_unit option of the RDMA modules, whose settings the kernel forgets at reboot."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  boot_unit:
    description:
      - Write the boot script and unit that re-apply the settings at every boot, and enable the unit.
      - V(false) leaves them as they are.
    type: bool
    default: true
"""
