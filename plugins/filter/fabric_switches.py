# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.fabric_switches: a node's cabling plan -> the readings of the leaves it is cabled to,
the ``switches`` argument of gpufleet.node.fabric (roles/fabric/vars/main.yml). Runs on the controller.

The leaves are those of the inventory's ``leaf_switches`` group that the plan names (all of them without a
plan; none when the plan is not a mapping: the module refuses it, naming cabling), in the group's order,
each with its reading from this run's switch read (``switch_qos_reading.reading``, registered on the leaf
by roles/switch_qos/tasks/read.yml), ``{}`` for a leaf that was not read (its links fail closed).

It was a chain of Jinja filters and a ``hostvars[leaf]`` per leaf, rendered by every node's worker:
``hostvars[leaf]`` computes all of the leaf's variables (its groups, the inventory's ``groups`` map,
every fact) to give one of them, ~0.03 CPU-s of each node's worker with the filters (bench/README.md).
A registered value is among the leaf's registered variables, which only extra vars outrank, so it is
read from there; a leaf without one (not read in this run, or a reading set in the inventory) and a
reading given as an extra var are read through ``hostvars`` as before.
"""

from __future__ import annotations

from collections.abc import Mapping

_READING = "switch_qos_reading"


def _planned(cabling):
    """The leaves a cabling plan names, as ``__fabric_planned_leaves`` did (``leaf:port`` -> leaf)."""
    if not isinstance(cabling, Mapping):
        return set()
    return {str(where).split(":", maxsplit=1)[0] for where in cabling.values()}


def _registered(hostvars):
    """The registered (non-persistent) variables of every host, or None where they cannot be read safely:
    ansible's own store behind ``hostvars``, unless extra vars (which outrank them) set a reading."""
    manager = getattr(hostvars, "_variable_manager", None)
    store = getattr(manager, "_nonpersistent_fact_cache", None)
    extra = getattr(manager, "extra_vars", None)
    if not isinstance(store, Mapping) or not isinstance(extra, Mapping) or _READING in extra:
        return None
    return store


def _reading(hostvars, registered, leaf):
    result = None
    if registered is not None and _READING in registered.get(leaf, {}):
        result = registered[leaf][_READING]
    else:
        variables = hostvars.get(leaf, {})
        if isinstance(variables, Mapping) and _READING in variables:
            result = variables[_READING]
    if isinstance(result, Mapping):
        return result.get("reading", {})
    return {}


def fabric_switches(cabling, leaves, hostvars):
    """{leaf: reading} for the leaves in ``leaves`` (``groups['leaf_switches']``) that ``cabling`` plans."""
    leaves = list(leaves or [])
    if cabling:
        planned = _planned(cabling)
        leaves = [leaf for leaf in leaves if leaf in planned]
    registered = _registered(hostvars)
    return {leaf: _reading(hostvars, registered, leaf) for leaf in leaves}


class FilterModule:
    def filters(self):
        return {"fabric_switches": fabric_switches}
