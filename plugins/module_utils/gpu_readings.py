# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Running nvidia-smi from a module for the GPU readings: the binary, the C locale, the one cheap
thermal sample (the idle gate takes it once, the burn-in once a second) and the error an operator
can act on. Parsing stays in nvidia_smi (pure); this file is the I/O around it.

Runs on the managed node (Python 3.11).
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import (
    ParseError,
    parse_thermal_sample,
    thermal_query,
)

__all__ = ["ENV", "ReadError", "first_line", "nvidia_smi_bin", "thermal_sampler"]

# nvidia-smi's messages and number formats are only stable in the C locale.
ENV = {"LC_ALL": "C"}


class ReadError(Exception):
    """nvidia-smi could not be run or its output read; the message says which and why."""


def first_line(*texts):
    """The first non-blank line of the texts (stderr before stdout), or 'no output'."""
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return "no output"


def nvidia_smi_bin(module, option="nvidia_smi_path"):
    """The nvidia-smi to run: the module's ``nvidia_smi_path`` when set, else the one on PATH."""
    path = module.params.get(option)
    if path is None:
        return module.get_bin_path("nvidia-smi", required=True)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        module.fail_json(msg="%s %s is not an executable file; point it at nvidia-smi" % (option, path))
    return path


def thermal_sampler(module, smi, error=ReadError):
    """A function taking one thermal sample (nvidia_smi.parse_thermal_sample's readings).

    It raises ``error`` (ReadError, or the caller's own class) when nvidia-smi fails or prints
    something that is not the sample.
    """
    cmd = thermal_query(smi)

    def sample():
        rc, out, err = module.run_command(cmd, environ_update=ENV)
        if rc != 0:
            raise error("%s failed (rc=%d): %s" % (" ".join(cmd[:2]), rc, first_line(err, out)))
        try:
            return parse_thermal_sample(out)
        except ParseError as exc:
            raise error(str(exc)) from exc

    return sample
