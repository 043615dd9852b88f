"""The fake ``dcgmi``: ``dcgmi diag -r <1|2|3|4> [-j]`` (DCGM's diagnostic) on the node's GPUs.

``-r``/``--run`` takes a level or its name (quick/short 1, medium 2, long 3, xlong 4); ``-j``/``--json``
prints DCGM 3's JSON as jsoncpp's styled writer does (tab indents, ``"key" : value``, an object or
array member's value on the next line, ``null`` between the deployment tests), the shape of
tests/fixtures/real/dcgm/dcgm-jsonresulttests-real-output-3.1.0-8gpu.json: ``"DCGM GPU Diagnostic"`` ->
``test_categories`` -> ``tests`` -> ``results`` (the deployment tests one result for all GPUs, ``gpu_ids``
"0,1,...", unless some GPU has a finding; the plugins one result per GPU, ``gpu_ids`` a number), each
``status`` PASS/FAIL/WARN, a finding's ``warnings`` as ``{error_category, error_id, error_severity,
warning}``. Without ``-j``: DCGM's text table. ``-i``/``-g``/``-v``/``--iterations`` are accepted.
What each test finds is sim/dcgm_diag.py's. A failed result exits 226 (DCGM_ST_NVVS_ERROR, -30), as
dcgmi does; a bad command line prints the problem on stderr and exits 1.

The run takes 0.5-4 s by level; levels 2 and up load the GPUs in the thermal model meanwhile.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from gpufleet_sim import dcgm_diag, thermal
from gpufleet_sim import state as sim_state
from gpufleet_sim.state import present_gpus
from gpufleet_sim.tools import usage
from gpufleet_sim.tools.usage import UsageError

LEVELS = {"1": 1, "quick": 1, "short": 1, "2": 2, "medium": 2, "3": 3, "long": 3, "4": 4, "xlong": 4}
RUN_S = {1: 0.5, 2: 1.5, 3: 3.0, 4: 4.0}
RC_FAILED = 226
_VALUED = {"-i", "--entity-id", "-g", "--group", "--iterations", "-p", "--parameters", "-c", "--configfile"}
_STATUS = {"Pass": "PASS", "Fail": "FAIL", "Warn": "WARN"}
# How the run waits (tests replace it to run without waiting).
pause = time.sleep


def parse(argv: list[str]) -> tuple[int, bool]:
    """(level, json) of ``diag -r N [-j]``; UsageError otherwise."""
    if not argv or argv[0] != "diag":
        raise UsageError(f"Error: only 'diag' is available here, not {argv[0] if argv else 'nothing'!r}")
    level, as_json = None, False
    args = iter(argv[1:])
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in ("-r", "--run"):
            value = value if eq else next(args, "")
            if value.lower() not in LEVELS:
                levels = "1-4, quick, medium, long, xlong"
                raise UsageError(f"Error: '{value}' is not a diagnostic level ({levels})")
            level = LEVELS[value.lower()]
        elif arg in ("-j", "--json"):
            as_json = True
        elif arg in ("-v", "--verbose"):
            continue
        elif name in _VALUED:
            if not eq:
                next(args, None)
        else:
            raise UsageError(f"PARSE ERROR: Argument: {arg}\n             Couldn't find match for argument")
    if level is None:
        raise UsageError("PARSE ERROR: Required argument missing: run")
    return level, as_json


def _warning(finding: dcgm_diag.Finding) -> dict[str, Any]:
    return {
        "error_category": finding.category,
        "error_id": finding.code,
        "error_severity": finding.severity,
        "warning": finding.text,
    }


def _status(findings: list[dcgm_diag.Finding]) -> str:
    if any(f.status == "Fail" for f in findings):
        return "FAIL"
    return "WARN" if findings else "PASS"


def _result(gpu_ids: int | str, findings: list[dcgm_diag.Finding]) -> dict[str, Any]:
    result: dict[str, Any] = {"gpu_ids": gpu_ids, "status": _status(findings)}
    if findings:
        result["warnings"] = [_warning(f) for f in findings]
    return result


def _results(test: dcgm_diag.TestResult) -> list[dict[str, Any]]:
    if test.category != "Deployment":
        return [_result(gpu, test.findings.get(gpu, [])) for gpu in test.gpus]
    clean = [gpu for gpu in test.gpus if gpu not in test.findings]
    results = [_result(str(gpu), test.findings[gpu]) for gpu in test.gpus if gpu in test.findings]
    if clean:
        results.insert(0, _result(",".join(str(gpu) for gpu in clean), []))
    return results


def document(tests: list[dcgm_diag.TestResult], driver: str) -> dict[str, Any]:
    categories: list[dict[str, Any]] = []
    for test in tests:
        if not categories or categories[-1]["category"] != test.category:
            categories.append({"category": test.category, "tests": []})
        entries = categories[-1]["tests"]
        if entries and test.category == "Deployment":
            entries.append(None)  # DCGM 3 writes null between the deployment tests
        entries.append({"name": test.name, "results": _results(test)})
    return {
        "DCGM GPU Diagnostic": {
            "test_categories": categories,
            "driver_version_detected": driver,
            "version": dcgm_diag.DCGM_VERSION,
        }
    }


def styled(value: Any, depth: int = 0) -> str:
    """jsoncpp's StyledWriter: tabs, ``"key" : value``, a non-empty object or array on its own lines."""
    pad = "\t" * depth
    if isinstance(value, dict) and value:
        members = []
        for key, item in value.items():
            joint = f"\n{pad}\t" if isinstance(item, (dict, list)) and item else " "
            members.append(f"{pad}\t{json.dumps(key)} :{joint}{styled(item, depth + 1)}")
        return "{\n" + ",\n".join(members) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(f"{pad}\t{styled(item, depth + 1)}" for item in value) + f"\n{pad}]"
    return json.dumps(value)


def table(tests: list[dcgm_diag.TestResult], driver: str) -> str:
    """DCGM's text report: one line per test (Pass/Fail/Warn, with the GPUs), the findings under it."""
    rule = "+---------------------------+------------------------------------------------+"
    lines = ["Successfully ran diagnostic for group.", rule, f"| {'Diagnostic':<25} | {'Result':<46} |"]
    lines.append(rule.replace("-", "="))
    lines.append("|-----  Metadata  ----------+------------------------------------------------|")
    lines.append(f"| {'DCGM Version':<25} | {dcgm_diag.DCGM_VERSION:<46} |")
    lines.append(f"| {'Driver Version Detected':<25} | {driver:<46} |")
    category = None
    for test in tests:
        if test.category != category:
            category = test.category
            lines.append(f"|-----  {category}  ".ljust(28, "-") + "+" + "-" * 48 + "|")
        findings = [f for gpu in test.gpus for f in test.findings.get(gpu, [])]
        verdict = _status(findings).capitalize()
        lines.append(f"| {test.name:<25} | {verdict:<46} |")
        for gpu in test.gpus:
            for finding in test.findings.get(gpu, []):
                lines.append(f"| {'':<25} | {finding.status}: GPU{gpu} {finding.text}")
    lines.append(rule)
    return "\n".join(lines) + "\n"


def main(argv: list[str], node_dir: Path) -> int:
    try:
        level, as_json = parse(argv)
    except UsageError as err:
        return usage.refused(err)
    node = sim_state.load(node_dir)
    uuids = [str(g["uuid"]) for g in present_gpus(node)] if level >= 2 else []
    if uuids:
        with sim_state.locked(node_dir) as live:
            thermal.change_load(live, uuids, 1, time.time())
    try:
        pause(RUN_S[level])
    finally:
        if uuids:
            with sim_state.locked(node_dir) as live:
                thermal.change_load(live, uuids, -1, time.time())
    tests = dcgm_diag.run(sim_state.load(node_dir), level)
    driver = str(node.get("driver_version", ""))
    sys.stdout.write(styled(document(tests, driver)) + "\n" if as_json else table(tests, driver))
    failed = any(f.status == "Fail" for test in tests for found in test.findings.values() for f in found)
    return RC_FAILED if failed else 0
