#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: roce_health
short_description: Judge the node's RoCE ports by their counters over a window (retransmits, pauses, drops)
version_added: "0.1.0"
description:
  - Reads every RoCE port of the node (an RDMA port whose link layer is Ethernet and that has a netdev)
    twice, O(window_s) seconds apart. A reading is C(ethtool -S <netdev>), then the port's
    C(/sys/class/infiniband/<dev>/ports/<n>/hw_counters/*) files.
  - Judges how much the counters grew, per port, as C(fabric.<reading>[<dev>]) checks - retransmits
    (C(packet_seq_err), C(out_of_sequence), C(local_ack_timeout_err), C(implied_nak_seq_err),
    C(roce_adp_retrans)) per second, queue pairs that ran out of retries (C(rnr_nak_retry_err),
    C(req_transport_retries_exceeded)), the share of the window the RoCE priority was paused, PFC
    pause storm events, C(rx_discards_phy) and C(rx_out_of_buffer) per second, an ECN loop
    (C(np_ecn_marked_roce_packets), C(np_cnp_sent), C(rp_cnp_handled)) silent while pauses or retransmits
    grow, and no C(rx_prio<N>_pause) counter at all (PFC off on the host).
  - The counters only tell something while the ports carry traffic. Run it under load - during a job,
    or use the burn-in (M(gpufleet.node.burn_in) watches the same counters over its load).
  - Fails when any check fails, naming the failed checks; the checks are in the failed result too.
    A tool that fails or prints something that cannot be read fails the module naming the tool.
  - A node without RoCE ports returns no checks and a warning.
  - Changes nothing.
options:
  window_s:
    description:
      - Seconds between the two readings. Ten seconds holds enough packets at RoCE rates for the rates to
        mean something and is short next to a job.
    type: float
    default: 10
  priority:
    description: The RoCE priority, the one with PFC (the fleet's lossless profile uses 3).
    type: int
    default: 3
  thresholds:
    description:
      - Limits that replace the defaults, by name. The defaults, and why -
      - C(retransmits_per_s) (1.0) - a lossless fabric resends next to nothing; a steady stream means drops.
      - C(qp_failures) (0) - each one is a queue pair in the error state, a failed or hung job.
      - C(pause_pct) (10.0) - a port paused a tenth of the time loses that much bandwidth and spreads
        the congestion to its neighbours.
      - C(pause_storm_events) (0) - the NIC stopped sending pauses after hundreds of milliseconds of them.
      - C(rx_discards_per_s) (0.0) - drops in the port's buffers; with PFC on none should happen.
      - C(rx_out_of_buffer_per_s) (0.0) - receive rings found empty; the host is not keeping up.
      - C(unanswered_ecn_marks_per_s) (5.0) - ECN-marked packets a second with no CNP sent back, more than a
        live notification point leaves between two counter reads; a dead one leaves hundreds.
      - The physical layer's limits, judged over the burn-in's and the watch's window (not by this module) -
        C(symbol_errors_per_min) (2.0) - uncorrected symbol errors a minute (NVIDIA NVSentinel's 120 an hour);
        C(link_integrity_errors) (0) - link error recoveries and local link integrity errors;
        C(buffer_overrun_errors) (0) - excessive buffer overruns (0 is C(ibqueryerrors)' default).
    type: dict
    default: {}
extends_documentation_fragment: [gpufleet.node.attributes.read_only, gpufleet.node.attributes]
notes:
  - Needs C(ethtool) and the mlx5 drivers' counter names (C(mlx5_core), C(mlx5_ib)); C(ethtool) runs with
    C(LC_ALL=C).
  - The module sleeps O(window_s) seconds between the readings.
seealso:
  - module: gpufleet.node.burn_in
  - module: gpufleet.node.rdma_facts
  - name: mlx5 ethtool counters
    description: What each counter of C(ethtool -S) on an mlx5 port counts.
    link: https://docs.kernel.org/networking/device_drivers/ethernet/mellanox/mlx5/counters.html
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the RoCE ports over ten seconds of a running job
  gpufleet.node.roce_health:

- name: A port that also carries lossy bulk traffic may drop some
  gpufleet.node.roce_health:
    window_s: 30
    thresholds:
      rx_discards_per_s: 50
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description:
    - Per RoCE port, C(fabric.retransmits[<dev>]), C(fabric.qp_failures[<dev>]),
      C(fabric.pause_duration[<dev>]), C(fabric.pause_storm[<dev>]), C(fabric.rx_discards[<dev>]),
      C(fabric.rx_out_of_buffer[<dev>]), C(fabric.ecn_loop[<dev>]) and C(fabric.host_pfc[<dev>]), each only
      when the port has its counters.
  sample:
    - {"name": "fabric.retransmits[mlx5_3]", "ok": false, "value": 1530.2, "limit": 1.0, "unit": "1/s",
       "message": "mlx5_3 over 10s: 15302 lost packets and retransmits (packet_seq_err, out_of_sequence,
       local_ack_timeout_err, implied_nak_seq_err, roce_adp_retrans), 1530.2/s, limit 1/s"}
ports:
  description: The RoCE ports read - RDMA device, port number and netdev.
  returned: always
  type: list
  elements: dict
  sample: [{"ibdev": "mlx5_0", "port": 1, "netdev": "ens21np0"}]
window_s:
  description: Seconds between the two readings, as measured.
  returned: always
  type: float
  sample: 10.0
deltas:
  description: Per port, how much each judged counter grew in the window.
  returned: always
  type: dict
  sample: {"mlx5_0": {"out_of_sequence": 0, "np_cnp_sent": 2950, "rx_prio3_pause_duration": 188000}}
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import tool_path
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_reading import (
    ReadError,
    deltas,
    judge,
    read_ports,
    roce_ports,
    threshold_errors,
    thresholds_from,
)

# The clock and sleep this module uses (tests replace them, not the time module's).
_monotonic = time.monotonic
_sleep = time.sleep

# Longer windows belong to a monitoring system, not to a task that holds a play.
MAX_WINDOW_S = 3600


def main():
    module = AnsibleModule(
        argument_spec=dict(
            window_s=dict(type="float", default=10),
            priority=dict(type="int", default=3),
            thresholds=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not 0 < p["window_s"] <= MAX_WINDOW_S:
        module.fail_json(
            msg="window_s is %s; give 0 < window_s <= %d seconds" % (p["window_s"], MAX_WINDOW_S)
        )
    if not 0 <= p["priority"] <= 7:
        module.fail_json(
            msg="priority is %d; the RoCE priority is 0..7 (3 in the fleet's profile)" % p["priority"]
        )
    thresholds = thresholds_from(p["thresholds"])
    errors = threshold_errors(thresholds)
    if errors:
        module.fail_json(msg="thresholds: %s" % "; ".join(errors))
    result = dict(changed=False, checks=[], ports=[], window_s=None, deltas={}, changes=[])
    try:
        ports = roce_ports()
    except ReadError as exc:
        module.fail_json(msg="%s; check the RDMA devices' sysfs" % exc, **result)
    result["ports"] = ports
    if not ports:
        module.warn("no RoCE port on this node (no RDMA port with an Ethernet link layer and a netdev)")
        module.exit_json(msg="no RoCE port to judge", **result)
    ethtool = tool_path(module, "ethtool")
    try:
        before = read_ports(module.run_command, ports, ethtool)
        started = _monotonic()
        _sleep(p["window_s"])
        after = read_ports(module.run_command, ports, ethtool)
        seconds = max(_monotonic() - started, 0.001)
    except ReadError as exc:
        module.fail_json(msg="%s; run it by hand on this node to see why" % exc, **exc.details(), **result)
    result["window_s"] = round(seconds, 1)
    result["deltas"] = deltas(before, after, p["priority"])
    result["checks"] = judge(before, after, seconds, p["priority"], thresholds)
    failed = [c for c in result["checks"] if not c["ok"]]
    if failed:
        module.fail_json(
            msg="RoCE ports unhealthy: %s%s"
            % (
                "; ".join(c["message"] for c in failed[:6]),
                " (and %d more)" % (len(failed) - 6) if len(failed) > 6 else "",
            ),
            **result,
        )
    module.exit_json(
        msg="%d RoCE ports healthy over %ss: %d checks passed"
        % (len(ports), result["window_s"], len(result["checks"])),
        **result,
    )


if __name__ == "__main__":
    main()
