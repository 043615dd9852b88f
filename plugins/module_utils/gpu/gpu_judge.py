# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's GPUs must be, compared with what they are: power limits, persistence, pinning.

Pure functions over the data the nvidia_smi parsers return; the gpu_power and gpu_pinning
modules run the commands and write the files. Runs on the managed node (Python 3.11, stdlib).
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.node.plugins.module_utils.core import results

UUID = re.compile(r"^GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PlanError(ValueError):
    """The desired state cannot be reached on this node; the message says why and what to do.

    ``checks``: the failed readings behind it (a GPU missing from its NVLink domain), for the report.
    ``input_error``: the inputs ask for what this node cannot have (an NVLink domain it lacks, two
    instances on one GPU): a configuration error, refused before anything changes.
    """

    def __init__(self, message, checks=(), input_error=False):
        super().__init__(message)
        self.checks = list(checks)
        self.input_error = input_error


# What lowers a GPU's enforced power limit below the one software asked for: a limiter outside the
# driver. provision's hint and watch's verdict name it the same way.
POWER_BUDGET_CAUSE = "the rack's power budget (a PDU protection or power brake)"


def watts_arg(value):
    """1400.0 -> '1400', 1312.5 -> '1312.5': the argument to nvidia-smi -pl."""
    return ("%.2f" % float(value)).rstrip("0").rstrip(".")


def same_watts(a, b):
    """nvidia-smi prints watts with two decimals; compare at that precision."""
    return a is not None and b is not None and round(float(a), 2) == round(float(b), 2)


def power_check(gpu, window_s=None, after=None):
    """``gpu_power.enforced_limit_w[<uuid>]``, the one judge: the limit the GPU enforces against the
    one it was asked for (``requested_limit_w``: power.limit, or the target gpu_power just set), and
    the likely cause when it is lower.

    With ``window_s`` the reading is a window's (watch, burn-in: the lowest limit enforced over its
    samples, ``capped_samples`` of ``samples`` below the request); without, one reading (gpufleet
    facts; gpu_power's verify, ``after`` naming the command that set the limit), which must enforce
    the requested limit exactly (nvidia-smi's two decimals)."""
    name = "gpu_power.enforced_limit_w[%s]" % gpu["uuid"]
    enforced, requested = gpu["enforced_limit_w"], gpu["requested_limit_w"]
    if enforced is None or requested is None:
        why = "%s power limits not reported (fail closed)" % gpu["uuid"]
        return results.check(name, False, enforced, requested, "W", why)
    if window_s is None:
        if same_watts(enforced, requested):
            return results.check(
                name,
                True,
                enforced,
                requested,
                "W",
                "%s enforces its requested %s W" % (gpu["uuid"], watts_arg(requested)),
            )
        below = float(enforced) < float(requested)
        cause = " (%s may be capping it; check the rack's PDU before raising limits)" % POWER_BUDGET_CAUSE
        if after:
            why = "%s enforces %s W after %s: the limit did not take%s" % (
                gpu["uuid"],
                enforced,
                after,
                cause if below else "",
            )
        else:
            why = "%s enforces %s W, %s the requested %s W%s" % (
                gpu["uuid"],
                enforced,
                "below" if below else "above",
                requested,
                cause if below else "",
            )
        return results.check(name, False, enforced, requested, "W", why)
    if not gpu["capped_samples"]:
        why = "%s enforces its requested %s W" % (gpu["uuid"], watts_arg(requested))
        if gpu.get("sample_gap_s") is not None:
            # the watch's dense samples: a cap lasting longer than the gap would have fallen on one
            why += " in all %d samples over %g s, at most %g s apart" % (
                gpu["samples"],
                window_s,
                gpu["sample_gap_s"],
            )
        return results.check(name, True, enforced, requested, "W", why)
    capped_s = (gpu["reason_seconds"] or {}).get("sw_power_cap")
    during = "" if not capped_s else "; power-capped %g s of %g s" % (capped_s, window_s)
    return results.check(
        name,
        False,
        enforced,
        requested,
        "W",
        "%s enforces %s W, below the requested %s W, in %d of %d samples over %g s%s: %s is capping it "
        "(check the rack's PDU before raising limits)"
        % (
            gpu["uuid"],
            watts_arg(enforced),
            watts_arg(requested),
            gpu["capped_samples"],
            gpu["samples"],
            window_s,
            during,
            POWER_BUDGET_CAUSE,
        ),
    )


def persistence_check(uuid, mode, after=None):
    """``gpu_power.persistence_mode[<uuid>]``: the GPU is in persistence mode (``after``: what put it
    there, named when it did not take)."""
    on = mode is True
    if on:
        message = "%s is in persistence mode" % uuid
    else:
        message = "%s is not in persistence mode%s" % (uuid, " after %s" % after if after else "")
    return results.check("gpu_power.persistence_mode[%s]" % uuid, on, mode, True, "", message)


# ---------------------------------------------------------------- power


def power_plan(gpus, limit_w, limits):
    """Per GPU, the limit it must enforce and whether it does.

    gpus: parse_query_xml(...)['gpus']; limit_w: watts for every GPU, or None for each GPU's
    default limit; limits: {uuid: watts} overrides. Returns ``(plan, unknown)``: plan is one
    ``{uuid, pci_bus_id, target_w, enforced_w, requested_w, min_w, max_w, change}`` per GPU
    in nvidia-smi order, unknown the override UUIDs this node does not have. Raises
    PlanError, naming every GPU, target and allowed range, when a target is outside
    [min_limit_w, max_limit_w] or the GPU does not report its range.
    """
    limits = dict(limits or {})
    plan, errors = [], []
    for gpu in gpus:
        power = gpu.get("power") or {}
        uuid = gpu["uuid"]
        target = limits.get(uuid, limit_w if limit_w is not None else power.get("default_limit_w"))
        low, high = power.get("min_limit_w"), power.get("max_limit_w")
        if target is None or low is None or high is None:
            errors.append(
                "%s does not report its default or min/max power limit, so no limit can be validated" % uuid
            )
            continue
        try:
            target = float(target)
        except (TypeError, ValueError):
            errors.append("%s: target %r is not a number of watts" % (uuid, target))
            continue
        if not float(low) <= target <= float(high):
            errors.append(
                "%s: target %s W is outside its allowed range %s-%s W"
                % (uuid, watts_arg(target), watts_arg(low), watts_arg(high))
            )
            continue
        enforced, requested = power.get("enforced_limit_w"), power.get("requested_limit_w")
        plan.append(
            {
                "uuid": uuid,
                "pci_bus_id": gpu.get("pci_bus_id"),
                "target_w": target,
                "enforced_w": enforced,
                "requested_w": requested,
                "min_w": float(low),
                "max_w": float(high),
                "change": not (same_watts(enforced, target) and same_watts(requested, target)),
            }
        )
    if errors:
        raise PlanError("; ".join(errors))
    present = set(g["uuid"] for g in gpus)
    return plan, sorted(u for u in limits if u not in present)


def power_changes(plan):
    """The report's changes for the limits: the enforced limit, or the requested one when only it differs."""
    changes = []
    for entry in plan:
        if not entry["change"]:
            continue
        if not same_watts(entry["enforced_w"], entry["target_w"]):
            setting, before = "gpu_power.enforced_limit_w[%s]" % entry["uuid"], entry["enforced_w"]
        else:
            setting, before = "gpu_power.requested_limit_w[%s]" % entry["uuid"], entry["requested_w"]
        changes.append(results.change(setting, before, entry["target_w"]))
    return changes


def capped(plan):
    """GPUs whose enforced limit is below what software asked for: a limiter outside the driver."""
    return [
        e
        for e in plan
        if e["enforced_w"] is not None
        and e["requested_w"] is not None
        and round(float(e["enforced_w"]), 2) < round(float(e["requested_w"]), 2)
    ]


# ---------------------------------------------------------------- persistence


def parse_systemctl_show(text):
    """`systemctl show UNIT` Key=Value lines -> dict (the first '=' splits)."""
    result = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            result[key.strip()] = value.strip()
    return result


def daemon_state(show):
    """``(installed, enabled, active)`` of a unit from its parsed `systemctl show`."""
    installed = show.get("LoadState") == "loaded"
    enabled = show.get("UnitFileState") in ("enabled", "enabled-runtime", "static", "alias", "indirect")
    return installed, installed and enabled, installed and show.get("ActiveState") == "active"


# ---------------------------------------------------------------- pinning


def _bus_key(bus_id):
    parts = re.split(r"[:.]", str(bus_id).lower())
    try:
        return tuple(int(p, 16) for p in parts)
    except ValueError:
        return (str(bus_id).lower(),)


def pinning_plan(gpus, domains, instances, gpu_count):
    """Which GPUs each instance gets.

    gpus: ``[{uuid, pci_bus_id}]``; domains: NVLink domains as lists of UUIDs (numbered as
    nvidia-smi lists them: domain 0 holds GPU 0); instances: ``[{name, nvlink_domain | gpus,
    gpu_count}]``; gpu_count: GPUs an instance needs unless it sets its own. Returns
    ``{name: {gpus: [uuid in PCI bus order], nvlink_domain}}`` in input order. Raises
    PlanError before anything is written when a domain is short of GPUs, a GPU is not on the
    node, or two instances claim the same GPU.
    """
    bus_of = dict((g["uuid"], g["pci_bus_id"]) for g in gpus)
    plan, owner, errors, checks = {}, {}, [], []
    # the errors no repair of the node fixes (the inputs name a domain or a GPU twice): configuration
    misconfigured = 0
    for instance in instances:
        name = instance["name"]
        needed = instance.get("gpu_count") or gpu_count
        if instance.get("gpus"):
            wanted = list(instance["gpus"])
            absent = [u for u in wanted if u not in bus_of]
            if absent:
                errors.append(
                    "instance %s: GPU %s is not on this node (fell off the bus, or replaced?)"
                    % (name, ", ".join(absent))
                )
                checks += [
                    results.check(
                        "gpu_pinning.gpu_present[%s]" % uuid, False, "absent", "present", "", errors[-1]
                    )
                    for uuid in absent
                ]
                continue
            domain = None
        else:
            domain = instance.get("nvlink_domain")
            if domain is None or not 0 <= domain < len(domains):
                errors.append(
                    "instance %s: NVLink domain %s does not exist; this node has domains 0-%d"
                    % (name, domain, len(domains) - 1)
                )
                misconfigured += 1
                continue
            members = sorted(domains[domain], key=lambda u: _bus_key(bus_of.get(u, "")))
            if len(members) < needed:
                errors.append(
                    "instance %s needs %d GPUs on NVLink domain %d, which has %d (%d missing); a GPU may "
                    "have fallen off the bus (nvidia-smi -L, Xid 79 in dmesg)"
                    % (name, needed, domain, len(members), needed - len(members))
                )
                checks.append(
                    results.check(
                        "gpu_pinning.nvlink_domain_gpus[%d]" % domain,
                        False,
                        len(members),
                        needed,
                        "GPUs",
                        errors[-1],
                    )
                )
                continue
            wanted = members[:needed]
        for uuid in wanted:
            if uuid in owner:
                errors.append("instances %s and %s both claim %s" % (owner[uuid], name, uuid))
                misconfigured += 1
            owner[uuid] = name
        plan[name] = {"gpus": sorted(wanted, key=lambda u: _bus_key(bus_of[u])), "nvlink_domain": domain}
    if errors:
        raise PlanError("; ".join(errors) + ". Nothing was written.", checks, misconfigured == len(errors))
    return plan


def instance_env(uuids, topo_file):
    """The variables an instance's unit reads (EnvironmentFile=). Never NCCL_GRAPH_FILE."""
    return {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(uuids),
        "NCCL_TOPO_FILE": topo_file,
    }


def env_text(name, nvlink_domain, variables):
    """An EnvironmentFile: a header that says who writes it, then KEY=value lines in a fixed order."""
    where = "NVLink domain %d" % nvlink_domain if nvlink_domain is not None else "GPUs named by UUID"
    lines = [
        "# Managed by gpufleet (gpufleet.node.gpu_pinning); changes here are overwritten.",
        "# Instance %s: %s; GPUs by UUID, in PCI bus order." % (name, where),
    ]
    lines.extend("%s=%s" % (key, variables[key]) for key in sorted(variables))
    return "\n".join(lines) + "\n"


def parse_env(text):
    """KEY=value lines of an EnvironmentFile (comments and blanks skipped, quotes stripped)."""
    result = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            result[key.strip()] = value.strip().strip('"').strip("'")
    return result


def instance_change(name, entry, topo_file, current):
    """An instance's EnvironmentFile: ``(text, variables, change)``, change None when ``current`` matches.

    entry: the instance's pinning_plan entry; current: the file's content (None: no file).
    """
    variables = instance_env(entry["gpus"], topo_file)
    text = env_text(name, entry["nvlink_domain"], variables)
    if current == text:
        return text, variables, None
    before = None if current is None else parse_env(current)
    return text, variables, results.change("gpu_pinning.instance[%s]" % name, before, variables)
