# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes of each kind of gpufleet module, whole: what each attribute means (as
ansible.builtin's action_common_attributes words it) and how far the kind supports it. A module
extends exactly one of READ_ONLY, FACTS or WRITES (or the bare DOCUMENTATION, then words its own
check_mode and diff_mode). Each kind's check_mode C(details) say what most such modules do; a module
whose check mode does something else writes its own (Ansible keeps the module's over the
fragment's). Literal YAML: ansible-test reads doc fragments as plain strings."""


class ModuleDocFragment:
    # Every module: runs on the (Linux) managed node.
    DOCUMENTATION = r"""
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # A module that changes nothing: the same reads in check mode, nothing to diff.
    READ_ONLY = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Changes nothing; the same reads and checks in check mode.
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # A read-only module that returns facts.
    FACTS = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Only reads; runs the same commands in check mode.
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # A module that writes: check mode reports what a run would change, diff mode shows it.
    WRITES = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reads the same and reports in RV(changes) exactly what a run would change; writes nothing.
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""
