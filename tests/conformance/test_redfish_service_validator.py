"""DMTF's Redfish Service Validator (rf_service_validator, PyPI redfish-service-validator) against the
simulated BMC: every resource it reaches from the service root checks against DMTF's CSDL schemas
with no failure.

It reads the schemas from ``--schema_directory`` (``--skipschema``: no download from dmtf.org):
tests/conformance/dsp8010 keeps the ones the sim's resources need, unchanged from DMTF's
DSP8010 2025.4 (its README says which and why). It runs in the BMC's network namespace
(sim_bmc.in_namespace), so nothing it might fetch past the BMC can leave the test.

Its only warnings are the deprecation of the ThermalSubsystem/LeakDetection/LeakDetectors path,
which the sim serves on purpose beside the chassis' LeakDetectors collection (gpufleet's Redfish
client reads the old path from BMCs whose firmware has only that).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from gpufleet_sim.bmc import launch

from tests.conformance import sim_bmc

SCHEMAS = Path(__file__).with_name("dsp8010")
# "... - ERROR - FAIL - /RoleId ([Not Present]): Required Property Error: ..." in its debug log
RESULT = re.compile(r" - (?:ERROR|WARNING) - (FAIL|WARN) - (.*)$")
# | PASS | WARN | FAIL | NOT TESTED | row of counts on its stdout
SUMMARY = re.compile(r"^\|\s+(\d+)\s+\|\s+(\d+)\s+\|\s+(\d+)\s+\|\s+(\d+)\s+\|$", re.MULTILINE)
DEPRECATED_LEAK_DETECTION = re.compile(
    r"^/(LeakDetectors|@odata\.id) \(.*/LeakDetection/LeakDetectors.*\): Deprecated (Property|URI) Warning"
)


def run_validator(bmc: sim_bmc.Namespaced, log_dir: Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(its summary counts, its FAIL and WARN lines as (result, what))."""
    node = bmc.node
    validator = str(Path(sys.executable).with_name("rf_service_validator"))
    argv = [validator, "--rhost", node.url, f"--user={launch.USERNAME}", f"--password={node.password}"]
    argv += ["--schema_directory", str(SCHEMAS), "--skipschema", "--logdir", str(log_dir)]
    # its own config.ini is read from the working directory: none there
    done = bmc.run(argv, timeout=300)
    bmc_now = "running" if bmc.process.poll() is None else f"exited {bmc.process.returncode}"
    why = f"{done.stdout}{done.stderr}\nthe BMC: {bmc_now}"
    # 1: a FAIL; anything else is the validator itself failing
    assert done.returncode in (0, 1), why
    counts = SUMMARY.findall(done.stdout)
    assert len(counts) == 1, why
    summary = dict(zip(("pass", "warn", "fail", "not tested"), map(int, counts[0]), strict=True))
    logs = list(log_dir.glob("*/RedfishServiceValidatorDebug_*.log"))
    assert len(logs) == 1, why
    lines = logs[0].read_text(encoding="utf-8").splitlines()
    found = [m.groups() for m in map(RESULT.search, lines) if m]
    return summary, [(str(result), str(what)) for result, what in found]


def test_the_service_validator_finds_no_failure_in_the_simulated_bmc(tmp_path: Path) -> None:
    node = sim_bmc.prepared(tmp_path)
    with sim_bmc.in_namespace(node) as bmc:
        started = time.monotonic()
        summary, results = run_validator(bmc, tmp_path / "logs")
        took = time.monotonic() - started
    assert [what for result, what in results if result == "FAIL"] == []
    assert summary["fail"] == 0
    warned = [what for result, what in results if result == "WARN"]
    assert len(warned) == summary["warn"]
    assert [w for w in warned if not DEPRECATED_LEAK_DETECTION.match(w)] == []
    # 488 properties passed in 3.1.8 (the Role's RoleId, the service root's ProtocolFeaturesSupported
    # among them): a run that reached little of the service, or found no schema, shows here
    assert summary["pass"] > 450, summary
    assert took < 120, f"the validator took {took:.0f} s"
