"""bench/acct_split.py: the kernel's acct_v3 records read back (comp_t times), and each process that descends
from the bench put in its part by command and place in the tree; other processes left out."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import acct_split

ME = 1000


def _record(pid: int, ppid: int, utime: int, stime: int, comm: bytes) -> bytes:
    return struct.pack(
        "<BBHIIIIIIf8H16s", 0, 3, 0, 0, 0, 0, pid, ppid, 0, 0.0, utime, stime, 0, 0, 0, 0, 0, 0, comm
    )


def test_records_read_comp_t_times_and_skip_other_versions() -> None:
    # comp_t 0x2001: mantissa 1, exponent 1 -> 8 ticks; 150 ticks plain
    data = _record(5, ME, 0x2001, 150, b"ssh") + _record(6, ME, 1, 1, b"x").replace(b"\x03", b"\x02", 1)
    recs = list(acct_split.records(data))
    assert recs == [acct_split.Record(pid=5, ppid=ME, cpu_s=1.58, comm="ssh")]


def test_processes_are_put_in_parts_and_strangers_left_out() -> None:
    data = b"".join(
        [
            _record(10, ME, 80, 10, b"gpufleet"),
            _record(11, 10, 50, 10, b"ansible-invento"),
            _record(12, 10, 200, 40, b"ansible-playboo"),
            _record(13, 12, 4, 1, b"ansible-playboo"),
            _record(14, 12, 5, 0, b"ansible-playboo"),
            _record(15, 13, 9, 1, b"ssh"),
            _record(16, ME, 7, 0, b"ssh"),  # a ControlPersist master, reparented to the bench
            _record(17, 999, 300, 0, b"python3"),  # a simulated node's tool: not the controller's
            _record(18, 12, 1, 0, b"ldconfig"),
        ]
    )
    parts = acct_split.split(list(acct_split.records(data)), ME)
    assert parts == {
        "gpufleet itself": (1, 0.9),
        "ansible-inventory": (1, 0.6),
        "ansible's main process": (1, 2.4),
        "ansible's workers": (2, 0.1),
        "ssh clients and masters": (2, 0.17),
        "ldconfig": (1, 0.01),
    }
