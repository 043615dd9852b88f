"""The vLLM stand-in under the official clients: the `openai` Python client (its strict response
validation for whole answers) lists, retrieves and completes, plain and streamed; prometheus_client's
parsers read /metrics in both formats. The stand-in runs in-process on 127.0.0.1."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from gpufleet_sim import build, state
from gpufleet_sim.tools import vllm_engine, vllm_openai
from gpufleet_sim.tools.vllm_engine import filler
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.sim.test_vllm_standin import Api, config, serving

HISTOGRAMS = (
    "vllm:e2e_request_latency_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_params_n",
)
COUNTERS = (
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Api, vllm_engine.Engine]]:
    current = build.build_node_state("node01", "b300-16", 1)
    state.save(tmp_path, current)
    yield from serving(tmp_path, config())


def open_client(api: Api, strict: bool) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=api.base + "/v1",
        api_key="EMPTY",
        max_retries=0,
        timeout=10,
        _strict_response_validation=strict,
    )


@pytest.fixture
def client(served: tuple[Api, vllm_engine.Engine]) -> Iterator[openai.OpenAI]:
    with open_client(served[0], strict=False) as found:
        yield found


@pytest.fixture
def strict(served: tuple[Api, vllm_engine.Engine]) -> Iterator[openai.OpenAI]:
    """Every whole answer must validate against the client's own response models. (Stream chunks
    cannot: they carry finish_reason null until the last, as vLLM's and OpenAI's do, which the
    client's Completion model, reused for chunks, does not allow.)"""
    with open_client(served[0], strict=True) as found:
        yield found


# -- models -----------------------------------------------------------------------------------
def test_models_are_listed_and_retrieved(strict: openai.OpenAI) -> None:
    assert [m.id for m in strict.models.list()] == ["glm52"]
    card = strict.models.retrieve("glm52")
    assert (card.id, card.object, card.owned_by) == ("glm52", "model", "vllm")
    with pytest.raises(openai.NotFoundError) as caught:
        strict.models.retrieve("nope")
    assert caught.value.status_code == 404 and "`nope` does not exist" in caught.value.message


# -- completions ------------------------------------------------------------------------------
def test_a_completion_plain_and_streamed_gives_the_same_text(
    client: openai.OpenAI, strict: openai.OpenAI
) -> None:
    done = strict.completions.create(model="glm52", prompt="p" * 40, max_tokens=5)
    assert [c.text for c in done.choices] == [filler(5)] and done.choices[0].finish_reason == "length"
    assert done.usage is not None and (done.usage.prompt_tokens, done.usage.completion_tokens) == (10, 5)
    chunks = list(
        client.completions.create(
            model="glm52", prompt="p" * 40, max_tokens=5, stream=True, stream_options={"include_usage": True}
        )
    )
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert "".join(texts) == filler(5) and len(texts) == 5  # one chunk a token
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 5


def test_streamed_tokens_arrive_as_they_are_generated(client: openai.OpenAI) -> None:
    seen = []
    for _ in client.completions.create(model="glm52", prompt="x", max_tokens=30, stream=True):
        seen.append(time.monotonic())
    # 30 decode steps of 10 ms: a server that answered in one piece would deliver them all at once
    assert len(seen) == 30 and seen[-1] - seen[0] > 0.2


def test_n_and_logprobs_are_honoured(client: openai.OpenAI, strict: openai.OpenAI) -> None:
    done = strict.completions.create(model="glm52", prompt=["a", "b"], max_tokens=3, n=3, logprobs=2)
    assert [c.index for c in done.choices] == list(range(6))
    texts = [c.text for c in done.choices]
    assert len(set(texts[:3])) == 3 and texts[:3] == texts[3:]  # n samples differ; each prompt gets them
    assert done.usage is not None and (done.usage.prompt_tokens, done.usage.completion_tokens) == (2, 18)
    for choice in done.choices:
        assert choice.logprobs is not None and "".join(choice.logprobs.tokens or []) == choice.text
        assert [len(top) for top in choice.logprobs.top_logprobs or []] == [2, 2, 2]
        tokens = choice.logprobs.tokens or []
        assert choice.logprobs.text_offset == [len("".join(tokens[:i])) for i in range(3)]
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="glm52", prompt="a", max_tokens=1, logprobs=21)
    assert caught.value.status_code == 400 and "greater than max allowed: 20" in caught.value.message


# -- chat -------------------------------------------------------------------------------------
def test_a_chat_completion_plain_and_streamed(client: openai.OpenAI, strict: openai.OpenAI) -> None:
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]
    done = strict.chat.completions.create(model="glm52", messages=messages, max_tokens=4, n=2)
    assert [(c.index, c.message.role) for c in done.choices] == [(0, "assistant"), (1, "assistant")]
    assert [c.message.content for c in done.choices] == [filler(4), filler(4, 1)]
    assert done.object == "chat.completion" and done.id.startswith("chatcmpl-")
    streamed: dict[int, str] = {}
    roles = []
    for chunk in client.chat.completions.create(
        model="glm52", messages=messages, max_tokens=4, n=2, stream=True, logprobs=True, top_logprobs=3
    ):
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            streamed[choice.index] = streamed.get(choice.index, "") + (choice.delta.content or "")
            if choice.delta.content:
                assert choice.logprobs is not None and choice.logprobs.content is not None
                assert [len(t.top_logprobs) for t in choice.logprobs.content] == [3]
    assert streamed == {0: filler(4), 1: filler(4, 1)} and roles == ["assistant", "assistant"]


def test_a_chat_without_max_tokens_ends_its_answer(
    served: tuple[Api, vllm_engine.Engine], client: openai.OpenAI, strict: openai.OpenAI
) -> None:
    """vLLM lets an open chat run to the end of the context; the simulated model ends its answer
    (EOS) first. The stand-in once dropped the connection here (issue 36)."""
    api, engine = served
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    done = strict.chat.completions.create(model="glm52", messages=messages)
    (choice,) = done.choices
    assert choice.finish_reason == "stop" and choice.message.content == filler(vllm_openai.ANSWER_TOKENS)
    assert done.usage is not None and done.usage.completion_tokens == vllm_openai.ANSWER_TOKENS
    assert (choice.model_extra or {})["stop_reason"] is None  # EOS, not a stop string
    streamed = list(client.chat.completions.create(model="glm52", messages=messages, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == filler(vllm_openai.ANSWER_TOKENS)
    assert streamed[-1].choices[0].finish_reason == "stop"
    assert engine.snapshot()["success"]["stop"] == 2
    # max_tokens null is the same open request, for a completion too (16 when it is left out)
    status, body = api.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": None})
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == vllm_openai.ANSWER_TOKENS
    assert api.json("POST", "/v1/completions", {"prompt": "x"})[1]["usage"]["completion_tokens"] == 16


@pytest.fixture
def short_context(tmp_path: Path) -> Iterator[tuple[Api, vllm_engine.Engine]]:
    state.save(tmp_path, build.build_node_state("node01", "b300-16", 1))
    yield from serving(tmp_path, config(max_model_len=20))


def test_an_open_chat_stops_at_the_end_of_a_short_context(
    short_context: tuple[Api, vllm_engine.Engine],
) -> None:
    api, _ = short_context
    # "<|user|>\n" + 40 characters + "\n<|assistant|>\n": 64 characters, 16 prompt tokens, 4 left
    status, body = api.json(
        "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "y" * 40}]}
    )
    assert status == 200 and body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] == 20
    status, body = api.json(
        "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "y" * 80}]}
    )
    assert status == 400 and "maximum context length is 20 tokens" in body["error"]["message"]


def test_stop_strings_end_the_text_before_them(
    served: tuple[Api, vllm_engine.Engine], client: openai.OpenAI, strict: openai.OpenAI
) -> None:
    whole = filler(20)
    cut = whole.index(" cache")  # the 7th token
    done = strict.completions.create(model="glm52", prompt="p", max_tokens=20, stop=" cache")
    (choice,) = done.choices
    assert choice.text == whole[:cut] and choice.finish_reason == "stop"
    assert (choice.model_extra or {})["stop_reason"] == " cache"
    assert done.usage is not None and done.usage.completion_tokens == 7
    # streamed: the same text, nothing of the stop string on the way, the reason in the last chunk
    chunks = list(
        client.completions.create(model="glm52", prompt="p", max_tokens=20, stop="s cache", stream=True)
    )
    texts = [c.choices[0].text for c in chunks]
    assert "".join(texts) == whole[: whole.index("s cache")] and chunks[-1].choices[0].finish_reason == "stop"
    assert all("s cache" not in "".join(texts[: i + 1]) for i in range(len(texts)))
    # several stops: the first one generated ends it; each of n samples ends at its own (sample 1's
    # filler starts a word later: " node serves tokens from its cache ... the")
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    chat = strict.chat.completions.create(
        model="glm52", messages=messages, max_tokens=20, n=2, stop=[" cache", " the"]
    )
    assert [c.message.content for c in chat.choices] == ["", filler(5, 1)]
    assert [(c.model_extra or {})["stop_reason"] for c in chat.choices] == [" the", " cache"]
    assert chat.usage is not None and chat.usage.completion_tokens == 1 + 6
    # a stop string never generated leaves the length
    never = strict.completions.create(model="glm52", prompt="p", max_tokens=30, stop=["zebra"])
    assert never.choices[0].text == filler(30) and never.choices[0].finish_reason == "length"


def test_sampling_settings_vllm_refuses_are_400(
    served: tuple[Api, vllm_engine.Engine], client: openai.OpenAI
) -> None:
    api, engine = served
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="glm52", messages=messages, max_tokens=2, temperature=-1)
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": "temperature must be non-negative, got -1.0.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="glm52", prompt="p", max_tokens=2, top_p=0)
    assert "top_p must be in (0, 1], got 0.0." in caught.value.message
    for bad in ({"stop": 5}, {"stop": ["a", 1]}, {"temperature": "hot"}):
        status, body = api.json("POST", "/v1/completions", {"prompt": "p", **bad})
        assert status == 400 and body["error"]["type"] == "BadRequestError", bad
    assert engine.snapshot()["queries"] == 0  # refused before the engine ran anything
    done = client.chat.completions.create(
        model="glm52", messages=messages, max_tokens=2, temperature=0, top_p=1
    )
    assert done.choices[0].finish_reason == "length"


def test_ping_and_tokenize(served: tuple[Api, vllm_engine.Engine], client: openai.OpenAI) -> None:
    api, _ = served
    assert api.call("GET", "/ping") == (200, b"") and api.call("POST", "/ping") == (200, b"")
    status, found = api.json("POST", "/tokenize", {"prompt": "p" * 41, "return_token_strs": True})
    assert status == 200 and (found["count"], found["max_model_len"]) == (11, 131072)
    assert len(found["tokens"]) == 11 and found["token_strs"][-1] == "p"
    done = client.completions.create(model="glm52", prompt="p" * 41, max_tokens=1)
    assert done.usage is not None and done.usage.prompt_tokens == found["count"]
    status, chat = api.json("POST", "/tokenize", {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and chat["count"] > 1 and chat["token_strs"] is None
    assert api.json("POST", "/tokenize", {"model": "other", "prompt": "x"})[0] == 404
    assert api.call("GET", "/tokenize")[0] == 405


# -- /metrics ---------------------------------------------------------------------------------
def scrape(api: Api) -> dict[str, Metric]:
    return {f.name: f for f in text_string_to_metric_families(api.call("GET", "/metrics")[1].decode())}


def sample(family: Metric, suffix: str) -> float:
    return next(s.value for s in family.samples if s.name == family.name + suffix)


def test_prometheus_client_reads_metrics_that_move(
    served: tuple[Api, vllm_engine.Engine], client: openai.OpenAI
) -> None:
    api, _ = served
    before = scrape(api)
    assert {before[name].type for name in HISTOGRAMS} == {"histogram"}
    assert {before[name].type for name in COUNTERS} == {"counter"}
    assert "vllm:gpu_prefix_cache_hit_rate" not in before  # V0's gauge; vLLM 0.11 has none
    client.completions.create(model="glm52", prompt="q" * 400, max_tokens=3, n=2)
    after = scrape(api)
    assert {name: sample(after[name], "_count") - sample(before[name], "_count") for name in HISTOGRAMS} == {
        name: 1 if name == "vllm:request_params_n" else 4 if "inter_token" in name else 2
        for name in HISTOGRAMS
    }
    assert (
        sample(after["vllm:generation_tokens"], "_total") - sample(before["vllm:generation_tokens"], "_total")
        == 6
    )
    assert sample(after["vllm:prefix_cache_queries"], "_total") == 200
    e2e = after["vllm:e2e_request_latency_seconds"]
    buckets = [s for s in e2e.samples if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[0].labels["le"] == "0.3"
    assert buckets[0].value == 2  # three 10 ms decode steps take well under 0.3 s


def test_an_openmetrics_accept_header_gets_openmetrics(served: tuple[Api, vllm_engine.Engine]) -> None:
    api, _ = served
    api.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    request = urllib.request.Request(api.base + "/metrics")
    request.add_header("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
    with urllib.request.urlopen(request, timeout=10) as response:
        content_type, body = response.headers["content-type"], response.read().decode()
    assert content_type == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert body.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_parser.text_string_to_metric_families(body)}
    assert families["vllm:prompt_tokens"].type == "counter"
    assert sample(families["vllm:e2e_request_latency_seconds"], "_count") == 1
    plain = api.call("GET", "/metrics")[1].decode()
    assert "# EOF" not in plain and "# TYPE vllm:prompt_tokens_total counter" in plain


def test_a_client_leaving_a_stream_aborts_the_request(served: tuple[Api, vllm_engine.Engine]) -> None:
    api, engine = served
    host, port = api.base.removeprefix("http://").split(":")
    body = b'{"prompt": "x", "max_tokens": 300, "stream": true}'
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert b"text/event-stream" in sock.recv(4096)
    deadline = time.monotonic() + 5
    # the server sees the client gone at its next write, counts the abort, then frees the slot
    while (
        (snap := engine.snapshot())["running"] or not snap["success"]["abort"]
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert snap["running"] == 0 and snap["success"]["abort"] == 1 and snap["generation_tokens"] < 300
