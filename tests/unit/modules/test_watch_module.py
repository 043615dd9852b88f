"""gpufleet.node.watch refuses bad options before it reads anything, naming each role input and its
allowed range (input_error, so the report counts it as configuration)."""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.modules import watch

from tests.unit.modules import harness


def test_every_bad_option_is_named_with_its_range_and_nothing_runs() -> None:
    ran: list[list[str]] = []
    args = {
        "window_s": 0.5,
        "sample_interval_s": 0.05,
        "max_sample_gap_s": 0.5,
        "min_prefix_cache_hit_rate": 1.5,
        "roce_priority": 9,
        "max_gpu_temp_c": -1,
        "roce_thresholds": {"retransmit_per_s": 1},
        "instances": [{"name": "a", "port": 8000}, {"name": "a", "port": 8001}, {"name": "b"}],
    }
    run = harness.run_module(
        watch.main,
        args,
        run_command=lambda module, argv, **kw: ran.append(argv) or (0, "", ""),
        expect=harness.FailJson,
    )
    msg = run.result["msg"]
    assert run.result["input_error"] is True and ran == []
    assert msg.startswith("Refusing to watch: ")
    for expected in (
        "window_s (watch_window_s) must be 1..300 seconds, got 0.5",
        "sample_interval_s (watch_sample_interval_s) must be 0.2..60 seconds, got 0.05",
        "max_sample_gap_s (watch_max_sample_gap_s) must be 1..300 seconds, got 0.5",
        "min_prefix_cache_hit_rate (watch_min_prefix_cache_hit_rate) must be 0..1, got 1.5",
        "roce_priority (watch_roce_priority) must be 0..7, got 9",
        "max_gpu_temp_c (watch_max_gpu_temp_c) must be at least 0",
        "retransmit_per_s",
        "instances[1] (watch_instances): the name a is there twice",
        "instances[2] (watch_instances) needs a name and a port 1..65535",
    ):
        assert expected in msg


def test_a_sample_gap_no_wider_than_the_interval_is_refused() -> None:
    run = harness.run_module(
        watch.main,
        {"sample_interval_s": 5, "max_sample_gap_s": 5},
        run_command=lambda module, argv, **kw: (0, "", ""),
        expect=harness.FailJson,
    )
    assert run.result["input_error"] is True
    assert (
        "max_sample_gap_s (watch_max_sample_gap_s) must be more than sample_interval_s" in run.result["msg"]
    )
