# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdicts on a vLLM instance, once: ``service.health[<name>]`` and
``service.prefix_cache_hit_rate[<name>]``, for the gate's service_check and for watch.

Pure, stdlib only: runs on the managed node (Python 3.11).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check

# Where a prefix-cache collapse with no error anywhere usually comes from.
PREFIX_CACHE_CAUSE = "a prompt template that varies the prefix - a timestamp, a session id - does this"


def health_check(label, status, text, waited_s=0, stopped_by=None):
    """``service.health[<label>]``: ``status`` is /health's HTTP status, None when it did not
    answer (``text`` then says why). ``stopped_by``: ``(unit, why)`` when the wait ended early because
    an instance's unit failed or its process exited (unit_down)."""
    ok = status == 200
    if ok:
        msg = "%s /health answers 200" % label
    elif stopped_by is not None:
        unit, why = stopped_by
        msg = "%s /health did not answer (%s); stopped waiting after %d s: %s %s (journalctl -u %s)" % (
            label,
            text if status is None else "HTTP %s" % status,
            waited_s,
            unit,
            why,
            unit,
        )
        return check("service.health[%s]" % label, False, "%s %s" % (unit, why), 200, "", msg)
    elif status is None:
        msg = "%s /health did not answer (%s)%s; check that the instance is running" % (
            label,
            text,
            " within %d s" % waited_s if waited_s else "",
        )
        msg += " (journalctl -u its unit)"
    else:
        msg = "%s /health answers %s%s" % (label, status, " after %d s" % waited_s if waited_s else "")
    return check("service.health[%s]" % label, ok, status if status is not None else text, 200, "", msg)


def prefix_cache_name(label):
    return "service.prefix_cache_hit_rate[%s]" % label


def prefix_cache_check(label, rate, floor, queries, where, unread=None, idle=False):
    """``service.prefix_cache_hit_rate[<label>]`` for a hit rate over ``queries`` tokens ``where``
    ("since the server started", "over 5 s of serving"); None rate: no query, fail closed.

    ``unread``: why there is no rate to judge (its /metrics could not be read, it exports no
    prefix-cache metric): fails closed, the message says why. ``idle``: the instance served no prompt
    ``where``, so there is no rate and nothing wrong with it: passes, not judged."""
    name = prefix_cache_name(label)
    if unread is not None:
        return check(name, False, None, floor, "ratio", "%s %s (fail closed)" % (label, unread))
    if idle:
        return check(
            name, True, None, floor, "ratio", "%s served no prompt %s; hit rate not judged" % (label, where)
        )
    if rate is None:
        msg = "%s had no prefix-cache queries %s; send traffic first (fail closed)" % (label, where)
        return check(name, False, None, floor, "ratio", msg)
    tokens = "" if queries is None else " over %d queried tokens" % queries
    ok = rate >= floor
    msg = "%s prefix-cache hit rate %.4g%s %s, %s the %s floor" % (
        label,
        rate,
        tokens,
        where,
        "at or above" if ok else "below",
        floor,
    )
    if not ok:
        msg += " (%s)" % PREFIX_CACHE_CAUSE
    return check(name, ok, round(rate, 4), floor, "ratio", msg)


def unit_properties(text):
    """``systemctl show <unit>``'s ``Key=Value`` lines as a dict (a line without ``=`` is skipped)."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in props:
            props[key] = value
    return props


def unit_down(props):
    """Why a vLLM unit will not become healthy, from its ``systemctl show`` properties: failed,
    stopped, not installed, or its process exited and systemd waits to restart it; None while it
    runs or starts."""
    active, sub = props.get("ActiveState"), props.get("SubState")
    status = props.get("ExecMainStatus")
    exited = "its process exited%s" % (" with status %s" % status if status not in (None, "", "0") else "")
    if props.get("LoadState") == "not-found":
        return "is not installed (LoadState=not-found)"
    if active == "failed":
        return "failed (Result=%s): %s" % (props.get("Result") or "unknown", exited)
    if active in ("inactive", "deactivating"):
        return "is %s (stopped): %s" % (active, exited)
    if sub == "auto-restart":
        return "is waiting to restart (SubState=auto-restart): %s" % exited
    return None
