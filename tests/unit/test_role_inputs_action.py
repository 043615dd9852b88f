"""gpufleet.node.role_inputs through Ansible itself (ansible-runner, local connection, no fleet): the first
play the playbooks share (playbooks/tasks/check_inputs.yml) checks every role's inputs in one task per
node, fails only the nodes with a bad input, each with its messages and ``input_error``, and the report's
Collector calls them refused for their configuration. In check mode too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml
from ansible_collections.gpufleet.node.plugins.module_utils.node import role_rules

from gpufleet import events, runner

REPO = Path(__file__).resolve().parents[2]
ROLES = list(role_rules.ROLES)

PLAY = f"""
- name: Check every role's inputs before anything changes
  hosts: nodes
  gather_facts: false
  tasks:
    - name: Check the inputs of each role
      ansible.builtin.import_tasks: {REPO}/playbooks/tasks/check_inputs.yml
      vars:
        __check_inputs_roles: {ROLES}
      tags: [always]

- name: The nodes with no scheduler to drain
  hosts: "{{{{ groups['gpufleet_drain_none'] | default([]) }}}}"
  gather_facts: false
  tasks:
    - name: Say which
      ansible.builtin.debug:
        msg: "nothing to drain on {{{{ inventory_hostname }}}}"

- name: What comes after
  hosts: nodes
  gather_facts: false
  tasks:
    - name: Carry on with the nodes whose inputs passed
      ansible.builtin.debug:
        msg: "inputs checked: {{{{ gpufleet_inputs_checked }}}}"
"""

HOSTS: dict[str, dict[str, Any]] = {
    # the all-reduce's floor set: its tool is looked for on the node (here: an executable file)
    "h01": {"thermal_gate_nccl_min_busbw_gbps": 100, "thermal_gate_nccl_tests_path": sys.executable},
    "h02": {"rdma_link_tos": 300, "thermal_gate_max_supply_c": 180},
    "h03": {"rdma_qos_trust": "lossless"},
    "h04": {
        "thermal_gate_nccl_min_busbw_gbps": 100,
        "thermal_gate_nccl_tests_path": "/nonexistent/all_reduce_perf",
    },
}
SAID = {
    "h02": [
        "gpufleet.node.rdma_link : Check rdma_link_tos: rdma_link_tos is 300; a ToS is 0..255",
        "gpufleet.node.thermal_gate : Check the coolant supply temperature limit: thermal_gate_max_supply_c "
        "must be between 0 and 100 C, got 180",
    ],
    "h03": [
        "gpufleet.node.rdma_qos : Validating arguments against arg spec 'preflight'",
        "rdma_qos_trust must be one of: dscp, pcp, got: lossless",
    ],
    "h04": [
        "thermal_gate_nccl_tests_path is /nonexistent/all_reduce_perf, which is not an executable file on "
        "this node (not there)",
    ],
}


def run(tmp: Path, check: bool) -> dict[str, events.HostResult]:
    runner.ensure_collection_link()
    (tmp / "play.yml").write_text(PLAY)
    inventory = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "gpufleet_bmc_address": "https://10.20.1.11",
                "gpufleet_bmc_username": "gate",
                "inference_service_instances": [{"name": "glm52", "model": "/models/GLM", "port": 8000}],
            },
            "children": {"nodes": {"hosts": HOSTS}},
        }
    }
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory))
    collector = events.Collector()
    (tmp / "runner").mkdir()
    ansible_runner.run(
        private_data_dir=str(tmp / "runner"),
        project_dir=str(REPO),
        playbook=str(tmp / "play.yml"),
        inventory=str(tmp / "inventory.yml"),
        cmdline="--check" if check else "",
        envvars=runner.environment(forks=4),
        event_handler=lambda event: collector.add(event) is None or True,
        quiet=True,
    )
    assert collector.finished()
    return collector.hosts


@pytest.fixture(scope="module", params=[False, True], ids=["run", "check"])
def hosts(request, tmp_path_factory) -> dict[str, events.HostResult]:
    return run(tmp_path_factory.mktemp("role-inputs"), check=request.param)


def test_a_node_with_good_inputs_passes_in_one_task_and_carries_on(hosts) -> None:
    host = hosts["h01"]
    assert not host.failed, host.tasks
    first = [t for t in host.tasks if t["play"].startswith(events.INPUTS_PLAY)]
    # one task judges every role; the other only remembers it for the roles later in the run
    assert [t["action"] for t in first] == ["gpufleet.node.role_inputs", "ansible.builtin.set_fact"], first
    assert first[0]["outcome"] == "ok" and not first[0]["changed"]
    assert host.tasks[-1]["msg"] == "inputs checked: True"


def test_a_node_that_passed_joins_the_group_of_its_drain_method(hosts) -> None:
    """role_inputs puts a node whose inputs passed in gpufleet_drain_<method> (drain_method none here, the
    default), so a later play of the run can leave it out of the drain; a refused node joins none."""
    assert [t["msg"] for t in hosts["h01"].tasks if t["play"] == "The nodes with no scheduler to drain"] == [
        "nothing to drain on h01"
    ]
    for name in SAID:
        assert not [t for t in hosts[name].tasks if t["play"] == "The nodes with no scheduler to drain"]


@pytest.mark.parametrize("name", sorted(SAID))
def test_a_node_with_a_bad_input_is_refused_alone_naming_each_setting(hosts, name: str) -> None:
    host = hosts[name]
    assert host.failed and host.refused_for_input(), host.tasks
    failed = host.tasks[-1]
    assert failed["action"] == "gpufleet.node.role_inputs" and failed["input_error"] is True, failed
    for words in SAID[name]:
        assert words in host.failure_message(), host.failure_message()
    # it went no further; the others did
    assert len(host.tasks) == 1
