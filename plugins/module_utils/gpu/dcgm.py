# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dcgmi diag -r N -j`` (DCGM diagnostics, JSON) parsed: per test, per GPU, a result and its messages.

dcgmi can print a line before the JSON ("Successfully ran diagnostic for group.", a warning); the
document starts at the first ``{`` and nothing but blanks may follow it. DCGM 3 puts it under
``"DCGM GPU Diagnostic"``, DCGM 4 under ``"DCGM Diagnostic"``: ``test_categories`` -> ``tests``
-> ``results``, one result per GPU (``gpu_ids`` a number, or a comma list for the deployment tests
that cover all GPUs at once; DCGM 4 also ``entity_group`` / ``entity_id``), each with a status
(PASS/Pass, FAIL, WARN, SKIP/SKIPPED) and ``warnings`` / ``info`` messages (strings, or objects
with a ``warning``/``message`` text). DCGM 3 leaves ``null`` between tests; they are skipped. DCGM
3 puts its version and driver under the root; DCGM 4 under a top-level ``metadata`` (``version``,
``Driver Version Detected``) and adds a ``test_summary`` per test, not read: the results say it. A
status this module does not know, a GPU id that is not ASCII digits, or no test at all raises
ParseError naming the tool.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard, has_surrogates

TOOL = "dcgmi diag -j"

_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
_STATUS = {
    "pass": "Pass",
    "fail": "Fail",
    "warn": "Warn",
    "warning": "Warn",
    "skip": "Skip",
    "skipped": "Skip",
    "not run": "Skip",
}
_GPU_IDS = re.compile(r"^[0-9]{1,4}(?:,[0-9]{1,4})*$")


class ParseError(ValueError):
    """Raised when dcgmi diag JSON output is empty, cut or not in DCGM's format."""


def _document(text: str) -> dict[str, Any]:
    if has_surrogates(text):
        raise ParseError("%s: output is not UTF-8" % TOOL)
    start = text.find("{")
    if start < 0:
        raise ParseError("%s: no JSON object in the output" % TOOL)
    try:
        document, end = json.JSONDecoder().raw_decode(text, start)
    except RecursionError:
        raise ParseError("%s: JSON nested too deeply to read" % TOOL) from None
    except ValueError as exc:
        raise ParseError("%s: output is not JSON (%s)" % (TOOL, exc)) from None
    if text[end:].strip():
        raise ParseError("%s: text after the JSON document: %r" % (TOOL, text[end:].strip()[:60]))
    if not isinstance(document, dict):
        raise ParseError("%s: the JSON is not an object" % TOOL)
    return document


def _gpu_ids(result: dict[str, Any]) -> list[int]:
    raw = result.get("gpu_ids", result.get("gpu_id"))
    if raw is None and result.get("entity_group", "GPU") == "GPU":
        raw = result.get("entity_id")
    if raw is None:
        return []
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 0 <= raw < 10000:
            raise ValueError("GPU id %r" % raw)
        return [raw]
    if isinstance(raw, str) and _GPU_IDS.match(raw):
        return [int(part) for part in raw.split(",")]
    raise ValueError("GPU id %r is not a number or a comma list" % (raw,))


def _messages(result: dict[str, Any], key: str) -> list[str]:
    found = result.get(key) or []
    if isinstance(found, (str, dict)):
        found = [found]
    if not isinstance(found, list):
        raise ValueError("%s is %r, not a list" % (key, type(found).__name__))
    texts = []
    for item in found:
        if isinstance(item, dict):
            item = item.get("warning", item.get("message", item.get("info")))
        if not isinstance(item, str):
            raise ValueError("a %s entry is %r, not text" % (key, item))
        texts.append(item)
    return texts


def _status(raw: Any) -> str:
    status = _STATUS.get(raw.strip().lower()) if isinstance(raw, str) else None
    if status is None:
        raise ValueError("status %r is not PASS/FAIL/WARN/SKIP" % (raw,))
    return status


@guard(ParseError, TOOL)
def parse_diag_json(text: str) -> dict[str, Any]:
    """``dcgmi diag -r N -j`` -> ``{version, driver_version, tests: [{category, name, results:
    [{gpu_ids, status, warnings, info}]}], gpus: [{gpu, status}], failed: [{test, gpu_ids,
    messages}], passed, warned, runtime_error}``.

    ``status`` is one of Pass, Fail, Warn, Skip; ``gpus`` holds each GPU's worst result (by GPU id) over all
    tests (Fail > Warn > Pass > Skip); ``passed`` is True when no result failed and DCGM reported
    no runtime error; ``warned`` when some result is Warn. ``runtime_error``: DCGM's own message
    when the diagnostic could not run (then ``passed`` is False)."""
    document = _document(text)
    root_key = next((key for key in _ROOTS if key in document), None)
    if root_key is None:
        raise ParseError("%s: neither %s in the JSON" % (TOOL, " nor ".join(repr(k) for k in _ROOTS)))
    root = document[root_key]
    if not isinstance(root, dict):
        raise ParseError("%s: %r is not an object" % (TOOL, root_key))
    runtime_error = document.get("runtime_error", root.get("runtime_error"))
    if runtime_error is not None and not isinstance(runtime_error, str):
        raise ParseError("%s: runtime_error is not text" % TOOL)
    categories = root.get("test_categories")
    if categories is None and runtime_error is not None:
        categories = []
    if not isinstance(categories, list):
        raise ParseError("%s: test_categories is not a list" % TOOL)
    tests = []
    for category in categories:
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseError("%s: a test category without a list of tests" % TOOL)
        for test in category["tests"]:
            if test is None:  # DCGM 3 writes null between tests
                continue
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise ParseError("%s: a test without a name in %r" % (TOOL, category.get("category")))
            results = test.get("results")
            if not isinstance(results, list) or not results:
                raise ParseError("%s: test %r has no results" % (TOOL, test["name"]))
            rows = []
            for result in results:
                if not isinstance(result, dict):
                    raise ParseError("%s: a result of %r is not an object" % (TOOL, test["name"]))
                rows.append(
                    {
                        "gpu_ids": _gpu_ids(result),
                        "status": _status(result.get("status")),
                        "warnings": _messages(result, "warnings"),
                        "info": _messages(result, "info"),
                    }
                )
            tests.append({"category": category.get("category"), "name": test["name"], "results": rows})
    if not tests and runtime_error is None:
        raise ParseError("%s: no test in the output" % TOOL)
    rank = {"Skip": 0, "Pass": 1, "Warn": 2, "Fail": 3}
    gpus: dict[int, str] = {}
    for test in tests:
        for row in test["results"]:
            for gpu in row["gpu_ids"]:
                if rank[row["status"]] >= rank[gpus.get(gpu, "Skip")]:
                    gpus[gpu] = row["status"]
    failed = [
        {"test": test["name"], "gpu_ids": row["gpu_ids"], "messages": row["warnings"]}
        for test in tests
        for row in test["results"]
        if row["status"] == "Fail"
    ]
    # DCGM 3 writes both under its root; DCGM 4 under a top-level "metadata" in the words of its table.
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    version = root.get("version", document.get("version", metadata.get("version")))
    driver = root.get(
        "driver_version_detected",
        document.get("driver_version_detected", metadata.get("Driver Version Detected")),
    )
    return {
        "version": version if isinstance(version, str) else None,
        "driver_version": driver if isinstance(driver, str) else None,
        "tests": tests,
        "gpus": [{"gpu": gpu, "status": gpus[gpu]} for gpu in sorted(gpus)],
        "failed": failed,
        "passed": not failed and runtime_error is None,
        "warned": any(row["status"] == "Warn" for test in tests for row in test["results"]),
        "runtime_error": runtime_error,
    }
