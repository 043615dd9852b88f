# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The BMC connection options, shared by the modules that talk Redfish to a node's BMC (coolant_facts,
bmc_reset); the password is in the account fragment."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  baseuri:
    description:
      - The BMC, as C(host), C(host:port) or C(https://host[:port]). Without a scheme C(https) is used.
      - An C(http://) address is refused unless O(insecure_http_reason) is given.
    type: str
    required: true
    aliases: [address]
  insecure_http_reason:
    description:
      - Why this BMC may be read over plain C(http://) (a ticket, the BMC firmware that cannot do TLS, the
        isolated network). The password then crosses the network in clear text; the reason is reported as
        a warning and in C(hints). Blank or unset refuses C(http://). Ignored for C(https).
    type: str
  username:
    description:
      - BMC account. Reading (M(gpufleet.node.coolant_facts)) needs read-only rights; a reset
        (M(gpufleet.node.bmc_reset)) needs the C(ConfigureComponents) privilege, the Operator role.
    type: str
    required: true
  auth:
    description:
      - V(session) logs in with a Redfish session (POST to the session collection, C(X-Auth-Token)) and
        deletes the session when done; V(basic) sends HTTP basic auth with every request.
    type: str
    choices: [session, basic]
    default: session
  validate_certs:
    description:
      - Verify the BMC's TLS certificate. Turn off only in a lab; point O(ca_path) at the BMCs' CA instead.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the CA that signed the BMC certificates, used in addition to the system's.
      - It must exist on the controller, be readable and hold at least one PEM certificate; otherwise the
        module fails at once naming the file (no request is made).
    type: path
  timeout:
    description: Seconds to wait for each HTTP request, 1 to 600.
    type: int
    default: 10
  retries:
    description:
      - How often to retry a request that failed to connect, timed out, or got HTTP 502/503/504, 0 to 10.
        HTTP 401 and 404 and local configuration errors are never retried.
    type: int
    default: 3
  retry_delay:
    description:
      - Seconds before the first retry, 0 to 60; each further retry waits twice as long. A C(Retry-After)
        header from the BMC (up to 30 s) takes precedence.
    type: float
    default: 1.0
  use_proxy:
    description:
      - Use the controller's C(https_proxy)/C(http_proxy) to reach the BMC.
      - Off by default, as management networks are rarely behind a proxy.
    type: bool
    default: false
"""
