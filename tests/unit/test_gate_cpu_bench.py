"""bench/gate_cpu.py: every task result a gate's playbook reports is counted per host and play (skipped too),
the counts are averaged per gated node, and the bench's counter joins the tree's own callbacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "callbacks"))

import gate_cpu
import task_count


def _result(host: str) -> SimpleNamespace:
    return SimpleNamespace(_host=SimpleNamespace(get_name=lambda: host))


def test_counter_adds_every_outcome_per_host_and_play_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "tasks.json"
    monkeypatch.setenv("GPUFLEET_BENCH_TASKS", str(target))
    for run_no in range(2):  # two playbooks of one command add up in the same file
        counter = task_count.CallbackModule()
        counter.v2_playbook_on_play_start(SimpleNamespace(get_name=lambda: "Gate"))
        counter.v2_runner_on_ok(_result("node01"))
        counter.v2_runner_on_skipped(_result("node01"))
        counter.v2_runner_on_failed(_result("node02"))
        if run_no == 1:
            counter.v2_playbook_on_play_start(SimpleNamespace(get_name=lambda: "Admit"))
            counter.v2_runner_on_unreachable(_result("node02"))
        counter.v2_playbook_on_stats(None)
    assert json.loads(target.read_text(encoding="utf-8")) == {
        "node01": {"Gate": {"ok": 2, "skipped": 2}},
        "node02": {"Gate": {"failed": 2}, "Admit": {"unreachable": 1}},
    }


def test_per_node_averages_over_gates_and_nodes(tmp_path: Path) -> None:
    counts = tmp_path / "tasks.json"
    known = {
        "node01": {"Gate": {"ok": 10, "skipped": 4}, "Admit": {"ok": 2}},
        "node02": {"Gate": {"ok": 12, "skipped": 2}, "Admit": {"ok": 2}},
        "leaf01": {"Read each leaf": {"ok": 4}},
    }
    counts.write_text(json.dumps(known), encoding="utf-8")
    assert gate_cpu.per_node(counts, gates=2, nodes=2) == {"Gate": 7.0, "Admit": 1.0, "Read each leaf": 1.0}


def test_counter_joins_the_trees_own_callbacks(tmp_path: Path) -> None:
    (tmp_path / "ansible.cfg").write_text(
        "[defaults]\ncallbacks_enabled = a.b.one, a.b.two\n", encoding="utf-8"
    )
    assert gate_cpu._callbacks(tmp_path) == "a.b.one,a.b.two,task_count"
    assert gate_cpu._callbacks(tmp_path / "none") == "task_count"
