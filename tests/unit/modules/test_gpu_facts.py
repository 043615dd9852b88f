"""gpufleet.node.gpu_facts: exact nvidia-smi calls, facts, and failure handling."""

import re
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.modules import gpu_facts

from tests.unit.modules import harness

SMI = "/usr/bin/nvidia-smi"
QUERY = [SMI, "-q", "-x"]
TOPO = [SMI, "topo", "-m"]
V13 = "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"
V12 = "nvidia-smi-xml/telegraf-a100-sxm4-v12.xml"
MLENG = "topo-matrix/ml-engineering-h100-8gpu-NV18-topo-m.txt"
FULL = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-FULL-capture.txt"
DRIVER_DOWN = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


class FakeNvidiaSmi:
    """Answers run_command from a table keyed by argv; records every call."""

    def __init__(self, answers):
        self.answers = {tuple(argv): result for argv, result in answers.items()}
        self.calls = []

    def __call__(self, module, args, **kwargs):
        self.calls.append((list(args), kwargs))
        return self.answers[tuple(args)]


@pytest.fixture
def single_gpu_topo(read_fixture):
    """The single-GPU `topo -m` section (with its ANSI header) from the utku bundle."""
    text = read_fixture(FULL)
    start = text.index("# $ nvidia-smi topo -m\n")
    body = text[text.index("\n", text.index("#" * 80, start)) + 1 :]
    return body[: body.index("#" * 80)]


def eight_gpu_xml(read_fixture):
    """Real v12 <gpu> repeated as an 8-GPU node (no real 8-GPU XML was ever published)."""
    text = read_fixture(V12).replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>8</attached_gpus>")
    block = re.search(r"\n(\s*<gpu id=.*?</gpu>)", text, re.S).group(1)
    uuid = "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    copies = [block.replace(uuid, f"GPU-0000000{i}-0000-0000-0000-000000000000") for i in range(8)]
    return text.replace(block, "\n".join(copies))


def run_module(args, fake, bin_path=SMI):
    """Run gpu_facts.main(); returns (result, warnings, get_bin_path mock)."""
    return harness.run_module(gpu_facts.main, args, run_command=fake, get_bin_path=bin_path)


def test_facts_single_gpu_with_topology(read_fixture, single_gpu_topo):
    fake = FakeNvidiaSmi({tuple(QUERY): (0, read_fixture(V13), ""), tuple(TOPO): (0, single_gpu_topo, "")})
    result, warnings, which = run_module({}, fake)
    assert [argv for argv, _ in fake.calls] == [QUERY, TOPO]
    assert all(kwargs == {"environ_update": {"LC_ALL": "C"}} for _, kwargs in fake.calls)
    which.assert_called_once_with(mock.ANY, "nvidia-smi")
    assert warnings == []
    assert result["changed"] is False
    facts = result["ansible_facts"]
    assert set(facts) == {
        "gpufleet_driver_version",
        "gpufleet_cuda_version",
        "gpufleet_gpus",
        "gpufleet_gpu_topology",
    }
    assert (facts["gpufleet_driver_version"], facts["gpufleet_cuda_version"]) == ("590.44.01", "13.1")
    gpu = facts["gpufleet_gpus"][0]
    assert gpu["uuid"] == "GPU-12345678-aaaa-bbbb-cccc-0123456789ab"
    assert gpu["power"]["max_limit_w"] == 325.0
    topology = facts["gpufleet_gpu_topology"]
    assert topology["nvlink_domains"] == [["GPU-12345678-aaaa-bbbb-cccc-0123456789ab"]]
    assert topology["gpus"][gpu["uuid"]]["cpu_affinity"] == "0-19"
    assert topology["nics"] == {}


def test_facts_eight_gpus_one_nvlink_domain(read_fixture):
    fake = FakeNvidiaSmi(
        {tuple(QUERY): (0, eight_gpu_xml(read_fixture), ""), tuple(TOPO): (0, read_fixture(MLENG), "")}
    )
    result, warnings, _ = run_module({}, fake)
    assert warnings == []
    facts = result["ansible_facts"]
    uuids = [g["uuid"] for g in facts["gpufleet_gpus"]]
    assert uuids == [f"GPU-0000000{i}-0000-0000-0000-000000000000" for i in range(8)]
    assert facts["gpufleet_gpu_topology"]["nvlink_domains"] == [uuids]
    assert facts["gpufleet_gpu_topology"]["gpus"][uuids[5]]["numa_node"] == 1


def test_topology_disagreement_warns_and_is_null(read_fixture):
    fake = FakeNvidiaSmi(
        {tuple(QUERY): (0, read_fixture(V13), ""), tuple(TOPO): (0, read_fixture(MLENG), "")}
    )
    result, warnings, _ = run_module({}, fake)
    assert "failed" not in result
    assert result["ansible_facts"]["gpufleet_gpu_topology"] is None
    assert len(result["ansible_facts"]["gpufleet_gpus"]) == 1
    assert warnings == [
        "nvidia-smi topo -m shows 8 GPUs (GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7) but "
        "nvidia-smi -q -x lists 1; GPU topology left unset"
    ]


def test_topo_command_failure_warns_and_is_null(read_fixture):
    fake = FakeNvidiaSmi(
        {
            tuple(QUERY): (0, read_fixture(V13), ""),
            tuple(TOPO): (3, "", "Failed to initialize NVML: Unknown Error\n"),
        }
    )
    result, warnings, _ = run_module({}, fake)
    assert result["ansible_facts"]["gpufleet_gpu_topology"] is None
    assert warnings == [
        "nvidia-smi topo -m failed (rc=3): Failed to initialize NVML: Unknown Error; GPU topology left unset"
    ]


def test_topo_garbage_warns_and_is_null(read_fixture):
    fake = FakeNvidiaSmi(
        {tuple(QUERY): (0, read_fixture(V13), ""), tuple(TOPO): (0, "Segmentation fault\n", "")}
    )
    result, warnings, _ = run_module({}, fake)
    assert result["ansible_facts"]["gpufleet_gpu_topology"] is None
    assert len(warnings) == 1 and warnings[0].startswith("nvidia-smi topo -m: no header line with GPU0")


def test_attached_gpus_mismatch_warns(read_fixture, single_gpu_topo):
    # The real telegraf capture says 4 attached but describes 1.
    fake = FakeNvidiaSmi({tuple(QUERY): (0, read_fixture(V12), ""), tuple(TOPO): (0, single_gpu_topo, "")})
    result, warnings, _ = run_module({}, fake)
    assert warnings == [
        "nvidia-smi reports 4 attached GPUs but describes 1; check for a GPU that fell off the bus"
    ]
    assert result["ansible_facts"]["gpufleet_gpu_topology"] is not None


def test_query_failure_fails_with_driver_message():
    fake = FakeNvidiaSmi({tuple(QUERY): (9, DRIVER_DOWN, "")})
    result, _, _ = run_module({}, fake)
    assert result["failed"] is True
    assert result["msg"].startswith(
        "/usr/bin/nvidia-smi -q -x failed (rc=9): "
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )
    assert "driver is loaded" in result["msg"]
    assert (result["cmd"], result["rc"], result["stdout"], result["stderr"]) == (QUERY, 9, DRIVER_DOWN, "")
    assert [argv for argv, _ in fake.calls] == [QUERY]  # no topo call after a failed query


def test_query_truncated_fails_with_parse_message(read_fixture):
    text = read_fixture(V13)[:5000]
    fake = FakeNvidiaSmi({tuple(QUERY): (0, text, "")})
    result, _, _ = run_module({}, fake)
    assert result["failed"] is True
    assert result["msg"].startswith(
        "Could not read the output of /usr/bin/nvidia-smi -q -x: nvidia-smi -q -x: malformed or truncated"
    )
    assert (result["cmd"], result["rc"], result["stdout"]) == (QUERY, 0, text)


def test_query_without_gpus_fails():
    text = "<?xml version='1.0'?><nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    result, _, _ = run_module({}, FakeNvidiaSmi({tuple(QUERY): (0, text, "")}))
    assert result["failed"] is True
    assert "no <gpu> element in output" in result["msg"]


def test_missing_nvidia_smi_fails(tmp_path, monkeypatch):
    # The real get_bin_path, on a PATH without nvidia-smi (it also looks in the sbin dirs).
    monkeypatch.setenv("PATH", str(tmp_path))
    fake = FakeNvidiaSmi({})
    result = harness.run_module(gpu_facts.main, {}, run_command=fake, expect=harness.FailJson).result
    assert "nvidia-smi" in result["msg"]
    assert fake.calls == []


def test_explicit_path_is_used_as_given(read_fixture, single_gpu_topo, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    argv_q, argv_t = [str(smi), "-q", "-x"], [str(smi), "topo", "-m"]
    fake = FakeNvidiaSmi({tuple(argv_q): (0, read_fixture(V13), ""), tuple(argv_t): (0, single_gpu_topo, "")})
    result, _, which = run_module({"nvidia_smi_path": str(smi)}, fake)
    assert [argv for argv, _ in fake.calls] == [argv_q, argv_t]
    which.assert_not_called()
    assert result["ansible_facts"]["gpufleet_gpu_topology"] is not None


def test_explicit_path_not_executable_fails(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("not a program")
    result, _, _ = run_module({"nvidia_smi_path": str(smi)}, FakeNvidiaSmi({}))
    assert result["failed"] is True
    assert result["msg"] == f"nvidia_smi_path {smi} is not an executable file; point it at nvidia-smi"


def test_check_mode_and_rerun_report_the_same_and_no_change(read_fixture, single_gpu_topo):
    answers = {tuple(QUERY): (0, read_fixture(V13), ""), tuple(TOPO): (0, single_gpu_topo, "")}
    first, _, _ = run_module({}, FakeNvidiaSmi(answers))
    again, _, _ = run_module({}, FakeNvidiaSmi(answers))
    checked, _, _ = run_module({"_ansible_check_mode": True}, FakeNvidiaSmi(answers))
    assert first["changed"] is again["changed"] is checked["changed"] is False
    assert first["ansible_facts"] == again["ansible_facts"] == checked["ansible_facts"]


def test_documentation_matches_argument_spec():
    import yaml

    doc = harness.documentation(gpu_facts)
    assert set(doc["options"]) == {"nvidia_smi_path", "judge"}
    assert doc["attributes"]["check_mode"]["support"] == "full"
    assert doc["attributes"]["diff_mode"]["support"] == "none"
    returned = yaml.safe_load(gpu_facts.RETURN)["ansible_facts"]["contains"]
    assert set(returned) == {
        "gpufleet_driver_version",
        "gpufleet_cuda_version",
        "gpufleet_gpus",
        "gpufleet_gpu_topology",
    }
