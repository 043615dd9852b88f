"""The stand-in vLLM's engine: its GPUs, its request slots, the load it puts on the node and the
counters it exports.

Every request holds a slot (at most --max-num-seqs at once, the rest wait), raises the load on
exactly the instance's GPUs in the node state for as long as it runs (the thermal model turns it
into heat), and takes longer when those GPUs are throttled. The prefix-cache hit rate is the
node's serving.prefix_cache_hit_rate (0.9; 0.07 with the prefix-cache-cliff fault).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.sim import state as sim_state
from gpufleet.sim import thermal

# Timing of one sequence on healthy GPUs (simulated; short so tests and burn-ins stay quick):
# prefill of the uncached prompt part, then one decode step per generated token.
PREFILL_BASE_S = 0.02
PREFILL_PER_TOKEN_S = 0.0001
DECODE_PER_TOKEN_S = 0.01
CHARS_PER_TOKEN = 4
# KV cache capacity, in tokens, per unit of max-model-len (simulated: eight full contexts).
KV_CONTEXTS = 8
_WORDS = ("the", "node", "serves", "tokens", "from", "its", "cache", "and", "stays", "cool")


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


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode()) / CHARS_PER_TOKEN))


def filler(count: int) -> str:
    return "".join(" " + _WORDS[i % len(_WORDS)] for i in range(count))


class Engine:
    def __init__(self, node_dir: Path, config: Config, uuids: list[str]) -> None:
        self.node_dir, self.config, self.uuids = node_dir, config, uuids
        self.counters = Counters()
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

    def complete(self, prompts: list[str], max_tokens: int) -> list[Completion]:
        """Runs the prompts as one batch of sequences; returns when the last one is done."""
        sizes = [tokens(p) for p in prompts]
        self._acquire(len(prompts))
        try:
            with self.lock:
                self.counters.running += len(prompts)
                self.counters.running_tokens += sum(sizes) + max_tokens * len(prompts)
            rate, clock = self._begin(len(prompts))
            hits = [self._cached(size, rate) for size in sizes]
            uncached = max(size - hit for size, hit in zip(sizes, hits, strict=True))
            busy = PREFILL_BASE_S + uncached * PREFILL_PER_TOKEN_S + max_tokens * DECODE_PER_TOKEN_S
            try:
                time.sleep(busy / max(clock, thermal.MIN_CLOCK_FACTOR))
            finally:
                self._end(len(prompts))
            with self.lock:
                c = self.counters
                c.prompt_tokens += sum(sizes)
                c.generation_tokens += max_tokens * len(prompts)
                c.queries += sum(sizes)
                c.hits += sum(hits)
                c.success["length"] += len(prompts)
        finally:
            with self.lock:
                self.counters.running -= len(prompts)
                self.counters.running_tokens -= sum(sizes) + max_tokens * len(prompts)
            for _ in prompts:
                self.slots.release()
        return [Completion(filler(max_tokens), size, max_tokens) for size in sizes]

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
            }
