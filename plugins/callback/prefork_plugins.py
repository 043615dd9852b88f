# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load Ansible's Jinja filter and test plugins (and the connections' settings) once, in the controller,
before it forks.

ansible-core forks a worker process for every task on every host. The first filter or test a
worker evaluates (``default``, ``bool``, ``is defined``...) makes it import and wrap every
filter and test plugin Ansible has, and the worker exits with them: a gate repeats that for each of
its ~190 tasks on each node. Loaded once in the parent, every worker inherits them. In a py-spy
profile of a gate on four simulated nodes it was ~22 of the workers' 90 CPU-s (of 217 sampled);
bench/README.md has the gate's controller CPU per node with it. The ssh and local connection
plugins' settings, read from their documentation, were likewise parsed again by every worker (~5 % of
the workers' samples on a two-node gate).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: prefork_plugins
type: aggregate
short_description: Load the Jinja filter and test plugins once, before ansible forks its workers
description:
  - Loads ansible-core's Jinja filter and test plugins in the controller's main process when a
    playbook starts, so the worker that ansible forks for each task and host inherits them instead of
    importing and wrapping all of them again (about a tenth of a gate's controller CPU). The ssh and
    local connection plugins' settings are read once there too.
  - It changes nothing a playbook does or prints. gpufleet's C(ansible.cfg) enables it.
requirements:
  - enabled in C(callbacks_enabled) (gpufleet's C(ansible.cfg) does it)
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader, filter_loader, test_loader

# One name each is enough: the first lookup of any name loads and wraps every non-collection plugin.
_WARM = ((filter_loader, "ansible.builtin.default"), (test_loader, "ansible.builtin.defined"))
# The connections gpufleet's inventories use: the first lookup parses the plugin's DOCUMENTATION into
# its configuration definitions, which every worker did again for every task (ssh's is long).
_CONNECTIONS = ("ansible.builtin.ssh", "ansible.builtin.local")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.node.prefork_plugins"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        for loader, name in _WARM:
            loader.get(name)
        for name in _CONNECTIONS:
            connection_loader.get(name, class_only=True)
