# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes of each kind of gpufleet module, whole: what each attribute means (as
ansible.builtin's action_common_attributes words it) and how far the kind supports it. A module
extends exactly one of READ_ONLY, FACTS or WRITES (or the bare DOCUMENTATION, then words its own
check_mode and diff_mode). Each kind's check_mode C(details) say what most such modules do; a module
whose check mode does something else writes its own (Ansible keeps the module's over the
fragment's). Each kind is written by _kind from the one wording of each attribute; the result is
plain YAML text, as ansible-doc and ansible-test read a fragment."""

# Every module: runs on the (Linux) managed node.
_PLATFORM = r"""
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

_FACTS = r"""
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full"""


def _kind(check_details: str, diff_support: str, extra: str = "") -> str:
    """One kind's attributes: check mode fully supported with check_details, diff mode at
    diff_support, then extra attributes (YAML lines) and the platform."""
    return rf"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: {check_details}
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
    support: {diff_support}{extra}{_PLATFORM}"""


class ModuleDocFragment:
    DOCUMENTATION = "\nattributes:" + _PLATFORM

    # A module that changes nothing: the same reads in check mode, nothing to diff.
    READ_ONLY = _kind("Changes nothing; the same reads and checks in check mode.", "none")

    # A read-only module that returns facts.
    FACTS = _kind("Only reads; runs the same commands in check mode.", "none", _FACTS)

    # A module that writes: check mode reports what a run would change, diff mode shows it.
    WRITES = _kind(
        "Reads the same and reports in RV(changes) exactly what a run would change; writes nothing.", "full"
    )
