"""The shipped schedule of `gpufleet watch --act` (contrib/systemd/gpufleet-guardian.*, docs/guardian.md):
it replaces the watch's timer (one gpufleet_watch.prom), runs at the interval WatchStale counts, writes the
same textfile directory, and lives long enough for a reboot at the default timeouts; its first SIGTERM goes
to gpufleet alone (which finishes the step under way, the node left drained)."""

from __future__ import annotations

import shlex

from gpufleet import cli, guardian_settings
from gpufleet.commands import registry
from tests.unit.test_watch_schedule import unit


def test_the_guardian_replaces_the_watch_at_the_same_interval_and_file() -> None:
    timer, watch_timer = unit("gpufleet-guardian.timer"), unit("gpufleet-watch.timer")
    assert timer["Unit"]["Conflicts"] == "gpufleet-watch.timer"
    assert timer["Timer"]["OnCalendar"] == watch_timer["Timer"]["OnCalendar"]
    assert timer["Install"]["WantedBy"] == "timers.target"
    service, watch = unit("gpufleet-guardian.service")["Service"], unit("gpufleet-watch.service")["Service"]
    argv, watch_argv = shlex.split(service["ExecStart"]), shlex.split(watch["ExecStart"])
    assert argv[:3] == [watch_argv[0], "watch", "--act"]
    textfile = watch_argv[watch_argv.index("--textfile-dir") + 1]
    assert argv[argv.index("--textfile-dir") + 1] == textfile
    # its own reports: a plain watch's are not overwritten by a guardian's
    assert argv[argv.index("--report-dir") + 1] != watch_argv[watch_argv.index("--report-dir") + 1]
    assert "--check" not in argv and service["SuccessExitStatus"] == "1" and service["Type"] == "oneshot"


def test_a_run_outlives_a_reboot_at_the_default_timeouts_and_stops_cleanly() -> None:
    service = unit("gpufleet-guardian.service")["Service"]
    reboot = (
        guardian_settings.REBOOT_GRACEFUL_TIMEOUT_S.default + guardian_settings.REBOOT_BOOT_TIMEOUT_S.default
    )
    assert int(service["TimeoutStartSec"]) > reboot
    assert service["KillMode"] == "mixed" and int(service["TimeoutStopSec"]) > 0


def test_the_service_runs_a_guardian_the_cli_accepts() -> None:
    argv = shlex.split(unit("gpufleet-guardian.service")["Service"]["ExecStart"])
    args = cli._parser().parse_args(argv[1:])
    assert args.command == "watch" and args.act is True and args.check is False
    registry.COMMANDS["watch"].validate(args)
    assert registry.COMMANDS["watch"].reported_as(args) == "watch --act"
