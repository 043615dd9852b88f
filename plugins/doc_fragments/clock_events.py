# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The forbidden_reasons option of the modules that judge GPUs with module_utils.thermal.thermal_verdict (the
idle gate and the burn-in take it from the same gpu_limit_spec, with the same default)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  forbidden_reasons:
    description:
      - Clock event reasons that must not be active in any sample. By default the thermal and power-brake
        slowdowns, which cost throughput; C(sw_power_cap) (the configured power limit) and C(gpu_idle)
        are normal.
    type: list
    elements: str
    choices: [gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, hw_thermal_slowdown,
              hw_power_brake_slowdown, sync_boost, sw_thermal_slowdown, display_clocks_setting]
    default: [hw_slowdown, hw_thermal_slowdown, sw_thermal_slowdown, hw_power_brake_slowdown]
"""
