"""The drain role's Kubernetes reason on a local play (no fleet): the argv run_reason and run_undrain give
kubectl for the node's gpufleet.io/drain-reason annotation, the text the gate's filter builds, and a kubectl
that refuses it never failing the play (reported instead). The stand-in kubectl's answers to these argv:
tests/unit/sim/test_fake_kubectl.py; the whole drain on simulated nodes: molecule/drain."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEY = "gpufleet.io/drain-reason"
REASON = "gpufleet gate: health.xid[0000:1b:00.0] 79"
# the role's task that reports an annotation kubectl refused (tasks/annotate_kubernetes.yml)
REPORT = r"TASK \[gpufleet.node.drain : Report a drain reason Kubernetes did not take\] \*+"
# a kubectl that logs its argv (one JSON list a line) and, when told to, refuses an annotate as the API
# server refuses a user whose role may not patch nodes
FAKE_KUBECTL = """#!{python}
import json, os, sys
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["annotate"] and os.environ.get("FAKE_KUBECTL_REFUSE"):
    sys.stderr.write('Error from server (Forbidden): nodes "node-a" is forbidden: User "gpufleet" '
                     'cannot patch resource "nodes" in API group "" at the cluster scope\\n')
    sys.exit(1)
print("node/node-a done")
"""
PLAY = """
- name: The drain role's entry point on a Kubernetes node
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    gpufleet_drain_method: kubernetes
    gpufleet_drain_node_name: node-a
    drain_record_path: {record}
  tasks:
    - name: Run the entry point
      ansible.builtin.include_role:
        name: gpufleet.node.drain
        tasks_from: {entry}
      vars:
        drain_reason: >-
          {{{{ {{'checks': [{{'name': 'health.xid[0000:1b:00.0]', 'ok': False, 'value': 79}}]}}
             | gpufleet.node.drain_reason('gate', 'Read the node health') }}}}
"""


def play(
    tmp_path: Path, entry: str, refuse: bool = False
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """ansible-playbook of ``entry`` (tasks_from) with the fake kubectl first on PATH: (the run, its argv)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL.format(python=sys.executable))
    kubectl.chmod(0o755)
    playbook = tmp_path / f"{entry}.yml"
    playbook.write_text(PLAY.format(record=tmp_path / "drained", entry=entry))
    log = tmp_path / "kubectl.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.update(FAKE_KUBECTL_LOG=str(log), ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".gpufleet" / "collections")  # this checkout, as ansible.cfg
    if refuse:
        env["FAKE_KUBECTL_REFUSE"] = "1"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(playbook)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


def test_run_reason_names_the_failed_check_in_the_nodes_annotation(tmp_path: Path) -> None:
    done, calls = play(tmp_path, "run_reason")
    assert done.returncode == 0, done.stdout[-3000:]
    assert calls == [["annotate", "node", "node-a", "--overwrite", f"{KEY}={REASON}"]]
    assert (tmp_path / "drained").read_text() == f"kubernetes: {REASON}\n"
    assert re.search(REPORT + r"\nskipping: \[localhost\]", done.stdout), done.stdout[-3000:]


@pytest.mark.parametrize("entry", ["run_reason", "run_undrain"])
def test_an_annotation_kubectl_refuses_is_reported_never_a_failure(tmp_path: Path, entry: str) -> None:
    (tmp_path / "drained").write_text("kubernetes: gpufleet gate (post-maintenance)\n")
    done, calls = play(tmp_path, entry, refuse=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "failed=0" in done.stdout, done.stdout[-3000:]
    assert re.search(REPORT + r"\nok: \[localhost\]", done.stdout), done.stdout[-3000:]
    said = " ".join(done.stdout.split())  # the message as Ansible wraps it, one line
    assert (
        'failed (rc 1): Error from server (Forbidden): nodes "node-a" is forbidden: User "gpufleet"' in said
    ), said
    if entry == "run_reason":
        assert calls == [["annotate", "node", "node-a", "--overwrite", f"{KEY}={REASON}"]]
        assert (tmp_path / "drained").read_text() == f"kubernetes: {REASON}\n"
    else:
        # the uncordon first, then the reason removed; the node is back, its record gone
        assert calls == [["uncordon", "node-a"], ["annotate", "node", "node-a", f"{KEY}-"]]
        assert not (tmp_path / "drained").exists()
