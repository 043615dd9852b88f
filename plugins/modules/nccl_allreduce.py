#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_allreduce
short_description: Measure the node's NCCL all-reduce bus bandwidth over all its GPUs against a floor
version_added: "0.1.0"
description:
  - Runs nccl-tests' C(all_reduce_perf) over every GPU of the node in one process (C(-g <gpus>)), from
    O(min_bytes) to O(max_bytes) doubling, with element checking on (C(-c 1)), under C(timeout) so a
    collective that hangs ends after O(timeout_s).
  - Judges the run's average bus bandwidth against O(min_busbw_gbps) (C(health.nccl_busbw)), the GPUs it
    used (C(health.nccl_gpus)) and the elements it checked (C(health.nccl_correct)).
  - With O(roce_ports) it reads the node's RoCE ports when the run starts and when it ends and judges them
    as the burn-in does (C(fabric.*) checks - a lossy or unmarked path, a link down or flapping, a port
    that carried nothing). On a node whose baseboards talk over RoCE the all-reduce is the first load the
    fabric carries, so a low figure names the RoCE checks that failed during it as its likely cause (a
    leaf that does not mark ECN, one without PFC), else the checks that usually explain it (RoCE links,
    the leaves' PFC and ECN, NVLink). Each RoCE port it names carries its leaf switch and port from
    O(roce_cabling) (C(mlx5_4 (leaf02:swp5))), and the C(gpufleet switch --check --limit) it suggests
    names those leaves.
  - Fails when a check fails; a binary that is missing, fails or prints something that is not its report
    fails the module naming it (fail closed).
  - Changes nothing, but loads every GPU for the run's length - run it while the node is drained and
    before its instances start.
options:
  binary:
    description: Path of nccl-tests' C(all_reduce_perf) on the node (a profile setting).
    type: path
    required: true
  gpus:
    description: GPUs the run uses (the node's count).
    type: int
    required: true
  min_busbw_gbps:
    description: The profile's floor for the run's average bus bandwidth, in GB/s, above 0 and at most 10000.
    type: float
    required: true
  min_bytes:
    description: Smallest message size, as all_reduce_perf takes it (C(8M), C(1G)).
    type: str
    default: 64M
  max_bytes:
    description: Largest message size.
    type: str
    default: 1G
  timeout_s:
    description: Seconds the run may take before it is stopped (a hung collective fails, named).
    type: int
    default: 300
extends_documentation_fragment: [gpufleet.node.roce_window, gpufleet.node.roce_window.judge,
  gpufleet.node.attributes.read_only, gpufleet.node.attributes]
attributes:
  check_mode:
    details: Not run in check mode (it loads the GPUs); the module returns skipped.
notes:
  - Needs C(timeout) (coreutils) and an C(all_reduce_perf) built for the node's CUDA and NCCL; with
    O(roce_ports) on a node that has RoCE ports, C(ethtool) too.
seealso:
  - module: gpufleet.node.node_health
  - name: nccl-tests
    description: NVIDIA's NCCL performance tests.
    link: https://github.com/NVIDIA/nccl-tests
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Measure the all-reduce over the node's 16 GPUs
  gpufleet.node.nccl_allreduce:
    binary: /opt/nccl-tests/build/all_reduce_perf
    gpus: 16
    min_busbw_gbps: 300
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description: C(health.nccl_gpus), C(health.nccl_correct) and C(health.nccl_busbw), then with O(roce_ports)
    the C(fabric.*) checks of every RoCE port over the run (C(health.nccl_roce_counters) when they could not
    be read).
  sample:
    - {"name": "health.nccl_busbw", "ok": false, "value": 82.4, "limit": 300.0, "unit": "GB/s",
       "message": "all_reduce over 16 GPUs (67108864 to 1073741824 bytes): average bus bandwidth 82.4 GB/s,
       floor 300 GB/s. ..."}
all_reduce:
  description: The parsed run (rows, avg_busbw_gbps, max_busbw_gbps, devices, wrong_rows, nccl_version).
  returned: when the run finished
  type: dict
roce:
  description: The RoCE ports read around the run (ports, window_s, deltas, links, error); null without
    O(roce_ports) or RoCE ports.
  returned: when the run finished
  type: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import ENV, first_line, tool_path
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_tests
from ansible_collections.gpufleet.node.plugins.module_utils.nccl.nccl_bandwidth import argv, judge
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_reading import (
    WINDOW_OPTIONS,
    OptionError,
    ReadError,
    window_for,
)

_SIZE = re.compile(r"^[0-9]{1,12}[KMG]?$")
# The highest floor a profile may set (GB/s): above any node's all-reduce, so a larger one is a typo.
MAX_BUSBW_GBPS = 10000.0


def _input_errors(p):
    errors = []
    if not 1 <= p["gpus"] <= 64:
        errors.append("gpus (thermal_gate_nccl_gpus) must be 1..64, got %s" % p["gpus"])
    # finite: an infinite floor blocks every node, nan passes none
    if not 0 < p["min_busbw_gbps"] <= MAX_BUSBW_GBPS:
        errors.append(
            "min_busbw_gbps (thermal_gate_nccl_min_busbw_gbps) must be above 0 and at most %g GB/s, got %s"
            % (MAX_BUSBW_GBPS, p["min_busbw_gbps"])
        )
    for key in ("min_bytes", "max_bytes"):
        if not _SIZE.match(p[key]):
            errors.append(
                "%s (thermal_gate_nccl_%s) must be a size such as 64M or 1G, got %r" % (key, key, p[key])
            )
    if not 10 <= p["timeout_s"] <= 3600:
        errors.append(
            "timeout_s (thermal_gate_nccl_timeout_s) must be 10..3600 seconds, got %s" % p["timeout_s"]
        )
    return errors


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary=dict(type="path", required=True),
            gpus=dict(type="int", required=True),
            min_busbw_gbps=dict(type="float", required=True),
            min_bytes=dict(type="str", default="64M"),
            max_bytes=dict(type="str", default="1G"),
            timeout_s=dict(type="int", default=300),
            **WINDOW_OPTIONS,
        ),
        supports_check_mode=True,
    )
    p = module.params
    refuse_bad_input(module, "run the all-reduce", _input_errors(p))
    result = dict(changed=False, checks=[], changes=[])
    if module.check_mode:
        module.exit_json(skipped=True, msg="check mode: the all-reduce loads every GPU; not run", **result)
    if not (os.path.isfile(p["binary"]) and os.access(p["binary"], os.X_OK)):
        module.fail_json(
            msg="%s is not an executable all_reduce_perf on this node (thermal_gate_nccl_tests_path); "
            "install nccl-tests or fix the path (fail closed)" % p["binary"],
            **result,
        )
    cmd = argv(
        p["binary"], p["gpus"], p["min_bytes"], p["max_bytes"], p["timeout_s"], tool_path(module, "timeout")
    )
    try:
        window = window_for(
            module.run_command,
            p,
            lambda: tool_path(module, "ethtool"),
            name="health.nccl_roce_counters",
            during="during the all-reduce",
        )
    except OptionError as exc:
        module.fail_json(msg=str(exc), input_error=True)
    except ReadError as exc:
        module.fail_json(msg="%s; check the RDMA devices' sysfs, or set roce_ports: false" % exc, **result)
    if window is not None:
        window.start()
    rc, out, err = module.run_command(cmd, environ_update=ENV)
    if window is not None:
        # read before judging anything: the counters' deltas are the run's alone
        window.stop()
    if rc == 124:
        module.fail_json(
            msg="all_reduce_perf did not finish in %d s: a collective hung (fail closed)" % p["timeout_s"],
            cmd=cmd,
            rc=rc,
            **result,
        )
    if rc != 0:
        module.fail_json(
            msg="all_reduce_perf failed (rc=%d): %s" % (rc, first_line(err, out)),
            cmd=cmd,
            rc=rc,
            stderr=err,
            **result,
        )
    try:
        parsed = nccl_tests.parse_all_reduce(out)
    except nccl_tests.ParseError as exc:
        module.fail_json(msg="%s (fail closed)" % exc, cmd=cmd, stdout=out[-4000:], **result)
    fabric = window.checks() if window is not None else []
    # a low figure names each RoCE port's leaf switch and port (the plan the fabric checks held LLDP to)
    cabling = {str(k): str(v) for k, v in p["roce_cabling"].items()}
    checks = judge(parsed, p["gpus"], p["min_busbw_gbps"], fabric, cabling) + fabric
    result.update(checks=checks, all_reduce=parsed, roce=window.summary() if window is not None else None)
    failed = [c for c in checks if not c["ok"]]
    if failed:
        module.fail_json(msg="; ".join(c["message"] for c in failed), **result)
    module.exit_json(msg=next(c["message"] for c in checks if c["name"] == "health.nccl_busbw"), **result)


if __name__ == "__main__":
    main()
