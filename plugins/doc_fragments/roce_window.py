# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roce_* options of the modules that read the node's RoCE ports: DOCUMENTATION, roce_ports, for
those that read them around a load they make (the burn-in, the NCCL all-reduce; they extend JUDGE
too); JUDGE, how the ports are judged, also for watch. module_utils.rdma.roce_reading's
WINDOW_OPTIONS and JUDGE_OPTIONS."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  roce_ports:
    description:
      - Also watch the node's RoCE ports (RDMA ports with an Ethernet link layer and a netdev) - read their
        links and counters (C(ethtool -S <netdev>), then
        C(/sys/class/infiniband/<dev>/ports/<n>/hw_counters/*)) just before the load starts and when it
        stops, and judge them as M(gpufleet.node.roce_health) does (C(fabric.*) checks). A fabric that
        drops, retransmits or pauses under the load, a link that went down, slowed or flapped, or a port
        that carried nothing while its siblings carried the load fails.
      - Nothing is read on a node without RoCE ports. A counter that cannot be read is a failed check naming
        the tool.
    type: bool
    default: true
"""

    # How the RoCE ports read are judged: with DOCUMENTATION around a load, and watch's window.
    JUDGE = r"""
options:
  roce_priority:
    description: The RoCE priority, the one with PFC (the fleet's lossless profile uses 3).
    type: int
    default: 3
  roce_thresholds:
    description:
      - Limits of the C(fabric.*) checks that replace the defaults, by name (C(retransmits_per_s),
        C(qp_failures), C(pause_pct), C(pause_storm_events), C(rx_discards_per_s),
        C(rx_out_of_buffer_per_s), C(link_flaps), C(min_traffic_share), C(symbol_errors_per_min),
        C(link_integrity_errors), C(buffer_overrun_errors), C(link_flap_settle_s)); see
        M(gpufleet.node.roce_health) for the defaults and why.
      - C(link_flap_settle_s) (30, 0..3600 s, 0 turns it off) is the burn-in's settling time. The burn-in
        reads the links once more that many seconds into its load; link-down events before that reading pass
        when the link was up in it, none follow and it is up at the end (a ConnectX-8 port retraining once as
        its fabric comes up); a burn-in no longer than it counts every down event. The watch never settles.
    type: dict
    default: {}
  roce_cabling:
    description:
      - The node's cabling plan, RoCE port to the leaf port it is cabled to (as the fabric role's
        C(fabric_cabling) gives it, C(mlx5_0) to C(leaf01:swp1)). Only named in the messages of a port whose
        link fails.
    type: dict
    default: {}
"""
