"""bench/: the naive playbook has one task per check, and the table's ratios come from medians."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import checks
import run


def test_naive_playbook_runs_each_check_as_its_own_task() -> None:
    (play,) = yaml.safe_load(checks.naive_playbook())
    commands = [task["ansible.builtin.shell"]["cmd"].strip() for task in play["tasks"]]
    assert commands == [c.strip() for c in checks.CHECKS.values()]
    assert all(task["changed_when"] == "'DRIFT' in check.stdout" for task in play["tasks"])


def test_clush_script_runs_every_check_once() -> None:
    assert checks.script().splitlines() == list(checks.CHECKS.values())


def test_table_ratios_use_medians() -> None:
    def samples(*walls: float) -> list[run.Sample]:
        return [run.Sample(w, w / 2, w * 2) for w in walls]

    results = {
        32: {
            "ansible -m ping": samples(10.0, 4.0, 5.0),
            "gpufleet drift": samples(7.5, 100.0, 6.0),
            "naive playbook": samples(60.0, 75.0, 1.0),
            "clush probe": samples(3.0, 3.0, 3.0),
        }
    }
    text = run.table(results)
    assert "| 32 | gpufleet drift | 7.5 | 3.8 | 0.117 | 15.0 | 1.50 | 0.0 |" in text
    assert (
        "drift / ping = 1.50 (target <= 1.5); naive / drift = 8.00 (target >= 5); drift / clush = 2.50"
        in text
    )


def test_methods_keep_ping_and_drift_and_refuse_unknown_names() -> None:
    assert run.chosen_methods("naive") == ("ansible -m ping", "gpufleet drift", "naive playbook")
    assert run.chosen_methods("drift,ping") == ("ansible -m ping", "gpufleet drift")
    assert run.chosen_methods("nofabric") == ("ansible -m ping", "gpufleet drift", "drift without fabric")
    assert run.chosen_methods("watch") == ("ansible -m ping", "gpufleet drift", "gpufleet watch")
    assert run.chosen_methods("act,watch")[-2:] == ("gpufleet watch", "gpufleet watch --act")
    with pytest.raises(
        ValueError, match="--methods: pdsh is not one of ping, drift, nofabric, watch, act, naive, clush"
    ):
        run.chosen_methods("ping,pdsh")


def test_table_without_naive_and_clush_gives_the_ping_ratios() -> None:
    results = {
        32: {
            "ansible -m ping": [run.Sample(10.0, 4.0, 1.0)],
            "gpufleet drift": [run.Sample(30.0, 6.0, 1.0)],
        }
    }
    text = run.table(results)
    assert (
        "32 nodes: drift / ping = 3.00 (target <= 1.5); controller CPU drift / ping = 1.50 (target <= 1.3)"
        in text
    )
    assert "naive" not in text


def test_growth_gives_the_per_node_cost_at_each_size_and_of_each_added_node() -> None:
    results = {
        32: {"ansible -m ping": [run.Sample(6.0, 5.0, 1.0)], "gpufleet drift": [run.Sample(17.0, 9.6, 1.0)]},
        128: {
            "ansible -m ping": [run.Sample(26.0, 19.0, 1.0)],
            "gpufleet drift": [
                run.Sample(70.0, 38.4, 9.0),
                run.Sample(80.0, 30.0, 9.0),
                run.Sample(75.0, 99.0, 9.0),
            ],
        },
    }
    line = run.growth(results)
    assert line == (
        "drift controller CPU per node: 0.300 at 32 nodes, 0.300 at 128 nodes (target <= 0.35: met); "
        "each node from 32 to 128 added 0.300 CPU-s"
    )
    results[128]["gpufleet drift"] = [run.Sample(80.0, 48.0, 9.0)]
    assert "0.375 at 128 nodes (target <= 0.35: not met)" in run.growth(results)
    assert "each node from 32 to 128 added 0.400 CPU-s" in run.growth(results)


def test_the_table_gives_each_method_its_median_load_at_start() -> None:
    results = {
        32: {
            "ansible -m ping": [run.Sample(6.0, 5.0, 1.0, 3.0), run.Sample(6.0, 5.0, 1.0, 9.0)],
            "gpufleet drift": [run.Sample(9.0, 6.0, 1.0, 2.0)],
        }
    }
    text = run.table(results)
    assert "| 32 | ansible -m ping | 6.0 | 5.0 | 0.156 | 1.0 | 1.00 | 6.0 |" in text
    assert "| 32 | gpufleet drift | 9.0 | 6.0 | 0.188 | 1.0 | 1.50 | 2.0 |" in text
    assert "controller CPU drift / ping = 1.20 (target <= 1.3)" in text


def test_fleets_above_32_nodes_time_ping_and_drift_only() -> None:
    every = run.chosen_methods(",".join(run.SHORT_NAMES))
    assert run.sized_methods(32, every) == every
    assert run.sized_methods(128, every) == ("ansible -m ping", "gpufleet drift")
    assert run.sized_methods(128, (*every, run.BASELINE)) == (
        "ansible -m ping",
        "gpufleet drift",
        run.BASELINE,
    )


def test_a_baseline_drift_gets_its_own_row_and_ratio_to_ping() -> None:
    results = {
        32: {
            "ansible -m ping": [run.Sample(6.0, 5.0, 1.0)],
            "gpufleet drift": [run.Sample(9.0, 6.0, 1.0)],
            run.BASELINE: [run.Sample(12.0, 10.0, 1.0)],
        }
    }
    text = run.table(results)
    assert "| 32 | baseline drift | 12.0 | 10.0 | 0.312 | 1.0 | 2.00 | 0.0 |" in text
    assert "controller CPU baseline drift / ping = 2.00; controller CPU drift / ping = 1.20" in text
