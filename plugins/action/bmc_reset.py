# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.bmc_reset: a node rebooted through its BMC, from the controller's worker.

The Redfish part (GracefulRestart, ForceRestart when the node never went down within
graceful_timeout_s) is module_utils/mgmt/bmc_reset.py's Reboot; then Ansible's own
ansible.builtin.wait_for_connection runs over the node's connection (its transport test, then the ping
module until it answers, up to boot_timeout_s). So the task runs for the node itself, never delegated:
an action plugin runs on the controller, which reaches the BMC, and the node's connection is what the
wait needs. The password and the session token are masked in the result as coolant_facts masks them.
"""

from __future__ import annotations

from ansible.module_utils.common.parameters import remove_values
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import bmc_reset
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.redfish_client import RedfishError
from ansible_collections.gpufleet.node.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = bmc_reset.ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        self._vars = task_vars or {}
        return super().run(tmp, task_vars)

    # -- the node's SSH, as its connection reaches it
    def _ssh_address(self, args):
        host, port = args["ssh_host"], args["ssh_port"]
        for name, known in (("host", host), ("port", port)):
            if known:
                continue
            try:
                value = self._connection.get_option(name)
            except (KeyError, AttributeError):
                value = None
            if name == "host":
                host = value or getattr(self._play_context, "remote_addr", None)
            else:
                port = value or getattr(self._play_context, "port", None) or 22
        return host, int(port)

    def _wait_up(self, timeout):
        """ansible.builtin.wait_for_connection over the node's connection, up to ``timeout`` seconds."""
        task = self._task.copy()
        task.args = {"timeout": int(timeout), "delay": 0, "sleep": 1, "connect_timeout": 5}
        action = self._shared_loader_obj.action_loader.get(
            "ansible.builtin.wait_for_connection",
            task=task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        return action.run(task_vars=self._vars)

    def _failed(self, result, msg, **extra):
        result.update(failed=True, msg=msg, ended=bmc_reset.now_iso(), **extra)

    def work(self, args, result):
        result.update(step=bmc_reset.STEP, started=bmc_reset.now_iso(), changed=False, resets=[], requests=0)
        bad = bmc_reset.bad_settings(args)
        if self._task.delegate_to:
            bad.append(
                f"bmc_reset runs for the node itself, not delegated (delegate_to {self._task.delegate_to}): "
                "it reaches the BMC from the controller anyway and waits for the node over the node's own "
                "connection"
            )
        if bad:
            self._failed(result, "; ".join(bad), input_error=True)
            return
        host, port = self._ssh_address(args)
        try:
            client = bmc_reset.client_for(args)
        except RedfishError as exc:
            self._failed(result, str(exc), input_error=exc.kind == "config")
            return
        if self._task.check_mode:
            result.update(
                changed=True,
                ended=bmc_reset.now_iso(),
                msg=f"would send GracefulRestart through BMC {client.baseuri}, ForceRestart if the node has "
                f"not gone down {args['graceful_timeout_s']}s later, then wait up to "
                f"{args['boot_timeout_s']}s for it to answer; nothing sent",
            )
            return
        reboot = bmc_reset.Reboot(client, lambda: not bmc_reset.ssh_answers(host, port), args)
        secrets = [args["password"]]
        try:
            self._reboot(args, result, client, reboot, secrets)
        finally:
            masked = {s for s in secrets if s}
            for key in ("msg", "resets"):
                if key in result:
                    result[key] = remove_values(result[key], masked)

    def _reboot(self, args, result, client, reboot, secrets):
        try:
            with client:
                try:
                    reboot.run()
                finally:
                    if client.token:
                        secrets.append(client.token)
        except (bmc_reset.Failed, RedfishError) as exc:
            step = reboot.resets[-1]["reset_type"] if reboot.resets else "finding the host's reset action"
            self._failed(
                result,
                f"reboot stopped at {step}: {exc}",
                changed=bool(reboot.resets),
                resets=reboot.resets,
                requests=client.requests,
            )
            return
        result.update(changed=True, resets=reboot.resets, requests=client.requests, down_at=reboot.down_at)
        up = self._wait_up(args["boot_timeout_s"])
        last = reboot.resets[-1]["reset_type"]
        if up.get("failed"):
            self._failed(
                result,
                f"reboot stopped waiting for the node to answer: not back within {args['boot_timeout_s']}s "
                f"after {last} ({up.get('msg', 'no answer')})",
            )
            return
        sent = ", then ".join(
            f"{r['reset_type']} sent {r['sent']}" + (f", down {r['went_down']}" if r["went_down"] else "")
            for r in reboot.resets
        )
        result.update(
            up_at=bmc_reset.now_iso(),
            ended=bmc_reset.now_iso(),
            msg=f"rebooted through BMC {client.baseuri}: {sent}; the node answered again after "
            f"{up.get('elapsed', '?')}s",
        )
