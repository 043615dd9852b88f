"""Every parser on mutations of every real capture: data that is sane, or the parser's own error.

Issue 11 ("Fail closed everywhere", "Parsers never crash"). For each real capture in
tests/fixtures/real that a pure parser reads, Hypothesis draws damaged copies
(tests/unit/mutations.py: flips, cuts, lines dropped or repeated, numbers turned into NaN, Inf,
1e999, huge or negative values, deep nesting, non-UTF-8 bytes). The parser must either return
data whose every number is finite and in its physical range, or raise its module's parse error
with a message that starts with the tool's name. Anything else (IndexError, RecursionError,
UnicodeEncodeError, OverflowError, a hit rate of 9.0) fails the test.

The example budget is fixed and the run derandomized, so CI sees the same examples every time.
The named defects of the issue have a regression test each at the end.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import lldp, sonic_qos
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import (
    dcgm,
    gpu_health_readings,
    nvidia_smi,
    nvlink,
    xid,
)
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_tests, topology_xml
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse, roce_counters
from ansible_collections.gpufleet.node.plugins.module_utils.vllm import vllm_metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.mutations import FIXTURES, digits_swapped, mutated, read_capture

EXAMPLES = 30
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)

INT_LIMIT = 2**64


# ------------------------------------------------------------------ what "sane data" means


# T.Limit is the margin to the slowdown temperature: below 0 when a GPU runs past it.
SIGNED_KEYS = frozenset(("tlimit_c", "temperature.gpu.tlimit"))


def _numbers(data: Any) -> list[tuple[int | float, bool]]:
    """Every int and float in a parser's result, with whether it may be negative (bools are flags)."""
    found: list[tuple[int | float, bool]] = []
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        item, signed = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, (int, float)):
            found.append((item, signed))
        elif isinstance(item, dict):
            stack.extend((key, False) for key in item)
            stack.extend((value, signed or key in SIGNED_KEYS) for key, value in item.items())
        elif isinstance(item, (list, tuple, set)):
            stack.extend((value, signed) for value in item)
    return found


def finite_readings(data: Any) -> None:
    """Every number is finite, fits 64 bits and (but a margin such as T.Limit) is >= 0."""
    for number, signed in _numbers(data):
        assert not (isinstance(number, float) and not math.isfinite(number)), f"non-finite reading {number!r}"
        assert abs(number) < INT_LIMIT, f"reading {number!r} does not fit 64 bits"
        assert signed or number >= 0, f"negative reading {number!r}"


def _gpus_as_announced(report: dict[str, Any]) -> None:
    finite_readings(report)
    assert report["attached_gpus"] is None or report["attached_gpus"] == len(report["gpus"]), (
        "{} of {} GPUs".format(len(report["gpus"]), report["attached_gpus"])
    )


def _csv_rows(rows: list[dict[str, Any]]) -> None:
    finite_readings(rows)
    assert rows, "no GPU row"


def _sample(rows: list[dict[str, Any]]) -> None:
    finite_readings(rows)
    assert rows, "no GPU row"
    for row in rows:
        pct = row.get("utilization_pct")
        assert pct is None or 0 <= pct <= 100, f"utilization {pct!r}%"


def _prefix_cache(result: dict[str, Any]) -> None:
    finite_readings(result)
    rate = result["hit_rate"]
    assert rate is None or 0 <= rate <= 1, f"hit rate {rate!r}"
    if result["hits"] is not None and result["queries"] is not None:
        assert result["hits"] <= result["queries"], "{!r} hits of {!r} queries".format(
            result["hits"],
            result["queries"],
        )


def _vllm(text: str) -> dict[str, Any]:
    metrics = vllm_metrics.parse_prometheus(text)
    return {"samples": metrics["samples"], "prefix_cache": vllm_metrics.prefix_cache(metrics)}


def _vllm_check(result: dict[str, Any]) -> None:
    # Other series may be NaN (Prometheus allows it); the prefix-cache readings are what is judged.
    _prefix_cache(result["prefix_cache"])


def _lldp(neighbours: dict[str, list[dict[str, Any]]]) -> None:
    finite_readings(neighbours)
    for heard in neighbours.values():
        for neighbour in heard:
            # LLDP's mandatory TLVs, and the 2-octet TLV fields
            assert neighbour["chassis_id"] and neighbour["port_id"], "a neighbour without its IDs"
            for key in ("mfs", "ttl"):
                assert neighbour[key] is None or 0 <= neighbour[key] <= 65535, f"{key} {neighbour[key]!r}"


def _rdma_statistic(text: str) -> dict[tuple[str, int], dict[str, int]]:
    # The capture is a mail: the tool's output is what follows the `show link` prompt.
    return roce_counters.parse_rdma_statistic(text.split("$ rdma statistic show link rocep8s0f0/1\n", 1)[-1])


def _counters(result: dict[Any, dict[str, int]] | dict[str, int]) -> None:
    finite_readings(result)
    assert result, "no counter"
    for value in result.values():
        assert isinstance(value, (int, dict)) and not isinstance(value, bool), f"counter {value!r}"


def _sonic_qos(qos: dict[str, Any]) -> None:
    finite_readings(qos)
    for name, port in qos["ports"].items():
        assert all(0 <= p <= 7 for p in port["pfc_enable"]), f"{name} pfc_enable {port['pfc_enable']!r}"
        assert port["mtu"] is None or 68 <= port["mtu"] <= 65535, f"{name} mtu {port['mtu']!r}"
    for mapping in qos["dscp_to_tc"].values():
        assert all(0 <= dscp <= 63 and 0 <= tc <= 15 for dscp, tc in mapping.items()), f"DSCP map {mapping!r}"


# ------------------------------------------------------------------ the cases


@dataclass(frozen=True)
class Case:
    capture: str
    name: str
    parse: Callable[[str], Any]
    error: type[Exception]
    tool: str
    markup: str
    check: Callable[[Any], None]

    @property
    def id(self) -> str:
        return "{}:{}".format(self.name, self.capture.rsplit("/", 1)[-1])


def _text(relpath: str) -> str:
    return read_capture(relpath)


def _sample_text(capture: str, fields: tuple[str, ...]) -> str:
    """A noheader,nounits sample of ``fields`` cut from a real full --query-gpu capture."""
    rows = nvidia_smi.parse_query_csv(read_capture(capture))
    aliases = {"clocks.sm": "clocks.current.sm"}
    lines = []
    for row in rows:
        values = [row.get(f, row.get(aliases.get(f, f))) for f in fields]
        lines.append(", ".join("[N/A]" if v is None else str(v) for v in values))
    return "\n".join(lines) + "\n"


_RDMA = {
    "3fs-doc-ethtool-i": ("ethtool -i", rdma_parse.parse_ethtool_info),
    "3fs-doc-mlnx_qos": ("mlnx_qos", rdma_parse.parse_mlnx_qos),
    "azhpc-diag-ibstatus": ("ibstatus", rdma_parse.parse_ibstatus),
    "cnode3-011-ibdev2netdev": ("ibdev2netdev", rdma_parse.parse_ibdev2netdev),
    "csegpu1-mlxlink": ("mlxlink", rdma_parse.parse_mlxlink),
    "gce-bugreport-mlxlink": ("mlxlink", rdma_parse.parse_mlxlink),
    "gpud-ibstat.": ("ibstat", rdma_parse.parse_ibstat),
    "gpud-ibstatus.": ("ibstatus", rdma_parse.parse_ibstatus),
    "openshift-nvidiatools-show_gids": ("show_gids", rdma_parse.parse_show_gids),
    "rdma-notes-show_gids": ("show_gids", rdma_parse.parse_show_gids),
}


SELECTED_GPU = {"nvidia-smi-text/llm-action-h800-q-i0.txt"}


def _without(prefixes: tuple[str, ...], parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` of the text without the lines a capture's author added (a loop's echo, '[...]')."""
    return lambda text: parse("".join(x for x in text.splitlines(True) if not x.strip().startswith(prefixes)))


def _folder(
    folder: str,
    name: str,
    parse: Callable[[str], Any],
    error: type[Exception],
    tool: str,
    markup: str,
    check: Callable[[Any], None] = finite_readings,
) -> list[Case]:
    """One case per capture in ``tests/fixtures/real/<folder>``, all read by the same parser."""
    return [
        Case(f"{folder}/{path.name}", name, parse, error, tool, markup, check)
        for path in sorted((FIXTURES / folder).iterdir())
    ]


def _health_cases() -> list[Case]:
    """Issue 25's parsers: NVLink, all_reduce_perf, Xid, dcgmi diag -j, the -q -x health readings."""
    cases = []
    for path in sorted((FIXTURES / "nvlink").iterdir()):
        rel = "nvlink/" + path.name
        name, tool = (
            ("parse_status", "nvidia-smi nvlink -s")
            if "nvlink-s" in rel
            else ("parse_error_counters", "nvidia-smi nvlink -e")
        )
        parse = _without(("=== GPU", "[...]"), getattr(nvlink, name))
        cases.append(Case(rel, name, parse, nvlink.ParseError, tool, "text", finite_readings))
    for rel in (
        "nvidia-smi-text/utku-h200-590.48.01-nvlink-s.txt",
        "nvidia-smi-text/azurehpc-hc-bad_nvlink_status.txt",
    ):
        cases.append(
            Case(
                rel,
                "parse_status",
                nvlink.parse_status,
                nvlink.ParseError,
                "nvidia-smi nvlink -s",
                "text",
                finite_readings,
            )
        )
    health_xml = ("parse_health_xml", gpu_health_readings.parse_health_xml, nvidia_smi.ParseError)
    return (
        cases
        + _folder(
            "nccl-tests",
            "parse_all_reduce",
            nccl_tests.parse_all_reduce,
            nccl_tests.ParseError,
            "all_reduce_perf",
            "text",
        )
        + _folder("xid", "parse_kernel_log", xid.parse_kernel_log, xid.ParseError, "kernel log (Xid)", "text")
        + _folder("dcgm", "parse_diag_json", dcgm.parse_diag_json, dcgm.ParseError, "dcgmi diag -j", "json")
        + [
            Case(
                "h200-device/nvidia-smi-q-x-idle.xml", *health_xml, "nvidia-smi -q -x", "xml", finite_readings
            )
        ]
        + _folder("nvidia-smi-xml", *health_xml, "nvidia-smi -q -x", "xml")
    )


def _cases() -> list[Case]:
    smi = nvidia_smi.ParseError
    cases = _folder(
        "nvidia-smi-xml", "parse_query_xml", nvidia_smi.parse_query_xml, smi, "nvidia-smi -q -x", "xml"
    )
    text_dirs = ("nvidia-smi-text", "nvidia-smi-power-perf")
    for folder in text_dirs:
        for path in sorted((FIXTURES / folder).iterdir()):
            rel = f"{folder}/{path.name}"
            if rel in SELECTED_GPU:  # `-q -i 0`: one GPU of those attached, as asked
                parse, check = functools.partial(nvidia_smi.parse_query_text, partial=True), finite_readings
            else:
                parse, check = nvidia_smi.parse_query_text, _gpus_as_announced
            cases.append(Case(rel, "parse_query_text", parse, smi, "nvidia-smi -q", "text", check))
    full = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-FULL-capture.txt"
    topo = ("parse_topo_matrix", nvidia_smi.parse_topo_matrix, smi, "nvidia-smi topo -m", "text")
    cases += [
        Case(full, "parse_list", nvidia_smi.parse_list, smi, "nvidia-smi -L", "text", finite_readings),
        Case(full, *topo, finite_readings),
    ]
    cases += _folder(
        "nvidia-smi-csv",
        "parse_query_csv",
        nvidia_smi.parse_query_csv,
        smi,
        "nvidia-smi --query-gpu",
        "text",
        _csv_rows,
    )
    cases += _folder("topo-matrix", *topo)
    cases += _folder(
        "nccl-topo",
        "topology_xml.parse",
        topology_xml.parse,
        topology_xml.TopologyError,
        "NCCL topology",
        "xml",
    )
    for path in sorted((FIXTURES / "mellanox").iterdir()):
        rel = "mellanox/" + path.name
        tool, parse = next(v for k, v in _RDMA.items() if path.name.startswith(k))
        cases.append(Case(rel, parse.__name__, parse, rdma_parse.ParseError, tool, "text", finite_readings))
    cases += _folder(
        "vllm-metrics", "vllm_metrics", _vllm, vllm_metrics.MetricsError, "vLLM /metrics", "text", _vllm_check
    )
    cases += _folder("lldp", "parse_lldpctl", lldp.parse_lldpctl, lldp.ParseError, "lldpctl", "json", _lldp)
    counters = ("text", _counters)
    cases += _folder(
        "ethtool",
        "parse_ethtool_stats",
        roce_counters.parse_ethtool_stats,
        roce_counters.ParseError,
        "ethtool -S",
        *counters,
    )
    cases += _folder(
        "rdma-statistic",
        "parse_rdma_statistic",
        _rdma_statistic,
        roce_counters.ParseError,
        "rdma statistic",
        *counters,
    )
    cases += _folder(
        "sonic",
        "parse_config_db",
        sonic_qos.parse_config_db,
        sonic_qos.ParseError,
        "SONiC CONFIG_DB",
        "json",
        _sonic_qos,
    )
    return cases + _health_cases()


CASES = _cases()

# The power and thermal samples (noheader,nounits) cut from the real full queries.
SAMPLE_CASES = [
    (
        capture,
        fields,
        parse,
    )
    for capture in (
        "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv",
        "nvidia-smi-csv/utku-h200-590.48.01-load-query-gpu.csv",
    )
    for fields, parse in (
        (nvidia_smi.POWER_FIELDS, nvidia_smi.parse_power_sample),
        (nvidia_smi.THERMAL_FIELDS, nvidia_smi.parse_thermal_sample),
    )
]


def classify(case: Case, text: str) -> str:
    """'data', 'error', 'crash: <type>: <message>' or 'wrong: <why>' for one input."""
    try:
        result = case.parse(text)
    except case.error as exc:
        message = str(exc)
        if not message.startswith(case.tool):
            return f"unnamed: message {message[:100]!r} does not name {case.tool}"
        return "error"
    except Exception as exc:  # the point of the test: any other type is a crash
        return f"crash: {type(exc).__name__}: {str(exc)[:100]}"
    try:
        case.check(result)
    except AssertionError as exc:
        return f"wrong: {exc}"
    return "data"


def test_every_capture_has_a_case() -> None:
    covered = {case.capture for case in CASES}
    for folder in (
        "nvidia-smi-xml",
        "nvidia-smi-text",
        "nvidia-smi-csv",
        "nvidia-smi-power-perf",
        "topo-matrix",
        "nccl-topo",
        "mellanox",
        "vllm-metrics",
        "lldp",
        "ethtool",
        "rdma-statistic",
        "sonic",
        "nvlink",
        "nccl-tests",
        "xid",
        "dcgm",
    ):
        for path in (FIXTURES / folder).iterdir():
            assert f"{folder}/{path.name}" in covered


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_capture_itself_is_sane_data_or_refused(case: Case) -> None:
    assert classify(case, _text(case.capture)) in ("data", "error")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_mutations_give_data_or_the_tools_parse_error(case: Case) -> None:
    original = _text(case.capture)

    @PROPERTY_SETTINGS
    @given(mutated(original, markup=case.markup))
    def run(text: str) -> None:
        outcome = classify(case, text)
        assert outcome in ("data", "error"), outcome

    run()


def _sample_case(fields: tuple[str, ...], parse: Callable[[str], Any]) -> Case:
    return Case("", parse.__name__, parse, nvidia_smi.ParseError, "nvidia-smi --query-gpu", "text", _sample)


@pytest.mark.parametrize(("capture", "fields", "parse"), SAMPLE_CASES)
def test_samples_give_data_or_the_tools_parse_error(
    capture: str, fields: tuple[str, ...], parse: Callable[[str], Any]
) -> None:
    original = _sample_text(capture, fields)
    case = _sample_case(fields, parse)
    assert classify(case, original) == "data"

    @PROPERTY_SETTINGS
    @given(mutated(original, markup="text"))
    def run(text: str) -> None:
        outcome = classify(case, text)
        assert outcome in ("data", "error"), outcome

    run()


def survey() -> dict[str, int]:
    """Run the property tests' exact examples and count outcomes instead of failing on the first."""
    import collections

    counts: collections.Counter[str] = collections.Counter()
    samples: dict[str, str] = {}

    def tally(case: Case, original: str) -> None:
        @PROPERTY_SETTINGS
        @given(mutated(original, markup=case.markup))
        def run(text: str) -> None:
            outcome = classify(case, text)
            kind = outcome.split(":", 1)[0]
            counts[kind] += 1
            if kind in ("crash", "wrong", "unnamed"):
                counts[f"{kind} {case.name}"] += 1
                samples.setdefault(f"{outcome[:90]} {case.name}", case.id)

        run()

    for case in CASES:
        tally(case, _text(case.capture))
    for capture, fields, parse in SAMPLE_CASES:
        tally(_sample_case(fields, parse), _sample_text(capture, fields))
    for line in sorted(samples):
        print("  ", line, "<-", samples[line])
    return dict(counts)


if __name__ == "__main__":
    for key, value in sorted(survey().items()):
        print(f"{value:6d}  {key}")


# ------------------------------------------------------------------ the named defects

RH = "vllm-metrics/rh-workshop-llama-vllm-single-metrics-grep-vllm-head40.prom"
FOXHOP = "vllm-metrics/foxhop-4090-qwen3.6-27b-trimmed-cache-lines.prom"
V0_GAUGE = '# TYPE vllm:gpu_prefix_cache_hit_rate gauge\nvllm:gpu_prefix_cache_hit_rate{model_name="m"} %s\n'


def _counters(queries: str, hits: str) -> str:
    return (
        f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}\n'
        f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}\n'
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (_counters("100", "900"), "more hits than queries"),  # the hit rate of 9.0
        (_counters("+Inf", "50"), "not a finite count"),
        (_counters("100", "NaN"), "not a finite count"),
        (_counters("100", "1e999"), "not a finite count"),
        (_counters("-100", "0"), "not a finite count"),
        (V0_GAUGE % "7", "not a ratio within 0..1"),  # a gauge of 7 passed the 0.5 floor
        (V0_GAUGE % "+Inf", "not a ratio within 0..1"),
        (_counters("100", "90") + _counters("100", "90"), "repeats the series"),
        (_counters("100", "90")[:-1], "does not end with a newline"),
    ],
)
def test_impossible_prefix_cache_readings_are_refused(text: str, why: str) -> None:
    with pytest.raises(vllm_metrics.MetricsError, match=why) as caught:
        vllm_metrics.parse_prometheus(text)
    assert str(caught.value).startswith("vLLM /metrics: ")


def test_real_vllm_hits_turned_into_nine_times_the_queries_are_refused() -> None:
    text = read_capture(FOXHOP)
    metrics = vllm_metrics.parse_prometheus(text)
    queries = vllm_metrics.prefix_cache(metrics)["queries"]
    line = next(x for x in text.splitlines() if x.startswith("vllm:prefix_cache_hits_total{"))
    value = line.rsplit(" ", 1)[1]
    with pytest.raises(vllm_metrics.MetricsError, match="more hits than queries"):
        vllm_metrics.parse_prometheus(text.replace(line, line[: -len(value)] + repr(queries * 9)))


def test_hit_rate_between_inconsistent_scrapes_counts_from_zero() -> None:
    before = {"queries": 100.0, "hits": 10.0, "hit_rate": 0.1, "source": vllm_metrics.QUERIES[0]}
    after = {"queries": 101.0, "hits": 60.0, "hit_rate": 60 / 101, "source": vllm_metrics.QUERIES[0]}
    judged = vllm_metrics.hit_rate_between(before, after)  # 50 new hits of 1 new query: impossible
    assert judged["reset"] is True and judged["hit_rate"] == pytest.approx(60 / 101)
    nan_baseline = dict(before, queries=math.nan)
    assert vllm_metrics.hit_rate_between(nan_baseline, after)["hit_rate"] == pytest.approx(60 / 101)


def test_nccl_topology_nested_1500_pci_is_a_topology_error() -> None:
    text = read_capture("nccl-topo/ibm-cloud-h100-vsi-gx3d-8xh100-topo.xml")
    at = text.index("<pci ")
    nested = (
        "".join('<pci busid="0000:{:02x}:{:02x}.0">'.format(*divmod(i, 256)) for i in range(1500))
        + "</pci>" * 1500
    )
    with pytest.raises(topology_xml.TopologyError, match=r"^NCCL topology: .*nested more than 64 deep"):
        topology_xml.parse(text[:at] + nested + text[at:])


def test_nccl_topology_non_utf8_byte_is_a_topology_error() -> None:
    text = read_capture("nccl-topo/aws-ofi-nccl-p4d-24xl-topo.xml")
    damaged = text[:40] + b"\xe9".decode("utf-8", errors="surrogateescape") + text[40:]
    with pytest.raises(topology_xml.TopologyError, match=r"^NCCL topology: the file is not UTF-8"):
        topology_xml.parse(damaged)


@pytest.mark.parametrize("value", ["-1", "1e999", "9" * 400, "abc"])
def test_nccl_topology_number_attribute_that_is_not_one_is_refused(value: str) -> None:
    text = read_capture("nccl-topo/ibm-cloud-h100-vsi-gx3d-8xh100-topo.xml")
    assert 'speed="200000"' in text
    with pytest.raises(topology_xml.TopologyError, match=r"^NCCL topology: net speed="):
        topology_xml.parse(text.replace('speed="200000"', f'speed="{value}"', 1))


def test_xml_non_utf8_byte_is_a_parse_error() -> None:
    text = read_capture("nvidia-smi-xml/telegraf-a100-sxm4-v12.xml")
    damaged = text.replace("<product_name>", "<product_name>" + "\udce9", 1)
    with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi -q -x: output is not UTF-8"):
        nvidia_smi.parse_query_xml(damaged)


def test_csv_cut_inside_the_last_value_is_refused() -> None:
    # netdata's P100 row ends in clocks.current.video 835; cut after its first digit it read 8.
    text = read_capture("nvidia-smi-csv/netdata-tesla-p100.csv") + "\n"
    assert nvidia_smi.parse_query_csv(text)[0]["clocks.current.video"] == 835
    cut = text[: text.rindex("835") + 1]
    with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi --query-gpu --format=csv: .*newline"):
        nvidia_smi.parse_query_csv(cut)
    with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi --query-gpu --format=csv: no GPU row"):
        nvidia_smi.parse_query_csv(text[: text.index("\n") + 1])  # cut after the header: zero rows


def test_q_text_with_3_of_8_gpus_is_refused() -> None:
    text = read_capture("nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt")
    assert len(nvidia_smi.parse_query_text(text)["gpus"]) == 8
    sections = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.startswith("GPU 0000")]
    cut = "".join(text.splitlines(keepends=True)[: sections[3]])
    with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi -q: the report says 8 GPUs .* describes 3"):
        nvidia_smi.parse_query_text(cut)
    assert len(nvidia_smi.parse_query_text(cut, partial=True)["gpus"]) == 3


@pytest.mark.parametrize("value", ["NaN", "Inf", "1e999", "-5", "9" * 400])
def test_q_text_reading_that_is_not_a_number_fails_closed(value: str) -> None:
    text = read_capture("nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-idle-q.txt")
    line = next(x for x in text.splitlines() if "GPU Current Temp" in x)
    damaged = text.replace(line, line.split(":")[0] + ": " + value + " C", 1)
    with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi -q: "):
        nvidia_smi.parse_query_text(damaged)


def test_thermal_sample_nan_temperature_and_garbled_mask_fail_closed() -> None:
    capture = "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv"
    text = _sample_text(capture, nvidia_smi.THERMAL_FIELDS)
    assert nvidia_smi.parse_thermal_sample(text)[0]["gpu_c"] == 41
    for damaged in (
        text.replace(", 41,", ", NaN,"),
        text.replace("0x0000000000000001", "0xZZ"),
        text.replace(", 0, 69.85", ", 101, 69.85"),
    ):
        assert damaged != text
        with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi --query-gpu"):
            nvidia_smi.parse_thermal_sample(damaged)


# ------------------------------------------------------------------ digits a tool never prints


def _digits_refused(case: Case, texts: tuple[str, str], what: str = "digits outside 0-9") -> None:
    """A number in another script's digits (or with ``what`` in it) is refused wherever the same text
    with letters there is refused (the parser reads a number at that place): it is never read as the
    number."""
    foreign, spoiled = texts
    outcome = classify(case, foreign)
    assert outcome in ("data", "error"), outcome
    if outcome == "data":
        assert classify(case, spoiled) == "data", f"{what} were read where letters are refused"


def _digits_always_refused(case: Case, texts: st.SearchStrategy[tuple[str, str]], *what: str) -> None:
    """``_digits_refused`` on every pair of texts hypothesis draws from ``texts``."""

    @PROPERTY_SETTINGS
    @given(texts)
    def run(pair: tuple[str, str]) -> None:
        _digits_refused(case, pair, *what)

    run()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_digits_outside_ascii_are_never_read_as_numbers(case: Case) -> None:
    """Arabic-Indic, full-width and other digits (as characters, or as a JSON or XML escape of
    them) in a number: the tool's parse error, in every parser."""

    _digits_always_refused(case, digits_swapped(_text(case.capture), markup=case.markup))


@pytest.mark.parametrize(("capture", "fields", "parse"), SAMPLE_CASES)
def test_sample_digits_outside_ascii_are_never_read_as_numbers(
    capture: str, fields: tuple[str, ...], parse: Callable[[str], Any]
) -> None:
    case = _sample_case(fields, parse)

    _digits_always_refused(case, digits_swapped(_sample_text(capture, fields), markup="text"))


# ------------------------------------------------------------------ underscores between digits (issue 36)

_BETWEEN_DIGITS = re.compile(r"(?<=[0-9])(?=[0-9])")
UNDERSCORE_WHAT = "digits with an underscore between them"


@st.composite
def underscored(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """``text`` with '_' between two digits of a number ('30' -> '3_0', which int() and float() read
    as 30), and the same text with a 'Z' there: where the parser reads a number, both are refused."""
    places = [m.start() for m in _BETWEEN_DIGITS.finditer(text)]
    at = draw(st.sampled_from(places))
    return text[:at] + "_" + text[at:], text[:at] + "Z" + text[at:]


@pytest.mark.parametrize(
    "case", [c for c in CASES if _BETWEEN_DIGITS.search(_text(c.capture))], ids=lambda c: c.id
)
def test_an_underscore_between_digits_is_never_read_as_a_number(case: Case) -> None:
    """Cut or damaged numbers such as '3_0' (show_gids) and '4_00' (ibstat): the tool's parse error
    wherever the parser reads a number, never 30 or 400."""

    _digits_always_refused(case, underscored(_text(case.capture)), UNDERSCORE_WHAT)


@pytest.mark.parametrize(("capture", "fields", "parse"), SAMPLE_CASES)
def test_a_sample_number_with_an_underscore_is_never_read(
    capture: str, fields: tuple[str, ...], parse: Callable[[str], Any]
) -> None:
    case = _sample_case(fields, parse)

    _digits_always_refused(case, underscored(_sample_text(capture, fields)), UNDERSCORE_WHAT)
