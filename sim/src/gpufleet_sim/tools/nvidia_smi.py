"""The fake `nvidia-smi`: reads and changes a simulated node's GPUs through its state.json.

Supported: -L; -q [-x] [-d TYPES]; --query-gpu=F --format=csv[,noheader][,nounits]; -pm 0|1;
--query-compute-apps=F --format=csv[,noheader][,nounits] (nvsmi_apps);
-pl WATTS; topo -m; nvlink -s|--status|-e|--errorcounters [-i ID] [-l LINK] (nvsmi_nvlink); --version;
-r|--gpu-reset (sim/gpu_reset.py); -i ID[,ID] with all but topo/--version. Everything goes to stdout,
errors included, as the real tool does (sources of each error text are noted where it is printed).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet_sim import gpu_reset
from gpufleet_sim import state as sim_state
from gpufleet_sim.tools import nvsmi_apps, nvsmi_csv, nvsmi_nvlink, nvsmi_text, nvsmi_topo, nvsmi_xml
from gpufleet_sim.tools import nvsmi_common as c

HELP_HINT = "Please run 'nvidia-smi -h' for help."

# option spellings -> canonical key; the value-taking ones accept "-i 0", "--id=0" and "--id 0"
_FLAGS = {
    "-q": "query",
    "--query": "query",
    "-x": "xml",
    "--xml-format": "xml",
    "-L": "list",
    "--list-gpus": "list",
    "--version": "version",
    "-r": "reset",
    "--gpu-reset": "reset",
}
_VALUED = {
    "-i": "id",
    "--id": "id",
    "-d": "display",
    "--display": "display",
    "--query-gpu": "query_gpu",
    "--query-compute-apps": "query_apps",
    "--format": "format",
    "-pm": "pm",
    "--persistence-mode": "pm",
    "-pl": "pl",
    "--power-limit": "pl",
}
_ACTIONS = ("query", "query_gpu", "query_apps", "list", "pm", "pl", "version", "reset")


@dataclass
class Args:
    flags: set[str] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)


def invalid_combination() -> c.ToolError:
    # Wording: NVIDIA DCGM's test helpers match it on stdout; Open MPI users list quotes it verbatim.
    return c.ToolError(f"Invalid combination of input arguments. {HELP_HINT}\n", c.RC_INVALID_ARGUMENT)


def parse(argv: list[str]) -> Args:
    # "ERROR: Option -format=csv is not recognized. ..." then an empty line: captured on a 4090 host
    # (stdout, it survived 2>/dev/null); "... is missing its value." has the same shape.
    args = Args()
    pos = 0
    while pos < len(argv):
        token = argv[pos]
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if not eq and name in _FLAGS:
            args.flags.add(_FLAGS[name])
        elif name in _VALUED:
            if eq:
                value = inline
            elif pos + 1 < len(argv):
                pos += 1
                value = argv[pos]
            else:
                raise c.ToolError(
                    f"ERROR: Option {token} is missing its value. {HELP_HINT}\n\n", c.RC_INVALID_ARGUMENT
                )
            args.values[_VALUED[name]] = value
        else:
            raise c.ToolError(
                f"ERROR: Option {token} is not recognized. {HELP_HINT}\n\n", c.RC_INVALID_ARGUMENT
            )
        pos += 1
    return args


def main(argv: list[str], node_dir: Path) -> int:
    try:
        text = run(argv, node_dir)
    except c.ToolError as err:
        sys.stdout.write(err.text)
        return err.rc
    sys.stdout.write(text)
    return 0


def run(argv: list[str], node_dir: Path) -> str:
    if argv[:1] == ["topo"]:
        if argv[1:] not in (["-m"], ["--matrix"]):
            raise invalid_combination()
        state = c.load_live(node_dir)
        return nvsmi_topo.render(state, [gpu for _, gpu in c.select_gpus(state, None)])
    if argv[:1] == ["nvlink"]:
        return nvsmi_nvlink.run(argv[1:], node_dir)
    args = parse(argv)
    actions = [a for a in _ACTIONS if a in args.flags or a in args.values]
    if len(actions) != 1:
        raise invalid_combination()
    action = actions[0]
    _check_modifiers(args, action)
    if action == "pm":
        return set_persistence(node_dir, args.values["pm"], args.values.get("id"))
    if action == "pl":
        return set_power_limit(node_dir, args.values["pl"], args.values.get("id"))
    if action == "reset":
        return gpu_reset.run(node_dir, args.values.get("id"), argv)  # refusals and sources: gpu_reset.py
    state = c.load_live(node_dir)
    if action == "version":
        return version(state)
    selected = c.select_gpus(state, args.values.get("id"))
    attached = len(sim_state.present_gpus(state))
    if action == "list":
        return "".join(f"GPU {i}: {g['name']} (UUID: {g['uuid']})\n" for i, g in selected)
    if action == "query_gpu":
        header, units = _csv_format(args.values.get("format"))
        fields = nvsmi_csv.parse_fields(args.values["query_gpu"])
        return nvsmi_csv.render(state, selected, attached, fields, header, units)
    if action == "query_apps":
        header, units = _csv_format(args.values.get("format"))
        return nvsmi_apps.query(state, selected, args.values["query_apps"], header, units)
    if "xml" in args.flags:
        return nvsmi_xml.render(state, selected, attached)
    return nvsmi_text.render(state, selected, attached, _display(args.values.get("display")))


def _check_modifiers(args: Args, action: str) -> None:
    # -x and -d belong to -q (and -d "doesn't work with -x", per nvidia-smi -h); --format to --query-gpu.
    if ("xml" in args.flags or "display" in args.values) and action != "query":
        raise invalid_combination()
    if "xml" in args.flags and "display" in args.values:
        raise invalid_combination()
    if ("format" in args.values) != (action in ("query_gpu", "query_apps")):
        if action in ("query_gpu", "query_apps"):
            # Wording as mirrored by the fake-gpu project (chaunceyjiang/fake-gpu, pkg/nvidia/query).
            raise c.ToolError(f'"--format=" switch is missing. {HELP_HINT}\n', c.RC_INVALID_ARGUMENT)
        raise invalid_combination()
    if "id" in args.values and action == "version":
        raise invalid_combination()


def _csv_format(spec: str | None) -> tuple[bool, bool]:
    options = {part.strip() for part in (spec or "").split(",")}
    if "csv" not in options or not options <= {"csv", "noheader", "nounits"}:
        raise invalid_combination()
    return "noheader" not in options, "nounits" not in options


def _display(spec: str | None) -> set[str] | None:
    if spec is None:
        return None
    types = {part.strip().upper() for part in spec.split(",")}
    if not types <= set(nvsmi_text.DISPLAY):
        raise invalid_combination()
    return types


def version(state: sim_state.State) -> str:
    # Layout of `nvidia-smi --version` on the 590.48.01 capture (utku FULL capture, lines 21-24).
    driver = str(state["driver_version"])
    nvml = ".".join(driver.split(".")[:2])
    return (
        f"NVIDIA-SMI version  : {driver}\nNVML version        : {nvml}\n"
        f"DRIVER version      : {driver}\nCUDA Version        : {state['cuda_version']}\n"
    )


def set_persistence(node_dir: Path, value: str, ids: str | None) -> str:
    modes = {"0": False, "DISABLED": False, "1": True, "ENABLED": True}
    if value.upper() not in modes:
        raise invalid_combination()
    wanted = modes[value.upper()]
    word = c.enabled(wanted)
    lines = []
    with sim_state.locked(node_dir) as state:
        for _, gpu in c.select_gpus(state, ids):
            bus = gpu["pci_bus_id"]
            # Wording: "Enabled persistence mode for GPU 00000000:05:00.0." / "Persistence mode is already
            # Enabled for GPU ..." / "Disabled persistence mode ...", then "All done." (published sessions).
            if bool(gpu["persistence_mode"]) == wanted:
                lines.append(f"Persistence mode is already {word} for GPU {bus}.")
            else:
                gpu["persistence_mode"] = wanted
                lines.append(f"{word} persistence mode for GPU {bus}.")
    return "\n".join([*lines, "All done."]) + "\n"


def set_power_limit(node_dir: Path, value: str, ids: str | None) -> str:
    try:
        limit = float(value)
    except ValueError:
        raise invalid_combination() from None
    lines = []
    with sim_state.locked(node_dir) as state:
        selected = c.select_gpus(state, ids)
        for _, gpu in selected:
            power = gpu["power"]
            low, high = float(power["min_limit_w"]), float(power["max_limit_w"])
            if not low <= limit <= high:
                # Wording: stackhpc/ansible-slurm-appliance#975 (595 driver, H100 class), and others.
                raise c.ToolError(
                    f"Provided power limit {limit:.2f} W is not a valid power limit which should be between "
                    f"{low:.2f} W and {high:.2f} W for GPU {gpu['pci_bus_id']}\n"
                    "Terminating early due to previous errors.\n",
                    c.RC_INVALID_ARGUMENT,
                )
        for _, gpu in selected:
            power = gpu["power"]
            # "from" is the limit in force before (a PDU-capped 1100 W, not the 1400 W request).
            before = float(power["enforced_limit_w"])
            power["requested_limit_w"] = limit
            power["enforced_limit_w"] = limit
            lines.append(
                f"Power limit for GPU {gpu['pci_bus_id']} was set to {limit:.2f} W from {before:.2f} W."
            )
    return "\n".join([*lines, "All done."]) + "\n"
