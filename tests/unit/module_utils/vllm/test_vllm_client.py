"""The one vLLM client (service_check and burn_in): answers as (status, text), never an exception."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_client import VllmClient, model_ids
from gpufleet_sim.ports import free_port

from tests.unit.module_utils.thermal.test_burn_in import FakeVllm


def test_get_models_and_a_completion() -> None:
    with FakeVllm(model="GLM-5.2-NVFP4") as vllm:
        client = VllmClient(vllm.url + "/", timeout=5)
        assert client.get("/health") == (200, "")
        assert client.models()[:2] == (200, ["GLM-5.2-NVFP4"])
        status, text = client.post_json("/v1/completions", {"model": "GLM-5.2-NVFP4", "max_tokens": 2})
        assert status == 200 and json.loads(text)["choices"][0]["text"] == " ok ok"
        assert vllm.bodies == [{"model": "GLM-5.2-NVFP4", "max_tokens": 2}]


def test_http_errors_and_a_dead_instance_are_answers() -> None:
    with FakeVllm() as vllm:
        assert VllmClient(vllm.url, timeout=5).get("/nope") == (404, "HTTP 404")
    status, text = VllmClient(f"http://127.0.0.1:{free_port()}", timeout=2).models()[0::2]
    assert status is None and "refused" in text.lower()


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ('{"data": [{"id": "a"}, {"id": "b"}, {"object": "model"}]}', ["a", "b"]),
        ('{"data": []}', []),
        ("not json", []),
        ("[1, 2]", []),
    ],
)
def test_model_ids(text: str, ids: list[str]) -> None:
    assert model_ids(text) == ids
