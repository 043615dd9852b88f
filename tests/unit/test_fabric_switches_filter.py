"""gpufleet.node.fabric_switches (roles/fabric/vars/main.yml's ``switches``): the same readings reach
gpufleet.node.fabric as the chain of Jinja filters and hostvars lookups it replaced, for every kind of
cabling plan and every way a leaf has (or lacks) a reading, in a real ansible-playbook run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml
from ansible_collections.gpufleet.node.plugins.filter.fabric_switches import FilterModule, fabric_switches

REPO = Path(__file__).resolve().parents[2]

# The expression of roles/fabric/vars/main.yml before the filter (commit 66c2027), verbatim.
BEFORE = {
    "__old_planned_leaves": (
        "{{ (fabric_cabling.values() if fabric_cabling is mapping else []) | map('string')"
        " | map('split', ':') | map('first') | unique }}"
    ),
    "__old_switch_names": (
        "{{ groups['leaf_switches'] | default([]) | select('in', __old_planned_leaves) | list"
        " if fabric_cabling else groups['leaf_switches'] | default([]) }}"
    ),
    "__old_switches": (
        "{{ dict(__old_switch_names | zip(__old_switch_names | map('extract', hostvars)"
        " | map(attribute='switch_qos_reading', default={}) | map(attribute='reading', default={}))) }}"
    ),
}

READ = {"swp1": {"pfc": [3], "mtu": 9216}, "swp2": {"pfc": [], "mtu": 1500}}
INVENTORY = {
    "all": {
        "vars": {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        },
        "children": {
            "leaf_switches": {
                "hosts": {
                    "leaf01": {},  # read in this run
                    "leaf02": {"switch_qos_reading": {"reading": {"swp9": {"mtu": 42}}}},  # the inventory's
                    "leaf03": {},  # not read
                    "leaf04": {},  # read, a result without a reading (a failed read)
                    "leaf05": {"switch_qos_reading": {"reading": {"stale": {}}}},  # read: the run's wins
                }
            },
            "gpu_nodes": {
                "hosts": {
                    "n1": {"fabric_cabling": {"a": "leaf01:swp1", "b": "leaf02:swp1", "c": "leaf03:swp2"}},
                    "n2": {"fabric_cabling": {}},  # no plan: every leaf
                    "n3": {"fabric_cabling": ["leaf01:swp1"]},  # not a mapping: no leaf
                    "n4": {"fabric_cabling": {"a": "leaf05:swp1", "b": "leafX:swp1", "c": "leaf01"}},
                    "n5": {"fabric_cabling": {"a": "leaf04:swp1", "b": "leaf04:swp2"}},
                    "n6": {},  # the role's default
                }
            },
        },
    }
}

PLAYBOOK = [
    {
        "name": "Read the leaves",
        "hosts": "leaf01,leaf05",
        "gather_facts": False,
        "tasks": [
            {
                "name": "A reading (debug var= returns it under the variable's name)",
                "ansible.builtin.debug": {"var": "reading"},
                "vars": {"reading": READ},
                "register": "switch_qos_reading",
            },
        ],
    },
    {
        "name": "A failed read",
        "hosts": "leaf04",
        "gather_facts": False,
        "tasks": [
            {
                "name": "A result without a reading",
                "ansible.builtin.debug": {"msg": "read failed"},
                "register": "switch_qos_reading",
            },
        ],
    },
    {
        "name": "The fabric module's switches, before and after",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        "vars": BEFORE,
        "tasks": [
            {
                "ansible.builtin.import_role": {
                    "name": "gpufleet.node.fabric",
                    "tasks_from": "options",
                    "rolespec_validate": False,
                }
            },
            {
                "name": "Both",
                "ansible.builtin.debug": {
                    "msg": "SWITCHES {{ {'host': inventory_hostname, 'before': __old_switches,"
                    " 'after': __fabric_options.switches} | to_json }}"
                },
            },
        ],
    },
]


def _run(tmp_path: Path, *extra: str) -> dict[str, dict[str, object]]:
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(INVENTORY), encoding="utf-8")
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible-playbook"),
            "-i",
            str(tmp_path / "inventory.yml"),
            str(tmp_path / "play.yml"),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_FORCE_COLOR": "0"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = {}
    for line in done.stdout.splitlines():
        if '"msg": "SWITCHES ' in line:
            value = json.loads(json.loads(line.split('"msg": ', 1)[1]).split("SWITCHES ", 1)[1])
            seen[value["host"]] = value
    assert sorted(seen) == ["n1", "n2", "n3", "n4", "n5", "n6"], done.stdout[-3000:]
    return seen


def test_the_same_readings_as_the_filter_chain_and_hostvars(tmp_path: Path) -> None:
    seen = _run(tmp_path)
    for host, value in seen.items():
        assert value["after"] == value["before"], host
    read = READ
    assert seen["n1"]["after"] == {"leaf01": read, "leaf02": {"swp9": {"mtu": 42}}, "leaf03": {}}
    assert seen["n2"]["after"] == {
        "leaf01": read,
        "leaf02": {"swp9": {"mtu": 42}},
        "leaf03": {},
        "leaf04": {},
        "leaf05": read,
    }
    assert seen["n6"]["after"] == seen["n2"]["after"]
    assert seen["n3"]["after"] == {}
    assert seen["n4"]["after"] == {"leaf01": read, "leaf05": read}
    assert seen["n5"]["after"] == {"leaf04": {}}


def test_an_extra_var_reading_outranks_the_run_s_as_it_did(tmp_path: Path) -> None:
    reading = {"reading": {"from": {"extra": 1}}}
    seen = _run(tmp_path, "-e", json.dumps({"switch_qos_reading": reading}))
    for host, value in seen.items():
        assert value["after"] == value["before"], host
    assert seen["n4"]["after"] == {"leaf01": reading["reading"], "leaf05": reading["reading"]}


def test_plain_mappings_for_hostvars() -> None:
    assert FilterModule().filters() == {"fabric_switches": fabric_switches}
    hostvars = {"l1": {"switch_qos_reading": {"reading": {"p": 1}}}, "l2": {"switch_qos_reading": "x"}}
    plan = {"a": "l1:swp1", "b": "l2:swp1"}
    assert fabric_switches(plan, ["l1", "l2", "l3"], hostvars) == {"l1": {"p": 1}, "l2": {}}
    assert fabric_switches({}, ["l3", "l1"], hostvars) == {"l3": {}, "l1": {"p": 1}}
    assert fabric_switches({"a": "l9:swp1"}, ["l1", "lX"], hostvars) == {}
    assert fabric_switches("l1:swp1", ["l1"], hostvars) == {}
    assert fabric_switches(None, None, hostvars) == {}
