# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node rebooted through its BMC: Redfish ``ComputerSystem.Reset`` GracefulRestart, then ForceRestart
when the node never went down within the graceful timeout; gpufleet.node.bmc_reset's options and its
whole run but the wait for the node to answer again (the action plugin runs Ansible's own
wait_for_connection over the node's connection).

"Went down" is either sign: the node's SSH no longer answers with its banner (a hung node accepts the
connection and says nothing: the same as down) or the BMC's ComputerSystem PowerState is not On.
The BMC is the same one the coolant read uses, with the same settings (roles/thermal_gate's
thermal_gate_bmc_*); the account needs Redfish's ConfigureComponents privilege (the Operator role) to
reset the host. An action is sent once, never retried (a second reset is a second reboot).

Runs on the controller (stdlib and ansible.module_utils only, as the module's other module_utils).
"""

from __future__ import annotations

import socket
import time

from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import coolant_read
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.redfish_client import (
    SERVICE_ROOT,
    RedfishError,
    normalize_baseuri,
)

# The BMC's options as coolant_facts has them (one definition), the reboot's own after them.
ARGUMENT_SPEC = dict(
    {k: v for k, v in coolant_read.ARGUMENT_SPEC.items() if k not in ("chassis", "cdus")},
    graceful_timeout_s=dict(type="int", default=300),
    boot_timeout_s=dict(type="int", default=900),
    poll_interval_s=dict(type="float", default=2.0),
    ssh_host=dict(type="str"),
    ssh_port=dict(type="int"),
)

STEP = "reboot"
GRACEFUL, FORCED = "GracefulRestart", "ForceRestart"
RESET_ACTION = "#ComputerSystem.Reset"
# After a ForceRestart, how long to look for the node going down before waiting for it to answer (a BMC
# takes a few seconds to act; a node that answers before it went down would read as rebooted).
FORCED_DOWN_S = 60.0
BANNER_WAIT_S = 5.0


def now_iso(clock=time.time):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


def ssh_answers(host, port, timeout=BANNER_WAIT_S):
    """Whether an SSH server answers at ``host``:``port`` with its banner ("SSH-...") within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            seen = b""
            deadline = time.monotonic() + timeout
            while b"\n" not in seen and len(seen) < 512 and time.monotonic() < deadline:
                chunk = conn.recv(256)
                if not chunk:
                    break
                seen += chunk
            return seen.startswith(b"SSH-")
    except (OSError, ValueError):
        return False


def bad_settings(params):
    """The options out of their ranges, one sentence each."""
    return [
        "%s must be %s, got %s" % (name, allowed, params[name])
        for name, allowed, ok in (
            ("timeout", "1 to 600 s", 1 <= params["timeout"] <= 600),
            ("retries", "0 to 10", 0 <= params["retries"] <= 10),
            ("retry_delay", "0 to 60 s", 0.0 <= params["retry_delay"] <= 60.0),
            ("graceful_timeout_s", "1 to 3600 s", 1 <= params["graceful_timeout_s"] <= 3600),
            ("boot_timeout_s", "1 to 7200 s", 1 <= params["boot_timeout_s"] <= 7200),
            ("poll_interval_s", "0.05 to 60 s", 0.05 <= params["poll_interval_s"] <= 60.0),
        )
        if not ok
    ]


def client_for(params):
    """The RedfishClient of the node's BMC (RedfishError for a local configuration error, nothing sent)."""
    return coolant_read.client_for(normalize_baseuri(params["baseuri"]), params)


class Failed(Exception):
    """The reboot stopped at a step; the message names it."""


class Reboot:
    """One node's reboot through its BMC up to the wait for it to answer again.

    ``client``: a RedfishClient (used as a context manager by the caller); ``down()``: whether the node's
    SSH is gone (ssh_answers negated); ``sleep`` and ``clock`` replaceable in tests.

    The node went down when any of these is seen after a reset was sent: its SSH, which answered before,
    no longer answers; the ComputerSystem's PowerState is not On; its LastResetTime (bmcweb's, the
    simulator's) is not what it was before. A node whose SSH did not answer before (hung) is judged by
    the BMC's two alone."""

    def __init__(self, client, down, params, sleep=time.sleep, clock=time.time):
        self.client, self.down, self.params = client, down, params
        self.sleep, self.clock = sleep, clock
        self.resets = []
        self.system = self.target = self.allowed = None
        self.ssh_before = True
        self.last_reset = None
        self.power_state = None
        self.down_at = ""

    def _find_system(self):
        root = self.client.get(SERVICE_ROOT)
        self.client.login(root)
        systems = root.get("Systems") if isinstance(root.get("Systems"), dict) else {}
        collection = systems.get("@odata.id")
        members = self.client.members(collection) if collection else []
        if len(members) != 1:
            raise Failed(
                "BMC %s lists %d computer systems (%s); gpufleet resets a node's one host and will not guess"
                % (self.client.baseuri, len(members), ", ".join(members) or "none")
            )
        self.system = members[0]
        doc = self.client.get(self.system)
        actions = doc.get("Actions") if isinstance(doc.get("Actions"), dict) else {}
        action = actions.get(RESET_ACTION)
        if not isinstance(action, dict) or not action.get("target"):
            raise Failed("BMC %s: %s has no ComputerSystem.Reset action" % (self.client.baseuri, self.system))
        self.target = action["target"]
        allowed = action.get("ResetType@Redfish.AllowableValues")
        self.allowed = list(allowed) if isinstance(allowed, list) else None
        self.last_reset = doc.get("LastResetTime")
        self.power_state = doc.get("PowerState")

    def _host_went_down(self):
        """What the BMC says: PowerState not On, or a LastResetTime after the one read before."""
        try:
            doc = self.client.get(self.system)
        except RedfishError:
            return False  # a BMC busy while its host reboots: SSH still tells
        self.power_state = doc.get("PowerState")
        changed = doc.get("LastResetTime") is not None and doc.get("LastResetTime") != self.last_reset
        return changed or self.power_state not in (None, "On")

    def _send(self, reset_type):
        if self.allowed is not None and reset_type not in self.allowed:
            raise Failed(
                "BMC %s does not offer ResetType %s for %s (it offers: %s)"
                % (self.client.baseuri, reset_type, self.system, ", ".join(self.allowed) or "none")
            )
        sent = {"reset_type": reset_type, "sent": now_iso(self.clock), "went_down": ""}
        try:
            self.client.post_action(self.target, {"ResetType": reset_type})
        except RedfishError as exc:
            message = str(exc)
            if exc.status == 403:
                message += "; resetting the host needs the ConfigureComponents privilege (the Operator role)"
            raise Failed("the BMC refused %s: %s" % (reset_type, message)) from None
        self.resets.append(sent)

    def _wait_down(self, seconds):
        """Poll until the node went down or ``seconds`` pass; whether it went down."""
        deadline = self.clock() + seconds
        while True:
            if (self.ssh_before and self.down()) or self._host_went_down():
                self.down_at = now_iso(self.clock)
                self.resets[-1]["went_down"] = self.down_at
                return True
            left = deadline - self.clock()
            if left <= 0:
                return False
            self.sleep(min(self.params["poll_interval_s"], left))

    def run(self):
        """Graceful, then forced when the node never went down. Raises Failed naming the step."""
        self._find_system()
        self.ssh_before = not self.down()
        if self.allowed is None or GRACEFUL in self.allowed:
            self._send(GRACEFUL)
            if self._wait_down(self.params["graceful_timeout_s"]):
                return
        self._send(FORCED)
        wait = min(FORCED_DOWN_S, self.params["boot_timeout_s"])
        if not self._wait_down(wait) and self.ssh_before:
            raise Failed(
                "the node still answered %ds after ForceRestart (SSH answering, the BMC's PowerState %s): "
                "the BMC accepted the reset but the host did not go down"
                % (wait, self.power_state or "unread")
            )
