"""The stand-in vLLM's OpenAI-compatible request checks and response bodies (vLLM 0.11's protocol.py
shapes): completions and chat completions, whole or as stream chunks, their logprobs, /tokenize, the
model card and the error body.

Honoured: model, prompt (a string or a list of strings), messages, max_tokens (max_completion_tokens
for chat), n, stream, stream_options.include_usage, logprobs (completions: how many top tokens;
chat: logprobs + top_logprobs), both refused past vLLM's default max_logprobs (20), and stop (a
string or a list: the text ends before the first one generated, finish_reason "stop" and
stop_reason the string, as vLLM's default include_stop_str_in_output=false gives).
Checked as vLLM's SamplingParams checks them, else without effect (the text is deterministic
filler): temperature (not negative), top_p (in (0, 1]). Accepted and without effect: seed,
presence/frequency penalties, user. Not modelled: echo, best_of, prompt_logprobs, tools, response
formats, continuous usage stats; a request that asks for them is answered as if it had not.

Lengths: a request that names max_tokens generates exactly that many tokens unless a stop string
ends it sooner (the simulated model never ends an answer early there, as with ignore_eos, so a
burn-in's load lasts as long as it asked). A completion without max_tokens generates 16, vLLM's
CompletionRequest default ("length"). A chat completion without it (or max_tokens null, for either)
may run to the end of the context, as vLLM's does, and the simulated model ends its answer (EOS,
finish_reason "stop") after ANSWER_TOKENS tokens, or at the end of the context if that comes first.
"""

from __future__ import annotations

import secrets
import time
import zlib
from dataclasses import dataclass
from typing import Any

from gpufleet_sim.tools.vllm_engine import WORD_PERIOD, Config, pieces, tokens, word

MAX_LOGPROBS = 20
DEFAULT_MAX_TOKENS = 16
# Tokens of an answer with no max_tokens before the simulated model's end of sequence.
ANSWER_TOKENS = 24
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
class End:
    """Where one choice ends: its generated tokens, why, and (a stop string) where its text is cut."""

    tokens: int
    finish_reason: str  # "length" or "stop"
    stop_reason: str | None = None  # the stop string that ended it
    cut: int | None = None  # the text's length in characters when a stop string cut it


@dataclass(frozen=True)
class Job:
    """One request as the engine runs it: choice i is sample i % n of prompt i // n."""

    chat: bool
    prompts: list[str]
    max_tokens: int  # the cap: as asked, or the context left after the longest prompt
    ends: tuple[End, ...]  # one a choice
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

    @property
    def steps(self) -> int:
        """Decode steps the request runs: until its longest choice ends."""
        return max(end.tokens for end in self.ends)

    def engine_ends(self) -> list[tuple[int, str]]:
        return [(end.tokens, end.finish_reason) for end in self.ends]


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


def _number(request: dict[str, Any], key: str) -> float | None:
    value = request.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"{key} must be a number, got {value!r}.", param=key)
    return float(value)


def check_sampling(request: dict[str, Any]) -> None:
    """The sampling settings vLLM's SamplingParams refuses (its messages; 400 BadRequestError)."""
    temperature = _number(request, "temperature")
    if temperature is not None and temperature < 0:
        raise ApiError(400, f"temperature must be non-negative, got {temperature}.")
    top_p = _number(request, "top_p")
    if top_p is not None and not 0 < top_p <= 1:
        raise ApiError(400, f"top_p must be in (0, 1], got {top_p}.")


def stop_strings(request: dict[str, Any]) -> tuple[str, ...]:
    stop = request.get("stop")
    given = [stop] if isinstance(stop, str) else stop if stop is not None else []
    if not isinstance(given, list) or not all(isinstance(s, str) for s in given):
        raise ApiError(400, "stop must be a string or a list of strings", param="stop")
    return tuple(s for s in given if s)


def end_of(sample: int, cap: int, stops: tuple[str, ...], answer: int | None) -> End:
    """Where sample `sample` ends: at the first token whose text holds a stop string (checked token
    by token, the stops in the order given, as vLLM does), at the answer's end (`answer` tokens,
    when max_tokens was not given), or at `cap` tokens."""
    limit = min(cap, answer) if answer is not None else cap
    if stops:
        # the filler repeats every WORD_PERIOD tokens: a stop not seen within one period past its
        # own length is never generated
        horizon = min(limit, WORD_PERIOD + max(len(s) for s in stops) + 1)
        text = ""
        for position in range(horizon):
            text += word(sample, position)
            for stop in stops:
                found = text.find(stop)
                if found >= 0:
                    return End(position + 1, "stop", stop, found)
    if answer is not None and answer < cap:
        return End(answer, "stop")
    return End(cap, "length")


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


def _asked_tokens(request: dict[str, Any], chat: bool) -> int | None:
    """max_tokens as asked; None for a request that leaves it open (up to the end of the context)."""
    if chat:
        key = "max_completion_tokens" if request.get("max_completion_tokens") is not None else "max_tokens"
        return _int(request, key, None, 1)
    return _int(request, "max_tokens", DEFAULT_MAX_TOKENS, 1)


def parse(request: dict[str, Any], config: Config, chat: bool) -> Job:
    check_model(request, config)
    check_sampling(request)
    stops = stop_strings(request)
    asked = _asked_tokens(request, chat)
    if chat:
        prompts = [chat_prompt(request.get("messages"))]
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
        top = _logprobs_limit(_int(request, "logprobs", None, 0), "logprobs")
    longest = max(tokens(p) for p in prompts)
    if asked is None and longest >= config.max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {config.max_model_len} tokens. However, your "
            f"request has {longest} input tokens. Please reduce the length of the input messages.",
        )
    if asked is not None and longest + asked > config.max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {config.max_model_len} tokens. However, you "
            f"requested {longest + asked} tokens ({longest} in the messages, {asked} in the "
            "completion). Please reduce the length of the messages or completion.",
        )
    # an open request may run to the end of the context of its longest prompt
    max_tokens = asked if asked is not None else config.max_model_len - longest
    answer = None if asked is not None else ANSWER_TOKENS
    n = _int(request, "n", 1, 1) or 1
    ends = tuple(end_of(i % n, max_tokens, stops, answer) for i in range(len(prompts) * n))
    options = request.get("stream_options")
    return Job(
        chat=chat,
        prompts=prompts,
        max_tokens=max_tokens,
        ends=ends,
        n=n,
        stream=bool(request.get("stream")),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
        top_logprobs=top,
        model=config.served_name,
        id=("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(16),
        created=int(time.time()),
    )


# -- bodies -----------------------------------------------------------------------------------
def text(job: Job, choice: int, start: int, end: int) -> str:
    """The tokens start..end of a choice as generated (before any stop string cuts them)."""
    return "".join(word(choice % job.n, i) for i in range(start, end))


def visible(job: Job, choice: int, generated: int) -> str:
    """What a client sees of a choice after `generated` tokens: never past the cut of the stop
    string that ends it (so a stream holds back a stop string's first characters, as vLLM's does)."""
    end = job.ends[choice]
    shown = text(job, choice, 0, min(generated, end.tokens))
    return shown if end.cut is None else shown[: end.cut]


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
    """After `generated` decode steps; vLLM counts each prompt once, whatever n is, and every
    choice's tokens (a stopped choice's up to the token that completed its stop string)."""
    prompt = sum(tokens(p) for p in job.prompts)
    completion = sum(min(generated, end.tokens) for end in job.ends)
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
    """The whole answer, every choice at its end."""
    choices = []
    for i in range(job.choices):
        end = job.ends[i].tokens
        if job.chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": visible(job, i, end),
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
                "text": visible(job, i, end),
                "logprobs": completion_logprobs(job, i, 0, end, 0),
            }
        choices.append(
            choice | {"finish_reason": job.ends[i].finish_reason, "stop_reason": job.ends[i].stop_reason}
        )
        if not job.chat:
            choices[-1]["prompt_logprobs"] = None
    body = _head(job, chunk=False) | {"choices": choices}
    if job.chat:
        body |= {"service_tier": None, "system_fingerprint": None}
    body["usage"] = usage(job, job.steps)
    if job.chat:
        body |= {"prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}
    return body


def role_chunk(job: Job, choice: int) -> dict[str, Any]:
    """A chat stream's first chunk for a choice: the role, no text yet."""
    delta = {"role": "assistant", "content": ""}
    return _head(job, chunk=True) | {
        "choices": [{"index": choice, "delta": delta, "logprobs": None, "finish_reason": None}]
    }


def chunk(job: Job, choice: int, start: int, end: int) -> dict[str, Any] | None:
    """The tokens start..end of a choice (end at most its own end); the last chunk carries the
    finish reason. None when the step shows nothing new (a stop string's start held back)."""
    ending = job.ends[choice]
    finish = ending.finish_reason if end == ending.tokens else None
    if ending.cut is None:
        piece = text(job, choice, start, end)
    else:
        piece = visible(job, choice, end)[len(visible(job, choice, start)) :]
    if not piece and finish is None:
        return None
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
    entry["stop_reason"] = ending.stop_reason if finish else None
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
