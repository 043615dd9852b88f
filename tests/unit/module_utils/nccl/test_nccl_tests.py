"""nccl_tests: all_reduce_perf output on real captures (tests/fixtures/real/nccl-tests, INDEX.md)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_tests

from tests.unit.mutations import read_capture

H200_8 = "nccl-tests/azure-nd-h200-v5-8gpu-all-reduce-8g.txt"
GB300_4 = "nccl-tests/gb300-nvl-tray-4gpu-all-reduce-truncated.txt"
H100_16 = "nccl-tests/ztan-a3mega-2x8-h100-all-reduce-markdown-damaged.txt"


def test_h200_node_of_8_gpus() -> None:
    result = nccl_tests.parse_all_reduce(read_capture(H200_8))
    assert result["avg_busbw_gbps"] == 476.967 and result["max_busbw_gbps"] == 476.98
    assert result["nccl_version"] == "2.19.3+cuda12.2"
    assert [(d["rank"], d["device"], d["host"]) for d in result["devices"]] == [
        (rank, rank, "test-h200-deb") for rank in range(8)
    ]
    (row,) = result["rows"]
    assert (row["size_bytes"], row["count"], row["type"], row["redop"], row["root"]) == (
        8589934592,
        2147483648,
        "float",
        "sum",
        None,
    )
    assert row["out_of_place"] == {"time_us": 31517.0, "algbw_gbps": 272.55, "busbw_gbps": 476.96, "wrong": 0}
    assert row["in_place"]["busbw_gbps"] == 476.98
    assert (result["wrong_rows"], result["out_of_bounds"], result["bounds_ok"]) == ([], 0, True)


def test_gb300_tray_bus_ids_and_the_authors_comment_line() -> None:
    result = nccl_tests.parse_all_reduce(read_capture(GB300_4))
    assert [d["bus_id"] for d in result["devices"]] == [
        "0008:06:00",
        "0009:06:00",
        "0018:06:00",
        "0019:06:00",
    ]
    assert {d["host"] for d in result["devices"]} == {"GPU-3882"}
    assert [r["size_bytes"] for r in result["rows"]] == [8589934592, 17179869184]
    assert result["avg_busbw_gbps"] == 446.673 and result["max_busbw_gbps"] == 685.27


def test_16_h100_over_two_nodes_full_sweep() -> None:
    # A Markdown copy: the header's '#' was eaten on the first lines, the rows are intact.
    result = nccl_tests.parse_all_reduce(read_capture(H100_16))
    assert len(result["devices"]) == 16
    assert {d["host"] for d in result["devices"]} == {"ztan-mig-235z", "ztan-mig-gq73"}
    assert result["devices"][8]["bus_id"] == "0000:04:00" and result["devices"][8]["device"] == 0
    sizes = [r["size_bytes"] for r in result["rows"]]
    assert sizes == [8 * 2**i for i in range(31)]
    assert result["rows"][-1]["out_of_place"]["busbw_gbps"] == 338.82
    assert result["avg_busbw_gbps"] == 70.742


def test_wrong_values_are_reported_per_size() -> None:
    text = read_capture(H200_8).replace("476.96      0", "476.96      3")
    assert nccl_tests.parse_all_reduce(text)["wrong_rows"] == [8589934592]


def test_log_lines_in_between_are_left_alone() -> None:
    text = read_capture(H200_8)
    noisy = text.replace(
        "NCCL version",
        "test-h200-deb:23690:23690 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.4<0>\nNCCL version",
    )
    assert nccl_tests.parse_all_reduce(noisy)["avg_busbw_gbps"] == 476.967


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda t: t[: t.index("# Out of bounds")], "no '# Avg bus bandwidth'"),  # killed before the end
        (lambda t: t[: t.rindex("476.967") + 3], "newline"),
        (lambda t: t + "# Avg bus bandwidth    : 476.967\n", "second"),
        (lambda t: t.replace("476.967", "nan"), "not a number"),
        (lambda t: t.replace("31517  272.55", "31517  \u0662\u0667\u0662.55"), "a digit that is not 0-9"),
        (
            lambda t: t.replace("  8589934592    2147483648", "  8589934592    -2147483648"),
            "not a result row",
        ),
        (lambda t: t.replace("476.96      0    31516", "476.96      0"), "not a result row"),
        (lambda t: "\n".join(x for x in t.splitlines() if not x.startswith("  85")) + "\n", "no result row"),
        (lambda t: t.replace("#  Rank  1 Group  0 Pid  23691", "#  Rank  0 Group  0 Pid  23691"), "twice"),
    ],
)
def test_damaged_output_is_refused(damage: object, why: str) -> None:
    with pytest.raises(nccl_tests.ParseError, match=r"^all_reduce_perf: .*" + why):
        nccl_tests.parse_all_reduce(damage(read_capture(H200_8)))  # type: ignore[operator]
