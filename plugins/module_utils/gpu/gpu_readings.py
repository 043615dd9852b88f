# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running nvidia-smi from a module for the GPU readings (through core.tool_runner): the one cheap
thermal sample (the idle gate takes it once, the burn-in once a second) and the error an operator
can act on. Parsing stays in nvidia_smi (pure); this file is the I/O around it.

Runs on the managed node (Python 3.11).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    ParseError,
    parse_thermal_sample,
    parse_watch_sample,
    thermal_query,
    watch_query,
)


class ReadError(Exception):
    """nvidia-smi could not be run or its output read; the message says which and why."""


def thermal_sampler(module, smi, error=ReadError, power=False):
    """A function taking one thermal sample (nvidia_smi.parse_thermal_sample's readings; with
    ``power``, the watch sample: the same plus the requested and enforced power limits and the
    clock event reason counters, parse_watch_sample's, in one query as well).

    It raises ``error`` (ReadError, or the caller's own class) when nvidia-smi fails or prints
    something that is not the sample.
    """
    cmd = watch_query(smi) if power else thermal_query(smi)
    parse = parse_watch_sample if power else parse_thermal_sample

    def sample():
        rc, out, err = tool_runner.read(module, cmd)
        if rc != 0:
            raise error("%s failed (rc=%d): %s" % (" ".join(cmd[:2]), rc, tool_runner.first_line(err, out)))
        try:
            return parse(out)
        except ParseError as exc:
            raise error(str(exc)) from exc

    return sample
