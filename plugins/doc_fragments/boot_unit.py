# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
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
