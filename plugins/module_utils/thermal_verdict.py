# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The thermal gate's decision: GPU facts + coolant facts + limits -> checks and a verdict.

Pure functions, no I/O. Every reading the gate looks at becomes one check
``{name, ok, value, limit, unit, message}``; a reading that is missing (None, or the
whole facts block absent) is a failed check, so the gate fails closed. A limit set to
None turns its check off explicitly (for a reading a GPU model never has; the module's
skip_checks); the check is then not listed at all.

Runs on the controller or the node (Python 3.11, stdlib only).
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_LIMITS",
    "FORBIDDEN_REASONS",
    "check",
    "coolant_checks",
    "evaluate",
    "gpu_checks",
    "verdict",
]

# Active clock event reasons that mean heat or power is costing throughput. gpu_idle,
# applications_clocks_setting, sync_boost and sw_power_cap (the configured power limit at work) do not.
FORBIDDEN_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "sw_thermal_slowdown",
    "hw_power_brake_slowdown",
)

# The module's documented defaults; thermal_gate.py's DOCUMENTATION says why each is what it is.
DEFAULT_LIMITS = {
    "max_gpu_temp_c": 60.0,
    "max_memory_temp_c": 70.0,
    "max_hotspot_c": None,
    "min_tlimit_c": 20.0,
    "forbidden_reasons": list(FORBIDDEN_REASONS),
    "min_flow_lpm": 10.0,
    "max_supply_c": 35.0,
    "max_delta_c": 15.0,
    "allowed_health": ["OK"],
    "require_leak_detection": False,
}

_ABSENT = frozenset(("Absent",))


def check(name, ok, value, limit, unit, message):
    return {"name": name, "ok": bool(ok), "value": value, "limit": limit, "unit": unit, "message": message}


def _fmt(value):
    if isinstance(value, float) and value.is_integer():
        return "%d" % value
    return "%s" % value


def _max_check(name, what, value, limit, unit):
    """value must be known and at or below limit."""
    if value is None:
        return check(name, False, None, limit, unit, "%s not reported (fail closed)" % what)
    ok = value <= limit
    word = "within" if ok else "above"
    return check(
        name,
        ok,
        value,
        limit,
        unit,
        "%s %s %s, %s the %s %s limit" % (what, _fmt(value), unit, word, _fmt(limit), unit),
    )


def _min_check(name, what, value, limit, unit):
    """value must be known and at or above limit."""
    if value is None:
        return check(name, False, None, limit, unit, "%s not reported (fail closed)" % what)
    ok = value >= limit
    word = "at or above" if ok else "below"
    return check(
        name,
        ok,
        value,
        limit,
        unit,
        "%s %s %s, %s the %s %s minimum" % (what, _fmt(value), unit, word, _fmt(limit), unit),
    )


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def gpu_checks(gpus, limits):
    """Checks for each GPU of gpu_facts' gpufleet_gpus, named ``thermal.<reading>[<uuid>]``."""
    if not gpus:
        return [
            check(
                "thermal.gpus", False, 0, None, "GPUs", "no GPUs in the facts; nothing to judge (fail closed)"
            )
        ]
    checks = []
    for gpu in gpus:
        gid = gpu.get("uuid") or "index-%s" % gpu.get("index")
        temp = gpu.get("temperature") or {}
        label = "GPU %s" % gid
        if limits.get("max_gpu_temp_c") is not None:
            checks.append(
                _max_check(
                    "thermal.gpu_temp_c[%s]" % gid,
                    "%s temperature" % label,
                    _number(temp.get("gpu_c")),
                    limits["max_gpu_temp_c"],
                    "C",
                )
            )
        if limits.get("max_memory_temp_c") is not None:
            checks.append(
                _max_check(
                    "thermal.memory_temp_c[%s]" % gid,
                    "%s memory temperature" % label,
                    _number(temp.get("memory_c")),
                    limits["max_memory_temp_c"],
                    "C",
                )
            )
        if limits.get("max_hotspot_c") is not None:
            checks.append(
                _max_check(
                    "thermal.hotspot_c[%s]" % gid,
                    "%s hotspot temperature" % label,
                    _number(temp.get("hotspot_c")),
                    limits["max_hotspot_c"],
                    "C",
                )
            )
        if limits.get("min_tlimit_c") is not None:
            checks.append(
                _min_check(
                    "thermal.tlimit_c[%s]" % gid,
                    "%s T.Limit margin" % label,
                    _number(temp.get("tlimit_c")),
                    limits["min_tlimit_c"],
                    "C",
                )
            )
        checks.append(_reasons_check("thermal.clocks_event_reasons[%s]" % gid, label, gpu, limits))
    return checks


def _reasons_check(name, label, gpu, limits):
    forbidden = list(limits.get("forbidden_reasons") or [])
    reasons = gpu.get("clocks_event_reasons")
    if reasons is None:
        return check(name, False, None, [], "", "%s clock event reasons not reported (fail closed)" % label)
    active = [r for r in reasons if r in forbidden]
    if active:
        return check(name, False, active, [], "", "%s clocks held back by %s" % (label, ", ".join(active)))
    return check(name, True, [], [], "", "%s: no forbidden clock event reason active" % label)


def _health_check(name, what, health, allowed):
    if health is None:
        return check(name, False, None, allowed, "", "%s health not reported (fail closed)" % what)
    ok = health in allowed
    return check(
        name,
        ok,
        health,
        allowed,
        "",
        "%s health is %s%s" % (what, health, "" if ok else " (allowed: %s)" % ", ".join(allowed)),
    )


def _leak_check(name, what, state, required):
    if state is None:
        if required:
            return check(
                name, False, None, "OK", "", "%s: no leak detector state reported (fail closed)" % what
            )
        return check(
            name,
            True,
            None,
            "OK",
            "",
            "%s: no leak detector reported (require_leak_detection is off)" % what,
        )
    ok = state == "OK"
    return check(
        name, ok, state, "OK", "", "%s leak detectors: %s" % (what, state if ok else state + " (leak?)")
    )


def coolant_checks(coolant, limits, require_coolant=True):
    """Checks for coolant_facts' gpufleet_coolant, named ``coolant.<reading>[<connector key>]``."""
    if coolant is None:
        if not require_coolant:
            return []
        return [
            check(
                "coolant.facts",
                False,
                None,
                None,
                "",
                "no coolant facts for this node (coolant_facts did not run or its BMC could not be read); "
                "fail closed",
            )
        ]
    checks = []
    connectors = [c for c in coolant.get("connectors") or [] if c.get("state") not in _ABSENT]
    if not connectors and require_coolant:
        checks.append(
            check(
                "coolant.connectors",
                False,
                0,
                None,
                "connectors",
                "the BMC reports no coolant connector for this node, so nothing shows the loop works "
                "(fail closed)",
            )
        )
    allowed = list(limits.get("allowed_health") or ["OK"])
    for conn in connectors:
        key = conn.get("key") or conn.get("id")
        what = "coolant connector %s" % key
        if limits.get("min_flow_lpm") is not None:
            checks.append(
                _min_check(
                    "coolant.flow_lpm[%s]" % key,
                    "%s flow" % what,
                    _number(conn.get("flow_lpm")),
                    limits["min_flow_lpm"],
                    "L/min",
                )
            )
        if limits.get("max_supply_c") is not None:
            checks.append(
                _max_check(
                    "coolant.supply_temp_c[%s]" % key,
                    "%s supply temperature" % what,
                    _number(conn.get("supply_c")),
                    limits["max_supply_c"],
                    "C",
                )
            )
        if limits.get("max_delta_c") is not None:
            checks.append(
                _max_check(
                    "coolant.delta_temp_c[%s]" % key,
                    "%s supply/return difference" % what,
                    _number(conn.get("delta_c")),
                    limits["max_delta_c"],
                    "K",
                )
            )
        checks.append(_health_check("coolant.health[%s]" % key, what, conn.get("health"), allowed))
        checks.append(
            _leak_check(
                "coolant.leak[%s]" % key, what, conn.get("leak"), limits.get("require_leak_detection")
            )
        )
    for cdu in coolant.get("cdus") or []:
        cid = cdu.get("id")
        what = "CDU %s" % cid
        health = _health_check("coolant.cdu_health[%s]" % cid, what, cdu.get("health"), allowed)
        problems = [c.get("message") for c in cdu.get("conditions") or [] if c.get("message")]
        if not health["ok"] and problems:
            health["message"] += ": " + "; ".join(problems)
        checks.append(health)
        checks.append(
            _leak_check(
                "coolant.cdu_leak[%s]" % cid, what, cdu.get("leak"), limits.get("require_leak_detection")
            )
        )
    return checks


def verdict(checks, override_reason=None):
    """pass (nothing failed), blocked (something failed), overridden (failed, with a reason)."""
    failed = [c for c in checks if not c["ok"]]
    if not failed:
        return "pass"
    reason = (override_reason or "").strip()
    return "overridden" if reason else "blocked"


def evaluate(gpus, coolant, limits=None, require_coolant=True, override_reason=None):
    """Returns ``{verdict, checks, failed_checks, override}``.

    ``limits`` overrides DEFAULT_LIMITS key by key. ``failed_checks`` is the names of the failed
    checks. ``override`` is ``{reason, failed_checks}`` when a non-blank override_reason was given,
    else None; the checks are listed either way.
    """
    merged = dict(DEFAULT_LIMITS)
    merged.update(limits or {})
    checks = gpu_checks(gpus, merged) + coolant_checks(coolant, merged, require_coolant)
    failed = [c["name"] for c in checks if not c["ok"]]
    reason = (override_reason or "").strip()
    return {
        "verdict": verdict(checks, reason),
        "checks": checks,
        "failed_checks": failed,
        "override": {"reason": reason, "failed_checks": failed} if reason else None,
    }
