"""Captures what Debian's real Slurm prints for the calls gpufleet makes (tests/fixtures/real/slurm/,
INDEX.md section 12): a one-node cluster of munged, slurmctld and slurmd on loopback (sim/slurm.py),
then `scontrol show node` and `scontrol update` in each state and each refusal gpufleet can meet
(stdout in scontrol-<call>.txt, stderr, when there is any, in scontrol-<call>.stderr.txt).

    .venv/bin/python scripts/capture_slurm.py /tmp/slurm-capture    # as root; writes <dir>/out
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim" / "src"))

from gpufleet_sim.slurm import SlurmCluster

CALLS = [
    ("show-node-idle", ["show", "node", "node01"]),
    ("show-node-idle-oneliner", ["show", "node", "-o", "node01"]),
    ("update-drain", ["update", "nodename=node01", "state=drain", "reason=gpufleet gate (post-maintenance)"]),
    ("show-node-drained", ["show", "node", "node01"]),
    ("show-node-drained-oneliner", ["show", "node", "-o", "node01"]),
    ("update-resume", ["update", "nodename=node01", "state=resume"]),
    ("show-node-resumed-at-once", ["show", "node", "node01"]),
    ("update-drain-without-reason", ["update", "nodename=node01", "state=drain"]),
    ("update-unknown-node", ["update", "nodename=node99", "state=drain", "reason=x"]),
    ("show-unknown-node", ["show", "node", "node99"]),
    ("update-bad-state", ["update", "nodename=node01", "state=sideways"]),
]


def main(workdir: Path) -> None:
    cluster = SlurmCluster(workdir / "cluster")
    shutil.rmtree(cluster.root, ignore_errors=True)
    out = workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cluster.prepare([("node01", "127.0.199.2")])
    daemons = []
    try:
        for argv in (cluster.munged_argv(), cluster.controller_argv(), cluster.slurmd_argv("node01")):
            daemons.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            if argv == cluster.munged_argv():
                cluster.wait_munge(10)
        cluster.wait_idle(["node01"], 30)
        for name, args in CALLS:
            done = subprocess.run(["scontrol", *args], capture_output=True, text=True, env=cluster.env())
            (out / f"scontrol-{name}.txt").write_text(done.stdout)
            if done.stderr:
                (out / f"scontrol-{name}.stderr.txt").write_text(done.stderr)
            print(f"scontrol {' '.join(args)}: rc {done.returncode}")
        log = cluster.controller_log.read_text().splitlines()
        (out / "slurmctld-update-node.log").write_text("".join(f"{x}\n" for x in log if "update_node" in x))
    finally:
        for proc in reversed(daemons):
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
