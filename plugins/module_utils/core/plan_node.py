# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node as the roles' plan functions see it when nothing may be written (node_facts, drift).

Each role's module_utils file (rdma_link, rdma_qos, gpu_power, nccl_topology, gpu_pinning) reads the
node and plans through the few AnsibleModule methods it needs: ``run_command``, ``get_bin_path``,
``fail_json``, ``warn`` and ``check_mode``. The role's module hands it the AnsibleModule itself.
node_facts hands it a :class:`PlanNode`: check mode, each command run once per module run for every
role that asks (:class:`Commands`), and ``fail_json`` raising :class:`RoleFailed` so that one role's
failure leaves the other roles compared. Same code, same commands, same messages.

:func:`parallel` runs a role's per-port reads concurrently on a PlanNode (a node answers in about the
time of its slowest tool instead of the sum of ~30), in order on a module (one failure, one message).

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner

# Threads per role for its ports: a node has 8 (B300) to 16 RDMA ports; more would only queue.
_PORT_WORKERS = 8


class RoleFailed(Exception):
    """A role's plan could not be made on this node (its module would have failed with this message,
    and with these failed ``checks``)."""

    def __init__(self, msg, checks=(), input_error=False):
        super().__init__(msg)
        self.checks = list(checks)
        # the role's inputs cannot be met on this node (a limit beyond the GPU's range): configuration
        self.input_error = input_error


class Commands:
    """Each distinct command run once per module run, for every role that asks for it.

    Nothing changes the node in between, so one output serves all; a caller asking for a command
    that another thread is running waits for that run instead of starting a second one.
    """

    def __init__(self, module):
        self._module = module
        self._lock = threading.Lock()
        self._runs = {}

    def run(self, args, kwargs):
        key = (tuple(args), tuple(sorted((kwargs.get("environ_update") or {}).items())))
        with self._lock:
            future = self._runs.get(key)
            owner = future is None
            if owner:
                future = self._runs[key] = Future()
        if owner:
            try:
                future.set_result(self._run(args, kwargs))
            except BaseException as exc:  # handed to every waiter, raised in each
                future.set_exception(exc)
        return future.result()

    def _run(self, args, kwargs):
        # a plan only reads: an empty output with rc 0 is read again (tool_runner.EMPTY_RETRIES)
        return tool_runner.read_command(self._module.run_command, args, **kwargs)


class PlanNode:
    """The node for a plan that writes nothing: check mode, shared command runs, failures raised."""

    check_mode = True
    _diff = False
    concurrent = True

    def __init__(self, module, commands=None):
        self._module = module
        self._commands = commands or Commands(module)

    def run_command(self, args, **kwargs):
        return self._commands.run(args, kwargs)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        path = self._module.get_bin_path(name, required=False, opt_dirs=opt_dirs)
        if path is None and required:
            raise RoleFailed("%s is not installed on this node (not on PATH)" % name)
        return path

    def fail_json(self, msg, **kwargs):
        raise RoleFailed(msg, kwargs.get("checks") or (), bool(kwargs.get("input_error")))

    def warn(self, warning):
        self._module.warn(warning)


def parallel(node, items, work):
    """``[work(item) for item in items]``; concurrently on a PlanNode, where the first failure (in
    order) is raised. A module runs them in order, so it fails once, with the first port's message."""
    items = list(items)
    if len(items) < 2 or not getattr(node, "concurrent", False):
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), _PORT_WORKERS)) as pool:
        return list(pool.map(work, items))
