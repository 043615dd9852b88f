# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each GPU's own slowdown temperature, which the thermal limits can be relative to (issue 38 item 5).

The GPU temperature at which the GPU's hardware halves its clocks (HW thermal slowdown) is the GPU's
own: nvidia-smi -q's Temperature section prints it as ``GPU Slowdown Temp`` (an absolute temperature:
older drivers, the real H800 and A100 captures) or, with T.Limit (driver R525 on), as ``GPU Slowdown
T.Limit Temp`` on the T.Limit scale, where ``GPU T.Limit Temp`` is the margin from the current
temperature to the max operating temperature (0 on that scale): the slowdown temperature is then
current + T.Limit - slowdown T.Limit (29 + 56 - (-2) = 87 C on the real 8 x H100's first GPU).

- :data:`ARGS`: the read (``nvidia-smi -q -d TEMPERATURE``, text: one section per GPU, in index order);
- :func:`parse`: its output -> ``[{bus_id, slowdown_c, source}]`` per GPU in order (slowdown_c None
  when the GPU reports neither form);
- :func:`read`: the read through core.tool_runner, ``(gpus, error)``: never raises, a GPU whose
  slowdown temperature is unknown is judged against the profile's absolute limit;
- :func:`merge`: those temperatures into the thermal sample's readings, by GPU index.

thermal_verdict.gpu_temp_limit computes the limit from it; pure parsing here, I/O in read() only.
Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner

ARGS = ("-q", "-d", "TEMPERATURE")

_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_FIELD = re.compile(
    r"^\s+(GPU Current Temp|GPU T\.Limit Temp|GPU Slowdown Temp|GPU Slowdown T\.Limit Temp)\s*:\s*(.*?)\s*$"
)
_CELSIUS = re.compile(r"^(-?[0-9]{1,3}(?:\.[0-9]+)?) C$")


def _celsius(text):
    match = _CELSIUS.match(text)
    return float(match.group(1)) if match else None


def _slowdown(fields):
    """(slowdown_c, source) of one GPU's Temperature fields; (None, None) when neither form is there."""
    absolute = fields.get("GPU Slowdown Temp")
    if absolute is not None:
        return absolute, "GPU Slowdown Temp"
    current, tlimit, offset = (
        fields.get(k) for k in ("GPU Current Temp", "GPU T.Limit Temp", "GPU Slowdown T.Limit Temp")
    )
    if current is None or tlimit is None or offset is None:
        return None, None
    return current + tlimit - offset, "T.Limit"


def parse(text):
    """``nvidia-smi -q`` (whole, or ``-d TEMPERATURE``) -> ``[{bus_id, slowdown_c, source}]``, one per
    GPU section in the order printed; source is ``GPU Slowdown Temp`` or ``T.Limit`` (None when unknown).
    """
    gpus = []
    fields = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            fields = {}
            gpus.append((header.group(1), fields))
            continue
        match = _FIELD.match(line)
        if match and fields is not None and match.group(1) not in fields:
            value = _celsius(match.group(2))
            if value is not None:
                fields[match.group(1)] = value
    out = []
    for bus_id, found in gpus:
        slowdown_c, source = _slowdown(found)
        out.append({"bus_id": bus_id, "slowdown_c": slowdown_c, "source": source})
    return out


def read(module, smi):
    """``(gpus, error)``: parse()'s list from the node's nvidia-smi, or ``([], why)`` when it failed."""
    cmd = [smi, *ARGS]
    rc, out, err = tool_runner.read(module, cmd)
    if rc != 0:
        return [], "%s failed (rc=%d): %s" % (" ".join(cmd), rc, tool_runner.first_line(err, out))
    return parse(out), None


def merge(readings, gpus):
    """``slowdown_c`` of each GPU (read()'s list, in nvidia-smi's index order) into the thermal
    sample's readings by index; a GPU with no entry gets None. Returns the readings."""
    for reading in readings:
        index = reading.get("index")
        known = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(gpus)
        reading["slowdown_c"] = gpus[index]["slowdown_c"] if known else None
    return readings


def with_slowdowns(sample, module, smi, margin):
    """``sample`` (a thermal sampler, gpu_readings.thermal_sampler's) whose readings carry each GPU's
    ``slowdown_c``, read once now when ``margin`` (the limits' slowdown_margin_c) is set; ``sample``
    itself without a margin (nothing read). A failed read leaves every slowdown_c None: the GPUs are
    judged against the profile's absolute limit, and thermal_verdict.gpu_temp_limit says so."""
    if margin is None:
        return sample
    gpus = read(module, smi)[0]

    def sampled():
        return merge(sample(), gpus)

    return sampled
