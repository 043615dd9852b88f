"""runner.run_limit: a --limit to some nodes still reaches the leaf switches a playbook reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet import runner

INVENTORY = """
all:
  children:
    leaf_switches: {hosts: {leaf01: {}, leaf02: {}}}
    gpu_nodes:
      children:
        rack7: {hosts: {node01: {}, node02: {}}}
        rack8: {hosts: {node03: {}}}
"""


@pytest.mark.parametrize(
    ("limit", "reached"),
    [
        ("node01", {"node01", "leaf01", "leaf02"}),
        ("node01,node03", {"node01", "node03", "leaf01", "leaf02"}),
        ("rack7:!node02", {"node01", "leaf01", "leaf02"}),
        ("rack8", {"node03", "leaf01", "leaf02"}),
    ],
)
def test_the_leaves_join_the_limit_in_its_own_separator(
    tmp_path: Path, limit: str, reached: set[str]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY)
    pattern = runner.run_limit("drift.yml", limit)
    tool = str(Path(sys.executable).parent / "ansible-inventory")
    listed = subprocess.run(
        [tool, "-i", str(inventory), "--list", "--limit", pattern],
        capture_output=True,
        text=True,
        check=True,
    )
    hosts = set(json.loads(listed.stdout)["_meta"]["hostvars"]) | {
        h for g in json.loads(listed.stdout).values() if isinstance(g, dict) for h in g.get("hosts", [])
    }
    assert hosts == reached


def test_playbooks_that_do_not_read_the_leaves_keep_the_limit() -> None:
    assert runner.run_limit("facts.yml", "node01") == "node01"
    assert runner.run_limit("switch_qos.yml", "leaf01") == "leaf01"
    assert runner.run_limit("drift.yml", None) is None
