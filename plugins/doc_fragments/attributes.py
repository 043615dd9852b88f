# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attribute support levels shared by kinds of gpufleet modules, in the spirit of
community.general.attributes (info_module, facts_module). Use with ansible.builtin's
action_common_attributes (the descriptions); a module adds its own C(details) next to them."""


class ModuleDocFragment:
    # Every module: runs on the (Linux) managed node.
    DOCUMENTATION = r"""
attributes:
  platform:
    platforms: posix
"""

    # A module that changes nothing: the same reads in check mode, nothing to diff.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    # A read-only module that returns facts (with action_common_attributes.facts).
    FACTS = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
"""

    # A module that writes: check mode reports what a run would change, diff mode shows it.
    WRITES = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""
