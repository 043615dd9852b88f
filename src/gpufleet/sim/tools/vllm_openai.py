"""The stand-in vLLM's OpenAI-compatible request checks and response bodies (vLLM 0.11's protocol.py
shapes): completions and chat completions, whole or as stream chunks, their logprobs, /tokenize, the
model card and the error body.

Honoured: model, prompt (a string or a list of strings), messages, max_tokens (max_completion_tokens
for chat), n, stream, stream_options.include_usage, logprobs (completions: how many top tokens;
chat: logprobs + top_logprobs), both refused past vLLM's default max_logprobs (20).
Accepted and without effect (the text is deterministic filler): temperature, top_p, seed, stop,
presence/frequency penalties, user. Not modelled: echo, best_of, prompt_logprobs, tools, response
formats, continuous usage stats; a request that asks for them is answered as if it had not. Without
max_tokens a request generates 16 tokens (vLLM would run to the end of the context).
"""

from __future__ import annotations

import secrets
import time
import zlib
from dataclasses import dataclass
from typing import Any

from gpufleet.sim.tools.vllm_engine import Config, pieces, tokens, word

MAX_LOGPROBS = 20
DEFAULT_MAX_TOKENS = 16
VOCAB_SIZE = 151_936  # simulated; token ids are a hash of each 4-byte piece
# Log probabilities the stand-in reports: the generated token first, then the next words.
CHOSEN_LOGPROB = -0.25
RUNNER_UP_LOGPROB = -2.0


class ApiError(Exception):
    """A request vLLM refuses: status and its error body."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.body = error(message, kind, status, param)


def error(message: str, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class Job:
    """One request as the engine runs it: choice i is sample i % n of prompt i // n."""

    chat: bool
    prompts: list[str]
    max_tokens: int
    n: int
    stream: bool
    include_usage: bool
    top_logprobs: int | None  # None: no logprobs asked
    model: str
    id: str
    created: int

    @property
    def choices(self) -> int:
        return len(self.prompts) * self.n


def check_model(request: dict[str, Any], config: Config) -> None:
    model = request.get("model") or config.served_name
    if model != config.served_name:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")


def _int(request: dict[str, Any], key: str, default: int | None, least: int) -> int | None:
    value = request.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ApiError(400, f"{key} must be at least {least}, got {value!r}.", param=key)
    return value


def _logprobs_limit(value: int | None, key: str) -> int | None:
    if value is not None and value > MAX_LOGPROBS:
        raise ApiError(
            400,
            f"Requested sample logprobs of {value}, which is greater than max allowed: {MAX_LOGPROBS}",
            param=key,
        )
    return value


def chat_prompt(messages: Any) -> str:
    """The prompt a chat template would make of messages (roles and text parts, simulated)."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list of messages", param="messages")
    rendered = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, "each message needs a role", param="messages")
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(
                p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
            )
        if not isinstance(content, str):
            raise ApiError(400, "message content must be a string or a list of parts", param="messages")
        rendered.append(f"<|{message['role']}|>\n{content}\n")
    return "".join(rendered) + "<|assistant|>\n"


def parse(request: dict[str, Any], config: Config, chat: bool) -> Job:
    check_model(request, config)
    if chat:
        prompts = [chat_prompt(request.get("messages"))]
        asked = request.get("max_completion_tokens", request.get("max_tokens"))
        max_tokens = _int({"max_tokens": asked}, "max_tokens", DEFAULT_MAX_TOKENS, 1)
        top = _logprobs_limit(_int(request, "top_logprobs", None, 0), "top_logprobs")
        if top is not None and not request.get("logprobs"):
            raise ApiError(
                400, "when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs"
            )
        top = (top or 0) if request.get("logprobs") else None
    else:
        prompt = request.get("prompt")
        given = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(given, list) or not given or not all(isinstance(p, str) for p in given):
            raise ApiError(400, "prompt must be a string or a list of strings", param="prompt")
        prompts = given
        max_tokens = _int(request, "max_tokens", DEFAULT_MAX_TOKENS, 1)
        top = _logprobs_limit(_int(request, "logprobs", None, 0), "logprobs")
    assert max_tokens is not None
    longest = max(tokens(p) for p in prompts)
    if longest + max_tokens > config.max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {config.max_model_len} tokens. However, you "
            f"requested {longest + max_tokens} tokens ({longest} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion.",
        )
    options = request.get("stream_options")
    return Job(
        chat=chat,
        prompts=prompts,
        max_tokens=max_tokens,
        n=_int(request, "n", 1, 1) or 1,
        stream=bool(request.get("stream")),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
        top_logprobs=top,
        model=config.served_name,
        id=("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(16),
        created=int(time.time()),
    )


# -- bodies -----------------------------------------------------------------------------------
def text(job: Job, choice: int, start: int, end: int) -> str:
    return "".join(word(choice % job.n, i) for i in range(start, end))


def _top(job: Job, choice: int, position: int, count: int) -> list[tuple[str, float]]:
    """The top `count` tokens at a position, the generated one first."""
    return [
        (word(choice % job.n, position + k), CHOSEN_LOGPROB if k == 0 else RUNNER_UP_LOGPROB - k)
        for k in range(count)
    ]


def completion_logprobs(job: Job, choice: int, start: int, end: int, offset: int) -> dict[str, Any] | None:
    if job.top_logprobs is None:
        return None
    found: dict[str, Any] = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for position in range(start, end):
        token = word(choice % job.n, position)
        found["text_offset"].append(offset)
        found["token_logprobs"].append(CHOSEN_LOGPROB)
        found["tokens"].append(token)
        # vLLM adds the sampled token to the top ones; here it always is the most likely
        found["top_logprobs"].append(dict(_top(job, choice, position, max(job.top_logprobs, 1))))
        offset += len(token)
    return found


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def chat_logprobs(job: Job, choice: int, start: int, end: int) -> dict[str, Any] | None:
    if job.top_logprobs is None:
        return None
    content = []
    for position in range(start, end):
        entry = _entry(word(choice % job.n, position), CHOSEN_LOGPROB)
        entry["top_logprobs"] = [_entry(t, lp) for t, lp in _top(job, choice, position, job.top_logprobs)]
        content.append(entry)
    return {"content": content}


def usage(job: Job, generated: int) -> dict[str, Any]:
    # vLLM counts each prompt once, whatever n is, and every choice's tokens
    prompt = sum(tokens(p) for p in job.prompts)
    completion = generated * job.choices
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def _head(job: Job, chunk: bool) -> dict[str, Any]:
    kind = ("chat.completion.chunk" if chunk else "chat.completion") if job.chat else "text_completion"
    return {"id": job.id, "object": kind, "created": job.created, "model": job.model}


def response(job: Job) -> dict[str, Any]:
    """The whole answer, every choice at max_tokens."""
    end = job.max_tokens
    choices = []
    for i in range(job.choices):
        if job.chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text(job, i, 0, end),
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": None,
            }
            choice = {"index": i, "message": message, "logprobs": chat_logprobs(job, i, 0, end)}
        else:
            choice = {
                "index": i,
                "text": text(job, i, 0, end),
                "logprobs": completion_logprobs(job, i, 0, end, 0),
            }
        choices.append(choice | {"finish_reason": "length", "stop_reason": None})
        if not job.chat:
            choices[-1]["prompt_logprobs"] = None
    body = _head(job, chunk=False) | {"choices": choices}
    if job.chat:
        body |= {"service_tier": None, "system_fingerprint": None}
    body["usage"] = usage(job, end)
    if job.chat:
        body |= {"prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}
    return body


def role_chunk(job: Job, choice: int) -> dict[str, Any]:
    """A chat stream's first chunk for a choice: the role, no text yet."""
    delta = {"role": "assistant", "content": ""}
    return _head(job, chunk=True) | {
        "choices": [{"index": choice, "delta": delta, "logprobs": None, "finish_reason": None}]
    }


def chunk(job: Job, choice: int, start: int, end: int) -> dict[str, Any]:
    """The tokens start..end of a choice; the last chunk carries the finish reason."""
    finish = "length" if end == job.max_tokens else None
    piece = text(job, choice, start, end)
    if job.chat:
        entry: dict[str, Any] = {
            "index": choice,
            "delta": {"content": piece},
            "logprobs": chat_logprobs(job, choice, start, end),
            "finish_reason": finish,
        }
    else:
        offset = len(text(job, choice, 0, start))
        logprobs = completion_logprobs(job, choice, start, end, offset)
        entry = {"index": choice, "text": piece, "logprobs": logprobs, "finish_reason": finish}
    entry["stop_reason"] = None
    body = _head(job, chunk=True) | {"choices": [entry]}
    if not job.chat:
        body["usage"] = None
    return body


def usage_chunk(job: Job, generated: int) -> dict[str, Any]:
    """stream_options.include_usage: a last chunk with no choices and the usage."""
    return _head(job, chunk=True) | {"choices": [], "usage": usage(job, generated)}


def tokenize(request: dict[str, Any], config: Config) -> dict[str, Any]:
    """POST /tokenize: the ids of the prompt (or the chat prompt of messages). No special tokens are
    added, so count is what a completion of this prompt charges as prompt_tokens."""
    check_model(request, config)
    if "messages" in request:
        prompt = chat_prompt(request["messages"])
    elif isinstance(request.get("prompt"), str):
        prompt = request["prompt"]
    else:
        raise ApiError(400, "prompt must be a string (or give messages)", param="prompt")
    found = pieces(prompt)
    return {
        "count": len(found),
        "max_model_len": config.max_model_len,
        "tokens": [zlib.crc32(p) % VOCAB_SIZE for p in found],
        "token_strs": [p.decode("utf-8", "replace") for p in found]
        if request.get("return_token_strs")
        else None,
    }


def model_card(config: Config, created: int) -> dict[str, Any]:
    return {
        "id": config.served_name,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": config.model,
        "parent": None,
        "max_model_len": config.max_model_len,
        "permission": [
            {
                "id": f"modelperm-{secrets.token_hex(16)}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
