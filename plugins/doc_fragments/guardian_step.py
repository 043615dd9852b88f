# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The return values every guardian remediation step shares (bmc_reset, gpu_reset): which step it is and
when it ran. Each module extends it from RETURN and gives its own samples (Ansible merges a module's keys
of the entry over the fragment's)."""


class ModuleDocFragment:
    RETURN = r"""
step:
  description: The guardian's step this result is, for the report.
  returned: always
  type: str
started:
  description: When the step started (UTC, ISO 8601).
  returned: always
  type: str
  sample: "2026-12-06T20:31:05Z"
ended:
  description: When it ended (UTC, ISO 8601; not C(finished), which Ansible keeps for async results).
  returned: always
  type: str
"""
