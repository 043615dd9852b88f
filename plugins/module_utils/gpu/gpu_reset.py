# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.gpu_reset: every GPU of a drained node reset with ``nvidia-smi -r``, under the real tool's
rules, and each GPU read again afterwards.

The rules (nvidia-smi(1), "-r, --gpu-reset"; NVIDIA/NVSentinel#1690 and #1692):
- no application may use a GPU being reset: the compute processes are read first
  (nvidia_smi.compute_apps_query) and a GPU in use refuses the whole reset, naming the GPU and the
  processes, before anything changes;
- on NVSwitch systems the GPUs of an NVLink domain are reset together, and a gpufleet node is one such
  domain: every GPU the driver lists is reset (``-r`` without ``-i``, which nvidia-smi(1) says resets
  all GPUs);
- persistence mode holds the device (nvidia-persistenced's attachment counts as a client, and the driver
  refuses the reset with exit 255, "In use by another client"): it is turned off first (``-pm 0``) on
  every GPU that has it, and left off. The gate's gpu_power role turns it on again when it re-asserts
  the node's settings, before the GPUs are judged.

A refusal of either command fails the module with the tool's words, naming each GPU the tool named.
After a reset every GPU is read again: its result says whether the tool reset it and whether it is
there. Check mode reads the GPUs and the processes and says what it would do; it changes nothing.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
import time

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi

ARGUMENT_SPEC = dict(
    nvidia_smi_path=dict(type="path"),
)

STEP = "gpu_reset"
AFTERWARDS = (
    "persistence mode is left off on the GPUs it was turned off on: the gate's gpu_power role turns it on "
    "again when it re-asserts the node's settings"
)
# "  GPU 00000000:1B:00.0: In use by another client" (the refusal), "GPU 00000000:1B:00.0 was successfully
# reset." (the success line): sources in sim/src/gpufleet_sim/gpu_reset.py.
_REFUSED = re.compile(r"^\s*GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*(.+?)\s*$")
_RESET = re.compile(
    r"^\s*GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]) was successfully reset"
)


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def bus_key(bus_id):
    """A PCI bus id compared as nvidia-smi compares it: 4- and 8-digit domains alike, any case."""
    domain, colon, rest = (bus_id or "").strip().lower().partition(":")
    try:
        return "%x%s%s" % (int(domain, 16), colon, rest)
    except ValueError:
        return (bus_id or "").strip().lower()


def refused_gpus(text):
    """``{bus id: the tool's words}`` for each GPU a refusal names ("  GPU <bus>: In use by another
    client")."""
    found = {}
    for line in (text or "").splitlines():
        match = _REFUSED.match(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def reset_gpus(text):
    """The bus ids the tool says it reset ("GPU <bus> was successfully reset.")."""
    return [m.group(1) for m in (_RESET.match(line) for line in (text or "").splitlines()) if m]


def _gpus(module, smi, **extra):
    """``[{index, uuid, pci_bus_id, persistence_mode}]`` of every GPU the driver lists (one CSV query)."""
    cmd = nvidia_smi.power_query(smi)
    rows = tool_runner.parsed(
        module, cmd, tool_runner.read(module, cmd), nvidia_smi.parse_power_sample, **extra
    )
    return [
        {
            "index": index,
            "uuid": row["uuid"],
            "pci_bus_id": row["pci_bus_id"],
            "persistence_mode": row["persistence_mode"],
        }
        for index, row in enumerate(rows)
    ]


def _apps(module, smi, **extra):
    # with its header: an idle node prints the header alone, so an empty output is never "no process"
    cmd = nvidia_smi.compute_apps_query(smi)
    return tool_runner.parsed(
        module, cmd, tool_runner.read(module, cmd), nvidia_smi.parse_compute_apps, **extra
    )


def _in_use(gpus, apps):
    """``{bus id: [process text]}`` of the GPUs a compute process uses."""
    by_bus = {bus_key(g["pci_bus_id"]): g["pci_bus_id"] for g in gpus}
    by_uuid = {g["uuid"]: g["pci_bus_id"] for g in gpus}
    used = {}
    for app in apps:
        bus = by_uuid.get(app["uuid"]) or by_bus.get(bus_key(app["pci_bus_id"])) or app["pci_bus_id"]
        what = "pid %s (%s, %s MiB)" % (
            app["pid"] if app["pid"] is not None else "unknown",
            app["name"] or "name unknown",
            app["used_memory_mib"] if app["used_memory_mib"] is not None else "?",
        )
        used.setdefault(bus, []).append(what)
    return used


def _fail(module, msg, result, cmd=None, ran=None):
    result = dict(result, ended=now())
    if cmd is not None:
        rc, out, err = ran
        result.update(cmd=cmd, rc=rc, stdout=tool_runner.kept(out), stderr=tool_runner.kept(err))
    module.fail_json(msg=msg, **result)


def _tool_refused(cmd, ran, what):
    """'<what>: nvidia-smi -r refused (rc=255): GPU <bus>: <words>; ... <the tool's last line>'."""
    rc, out, err = ran
    named = refused_gpus(out) or refused_gpus(err)
    said = "; ".join("GPU %s: %s" % (bus, words) for bus, words in named.items())
    lines = [line.strip() for line in ("%s\n%s" % (out or "", err or "")).splitlines() if line.strip()]
    tail = lines[-1] if lines else "no output"
    if not said:
        said = tool_runner.first_line(out, err)
    elif tail not in said:
        said = "%s. %s" % (said, tail)
    return "%s: %s refused (rc=%d): %s" % (what, " ".join(cmd), rc, said)


def run(module):
    """The module's whole run: returns its result or fails it (module.fail_json)."""
    started = now()
    smi = tool_runner.nvidia_smi(module, module.params["nvidia_smi_path"])
    base = dict(step=STEP, started=started, changed=False, nvidia_smi=smi, persistence_off=[], gpus=[])
    before = _gpus(module, smi, **base)
    base["gpus_before"] = before
    used = _in_use(before, _apps(module, smi, **base))
    if used:
        named = "; ".join("GPU %s: %s" % (bus, ", ".join(procs)) for bus, procs in sorted(used.items()))
        _fail(
            module,
            "GPU reset refused, nothing reset: %d GPU(s) in use by a process (%s). nvidia-smi -r needs every "
            "GPU free: stop what runs on them (the instances are stopped before a reset) and run it again"
            % (len(used), named),
            dict(base, in_use=used),
        )
    persistent = [g for g in before if g["persistence_mode"] is not False]
    base["persistence_off"] = [g["pci_bus_id"] for g in persistent]
    if module.check_mode:
        base.update(
            changed=True,
            ended=now(),
            gpus=[dict(g, reset=False, present=True, message="would be reset") for g in before],
            msg="would turn persistence mode off on %d GPU(s) and reset all %d GPU(s) (nvidia-smi -r); %s"
            % (len(persistent), len(before), AFTERWARDS),
        )
        return base
    if persistent:
        cmd = [smi, "-pm", "0", "-i", ",".join(str(g["index"]) for g in persistent)]
        ran = tool_runner.run(module, cmd, check=False)
        base["changed"] = True
        if ran[0] != 0:
            base["persistence_off"] = []
            _fail(
                module,
                _tool_refused(cmd, ran, "persistence mode could not be turned off, nothing reset"),
                base,
                cmd,
                ran,
            )
    cmd = [smi, "-r"]
    ran = tool_runner.run(module, cmd, check=False)
    if ran[0] != 0:
        refused = refused_gpus(ran[1]) or refused_gpus(ran[2])
        base["gpus"] = [
            dict(
                g,
                reset=False,
                present=True,
                message=refused.get(g["pci_bus_id"], "not reset: the tool refused"),
            )
            for g in before
        ]
        _fail(module, _tool_refused(cmd, ran, "GPU reset refused, nothing reset"), base, cmd, ran)
    base["changed"] = True
    said = {bus_key(bus) for bus in reset_gpus(ran[1])}
    after = {bus_key(g["pci_bus_id"]): g for g in _gpus(module, smi, **base)}
    results, failed = [], []
    for gpu in before:
        key = bus_key(gpu["pci_bus_id"])
        done, present = key in said, key in after
        if done and present:
            message = "reset; persistence mode %s" % (
                "off" if after[key]["persistence_mode"] is False else "on"
            )
        elif present:
            message = "the tool did not say it reset this GPU"
        else:
            message = (
                "not listed by the driver after the reset (fallen off the bus?): a reboot may bring it back"
            )
        if not (done and present):
            failed.append("GPU %s: %s" % (gpu["pci_bus_id"], message))
        results.append(dict(gpu, reset=done, present=present, message=message))
    base.update(gpus=results, cmd=cmd, stdout=tool_runner.kept(ran[1]))
    if failed:
        _fail(module, "GPU reset incomplete: %s" % "; ".join(failed), base)
    base.update(
        ended=now(),
        msg="reset all %d GPU(s) (nvidia-smi -r)%s; %s"
        % (
            len(results),
            ", persistence mode turned off on %d first" % len(persistent) if persistent else "",
            AFTERWARDS,
        ),
    )
    return base
