"""The gpufleet commands: one module per command (its Command, its host judge, its run), base.py (the
Command type and what the commands share) and registry.py (every command, once)."""

from __future__ import annotations

from gpufleet.commands.base import CanceledRun, Command, CommonOptions, Run, UsageError, run_reported
from gpufleet.commands.facts import facts_host
from gpufleet.commands.gate import gate_host
from gpufleet.commands.provision import provision_host

__all__ = [
    "CanceledRun",
    "Command",
    "CommonOptions",
    "Run",
    "UsageError",
    "facts_host",
    "gate_host",
    "provision_host",
    "run_reported",
]
