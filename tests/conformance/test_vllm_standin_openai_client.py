"""The official `openai` Python client (PyPI openai, pinned in requirements/constraints.txt) against the
vLLM stand-in run as a simulated node runs it (sim_vllm.serving: `vllm serve` in a process of its own
on 127.0.0.1): what real clients tripped on (issue 36) is answered as vLLM 0.11 answers it.

A chat completion without max_tokens is answered (the stand-in once dropped the connection), 32
requests opened at once all succeed (its listen backlog was 5, vLLM's uvicorn has 2048: a burn-in
whose concurrency a site raises lost some), `stop` ends the text before the stop string, and a
negative temperature is a 400 in vLLM's error body. The client validates every whole answer against
its own response models (strict), so a field of the wrong shape fails here too.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from tests.conformance import sim_vllm

CONCURRENT = 32
# bounds on the 32 threads' start and finish (each request takes ~0.1 s of simulated decode)
WAIT_S = 60
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with sim_vllm.serving(tmp_path_factory.mktemp("vllm")) as found:
        yield found


def client(url: str) -> openai.OpenAI:
    # no retries: a refused or dropped connection must show, not be retried away
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="EMPTY", max_retries=0, timeout=30, _strict_response_validation=True
    )


def requests_done(url: str) -> float:
    """vllm:request_success_total over its finish reasons, from /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:request_success_total{")
    )


def test_a_chat_without_max_tokens_is_answered(url: str) -> None:
    with client(url) as api:
        done = api.chat.completions.create(model=sim_vllm.SERVED_NAME, messages=MESSAGES)
    (choice,) = done.choices
    # the model ended its answer: "stop", well before the context's end (vLLM's limit here)
    assert choice.finish_reason == "stop" and choice.message.role == "assistant" and choice.message.content
    assert done.usage is not None and 0 < done.usage.completion_tokens < 8192 - done.usage.prompt_tokens


def test_32_requests_at_once_all_succeed(url: str) -> None:
    before = requests_done(url)
    # a client each, made beforehand: 32 connections opened at the same moment
    clients = [client(url) for _ in range(CONCURRENT)]
    start = threading.Barrier(CONCURRENT)
    answers: list[ChatCompletion] = []
    failures: list[str] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        try:
            start.wait(timeout=WAIT_S)
            done = clients[n].chat.completions.create(
                model=sim_vllm.SERVED_NAME, messages=MESSAGES, max_tokens=8, user=f"client {n}"
            )
        except (openai.OpenAIError, threading.BrokenBarrierError) as error:
            with lock:
                failures.append(f"client {n}: {error!r}")
        else:
            with lock:
                answers.append(done)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(CONCURRENT)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=WAIT_S)
    finally:
        for each in clients:
            each.close()
    assert failures == []
    assert len(answers) == CONCURRENT
    assert {
        (a.choices[0].finish_reason, a.usage.completion_tokens if a.usage else None) for a in answers
    } == {("length", 8)}
    assert requests_done(url) - before == CONCURRENT


def test_stop_ends_the_text_before_the_stop_string(url: str) -> None:
    with client(url) as api:
        whole = api.chat.completions.create(model=sim_vllm.SERVED_NAME, messages=MESSAGES, max_tokens=20)
        text = whole.choices[0].message.content or ""
        # a stop string from the middle of what it says unstopped
        stop = text[len(text) // 2 :].split()[0]
        done = api.chat.completions.create(
            model=sim_vllm.SERVED_NAME, messages=MESSAGES, max_tokens=20, stop=[stop]
        )
        streamed = api.chat.completions.create(
            model=sim_vllm.SERVED_NAME, messages=MESSAGES, max_tokens=20, stop=stop, stream=True
        )
        pieces = [c.choices[0].delta.content or "" for c in streamed if c.choices]
    assert whole.choices[0].finish_reason == "length"
    (choice,) = done.choices
    assert choice.finish_reason == "stop" and (choice.model_extra or {}).get("stop_reason") == stop
    assert choice.message.content == text[: text.index(stop)]
    assert done.usage is not None and whole.usage is not None
    assert done.usage.completion_tokens < whole.usage.completion_tokens
    assert "".join(pieces) == choice.message.content


def test_a_negative_temperature_is_refused_with_vllms_400(url: str) -> None:
    before = requests_done(url)
    with client(url) as api, pytest.raises(openai.BadRequestError) as caught:
        api.chat.completions.create(
            model=sim_vllm.SERVED_NAME, messages=MESSAGES, max_tokens=4, temperature=-1
        )
    assert caught.value.status_code == 400 and "temperature" in caught.value.message
    # the body as sent: vLLM 0.11's ErrorResponse, {"error": ErrorInfo}
    body = json.dumps({"model": sim_vllm.SERVED_NAME, "messages": MESSAGES, "temperature": -1}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    answer = json.loads(refused.value.read())
    assert answer == {
        "error": {
            "message": "temperature must be non-negative, got -1.0.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    assert requests_done(url) == before  # nothing ran
