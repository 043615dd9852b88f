# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The coolant loops read from a node's BMC, once: gpufleet.node.coolant_facts' options and its whole
read (the options judged, the Redfish client built, the coolant tree read, the session deleted), for the
module and for its action plugin, which runs it in the controller's worker (the BMC is read from the
controller either way: it reaches the management network; the plugin saves a Python process per read).

Runs on the controller (stdlib and ansible.module_utils only, as the module's other module_utils).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.redfish_client import (
    RedfishClient,
    RedfishError,
    normalize_baseuri,
)

ARGUMENT_SPEC = dict(
    baseuri=dict(type="str", required=True, aliases=["address"]),
    username=dict(type="str", required=True),
    password=dict(type="str", required=True, no_log=True),
    auth=dict(type="str", choices=["session", "basic"], default="session"),
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
    insecure_http_reason=dict(type="str"),
    timeout=dict(type="int", default=10),
    retries=dict(type="int", default=3),
    retry_delay=dict(type="float", default=1.0),
    use_proxy=dict(type="bool", default=False),
    chassis=dict(type="list", elements="str", default=[]),
    cdus=dict(type="bool", default=True),
)


def client_for(baseuri, params):
    """The RedfishClient of the BMC at ``baseuri`` (normalized) with the BMC options of ARGUMENT_SPEC
    (RedfishError for a local configuration error, nothing sent)."""
    return RedfishClient(
        baseuri,
        params["username"],
        params["password"],
        auth=params["auth"],
        validate_certs=params["validate_certs"],
        ca_path=params["ca_path"],
        timeout=params["timeout"],
        retries=params["retries"],
        retry_delay=params["retry_delay"],
        use_proxy=params["use_proxy"],
        insecure_http_reason=params["insecure_http_reason"],
    )


def bmc_check(baseuri, exc):
    return check("coolant.bmc[%s]" % baseuri, False, exc.kind, "readings", "", str(exc))


def read(params, warn):
    """``(result, secrets)``: the module's result (``failed`` set when it fails) and the session token
    to mask wherever the result is shown (a BMC may echo it in a body). ``warn(text)`` for warnings."""
    bad = [
        "%s must be %s, got %s" % (name, allowed, params[name])
        for name, allowed, ok in (
            ("timeout", "1 to 600 s", 1 <= params["timeout"] <= 600),
            ("retries", "0 to 10", 0 <= params["retries"] <= 10),
            # written so that NaN fails too
            ("retry_delay", "0 to 60 s", 0.0 <= params["retry_delay"] <= 60.0),
        )
        if not ok
    ]
    if bad:
        return dict(failed=True, msg="; ".join(bad), checks=[], hints=[], requests=0), []
    try:
        baseuri = normalize_baseuri(params["baseuri"])
    except RedfishError as exc:
        return dict(failed=True, msg=str(exc), checks=[], hints=[], requests=0), []
    try:
        client = client_for(baseuri, params)
    except RedfishError as exc:
        # A local configuration error (plain HTTP without a reason, the CA file): nothing was sent, and
        # gpufleet refuses the node for its inputs (exit 2).
        return (
            dict(
                failed=True,
                msg=str(exc),
                checks=[bmc_check(baseuri, exc)],
                hints=[],
                requests=0,
                input_error=exc.kind == "config",
            ),
            [],
        )
    hints = [client.transport_hint] if client.transport_hint else []
    for line in hints:
        warn(line)
    report = error = None
    secrets = []
    try:
        report = client.read_coolant(chassis_ids=params["chassis"], cdus=params["cdus"])
    except RedfishError as exc:
        error = exc
    finally:
        if client.token:
            secrets.append(client.token)
        warning = client.logout()
    if warning:
        warn(warning)
    if error is not None:
        result = dict(
            failed=True,
            msg=str(error),
            checks=[bmc_check(baseuri, error)],
            hints=hints,
            requests=client.requests,
        )
        return result, secrets
    for conn in report["connectors"]:
        if conn["flow_lpm"] is None:
            warn("coolant connector %s reports no flow reading; a gate on flow will block" % conn["key"])
    result = dict(
        changed=False,
        ansible_facts={"gpufleet_coolant": report},
        checks=[],
        hints=hints,
        requests=client.requests,
    )
    return result, secrets
