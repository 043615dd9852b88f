"""nvidia_smi parsers on the real captures in tests/fixtures/real (see its INDEX.md)."""

import re

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import ParseError

FULL = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-FULL-capture.txt"
BANNER = "#" * 80


def bundle_sections(text):
    """Sections of a utku capture bundle: {'idle :: query (-q)': body, ...}."""
    lines = text.split("\n")
    sections = {}
    i = 0
    while i < len(lines) - 1:
        if lines[i] == BANNER and lines[i + 1].startswith("# ") and "::" in lines[i + 1]:
            title = lines[i + 1][2:]
            start = lines.index(BANNER, i + 1) + 1
            end = lines.index(BANNER, start) if BANNER in lines[start:] else len(lines)
            sections[title] = "\n".join(lines[start:end])
            i = end
        else:
            i += 1
    return sections


@pytest.fixture(scope="module")
def full_capture(read_fixture):
    return bundle_sections(read_fixture(FULL))


def power(gpu):
    p = gpu["power"]
    keys = (
        "draw_w",
        "requested_limit_w",
        "enforced_limit_w",
        "default_limit_w",
        "min_limit_w",
        "max_limit_w",
    )
    return tuple(p[k] for k in keys)


def temps(gpu):
    t = gpu["temperature"]
    return (t["gpu_c"], t["memory_c"], t["tlimit_c"])


GPU_KEYS = {
    "index",
    "uuid",
    "pci_bus_id",
    "name",
    "serial",
    "persistence_mode",
    "mig_mode",
    "power",
    "module_power",
    "temperature",
    "clocks_event_reasons",
    "ecc",
    "remapped_rows",
    "retired_pages",
}


def assert_shape(report):
    """Every GPU has every key, indexes follow output order, values are never marker strings."""
    assert set(report) == {"driver_version", "cuda_version", "attached_gpus", "gpus"}
    for position, gpu in enumerate(report["gpus"]):
        assert set(gpu) == GPU_KEYS
        assert gpu["index"] == position
        for section in ("power", "module_power", "temperature", "ecc", "remapped_rows", "retired_pages"):
            for value in gpu[section].values():
                assert value is None or isinstance(value, (int, float, bool)), (section, value)
        assert set(gpu["clocks_event_reasons"]) <= set(nvidia_smi.THROTTLE_REASONS)


# ------------------------------------------------------------------ -q -x

XML_CASES = {
    "nvidia-smi-xml/netdata-a100-sxm4-mig.xml": dict(
        driver="510.47.03",
        cuda="11.6",
        attached=1,
        uuid="GPU-27b94a00-ed54-5c24-b1fd-1054085de32a",
        bus="00000000:00:04.0",
        name="NVIDIA A100-SXM4-40GB",
        serial="1324321002473",
        persistence=False,
        mig=True,
        power=(66.92, 400.0, 400.0, 400.0, 100.0, 400.0),
        temps=(36, 44, None),
        ecc={"volatile_uncorrected": None, "aggregate_uncorrected": 0},
        remapped={"pending": None, "failure": None},
    ),
    "nvidia-smi-xml/telegraf-a100-sxm4-v12.xml": dict(
        driver="535.54.03",
        cuda="12.2",
        attached=4,  # telegraf trimmed the file to one <gpu>
        uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
        bus="00000000:01:00.0",
        name="NVIDIA A100-SXM4-80GB",
        serial="1650522003820",
        persistence=False,
        mig=True,
        power=(67.03, 500.0, 500.0, 500.0, 100.0, 500.0),
        temps=(27, 44, None),
        ecc={"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
        remapped={"pending": None, "failure": None},
    ),
    "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml": dict(
        driver="590.44.01",
        cuda="13.1",
        attached=1,
        uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
        bus="00000000:61:00.0",
        name="NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        serial="0123456789012",
        persistence=True,
        mig=None,
        # v13 has no power_draw, only average/instant: the average is used.
        power=(3.97, 300.0, 300.0, 300.0, 250.0, 325.0),
        temps=(24, None, 68),
        ecc={"volatile_uncorrected": None, "aggregate_uncorrected": None},
        remapped={"pending": False, "failure": False},
    ),
}


@pytest.mark.parametrize("relpath", sorted(XML_CASES))
def test_parse_query_xml_real_captures(read_fixture, relpath):
    want = XML_CASES[relpath]
    report = nvidia_smi.parse_query_xml(read_fixture(relpath))
    assert_shape(report)
    assert report["driver_version"] == want["driver"]
    assert report["cuda_version"] == want["cuda"]
    assert report["attached_gpus"] == want["attached"]
    assert len(report["gpus"]) == 1
    gpu = report["gpus"][0]
    assert gpu["uuid"] == want["uuid"]
    assert gpu["pci_bus_id"] == want["bus"]
    assert gpu["name"] == want["name"]
    assert gpu["serial"] == want["serial"]
    assert gpu["persistence_mode"] is want["persistence"]
    assert gpu["mig_mode"] is want["mig"]
    assert power(gpu) == want["power"]
    assert temps(gpu) == want["temps"]
    # v13's clocks_event_reasons_counters (25483012608 us of SW power cap) is history, not "active".
    assert gpu["clocks_event_reasons"] == []
    assert gpu["ecc"] == want["ecc"]
    assert gpu["remapped_rows"] == want["remapped"]


def test_xml_every_capture_is_in_the_table(fixtures_dir):
    assert {f"nvidia-smi-xml/{p.name}" for p in (fixtures_dir / "nvidia-smi-xml").iterdir()} == set(XML_CASES)


def test_xml_v13_module_power_is_all_none(read_fixture):
    gpu = nvidia_smi.parse_query_xml(read_fixture("nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"))
    assert set(gpu["gpus"][0]["module_power"].values()) == {None}


@pytest.mark.parametrize(
    ("relpath", "tag", "reason"),
    [
        # v12 event names and v11 throttle names both land on the canonical names.
        ("nvidia-smi-xml/telegraf-a100-sxm4-v12.xml", "clocks_event_reason_sw_power_cap", "sw_power_cap"),
        ("nvidia-smi-xml/netdata-a100-sxm4-mig.xml", "clocks_throttle_reason_hw_slowdown", "hw_slowdown"),
        (
            "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml",
            "clocks_event_reason_hw_power_brake_slowdown",
            "hw_power_brake_slowdown",
        ),
    ],
)
def test_xml_active_reason_is_reported(read_fixture, relpath, tag, reason):
    text = read_fixture(relpath).replace(f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>")
    assert f"<{tag}>Active<" in text
    assert nvidia_smi.parse_query_xml(text)["gpus"][0]["clocks_event_reasons"] == [reason]


def test_xml_gpus_are_indexed_in_output_order(read_fixture):
    # No real multi-GPU XML exists; repeat the real v12 <gpu> with new identities.
    text = read_fixture("nvidia-smi-xml/telegraf-a100-sxm4-v12.xml")
    block = re.search(r"\n(\s*<gpu id=.*?</gpu>)", text, re.S).group(1)
    uuid = "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    copies = [block.replace(uuid, f"GPU-{i:08d}-0000-0000-0000-000000000000") for i in (7, 3)]
    report = nvidia_smi.parse_query_xml(text.replace(block, block + "\n" + "\n".join(copies)))
    assert [g["uuid"] for g in report["gpus"]] == [
        uuid,
        "GPU-00000007-0000-0000-0000-000000000000",
        "GPU-00000003-0000-0000-0000-000000000000",
    ]
    assert [g["index"] for g in report["gpus"]] == [0, 1, 2]


def test_xml_ecc_sums_dram_and_sram(read_fixture):
    text = read_fixture("nvidia-smi-xml/telegraf-a100-sxm4-v12.xml")
    volatile = re.search(r"<volatile>.*?</volatile>", text, re.S).group(0)
    bumped = volatile.replace("<sram_uncorrectable>0<", "<sram_uncorrectable>2<").replace(
        "<dram_uncorrectable>0<", "<dram_uncorrectable>3<"
    )
    ecc = nvidia_smi.parse_query_xml(text.replace(volatile, bumped))["gpus"][0]["ecc"]
    assert ecc == {"volatile_uncorrected": 5, "aggregate_uncorrected": 0}


def test_xml_pre_ampere_double_bit_ecc():
    text = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10.dtd">
<nvidia_smi_log><driver_version>450.80.02</driver_version>
<gpu id="00000000:00:1E.0"><uuid>GPU-a</uuid>
<ecc_errors><volatile><single_bit><total>4</total></single_bit><double_bit><device_memory>1</device_memory>
<total>1</total></double_bit></volatile><aggregate><double_bit><total>N/A</total></double_bit></aggregate>
</ecc_errors></gpu></nvidia_smi_log>"""
    ecc = nvidia_smi.parse_query_xml(text)["gpus"][0]["ecc"]
    assert ecc == {"volatile_uncorrected": 1, "aggregate_uncorrected": None}


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<nvidia_smi_log><driver_version>&lol3;</driver_version><gpu id="0"><uuid>a</uuid></gpu></nvidia_smi_log>"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<nvidia_smi_log><driver_version>&x;</driver_version><gpu id="0"/></nvidia_smi_log>"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("   \n", "empty output"),
        (None, "empty output"),
        (BILLION_LAUGHS, "<!ENTITY"),
        (EXTERNAL_ENTITY, "<!ENTITY"),
        ('<!DOCTYPE nvidia_smi_log SYSTEM "http://evil/x.dtd" [ ]><nvidia_smi_log/>', "DOCTYPE"),
        ("<nvidia_smi_log><driver_version>1</driver_version></nvidia_smi_log>", "no <gpu> element"),
        ("<html><body>502</body></html>", "not <nvidia_smi_log>"),
        ("<nvidia_smi_log><gpu>&undefined;</gpu></nvidia_smi_log>", "malformed or truncated"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "malformed"),
    ],
)
def test_xml_refuses_bad_input(text, message):
    with pytest.raises(ParseError, match=re.escape(message)) as err:
        nvidia_smi.parse_query_xml(text)
    assert str(err.value).startswith("nvidia-smi -q -x:")


@pytest.mark.parametrize("relpath", sorted(XML_CASES))
@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.5, 0.75, 0.999])
def test_xml_truncated_raises_parse_error(read_fixture, relpath, fraction):
    text = read_fixture(relpath)
    with pytest.raises(ParseError, match="malformed or truncated"):
        nvidia_smi.parse_query_xml(text[: int(len(text) * fraction)])


def test_xml_the_longest_field_of_every_real_capture_is_far_below_the_limit(read_fixture):
    """The limit leaves room: no tag, text or attribute of a real capture is a tenth of it."""
    for relpath in XML_CASES:
        root = nvidia_smi._safe_xml_root(read_fixture(relpath))
        longest = max(len(v) for e in root.iter() for v in (e.tag, e.text or "", *e.attrib.values()))
        assert longest < nvidia_smi.XML_FIELD_LIMIT / 10, relpath


def _oversized(text, where, size=2 * 1024 * 1024):
    """``text`` with ``size`` characters more at ``where`` (a marker replaced once)."""
    assert where in text
    return text.replace(where, where + "X" * size, 1)


@pytest.mark.parametrize("relpath", sorted(XML_CASES))
@pytest.mark.parametrize(
    ("where", "named"),
    [
        # a product name 2 MiB long (the simulator's nvsmi-oversized-field), and 60 MiB
        ("<product_name>", "the text of <product_name> of GPU "),
        ("<uuid>", "the text of <uuid> of GPU "),
        ("<driver_version>", "the text of <driver_version> is "),
        ('<gpu id="', "attribute 'id' of <gpu>"),
        ("<pci>", "the text of <pci> of GPU "),
    ],
)
def test_xml_a_field_longer_than_nvidia_smi_prints_is_refused_by_name(read_fixture, relpath, where, named):
    real = read_fixture(relpath)
    was = re.search(re.escape(where) + r'([^<"]*)', real).group(1)  # the field's own characters
    with pytest.raises(ParseError) as err:
        nvidia_smi.parse_query_xml(_oversized(real, where))
    message = str(err.value)
    assert message.startswith("nvidia-smi -q -x: ") and named in message
    long = f"is {2 * 1024 * 1024 + len(was)} characters long (nvidia-smi prints no field over 1024)"
    assert long in message
    assert len(message) < 400  # a 2 MiB field is quoted cut, never whole


def test_xml_a_60_mib_product_name_is_refused_and_a_field_at_the_limit_is_read(read_fixture):
    text = read_fixture("nvidia-smi-xml/telegraf-a100-sxm4-v12.xml")
    with pytest.raises(ParseError, match=r"<product_name> of GPU '00000000:01:00.0' is 62914581 characters"):
        nvidia_smi.parse_query_xml(_oversized(text, "<product_name>", 60 * 1024 * 1024))
    name = "NVIDIA A100-SXM4-80GB"
    at_limit = _oversized(text, "<product_name>", nvidia_smi.XML_FIELD_LIMIT - len(name))
    read = nvidia_smi.parse_query_xml(at_limit)["gpus"][0]["name"]
    assert read == "X" * (nvidia_smi.XML_FIELD_LIMIT - len(name)) + name
    with pytest.raises(ParseError, match="is 1025 characters long"):
        nvidia_smi.parse_query_xml(_oversized(at_limit, "<product_name>", 1))


def test_xml_an_oversized_tag_is_refused_quoted():
    tag = "t" * 5000
    text = f"<nvidia_smi_log><gpu id='0'><{tag}>1</{tag}></gpu></nvidia_smi_log>"
    with pytest.raises(ParseError, match=r"a tag of GPU '0' is 5000 characters long") as err:
        nvidia_smi.parse_query_xml(text)
    assert len(str(err.value)) < 400


# ------------------------------------------------------------------ -q (text)

GPUD_UUIDS = [
    "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",
    "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00",
    "GPU-167d8376-ee13-fca4-938a-a05167c43cdc",
    "GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99",
    "GPU-2b6f61f9-8b00-3b57-d912-b62792120662",
    "GPU-980ea11b-91dc-db7b-72ac-0685abc43658",
    "GPU-4ef109e9-e925-4834-2b85-0771b4ef696c",
    "GPU-b0fe4996-1f7c-91f6-0ccd-08ae3b7e23c5",
]
MASKED = "GPU-00000000-0000-0000-0000-000000000000"
H100_LIMITS = (700.0, 700.0, 700.0, 200.0, 700.0)
# (bus id, name) of the one GPU of utku's H100 and H200 captures
UTKU_H100 = ("00000000:00:09.0", "NVIDIA H100 80GB HBM3")
UTKU_H200 = ("00000000:83:00.0", "NVIDIA H200")


def _utku_text(gpu, draw, temps, reasons):
    """One of utku's `nvidia-smi -q` captures: one H100 or H200 SXM on driver 590.48.01 (CUDA 13.1), its
    UUID masked, persistence on, at the H100's power limits, no ECC error, no row remapped."""
    return dict(
        driver="590.48.01",
        cuda="13.1",
        attached=1,
        uuids=[MASKED],
        bus=gpu[0],
        name=gpu[1],
        persistence=True,
        power=(draw, *H100_LIMITS),
        temps=temps,
        reasons=reasons,
        ecc={"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
        remapped={"pending": False, "failure": False},
    )


TEXT_CASES = {
    "nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt": dict(
        driver="535.161.08",
        cuda="12.2",
        attached=8,
        uuids=GPUD_UUIDS,
        bus="00000000:19:00.0",
        name="NVIDIA H100 80GB HBM3",
        persistence=True,
        power=(67.74, *H100_LIMITS),
        temps=(29, 39, 56),
        # Every GPU of this HGX board has the external power brake asserted.
        reasons=[["hw_slowdown", "hw_power_brake_slowdown"]] * 8,
        ecc={"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
        remapped={"pending": False, "failure": False},
    ),
    "nvidia-smi-text/azhpc-diag-ndv4-8xA100-SXM4-40GB-460.32.03-q.txt": dict(
        driver="460.32.03",
        cuda="11.2",
        attached=8,
        uuids=[
            "GPU-b01e9f90-c60c-4ad1-2052-154833662357",
            "GPU-fccd4a78-556b-7b41-320b-f2a10438c176",
            "GPU-0b64e86a-a39a-9261-7e62-798d98e599af",
            "GPU-e58a4615-3aae-089b-9161-2c78eb0bf227",
            "GPU-bf404e05-68b6-34c1-386f-94eda8a08cd7",
            "GPU-083904c0-9140-4a80-ae74-4c2682d585b3",
            "GPU-2d82fc40-f4a8-9df4-effd-d6f6f22c88d8",
            "GPU-1291f09c-b6e3-8fb1-6879-89b8b8a9dbc6",
        ],
        bus="00000001:00:00.0",
        name="A100-SXM4-40GB",
        persistence=False,
        power=(55.63, 400.0, 400.0, 400.0, 100.0, 400.0),
        temps=(41, 40, None),
        reasons=[["gpu_idle"]] * 8,
        ecc={"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
        remapped={"pending": False, "failure": False},
    ),
    "nvidia-smi-text/llm-action-h800-q-i0.txt": dict(
        driver="525.105.17",
        cuda="12.0",
        attached=8,  # -q -i 0 on an 8-GPU node: one section, eight attached
        uuids=["GPU-34bf77d1-c686-6821-79a8-32d326c5039c"],
        bus="00000000:18:00.0",
        name="NVIDIA H800",
        persistence=True,
        power=(74.71, *H100_LIMITS),
        temps=(35, 44, 51),
        reasons=[["gpu_idle"]],
        ecc={"volatile_uncorrected": None, "aggregate_uncorrected": None},
        remapped={"pending": False, "failure": False},
    ),
    "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-idle-q.txt": _utku_text(
        UTKU_H100, 69.85, (41, 48, 46), [["gpu_idle"]]
    ),
    # 629.45 W is the Average Power Draw, not the 588.39 W instant reading; the T.Limit margin (26)
    # shrinks as the GPU heats
    "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-q.txt": _utku_text(
        UTKU_H100, 629.45, (59, 55, 26), [[]]
    ),
    "nvidia-smi-text/utku-h200-590.48.01-idle-q.txt": _utku_text(
        UTKU_H200, 77.67, (28, 32, 59), [["gpu_idle"]]
    ),
    "nvidia-smi-text/utku-h200-590.48.01-load-q.txt": _utku_text(UTKU_H200, 627.32, (52, 41, 35), [[]]),
}


# `-q -i 0` on an 8-GPU node: "Attached GPUs : 8" and one GPU section, as asked.
PARTIAL = {"nvidia-smi-text/llm-action-h800-q-i0.txt"}


@pytest.mark.parametrize("relpath", sorted(TEXT_CASES))
def test_parse_query_text_real_captures(read_fixture, relpath):
    want = TEXT_CASES[relpath]
    report = nvidia_smi.parse_query_text(read_fixture(relpath), partial=relpath in PARTIAL)
    assert_shape(report)
    assert report["driver_version"] == want["driver"]
    assert report["cuda_version"] == want["cuda"]
    assert report["attached_gpus"] == want["attached"]
    assert [g["uuid"] for g in report["gpus"]] == want["uuids"]
    assert [g["clocks_event_reasons"] for g in report["gpus"]] == want["reasons"]
    gpu = report["gpus"][0]
    assert gpu["pci_bus_id"] == want["bus"]
    assert gpu["name"] == want["name"]
    assert gpu["persistence_mode"] is want["persistence"]
    assert gpu["mig_mode"] is False
    assert power(gpu) == want["power"]
    assert temps(gpu) == want["temps"]
    assert gpu["ecc"] == want["ecc"]
    assert gpu["remapped_rows"] == want["remapped"]


def test_gpud_h100_gpu0_power_brake(read_fixture):
    gpus = nvidia_smi.parse_query_text(
        read_fixture("nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt")
    )["gpus"]
    assert "hw_slowdown" in gpus[0]["clocks_event_reasons"]
    assert "hw_power_brake_slowdown" in gpus[0]["clocks_event_reasons"]
    assert "hw_thermal_slowdown" not in gpus[0]["clocks_event_reasons"]
    assert [g["pci_bus_id"] for g in gpus][-1] == "00000000:DB:00.0"
    assert [g["temperature"]["tlimit_c"] for g in gpus] == [56, 57, 56, 57, 55, 55, 55, 55]


PAGE_RETIREMENT = {
    "nvidia-smi-text/azurehpc-hc-orig_nvsmi8_output.txt": [(0, 0, False)] * 8,
    "nvidia-smi-text/azurehpc-hc-bad_nvsmi8_output.txt": [
        (60, 5, False),
        (2, 61, True),
        (0, 0, False),
        (6, 0, True),
        (0, 0, False),
        (20, 45, True),
        (0, 0, False),
        (8, 56, True),
    ],
}


@pytest.mark.parametrize("relpath", sorted(PAGE_RETIREMENT))
def test_partial_page_retirement_report(read_fixture, relpath):
    report = nvidia_smi.parse_query_text(read_fixture(relpath))
    assert_shape(report)
    assert report["driver_version"] == "535.86.10"
    gpus = report["gpus"]
    assert [g["pci_bus_id"] for g in gpus] == [f"0000000{i}:00:00.0" for i in range(1, 9)]
    retired = [
        (g["retired_pages"]["single_bit"], g["retired_pages"]["double_bit"], g["retired_pages"]["pending"])
        for g in gpus
    ]
    assert retired == PAGE_RETIREMENT[relpath]
    # Sections the -d PAGE_RETIREMENT report leaves out read as unknown.
    assert all(g["uuid"] is None and power(g) == (None,) * 6 and temps(g) == (None,) * 3 for g in gpus)
    assert all(g["remapped_rows"] == {"pending": None, "failure": None} for g in gpus)


def test_partial_power_report_four_gpus(read_fixture):
    relpath = "nvidia-smi-power-perf/minerva-4x-rtx3090-3090ti-580.65.06-q-d-POWER.txt"
    report = nvidia_smi.parse_query_text(read_fixture(relpath))
    assert_shape(report)
    assert (report["driver_version"], report["cuda_version"]) == ("580.65.06", "13.0")
    assert [power(g) for g in report["gpus"]] == [
        (13.44, 480.0, 480.0, 480.0, 100.0, 480.0),
        (12.98, 420.0, 420.0, 420.0, 100.0, 450.0),
        (9.52, 420.0, 420.0, 420.0, 100.0, 450.0),
        (31.91, 450.0, 450.0, 450.0, 100.0, 450.0),
    ]
    assert [g["pci_bus_id"] for g in report["gpus"]][2] == "00000000:C1:00.0"
    assert all(g["uuid"] is None and g["clocks_event_reasons"] == [] for g in report["gpus"])


NOT_Q_OUTPUT = [
    "nvidia-smi-text/azhpc-diag-nvidia-smi-table-V100-inforom-corrupted.txt",
    "nvidia-smi-text/azurehpc-hc-bad_nvlink_status.txt",
    "nvidia-smi-text/azurehpc-hc-good_nvlink_status.txt",
    "nvidia-smi-text/gpud-nvidia-smi-default-table-550.90.07.txt",
    "nvidia-smi-text/gpud-nvlink-status-a100.txt",
    "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-default-table.txt",
    "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-dmon.txt",
    "nvidia-smi-text/utku-h200-590.48.01-nvlink-s.txt",
    "nvidia-smi-text/utku-h200-mig-590.48.01-load-default-table.txt",
]


@pytest.mark.parametrize("relpath", NOT_Q_OUTPUT)
def test_text_refuses_other_nvidia_smi_output(read_fixture, relpath):
    # Two of them (gpud's) were stored without nvidia-smi's final newline: refused for that first.
    with pytest.raises(
        ParseError,
        match=r"^nvidia-smi -q: (no 'GPU <pci bus id>' section|output does not end with a newline)",
    ):
        nvidia_smi.parse_query_text(read_fixture(relpath))


def test_text_every_capture_is_classified(fixtures_dir):
    known = set(TEXT_CASES) | set(PAGE_RETIREMENT) | set(NOT_Q_OUTPUT) | {FULL}
    assert {f"nvidia-smi-text/{p.name}" for p in (fixtures_dir / "nvidia-smi-text").iterdir()} == known


@pytest.mark.parametrize(
    ("section", "twin"),
    [
        ("idle :: query (-q)", "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-idle-q.txt"),
        ("load :: query (-q)", "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-q.txt"),
    ],
)
def test_full_capture_q_sections_match_slices(full_capture, read_fixture, section, twin):
    assert nvidia_smi.parse_query_text(full_capture[section]) == nvidia_smi.parse_query_text(
        read_fixture(twin)
    )


def test_text_and_csv_agree_on_the_same_gpu(read_fixture):
    # Captured 15 s apart on the same idle H100: identity and limits must match exactly.
    text = nvidia_smi.parse_query_text(
        read_fixture("nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-idle-q.txt")
    )
    row = nvidia_smi.parse_query_csv(
        read_fixture("nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv")
    )
    gpu = text["gpus"][0]
    assert row[0]["uuid"] == gpu["uuid"]
    assert row[0]["pci.bus_id"] == gpu["pci_bus_id"]
    assert row[0]["enforced.power.limit"] == gpu["power"]["enforced_limit_w"]
    assert row[0]["power.max_limit"] == gpu["power"]["max_limit_w"]
    assert row[0]["temperature.gpu.tlimit"] == gpu["temperature"]["tlimit_c"]


def test_text_old_double_bit_ecc_layout():
    text = """==============NVSMI LOG==============
Driver Version                            : 418.87.01
Attached GPUs                             : 1
GPU 00000000:00:1E.0
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 3
                Total                     : 3
            Double Bit
                Device Memory             : 2
                Register File             : 0
                Total                     : 2
        Aggregate
            Double Bit
                Total                     : N/A
"""
    ecc = nvidia_smi.parse_query_text(text)["gpus"][0]["ecc"]
    assert ecc == {"volatile_uncorrected": 2, "aggregate_uncorrected": None}


@pytest.mark.parametrize("relpath", sorted(TEXT_CASES))
def test_text_truncated_never_raises_anything_else(read_fixture, relpath):
    text = read_fixture(relpath)
    partial = relpath in PARTIAL
    full = len(nvidia_smi.parse_query_text(text, partial=partial)["gpus"])
    for cut in range(0, len(text), max(1, len(text) // 97)):
        try:
            report = nvidia_smi.parse_query_text(text[:cut], partial=partial)
        except ParseError as exc:
            assert str(exc).startswith("nvidia-smi -q:")
        else:
            assert 1 <= len(report["gpus"]) <= full


@pytest.mark.parametrize(
    "text", ["", "\n\n", "==============NVSMI LOG==============\n\nDriver Version : 1\n"]
)
def test_text_without_gpu_sections_raises(text):
    with pytest.raises(ParseError, match=r"^nvidia-smi -q: "):
        nvidia_smi.parse_query_text(text)


# ------------------------------------------------------------------ --query-gpu csv

UTKU_CSV = {
    "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv": dict(
        name="NVIDIA H100 80GB HBM3",
        bus="00000000:00:09.0",
        draw=69.85,
        instant=69.62,
        temp=41,
        tlimit=46,
        idle="Active",
        active_mask="0x0000000000000001",
        used=0,
    ),
    "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-load-query-gpu.csv": dict(
        name="NVIDIA H100 80GB HBM3",
        bus="00000000:00:09.0",
        draw=631.95,
        instant=625.68,
        temp=59,
        tlimit=26,
        idle="Not Active",
        active_mask="0x0000000000000000",
        used=19818,
    ),
    "nvidia-smi-csv/utku-h200-590.48.01-load-query-gpu.csv": dict(
        name="NVIDIA H200",
        bus="00000000:83:00.0",
        draw=627.4,
        instant=626.26,
        temp=52,
        tlimit=35,
        idle="Not Active",
        active_mask="0x0000000000000000",
        used=32362,
    ),
}


@pytest.mark.parametrize("relpath", sorted(UTKU_CSV))
def test_parse_query_csv_every_field(read_fixture, relpath):
    want = UTKU_CSV[relpath]
    rows = nvidia_smi.parse_query_csv(read_fixture(relpath))
    assert len(rows) == 1
    row = rows[0]
    assert len(row) == 212
    assert "power.draw [W]" not in row  # units are dropped from the names
    assert row["name"] == want["name"]
    assert row["uuid"] == MASKED
    assert row["pci.bus_id"] == want["bus"]
    assert row["index"] == 0
    assert row["power.draw"] == want["draw"]
    assert row["power.draw.instant"] == want["instant"]
    assert (row["power.limit"], row["enforced.power.limit"], row["power.min_limit"]) == (700.0, 700.0, 200.0)
    assert row["temperature.gpu"] == want["temp"]
    assert row["temperature.gpu.tlimit"] == want["tlimit"]
    assert row["memory.used"] == want["used"]
    assert row["clocks_event_reasons.gpu_idle"] == want["idle"]
    assert row["clocks_event_reasons_counters.sw_power_cap"] == 0  # '0 us'
    assert row["edpp_multiplier"] == 100.0  # '100.00 %'
    # Markers are None, never the marker text.
    assert row["module.power.draw.average"] is None  # [N/A]
    assert row["display_mode"] is None  # [Requested functionality has been deprecated]
    assert row["fan.speed"] is None
    # Identifiers that look numeric stay as printed.
    assert row["serial"] == "0000000000000"
    assert row["inforom.oem"] == "2.1"
    assert row["compute_cap"] == "9.0"
    assert row["clocks_event_reasons.active"] == want["active_mask"]
    assert row["pci.bus"] in ("0x00", "0x83")
    assert row["driver_version"] == "590.48.01"


def test_parse_query_csv_nounits_p100(read_fixture):
    # netdata's test file lost nvidia-smi's final newline; without it the last value could be cut.
    rows = nvidia_smi.parse_query_csv(read_fixture("nvidia-smi-csv/netdata-tesla-p100.csv") + "\n")
    assert rows == [
        {
            "name": "Tesla P100-PCIE-16GB",
            "uuid": "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6",
            "fan.speed": None,
            "pstate": "P0",
            "memory.reserved": 103,
            "memory.used": 0,
            "memory.free": 16280,
            "utilization.gpu": 0,
            "utilization.memory": 0,
            "temperature.gpu": 37,
            "power.draw": 28.16,
            "clocks.current.graphics": 405,
            "clocks.current.sm": 405,
            "clocks.current.memory": 715,
            "clocks.current.video": 835,
        }
    ]


def test_csv_every_capture_is_in_the_table(fixtures_dir):
    names = {f"nvidia-smi-csv/{p.name}" for p in (fixtures_dir / "nvidia-smi-csv").iterdir()}
    assert names == set(UTKU_CSV) | {"nvidia-smi-csv/netdata-tesla-p100.csv"}


def test_full_capture_csv_section_matches_slice(full_capture, read_fixture):
    section = nvidia_smi.parse_query_csv(full_capture["idle :: query-gpu (csv, what the exporter parses)"])
    twin = nvidia_smi.parse_query_csv(
        read_fixture("nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv")
    )
    assert section == twin


def test_csv_noheader_needs_fields(read_fixture):
    header, row = read_fixture("nvidia-smi-csv/netdata-tesla-p100.csv").splitlines()
    fields = [re.sub(r"\s*\[.*\]$", "", f.strip()) for f in header.split(",")]
    assert nvidia_smi.parse_query_csv(row + "\n", fields=fields)[0]["power.draw"] == 28.16
    # Given fields and a header anyway: the header is recognised, not read as a GPU.
    assert len(nvidia_smi.parse_query_csv(header + "\n" + row + "\n", fields=fields)) == 1
    with pytest.raises(ParseError, match="13 values for 15 fields"):
        nvidia_smi.parse_query_csv(row.rsplit(",", 2)[0] + "\n", fields=fields)


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        ("", None, "empty output"),
        ("name, uuid\nTesla\n", None, "row 1 has 1 values for 2 fields"),
        ("name, power.draw [W]\nA, 1 W, extra\n", None, "row 1 has 3 values for 2 fields"),
        ("name, uuid\nTesla, GPU-1", None, "does not end with a newline"),
    ],
)
def test_csv_refuses_bad_input(text, fields, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        nvidia_smi.parse_query_csv(text, fields=fields)


def test_csv_header_only_is_refused():
    # nvidia-smi prints a row per GPU or "No devices were found"; a header alone was cut short.
    with pytest.raises(ParseError, match="no GPU row after the header"):
        nvidia_smi.parse_query_csv("name, uuid\n")


# ------------------------------------------------------------------ -L


def test_parse_list_full_capture(full_capture):
    assert nvidia_smi.parse_list(full_capture["capabilities :: list (-L)"]) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": MASKED, "mig": []}
    ]


def test_parse_list_with_mig_devices():
    # Layout of `nvidia-smi -L` on a MIG-enabled A100 (no such capture in the fixtures).
    text = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-27b94a00-ed54-5c24-b1fd-1054085de32a)\n"
        "  MIG 3g.20gb     Device  0: (UUID: MIG-2a1f6b7e-7b0f-5e0c-9a4a-6f1f0c4a2b11)\n"
        "  MIG 3g.20gb     Device  1: (UUID: MIG-9c3e1d2a-4b5f-5a6b-8c7d-0e1f2a3b4c5d)\n"
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-fccd4a78-556b-7b41-320b-f2a10438c176)\n"
    )
    gpus = nvidia_smi.parse_list(text)
    assert [g["uuid"] for g in gpus] == [
        "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a",
        "GPU-fccd4a78-556b-7b41-320b-f2a10438c176",
    ]
    assert [(m["index"], m["profile"]) for m in gpus[0]["mig"]] == [(0, "3g.20gb"), (1, "3g.20gb")]
    assert gpus[1]["mig"] == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("No devices were found\n", "no 'GPU N: ... (UUID: ...)' line"),
        ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0000\n", "incomplete device line"),
    ],
)
def test_parse_list_refuses_bad_input(text, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        nvidia_smi.parse_list(text)


# ------------------------------------------------------------------ topo -m

GB200 = "topo-matrix/aiconfigurator-gb200-nvl72078-T01-4gpu-6nic-ansi-topo-m.txt"
SGLANG = "topo-matrix/sglang-deploy-notes-aihub0007-8gpu-NV18-12nic-tabs-topo-m.txt"
MLENG = "topo-matrix/ml-engineering-h100-8gpu-NV18-topo-m.txt"
GPUS8 = [f"GPU{i}" for i in range(8)]

TOPO_CASES = {
    GB200: dict(
        devices=["GPU0", "GPU1", "GPU2", "GPU3"] + [f"NIC{i}" for i in range(6)],
        cpu={"GPU0": "0-35", "GPU1": "0-35", "GPU2": None, "GPU3": None},
        numa={"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1},
        legend={f"NIC{i}": f"mlx5_{i}" for i in range(6)},
        domains=[["GPU0", "GPU1", "GPU2", "GPU3"]],
        # Every NIC is NODE from every GPU: all six are equally near.
        nearest={g: [f"mlx5_{i}" for i in range(6)] for g in ("GPU0", "GPU1", "GPU2", "GPU3")},
        cells={("GPU0", "GPU3"): "NV18", ("GPU2", "NIC5"): "NODE", ("NIC0", "NIC0"): "X"},
    ),
    SGLANG: dict(
        devices=GPUS8 + [f"NIC{i}" for i in range(12)],
        cpu=dict.fromkeys(GPUS8, "0-191"),
        numa=dict.fromkeys(GPUS8, 0),
        legend={f"NIC{i}": f"mlx5_{i}" for i in range(12)},
        domains=[GPUS8],
        # GPU3 pairs with NIC5, not NIC3: NIC3/NIC4 and NIC9/NIC10 share a switch with no GPU.
        nearest={
            "GPU0": ["mlx5_0"],
            "GPU1": ["mlx5_1"],
            "GPU2": ["mlx5_2"],
            "GPU3": ["mlx5_5"],
            "GPU4": ["mlx5_6"],
            "GPU5": ["mlx5_7"],
            "GPU6": ["mlx5_8"],
            "GPU7": ["mlx5_11"],
        },
        cells={
            ("GPU3", "NIC5"): "PIX",
            ("NIC3", "NIC4"): "PIX",
            ("NIC11", "GPU7"): "PIX",
            ("GPU7", "GPU0"): "NV18",
        },
    ),
    MLENG: dict(
        devices=GPUS8,
        cpu={g: ("0-51" if int(g[3:]) < 4 else "52-103") for g in GPUS8},
        numa={g: (0 if int(g[3:]) < 4 else 1) for g in GPUS8},
        legend={},
        domains=[GPUS8],
        nearest={g: [] for g in GPUS8},
        cells={("GPU0", "GPU7"): "NV18", ("GPU5", "GPU5"): "X"},
    ),
}


def _check_topo(topo, want):
    assert topo["devices"] == want["devices"]
    assert set(topo["matrix"]) == set(want["devices"])
    assert all(list(row) == want["devices"] for row in topo["matrix"].values())
    assert topo["cpu_affinity"] == want["cpu"]
    assert topo["numa_affinity"] == want["numa"]
    assert set(topo["gpu_numa_id"].values()) == {None}  # every capture prints N/A
    assert topo["nic_legend"] == want["legend"]
    for (row, col), link in want["cells"].items():
        assert topo["matrix"][row][col] == link
    assert nvidia_smi.nvlink_domains(topo) == want["domains"]
    assert {g: nvidia_smi.nearest_nics(topo, g) for g in want["nearest"]} == want["nearest"]


@pytest.mark.parametrize("relpath", sorted(TOPO_CASES))
def test_parse_topo_matrix_real_captures(read_fixture, relpath):
    _check_topo(nvidia_smi.parse_topo_matrix(read_fixture(relpath)), TOPO_CASES[relpath])


@pytest.mark.parametrize("relpath", [GB200, SGLANG])
def test_topo_with_tabs_expanded_reads_the_same(read_fixture, relpath):
    # A terminal copy turns tabs into spaces; empty cells (GB200's CPU Affinity) then vanish.
    text = read_fixture(relpath)
    spaced = "\n".join(line.expandtabs(8) for line in text.split("\n"))
    assert "\t" not in spaced
    assert nvidia_smi.parse_topo_matrix(spaced) == nvidia_smi.parse_topo_matrix(text)


def test_topo_every_capture_is_in_the_table(fixtures_dir):
    assert {f"topo-matrix/{p.name}" for p in (fixtures_dir / "topo-matrix").iterdir()} == set(TOPO_CASES)


def test_topo_single_gpu_full_capture(full_capture):
    text = full_capture["capabilities :: topo -m"]
    assert "\x1b[4m" in text and "\x1b[0m" in text
    topo = nvidia_smi.parse_topo_matrix(text, gpu_count=1)
    assert topo == {
        "devices": ["GPU0"],
        "matrix": {"GPU0": {"GPU0": "X"}},
        "cpu_affinity": {"GPU0": "0-19"},
        "numa_affinity": {"GPU0": 0},
        "gpu_numa_id": {"GPU0": None},
        "nic_legend": {},
    }
    assert nvidia_smi.nvlink_domains(topo) == [["GPU0"]]
    assert nvidia_smi.nearest_nics(topo, "GPU0") == []


def test_topo_two_baseboards_are_two_domains(read_fixture):
    # The reference node: two 8-GPU boards, cross-board traffic over the NICs (SYS).
    text = read_fixture(MLENG)
    lines = text.split("\n")
    for i in range(1, 9):
        cells = lines[i].split()
        cells[1:9] = [("NV18" if (j < 4) == (i - 1 < 4) else "SYS") if j != i - 1 else "X" for j in range(8)]
        lines[i] = "  ".join(cells)
    topo = nvidia_smi.parse_topo_matrix("\n".join(lines))
    assert nvidia_smi.nvlink_domains(topo) == [GPUS8[:4], GPUS8[4:]]


def test_topo_cells_that_ran_together(read_fixture):
    text = read_fixture(MLENG)
    joined = text.replace("GPU2  NV18  NV18   X    NV18", "GPU2  NV18NV18   X    NV18", 1)
    assert joined != text
    assert nvidia_smi.parse_topo_matrix(joined) == nvidia_smi.parse_topo_matrix(text)


def test_nearest_nics_prefers_the_closest_level():
    text = (
        "\tGPU0\tGPU1\tNIC0\tNIC1\tNIC2\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tSYS\tPXB\tPHB\tSYS\t0-15\t0\n"
        "GPU1\tSYS\t X \tSYS\tSYS\tSYS\t16-31\t1\n"
        "NIC0\tPXB\tSYS\t X \tPHB\tSYS\n"
        "NIC1\tPHB\tSYS\tPHB\t X \tSYS\n"
        "NIC2\tSYS\tSYS\tSYS\tSYS\t X \n"
        "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n"
    )
    topo = nvidia_smi.parse_topo_matrix(text)
    assert nvidia_smi.nearest_nics(topo, "GPU0") == ["mlx5_0"]
    assert nvidia_smi.nearest_nics(topo, "GPU1") == []  # only SYS: nothing is near
    assert nvidia_smi.nvlink_domains(topo) == [["GPU0"], ["GPU1"]]


def test_topo_truncated_rows(read_fixture):
    text = read_fixture(GB200)
    cut = text[: text.index("\nNIC4\t") + 1]
    with pytest.raises(ParseError, match="no row for NIC4, NIC5"):
        nvidia_smi.parse_topo_matrix(cut)


def test_topo_truncated_mid_row(read_fixture):
    text = read_fixture(SGLANG)
    with pytest.raises(ParseError, match="row GPU3 has fewer than 20 link values"):
        nvidia_smi.parse_topo_matrix(text[: text.index("\nGPU3\t") + 40] + "\n")


@pytest.mark.parametrize("relpath", sorted(TOPO_CASES))
def test_topo_any_prefix_parses_or_raises_parse_error(read_fixture, relpath):
    text = read_fixture(relpath)
    for cut in range(0, len(text), 7):
        try:
            topo = nvidia_smi.parse_topo_matrix(text[:cut])
        except ParseError as exc:
            assert str(exc).startswith("nvidia-smi topo -m:")
        else:
            assert topo["devices"] == TOPO_CASES[relpath]["devices"]


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("", {}, "empty output"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", {}, "no header line with GPU0"),
        ("\tGPU0\tGPU0\tCPU Affinity\nGPU0\t X \tX\t0-1\n", {}, "appears twice"),
        ("\tGPU0\tCPU Affinity\nGPU9\t X \t0-1\n", {}, "row GPU9 is not in the header"),
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-1\nGPU0\t X \t0-1\n", {}, "row GPU0 appears twice"),
    ],
)
def test_topo_refuses_bad_input(text, kwargs, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        nvidia_smi.parse_topo_matrix(text, **kwargs)


def test_topo_gpu_count_mismatch(read_fixture):
    with pytest.raises(ParseError, match="matrix has 8 GPUs, expected 16"):
        nvidia_smi.parse_topo_matrix(read_fixture(MLENG), gpu_count=16)


# ------------------------------------------------------------------ build_topology


def fake_gpus(count):
    return [
        {"index": i, "uuid": f"GPU-{i:08x}-aaaa", "pci_bus_id": f"00000000:{i:02X}:00.0"}
        for i in range(count)
    ]


def test_build_topology_sglang_pairs_gpus_with_nics(read_fixture):
    gpus = fake_gpus(8)
    topology, warnings = nvidia_smi.build_topology(gpus, nvidia_smi.parse_topo_matrix(read_fixture(SGLANG)))
    assert warnings == []
    assert set(topology) == {"matrix", "nvlink_domains", "gpus", "nics"}
    assert topology["nvlink_domains"] == [[g["uuid"] for g in gpus]]
    gpu3 = topology["gpus"]["GPU-00000003-aaaa"]
    assert gpu3 == {
        "index": 3,
        "topo_name": "GPU3",
        "pci_bus_id": "00000000:03:00.0",
        "numa_node": 0,
        "gpu_numa_id": None,
        "cpu_affinity": "0-191",
        "nearest_nics": ["mlx5_5"],
    }
    assert topology["nics"]["mlx5_5"] == {
        "topo_name": "NIC5",
        "numa_node": 0,
        "nearest_gpus": ["GPU-00000003-aaaa"],
    }
    # NIC3 has no GPU on its switch: no NUMA node can be inferred and no GPU uses it.
    assert topology["nics"]["mlx5_3"] == {"topo_name": "NIC3", "numa_node": None, "nearest_gpus": []}
    assert len(topology["nics"]) == 12


def test_build_topology_gb200_numa_and_empty_affinity(read_fixture):
    topology, warnings = nvidia_smi.build_topology(
        fake_gpus(4), nvidia_smi.parse_topo_matrix(read_fixture(GB200))
    )
    assert warnings == []
    by_name = {v["topo_name"]: v for v in topology["gpus"].values()}
    assert (by_name["GPU2"]["numa_node"], by_name["GPU2"]["cpu_affinity"]) == (1, None)
    assert (by_name["GPU0"]["numa_node"], by_name["GPU0"]["cpu_affinity"]) == (0, "0-35")
    assert sorted(topology["nics"]) == [f"mlx5_{i}" for i in range(6)]
    # NODE links cross host bridges; they do not pin a NIC to one NUMA node.
    assert {n["numa_node"] for n in topology["nics"].values()} == {None}
    assert len(topology["nvlink_domains"]) == 1 and len(topology["nvlink_domains"][0]) == 4


def test_build_topology_disagreement_is_a_warning(read_fixture):
    topology, warnings = nvidia_smi.build_topology(
        fake_gpus(7), nvidia_smi.parse_topo_matrix(read_fixture(MLENG))
    )
    assert topology is None
    assert len(warnings) == 1
    assert "shows 8 GPUs" in warnings[0] and "lists 7" in warnings[0]


def test_build_topology_refuses_duplicate_uuids(read_fixture):
    gpus = [dict(g, uuid=MASKED) for g in fake_gpus(8)]
    topology, warnings = nvidia_smi.build_topology(gpus, nvidia_smi.parse_topo_matrix(read_fixture(MLENG)))
    assert topology is None
    assert warnings == ["GPU UUIDs from nvidia-smi -q -x are not unique; GPU topology left unset"]


def test_build_topology_without_matrix():
    assert nvidia_smi.build_topology(fake_gpus(2), None) == (None, [])


@pytest.mark.parametrize(
    "capture",
    [
        "nvidia-smi-csv/utku-h200-590.48.01-load-query-gpu.csv",
        "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-idle-query-gpu.csv",
    ],
)
def test_power_sample_reads_the_real_query_columns(read_fixture, capture):
    """The power sample's columns, cut from real full queries (H100/H200 SXM: 200..700 W)."""
    rows = nvidia_smi.parse_query_csv(read_fixture(capture))
    text = "".join(
        ", ".join("" if row[f] is None else str(row[f]) for f in nvidia_smi.POWER_FIELDS) + "\n"
        for row in rows
    )
    sample = nvidia_smi.parse_power_sample(text)
    assert sample[0]["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert sample[0]["persistence_mode"] is True
    assert sample[0]["power"] == {
        "requested_limit_w": 700.0,
        "enforced_limit_w": 700.0,
        "default_limit_w": 700.0,
        "min_limit_w": 200.0,
        "max_limit_w": 700.0,
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [("", "empty output"), ("GPU-1, 00000000:18:00.0, Enabled, 1400.00, 1400.00\n", "row 1 has 5 values")],
)
def test_power_sample_refuses_empty_or_cut_output(text, why):
    with pytest.raises(ParseError, match=why):
        nvidia_smi.parse_power_sample(text)


@pytest.mark.parametrize("field", ['"' + "x" * (128 * 1024 + 1) + '"', '"' + "y" * 200_000])
def test_parse_query_csv_field_csv_cannot_read_is_a_parse_error(field):
    """csv.Error is not a ValueError: a field over csv's 128 KiB limit (quoted, or an unclosed
    quote) escaped as a traceback."""
    text = "name, power.draw [W]\n" + field + ", 10 W\n"
    with pytest.raises(nvidia_smi.ParseError, match=r"^nvidia-smi --query-gpu --format=csv: "):
        nvidia_smi.parse_query_csv(text)
