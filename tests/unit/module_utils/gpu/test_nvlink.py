"""nvlink: `nvidia-smi nvlink -s` and `-e` on real captures (tests/fixtures/real, INDEX.md)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvlink

from tests.unit.mutations import read_capture

H200_STATUS = "nvidia-smi-text/utku-h200-590.48.01-nvlink-s.txt"
A100_STATUS_8 = "nvidia-smi-text/gpud-nvlink-status-a100.txt"
A100_GOOD = "nvidia-smi-text/azurehpc-hc-good_nvlink_status.txt"
A100_BAD = "nvidia-smi-text/azurehpc-hc-bad_nvlink_status.txt"
BREV_STATUS = "nvlink/brev-a100-sxm4-40gb-535-nvlink-s-i0.txt"
BREV_ERRORS = "nvlink/brev-8xa100-sxm4-40gb-535-nvlink-e-per-gpu-loop.txt"
H100_ERRORS = "nvlink/ml-engineering-h100-nvlink-e-elided.txt"


def brev_errors() -> str:
    """The capture is a shell loop of `nvidia-smi nvlink -e -i $i`; drop the loop's own echo lines."""
    return "".join(
        line for line in read_capture(BREV_ERRORS).splitlines(True) if not line.startswith("=== GPU")
    )


def h100_errors() -> str:
    """The author elided links 2-16 with a '[...]' line; the rest is verbatim."""
    return "".join(line for line in read_capture(H100_ERRORS).splitlines(True) if line.strip() != "[...]")


def test_h200_status_has_18_active_links_at_26_562() -> None:
    (gpu,) = nvlink.parse_status(read_capture(H200_STATUS))
    assert (gpu["index"], gpu["name"], gpu["all_inactive"]) == (0, "NVIDIA H200", False)
    assert gpu["uuid"].startswith("GPU-")
    assert [link["link"] for link in gpu["links"]] == list(range(18))
    assert {(link["active"], link["speed_gbps"]) for link in gpu["links"]} == {(True, 26.562)}


def test_a100_node_status_has_8_gpus_of_12_links() -> None:
    # gpud's test file has no newline after its last line; nvidia-smi prints one.
    gpus = nvlink.parse_status(read_capture(A100_STATUS_8) + "\n")
    assert [gpu["index"] for gpu in gpus] == list(range(8))
    assert gpus[0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert all(
        len(gpu["links"]) == 12 and all(link["speed_gbps"] == 25.0 for link in gpu["links"]) for gpu in gpus
    )


def test_good_and_bad_a100_gpu() -> None:
    (good,) = nvlink.parse_status(read_capture(A100_GOOD))
    assert good["index"] == 7 and len(good["links"]) == 12 and all(link["active"] for link in good["links"])
    (bad,) = nvlink.parse_status(read_capture(A100_BAD))
    assert (bad["index"], bad["all_inactive"], bad["links"]) == (6, True, [])
    assert bad["uuid"] == "GPU-9667d95e-6d22-0c22-1f57-c481f13e7c44"


def test_tab_indented_status_and_an_inactive_link() -> None:
    text = read_capture(BREV_STATUS)
    assert "\t Link 3: 25 GB/s\n" in text
    (gpu,) = nvlink.parse_status(text.replace("\t Link 3: 25 GB/s", "\t Link 3: <inactive>"))
    link3 = gpu["links"][3]
    assert link3 == {"link": 3, "active": False, "speed_gbps": None}
    assert sum(link["active"] for link in gpu["links"]) == 11


def test_a100_error_counters_of_8_gpus() -> None:
    gpus = nvlink.parse_error_counters(brev_errors())
    assert [gpu["uuid"] for gpu in gpus][3] == "GPU-46a33459-81fa-9dcf-9ed9-9a9425a4abf5"
    assert len(gpus) == 8 and all(len(gpu["links"]) == 12 for gpu in gpus)
    assert {tuple(sorted(link["counters"].items())) for gpu in gpus for link in gpu["links"]} == {
        (("crc", 0), ("recovery", 0), ("replay", 0))
    }


def test_h100_error_counters_and_a_growing_replay_counter() -> None:
    (gpu,) = nvlink.parse_error_counters(h100_errors())
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert [link["link"] for link in gpu["links"]] == [0, 1, 17]
    grown = h100_errors().replace("Link 17: Replay Errors: 0", "Link 17: Replay Errors: 5")
    assert nvlink.parse_error_counters(grown)[0]["links"][2]["counters"] == {
        "replay": 5,
        "recovery": 0,
        "crc": 0,
    }


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda t: t[: t.rindex("25 GB/s") + 1], "newline"),  # cut: '25' read as '2'
        (lambda t: t + t.splitlines(True)[0], "twice"),  # a GPU repeated
        (lambda t: "\t Link 0: 25 GB/s\n" + t, "before any"),
        (lambda t: t.replace("Link 4: 25 GB/s", "Link 4: \u0662\u0665 GB/s"), "a digit that is not 0-9"),
        (lambda t: t.replace("Link 4: 25 GB/s", "Link 4: NaN GB/s"), "not a GPU or link line"),
        (lambda t: t.replace("Link 4:", "Link 400:"), "past 64"),
        (lambda t: t + "\t Link 4: 25 GB/s\n", "twice"),
    ],
)
def test_damaged_status_is_refused(damage: object, why: str) -> None:
    with pytest.raises(nvlink.ParseError, match=r"^nvidia-smi nvlink -s: .*" + why):
        nvlink.parse_status(damage(read_capture(BREV_STATUS)))  # type: ignore[operator]


def test_damaged_error_counters_are_refused() -> None:
    text = brev_errors()
    for damaged in (
        text.replace("Link 5: CRC Errors: 0", "Link 5: CRC Errors: -1", 1),
        text.replace("Link 5: CRC Errors: 0", "Link 5: CRC Errors: 1e999", 1),
        text + "\t Link 0: Replay Errors: 0\n",
        "",
    ):
        with pytest.raises(nvlink.ParseError, match=r"^nvidia-smi nvlink -e: "):
            nvlink.parse_error_counters(damaged)
