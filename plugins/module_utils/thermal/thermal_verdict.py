# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet's one thermal judge: GPU readings (+ coolant facts) + limits -> checks and a verdict.

Used by the idle gate (thermal_gate, one sample before any instance starts) and by the burn-in
(burn_in, the peaks of its samples under load): the same readings, the same limit names, the same
check names ``thermal.<reading>[<uuid>]`` and the same harmful clock event reasons
(results.HARMFUL_REASONS). Only the limits' defaults differ: IDLE_LIMITS and LOAD_LIMITS.

A GPU reading is ``{uuid, index, gpu_c, memory_c, hotspot_c, tlimit_c, reasons}`` (nvidia_smi's
parse_thermal_sample gives it; a gpu_facts GPU is accepted too). Under load the temperatures are
peaks, tlimit_c the lowest margin, reasons every reason seen, and ``missing`` may count the samples
that lacked a reading. A missing reading (None, or missing from a sample) is a failed check, so
the judge fails closed. A limit set to None turns its check off explicitly (skip_checks); the
check is then not listed at all.

Pure functions, no I/O. Runs on the controller or the node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import functools

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import (
    CLOCK_EVENT_REASONS,
    HARMFUL_REASONS,
    check,
)

# GPU limits at idle (the gate, on a drained node) and under load (the burn-in); the modules'
# DOCUMENTATION says why each is what it is. Same keys, same meaning, different defaults.
IDLE_LIMITS = {
    "max_gpu_temp_c": 60.0,
    # None: the GPU temperature limit is max_gpu_temp_c; a margin: the GPU's own slowdown temperature
    # less it, where the GPU reports one (gpu_temp_limit)
    "slowdown_margin_c": None,
    "max_memory_temp_c": 70.0,
    "max_hotspot_c": None,
    "min_tlimit_c": 20.0,
    "forbidden_reasons": list(HARMFUL_REASONS),
}
LOAD_LIMITS = {
    "max_gpu_temp_c": 83.0,
    "slowdown_margin_c": None,
    "max_memory_temp_c": 90.0,
    "max_hotspot_c": None,
    "min_tlimit_c": 3.0,
    "forbidden_reasons": list(HARMFUL_REASONS),
}
COOLANT_LIMITS = {
    "min_flow_lpm": 10.0,
    "max_supply_c": 35.0,
    "max_delta_c": 15.0,
    "allowed_health": ["OK"],
    "require_leak_detection": False,
}
# The idle gate's defaults (GPU and coolant).
DEFAULT_LIMITS = dict(IDLE_LIMITS, **COOLANT_LIMITS)

# The physical range of each limit option: (lowest, highest, lowest excluded, unit, why the ends).
# A limit outside it is a typo or a sign error, never a choice: -1 L/min would pass a loop at
# 4.8 L/min, a T.Limit minimum of 0 a GPU at its limit; above the highest end the check passes
# anything a sensor can report. NaN and inf (what "nan"/"1e999" become as a float) are outside.
LIMIT_RANGES = {
    "max_gpu_temp_c": (0.0, 150.0, False, "C", "a GPU temperature"),
    "max_memory_temp_c": (0.0, 150.0, False, "C", "an HBM temperature"),
    "min_tlimit_c": (0.0, 150.0, True, "C", "0 or less passes a GPU at its temperature limit"),
    "slowdown_margin_c": (0.0, 150.0, True, "C", "0 or less passes a GPU at its slowdown temperature"),
    "min_flow_lpm": (0.0, 10000.0, True, "L/min", "0 or less passes a loop with no flow"),
    "max_supply_c": (0.0, 100.0, False, "C", "a liquid coolant temperature"),
    "max_delta_c": (0.0, 100.0, False, "K", "a supply/return difference"),
    "min_utilization_pct": (0.0, 100.0, True, "%", "0 would pass an idle GPU; leave it unset to turn it off"),
}


def limit_errors(params, setting_prefix=None):
    """One message per limit in ``params`` outside its physical range (LIMIT_RANGES); [] when all fit.

    A limit that is None is not given (turned off) and not judged. ``setting_prefix`` names the role
    input too (``thermal_gate_`` -> min_flow_lpm (thermal_gate_min_flow_lpm)). Used by every module
    that takes these limits (thermal_gate, burn_in), so a direct module call is refused like the role.
    """
    errors = []
    for name, (low, high, open_low, unit, why) in LIMIT_RANGES.items():
        value = params.get(name)
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (low < value if open_low else low <= value) and value <= high
        if not ok:
            setting = "%s (%s%s)" % (name, setting_prefix, name) if setting_prefix else name
            errors.append(
                "%s must be %s %s and at most %s %s (%s), got %s"
                % (setting, "above" if open_low else "at least", _fmt(low), _fmt(high), unit, why, value)
            )
    return errors


# skip_checks choice -> the limit it turns off.
GPU_SKIPS = {"gpu_temp_c": "max_gpu_temp_c", "memory_temp_c": "max_memory_temp_c", "tlimit_c": "min_tlimit_c"}
COOLANT_SKIPS = {"flow_lpm": "min_flow_lpm", "supply_temp_c": "max_supply_c", "delta_temp_c": "max_delta_c"}

_ABSENT = frozenset(("Absent",))


def gpu_limit_spec(defaults, slowdown=False):
    """The argument_spec entries of the GPU limits both modules take (defaults: IDLE/LOAD_LIMITS);
    ``slowdown``: with slowdown_margin_c (the gate's and the burn-in's, which read the slowdown
    temperatures)."""
    spec = dict(
        max_gpu_temp_c=dict(type="float", default=defaults["max_gpu_temp_c"]),
        max_memory_temp_c=dict(type="float", default=defaults["max_memory_temp_c"]),
        min_tlimit_c=dict(type="float", default=defaults["min_tlimit_c"]),
        forbidden_reasons=dict(
            type="list",
            elements="str",
            choices=list(CLOCK_EVENT_REASONS),
            default=list(defaults["forbidden_reasons"]),
        ),
    )
    if slowdown:
        spec["slowdown_margin_c"] = dict(type="float", default=defaults["slowdown_margin_c"])
    return spec


def limits_from_params(params, keys, skips):
    """The limits a module's params give: ``keys`` copied (and slowdown_margin_c), every named
    skip_checks limit None (skipping the GPU temperature also drops its slowdown margin)."""
    limits = {key: params.get(key) for key in keys}
    limits["slowdown_margin_c"] = params.get("slowdown_margin_c")
    for name in params.get("skip_checks") or []:
        limits[skips[name]] = None
        if skips[name] == "max_gpu_temp_c":
            limits["slowdown_margin_c"] = None
    return limits


def gpu_temp_limit(limits, gpu):
    """The one place a GPU's temperature limit is computed: ``(limit, basis)``.

    With ``slowdown_margin_c`` set and the GPU's own slowdown temperature known (``slowdown_c``, read
    by thermal/slowdown.py), the limit is that temperature less the margin and ``basis`` says so,
    naming both; without a slowdown temperature it falls back to ``max_gpu_temp_c`` (the profile's
    absolute number) and ``basis`` says why; without a margin it is ``max_gpu_temp_c`` and ``basis``
    None (an operator who sets the margin to null judges against the absolute number alone). A limit
    of None turns the check off.
    """
    margin = limits.get("slowdown_margin_c")
    absolute = limits.get("max_gpu_temp_c")
    if margin is None:
        return absolute, None
    slowdown = _number(gpu.get("slowdown_c"))
    if slowdown is None:
        if absolute is None:
            return None, None
        return absolute, "the profile's %s C: the GPU reports no slowdown temperature" % _fmt(absolute)
    return (
        slowdown - margin,
        "its slowdown temperature %s C less the margin %s C" % (_fmt(slowdown), _fmt(margin)),
    )


def _fmt(value):
    if isinstance(value, float) and value.is_integer():
        return "%d" % value
    return "%s" % value


def _missing(what, missing):
    if missing:
        return "%s not reported in %d samples (fail closed)" % (what, missing)
    return "%s not reported (fail closed)" % what


# How a message words a reading against a maximum and a minimum: (within, beyond, peak verb, limit noun).
_WORDS = {
    "max": ("within", "above", "peaked at ", "limit"),
    "min": ("at or above", "below", "fell to ", "minimum"),
}


def _limit_check(kind, name, what, value, limit, unit, missing=0, peak=False):
    """value must be known and within limit: at or below it for a "max", at or above it for a "min"."""
    if value is None or missing:
        return check(name, False, value, limit, unit, _missing(what, missing))
    ok = value <= limit if kind == "max" else value >= limit
    within, beyond, verb, noun = _WORDS[kind]
    return check(
        name,
        ok,
        value,
        limit,
        unit,
        "%s %s%s %s, %s the %s %s %s"
        % (what, verb if peak else "", _fmt(value), unit, within if ok else beyond, _fmt(limit), unit, noun),
    )


_max_check = functools.partial(_limit_check, "max")
_min_check = functools.partial(_limit_check, "min")


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _reading(gpu):
    """A GPU reading; a gpu_facts GPU (temperature dict, clocks_event_reasons) is mapped to one."""
    if "temperature" not in gpu and "clocks_event_reasons" not in gpu:
        return gpu
    temp = gpu.get("temperature") or {}
    return {
        "uuid": gpu.get("uuid"),
        "index": gpu.get("index"),
        "gpu_c": temp.get("gpu_c"),
        "memory_c": temp.get("memory_c"),
        "hotspot_c": temp.get("hotspot_c"),
        "tlimit_c": temp.get("tlimit_c"),
        "slowdown_c": gpu.get("slowdown_c"),
        "reasons": gpu.get("clocks_event_reasons"),
    }


# reading key -> (check reading name, what it is, limit key, max|min)
_GPU_READINGS = (
    ("gpu_c", "gpu_temp_c", "temperature", "max_gpu_temp_c", "max"),
    ("memory_c", "memory_temp_c", "memory temperature", "max_memory_temp_c", "max"),
    ("hotspot_c", "hotspot_c", "hotspot temperature", "max_hotspot_c", "max"),
    ("tlimit_c", "tlimit_c", "T.Limit margin", "min_tlimit_c", "min"),
)


def gpu_checks(gpus, limits, under_load=False, read_error=None):
    """Checks for each GPU reading, named ``thermal.<reading>[<uuid>]``.

    ``under_load``: the readings are a burn-in's peaks (the messages say so); the names are the same.
    ``read_error``: why no GPU could be read at all; the one ``thermal.gpus`` check says it.
    """
    if read_error is not None and not gpus:
        return [
            check("thermal.gpus", False, None, None, "GPUs", "%s; no GPU was read (fail closed)" % read_error)
        ]
    if not gpus:
        return [
            check(
                "thermal.gpus",
                False,
                0,
                None,
                "GPUs",
                "no GPUs in the readings; nothing to judge (fail closed)",
            )
        ]
    checks = []
    for raw in gpus:
        gpu = _reading(raw)
        gid = gpu.get("uuid") or "index-%s" % gpu.get("index")
        label = "GPU %s" % gid
        missing = gpu.get("missing") or {}
        for key, reading, what, limit_key, kind in _GPU_READINGS:
            limit, basis = limits.get(limit_key), None
            if limit_key == "max_gpu_temp_c":
                limit, basis = gpu_temp_limit(limits, gpu)
            if limit is None:
                continue
            judge = _max_check if kind == "max" else _min_check
            found = judge(
                "thermal.%s[%s]" % (reading, gid),
                "%s %s%s" % (label, what, " under load" if under_load else ""),
                _number(gpu.get(key)),
                limit,
                "C",
                missing.get(key, 0),
                under_load,
            )
            if basis:
                found["message"] += " (%s)" % basis
            checks.append(found)
        checks.append(
            _reasons_check(
                "thermal.clocks_event_reasons[%s]" % gid,
                label,
                gpu,
                limits,
                missing.get("reasons", 0),
                under_load,
            )
        )
    return checks


def _reasons_check(name, label, gpu, limits, missing=0, under_load=False):
    forbidden = list(limits.get("forbidden_reasons") or [])
    reasons = gpu.get("reasons")
    if reasons is None or missing:
        return check(name, False, None, [], "", _missing("%s clock event reasons" % label, missing))
    active = [r for r in reasons if r in forbidden]
    if active:
        if under_load:
            return check(
                name, False, active, [], "", "%s throttled under load: %s" % (label, ", ".join(active))
            )
        return check(name, False, active, [], "", "%s clocks held back by %s" % (label, ", ".join(active)))
    if under_load:
        return check(
            name,
            True,
            [],
            [],
            "",
            "%s: no forbidden clock event reason under load%s" % (label, _allowed(gpu)),
        )
    return check(name, True, [], [], "", "%s: no forbidden clock event reason active" % label)


# An allowed reason is still a fact worth saying (a GPU on its power limit all through a burn-in runs
# its SM clocks well below their maximum): how the burn-in words the ones it saw.
_ALLOWED_WORDS = {
    "sw_power_cap": "power-capped at its power limit",
    "sync_boost": "clocks synced with its peers",
}


def _allowed(gpu):
    """'; power-capped at its power limit in 44 of 45 samples, drawing up to 699 W (allowed)', or ''."""
    counts, samples = gpu.get("reason_samples") or {}, gpu.get("samples")
    said = []
    for reason, n in counts.items():
        if reason == "gpu_idle" or not n:
            continue
        words = _ALLOWED_WORDS.get(reason, reason)
        said.append("%s in %d of %s samples" % (words, n, samples) if samples else words)
    if not said:
        return "; no clock event reason held its clocks back"
    power = gpu.get("max_power_w")
    drawing = ", drawing up to %g W" % power if power is not None and "sw_power_cap" in counts else ""
    return "; %s%s (allowed)" % ("; ".join(said), drawing)


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


# A connector's readings judged against a limit, in report order: (judge, limit option, check
# reading name, coolant_facts field, what the message calls it, unit).
_CONNECTOR_READINGS = (
    (_min_check, "min_flow_lpm", "flow_lpm", "flow_lpm", "flow", "L/min"),
    (_max_check, "max_supply_c", "supply_temp_c", "supply_c", "supply temperature", "C"),
    (_max_check, "max_delta_c", "delta_temp_c", "delta_c", "supply/return difference", "K"),
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
        for judge, limit, reading, field, label, unit in _CONNECTOR_READINGS:
            if limits.get(limit) is not None:
                checks.append(
                    judge(
                        "coolant.%s[%s]" % (reading, key),
                        "%s %s" % (what, label),
                        _number(conn.get(field)),
                        limits[limit],
                        unit,
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


def evaluate(gpus, coolant, limits=None, require_coolant=True, override_reason=None, read_error=None):
    """Returns ``{verdict, checks, failed_checks, override}``; ``read_error``: why no GPU was read.

    ``limits`` overrides DEFAULT_LIMITS key by key. ``failed_checks`` is the names of the failed
    checks. ``override`` is ``{reason, failed_checks}`` when a non-blank override_reason was given,
    else None; the checks are listed either way.
    """
    merged = dict(DEFAULT_LIMITS)
    merged.update(limits or {})
    checks = gpu_checks(gpus, merged, read_error=read_error) + coolant_checks(
        coolant, merged, require_coolant
    )
    failed = [c["name"] for c in checks if not c["ok"]]
    reason = (override_reason or "").strip()
    return {
        "verdict": verdict(checks, reason),
        "checks": checks,
        "failed_checks": failed,
        "override": {"reason": reason, "failed_checks": failed} if reason else None,
    }
