"""procs.stop_marked: what one run left behind is found by its own variable, never by name."""

from __future__ import annotations

import os
import subprocess
import sys

from gpufleet import procs, runner


def test_only_the_processes_carrying_the_runs_variable_are_stopped(tmp_path) -> None:
    marker = f"{runner.RUN_MARKER}={tmp_path}"
    name, value = marker.split("=", 1)
    sleeper = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
        "time.sleep(60)",
    ]
    # a worker that leads its own process group and ignores SIGTERM, as a stuck ansible worker may
    started = [
        subprocess.Popen(
            sleeper,
            env=dict(os.environ, **{name: value + suffix}),
            start_new_session=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        for suffix in ("", ".other")
    ]
    stuck, other = started
    for proc in started:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    try:
        assert procs.stop_marked(marker, grace=0.5) == [stuck.pid]
        assert stuck.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
