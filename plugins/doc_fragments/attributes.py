# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes of every gpufleet module, in two fragments a module lists together: the base
(DOCUMENTATION: what each attribute means, as ansible.builtin's action_common_attributes words it,
the platform, and check mode supported) and its kind's (READ_ONLY, FACTS or WRITES: how far the kind
supports diff mode, and what check mode does), listed kind first (``[..., gpufleet.node.attributes.writes,
gpufleet.node.attributes]``: Ansible shows the attributes in the order the fragments bring them). Ansible
merges the two per attribute; a module that is none of the kinds lists the base alone and words its own
check_mode details and diff_mode support.
Each kind's check_mode C(details) say what most such modules do; a module whose check mode does
something else writes its own (Ansible keeps the module's keys over the fragments'). Literal YAML:
ansible-test reads doc fragments as plain strings."""


class ModuleDocFragment:
    # Every module: runs on the (Linux) managed node; check mode supported unless the module says less.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # A module that changes nothing: the same reads in check mode, nothing to diff.
    READ_ONLY = r"""
attributes:
  check_mode:
    details: Changes nothing; the same reads and checks in check mode.
  diff_mode:
    support: none
"""

    # A read-only module that returns facts.
    FACTS = r"""
attributes:
  check_mode:
    details: Only reads; runs the same commands in check mode.
  diff_mode:
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""

    # A module that writes: check mode reports what a run would change, diff mode shows it.
    WRITES = r"""
attributes:
  check_mode:
    details: Reads the same and reports in RV(changes) exactly what a run would change; writes nothing.
  diff_mode:
    support: full
"""
