"""docs/health-checks.md's Xid table is XID_CATALOG: every Xid, whether it blocks, and NVIDIA's bucket for
its immediate action, as the code has it."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.gpufleet.node.plugins.module_utils.gpu import xid

DOC = Path(__file__).resolve().parents[2] / "docs" / "health-checks.md"


def test_the_xid_table_is_the_catalog() -> None:
    rows = re.findall(r"^\| (\d+) \| (yes|no) \| ([A-Z0-9_]+) \|", DOC.read_text(), flags=re.MULTILINE)
    documented = {int(number): (blocks == "yes", bucket) for number, blocks, bucket in rows}
    assert documented == {n: (info.severity == "block", info.bucket) for n, info in xid.XID_CATALOG.items()}
