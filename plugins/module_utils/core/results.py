# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet's results vocabulary (contract): what every module returns and every report shows.

- a **check** is ``{name, ok, value, limit, unit, message}``: one judged condition, named
  ``<role or area>.<reading>[<device>]`` (``gpu_power.enforced_limit_w[GPU-…]``,
  ``thermal.gpu_temp_c[GPU-…]``, ``rdma_link.link_state[mlx5_0]``). A condition has this one name
  in every command's report (provision, check, drift, gate, facts) and in the Prometheus file;
- a **change** is ``{setting, from, to}``: one setting that differs (check mode) or was changed;
- a **hint** is one line for the operator (a reboot to do, a switch setting to compare).

The clock event reasons that fail a GPU (HARMFUL_REASONS) are defined here once, for the idle
gate, the burn-in and the controller's facts verdicts.

Pure, stdlib only: runs on the managed node (Python 3.11) and is loaded by the controller's
``gpufleet`` command (src/gpufleet/checks.py) from this same file.
"""

from __future__ import annotations

import re

# Every clock event reason nvidia-smi names (NVML's nvmlClocksEventReasons), in its order.
CLOCK_EVENT_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "display_clocks_setting",
)

# Active clock event reasons that mean heat or power is costing throughput. gpu_idle,
# applications_clocks_setting, sync_boost, display_clocks_setting and sw_power_cap (the configured
# power limit at work) do not.
HARMFUL_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "sw_thermal_slowdown",
    "hw_power_brake_slowdown",
)


def check(name, ok, value, limit, unit, message):
    """One judged condition; ``ok`` is always a bool."""
    return {"name": name, "ok": bool(ok), "value": value, "limit": limit, "unit": unit, "message": message}


def allowed_in_window(per_minute, seconds):
    """The count a limit of ``per_minute`` events allows over a window of ``seconds``: a window under a
    minute is allowed a minute's worth, so a short window does not fail on a single event."""
    return int(per_minute * max(seconds / 60.0, 1.0))


def change(setting, before, after):
    """One setting that differs: ``{setting, from, to}``."""
    return {"setting": setting, "from": before, "to": after}


def hint(message):
    """One line for the operator: whitespace (newlines included) folded to single spaces."""
    return " ".join(str(message).split())


def failed_names(checks):
    """Names of the failed checks, in order."""
    return [c["name"] for c in checks if not c["ok"]]


# Ansible names a value's type by its internal class in argument errors
# ("<class 'ansible._internal._datatag._tags._AnsibleTaggedStr'>"): the operator reads "str".
_TAGGED_TYPE = re.compile(r"<class '(?:[\w.]*\.)?_?(?:AnsibleTagged)?(\w+?)'>")


def plain_types(message):
    """A message with Ansible's internal type names made plain (_AnsibleTaggedStr -> str)."""
    return _TAGGED_TYPE.sub(lambda m: m.group(1).lower(), message)


def task_message(res):
    """A task result's message; for a loop, the messages of the items that failed or became
    unreachable (Ansible's own is "One or more items failed" or even "All items completed").
    The report (gpufleet's events.py) and the progress lines (progress.py) both say this."""
    items = [
        r
        for r in res.get("results") or []
        # ansible-core 2.21 hands callbacks a failed item without its "failed" key, with "exception"
        if isinstance(r, dict)
        and (r.get("failed") or r.get("unreachable") or "exception" in r)
        and r.get("msg")
    ]
    if not items:
        return plain_types(str(res.get("msg", "")))
    return plain_types(
        "; ".join(
            "%s: %s" % (r.get("_ansible_item_label") or r.get("item"), r["msg"]) if "item" in r else r["msg"]
            for r in items
        )
    )
