"""The stand-in vLLM's engine: its GPUs, its request slots, the load it puts on the node and the
counters it exports.

Every request holds a slot (at most --max-num-seqs at once, the rest wait), raises the load on
exactly the instance's GPUs in the node state for as long as it runs (the thermal model turns it
into heat), and takes longer when those GPUs are throttled. The prefix-cache hit rate is the
node's serving.prefix_cache_hit_rate (0.9; 0.07 with the prefix-cache-cliff fault).

A request's sequences (its prompts times `n`) run in lockstep: one prefill, then one decode step per
token, each generating filler text until its own end (`ends`: its token count and finish reason,
"length" at max_tokens, "stop" at a stop string or the answer's end; vllm_openai decides which).
Streaming requests step token by token; the others sleep the decode in one.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet_sim import state as sim_state
from gpufleet_sim import thermal
from gpufleet_sim.tools.vllm_stats import Histogram, histograms

# Timing of one sequence on healthy GPUs (simulated; short so tests and burn-ins stay quick):
# prefill of the uncached prompt part, then one decode step per generated token.
PREFILL_BASE_S = 0.02
PREFILL_PER_TOKEN_S = 0.0001
DECODE_PER_TOKEN_S = 0.01
CHARS_PER_TOKEN = 4
# KV cache capacity, in tokens, per unit of max-model-len (simulated: eight full contexts).
KV_CONTEXTS = 8
_WORDS = ("the", "node", "serves", "tokens", "from", "its", "cache", "and", "stays", "cool")
# The filler text repeats every WORD_PERIOD tokens (word() below).
WORD_PERIOD = len(_WORDS)


@dataclass(frozen=True)
class Config:
    model: str
    served_name: str
    tensor_parallel_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    prefix_caching: bool
    swap_space: float


@dataclass
class Counters:
    created: float = field(default_factory=time.time)
    running: int = 0
    waiting: int = 0
    running_tokens: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    queries: int = 0
    hits: int = 0
    preemptions: int = 0
    success: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})
    histograms: dict[str, Histogram] = field(default_factory=dict)


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int


def pieces(text: str) -> list[bytes]:
    """The simulated tokenizer: CHARS_PER_TOKEN bytes a token; an empty text is still one token."""
    raw = text.encode()
    return [raw[i : i + CHARS_PER_TOKEN] for i in range(0, len(raw), CHARS_PER_TOKEN)] or [b""]


def tokens(text: str) -> int:
    return len(pieces(text))


def word(sample: int, position: int) -> str:
    """The token a sequence generates at position; the n samples of a prompt start apart."""
    return " " + _WORDS[(sample + position) % len(_WORDS)]


def filler(count: int, sample: int = 0) -> str:
    return "".join(word(sample, i) for i in range(count))


class Engine:
    def __init__(self, node_dir: Path, config: Config, uuids: list[str]) -> None:
        self.node_dir, self.config, self.uuids = node_dir, config, uuids
        self.counters = Counters(histograms=histograms(config.max_model_len))
        self.lock = threading.Lock()
        self.slots = threading.Semaphore(config.max_num_seqs)
        self._hit_carry = 0.0

    @property
    def kv_capacity_tokens(self) -> int:
        return self.config.max_model_len * KV_CONTEXTS

    # -- GPU memory, held while the engine lives ------------------------------------------------
    def claim_memory(self) -> None:
        """Takes gpu_memory_utilization of each GPU, or fails as vLLM does when it is not free."""
        share = self.config.gpu_memory_utilization
        with sim_state.locked(self.node_dir) as node:
            gpus = [g for g in node["gpus"] if g["uuid"] in self.uuids]
            for gpu in gpus:
                total, used = int(gpu["memory_total_mib"]), int(gpu.get("memory_used_mib", 0))
                if total - used < share * total:
                    free, want = (total - used) / 1024, share * total / 1024
                    raise MemoryError(
                        f"Free memory on device ({free:.2f}/{total / 1024:.2f} GiB) on startup is less than "
                        f"desired GPU memory utilization ({share}, {want:.2f} GiB). Decrease GPU memory "
                        "utilization or reduce GPU memory used by other processes."
                    )
            for gpu in gpus:
                gpu["memory_used_mib"] = int(gpu.get("memory_used_mib", 0)) + round(
                    share * int(gpu["memory_total_mib"])
                )

    def release(self) -> None:
        """Gives back memory and any load still held (a shutdown mid-request)."""
        share = self.config.gpu_memory_utilization
        with sim_state.locked(self.node_dir) as node:
            with self.lock:
                inflight = self.counters.running
            if inflight:
                thermal.change_load(node, self.uuids, -inflight, time.time())
            for gpu in node["gpus"]:
                if gpu["uuid"] in self.uuids:
                    held = round(share * int(gpu["memory_total_mib"]))
                    gpu["memory_used_mib"] = max(int(gpu.get("memory_used_mib", 0)) - held, 0)

    # -- requests -------------------------------------------------------------------------------
    def _acquire(self, count: int) -> None:
        with self.lock:
            self.counters.waiting += count
        for _ in range(count):
            self.slots.acquire()
        with self.lock:
            self.counters.waiting -= count

    def _begin(self, count: int) -> tuple[float, float]:
        """Load on; (hit rate, mean clock factor of the instance's GPUs) as the node is now."""
        now = time.time()
        with sim_state.locked(self.node_dir) as node:
            thermal.change_load(node, self.uuids, count, now)
            readings, _ = thermal.readings(node, now)
            factors = [
                r.clock_factor for g, r in zip(node["gpus"], readings, strict=True) if g["uuid"] in self.uuids
            ]
            rate = float(node.get("serving", {}).get("prefix_cache_hit_rate", 0.9))
        return rate if self.config.prefix_caching else 0.0, sum(factors) / max(len(factors), 1)

    def _end(self, count: int) -> None:
        with sim_state.locked(self.node_dir) as node:
            thermal.change_load(node, self.uuids, -count, time.time())

    def _cached(self, prompt_tokens: int, rate: float) -> int:
        # error diffusion keeps the long-run hit rate exact with whole-token counts
        with self.lock:
            self._hit_carry += prompt_tokens * rate
            hits = min(math.floor(self._hit_carry), prompt_tokens)
            self._hit_carry -= hits
        return hits

    def generate(
        self,
        prompts: list[str],
        max_tokens: int,
        n: int = 1,
        stream: bool = False,
        ends: list[tuple[int, str]] | None = None,
    ) -> Generator[int, None, None]:
        """Runs n sequences per prompt as one batch; yields the decode steps done so far, after every
        step when streaming, else once at the end. Sequence i (sample i % n of prompt i // n) ends
        at ends[i] = (tokens, finish reason), each at most max_tokens; without ends every one runs
        to max_tokens ("length"). Closing it early aborts the sequences not yet ended."""
        arrived = time.monotonic()
        sizes = [tokens(p) for p in prompts for _ in range(n)]
        count = len(sizes)
        ends = ends or [(max_tokens, "length")] * count
        if len(ends) != count or any(not 0 < t <= max_tokens for t, _ in ends):
            raise ValueError(f"ends must give 1..{max_tokens} tokens for each of the {count} sequences")
        steps = max(t for t, _ in ends)
        self._acquire(count)
        queued = time.monotonic() - arrived
        done = 0
        try:
            with self.lock:
                self.counters.running += count
                self.counters.running_tokens += sum(sizes) + max_tokens * count
            rate, clock = self._begin(count)
            slow = 1 / max(clock, thermal.MIN_CLOCK_FACTOR)
            hits = [self._cached(size, rate) for size in sizes]
            uncached = max(size - hit for size, hit in zip(sizes, hits, strict=True))
            try:
                time.sleep((PREFILL_BASE_S + uncached * PREFILL_PER_TOKEN_S) * slow)
                prefilled = time.monotonic()
                step = 1 if stream else steps
                while done < steps:
                    chunk = min(step, steps - done)
                    time.sleep(chunk * DECODE_PER_TOKEN_S * slow)
                    done += chunk
                    yield done
            finally:
                self._end(count)
                generated = [min(done, t) for t, _ in ends]
                with self.lock:
                    c = self.counters
                    c.prompt_tokens += sum(sizes)
                    c.generation_tokens += sum(generated)
                    c.queries += sum(sizes)
                    c.hits += sum(hits)
                    for (t, reason), made in zip(ends, generated, strict=True):
                        c.success[reason if made == t else "abort"] += 1
            self._observe(
                sizes, n, generated, queued, prefilled - arrived + DECODE_PER_TOKEN_S * slow, slow, arrived
            )
        finally:
            with self.lock:
                self.counters.running -= count
                self.counters.running_tokens -= sum(sizes) + max_tokens * count
            for _ in sizes:
                self.slots.release()

    def _observe(
        self,
        sizes: list[int],
        n: int,
        generated: list[int],
        queued: float,
        ttft: float,
        slow: float,
        arrived: float,
    ) -> None:
        """The histograms of finished sequences, as vLLM records them per request."""
        e2e = time.monotonic() - arrived
        with self.lock:
            h = self.counters.histograms
            h["vllm:request_params_n"].observe(n, len(sizes) // n)
            for size, made in zip(sizes, generated, strict=True):
                h["vllm:request_prompt_tokens"].observe(size)
                h["vllm:request_generation_tokens"].observe(made)
            count = len(sizes)
            h["vllm:request_queue_time_seconds"].observe(queued, count)
            h["vllm:time_to_first_token_seconds"].observe(ttft, count)
            h["vllm:e2e_request_latency_seconds"].observe(e2e, count)
            gaps = sum(made - 1 for made in generated if made > 1)
            if gaps:
                h["vllm:inter_token_latency_seconds"].observe(DECODE_PER_TOKEN_S * slow, gaps)

    def complete(self, prompts: list[str], max_tokens: int, n: int = 1) -> list[Completion]:
        """Runs the prompts (n samples each) as one batch; returns when the last one is done."""
        for _ in self.generate(prompts, max_tokens, n):
            pass
        return [
            Completion(filler(max_tokens, sample), tokens(prompt), max_tokens)
            for prompt in prompts
            for sample in range(n)
        ]

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            c = self.counters
            return {
                "created": c.created,
                "running": c.running,
                "waiting": c.waiting,
                "kv_usage": min(c.running_tokens / self.kv_capacity_tokens, 1.0),
                "prompt_tokens": c.prompt_tokens,
                "generation_tokens": c.generation_tokens,
                "queries": c.queries,
                "hits": c.hits,
                "preemptions": c.preemptions,
                "success": dict(c.success),
                "histograms": {name: h.copy() for name, h in c.histograms.items()},
            }
