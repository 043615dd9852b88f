"""The stand-in vLLM's histograms: the names, HELP texts and buckets vLLM 0.11 registers
(vllm/v1/metrics/loggers.py), and a histogram that counts observations into them.

Only the histograms the stand-in can fill honestly are here: per-request latencies (queue, time to
first token, between tokens, end to end), the request sizes and the `n` parameter. Not modelled:
the prefill/decode/inference phase splits, iteration tokens, max_tokens/max_num_generation_tokens
and the speculative-decoding and LoRA series.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _buckets(bounds: str) -> tuple[float, ...]:
    """Upper bounds written as vLLM's source lists them, space-separated."""
    return tuple(float(b) for b in bounds.split())


REQUEST_LATENCY = _buckets("0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960 1920 7680")
FIRST_TOKEN = _buckets(
    "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560"
)
PER_TOKEN = _buckets("0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1 2.5 5 7.5 10 20 40 80")
N_PARAM: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 20.0)
# Empty: the buckets vLLM sizes from max-model-len (build_1_2_5_buckets).
SIZE: tuple[float, ...] = ()


def one_two_five(limit: int) -> tuple[float, ...]:
    """vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to limit."""
    found: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > limit:
                return tuple(found)
            found.append(float(value))
        exponent += 1


# (name, HELP, buckets) in vLLM's registration order.
HISTOGRAMS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", SIZE),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.", SIZE),
    ("vllm:request_params_n", "Histogram of the n request parameter.", N_PARAM),
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", FIRST_TOKEN),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", PER_TOKEN),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_LATENCY),
    (
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY,
    ),
)


@dataclass
class Histogram:
    """Cumulative counts per upper bound (the last one +Inf), their sum, and how many in all."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0] * (len(self.bounds) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += times
        self.counts[-1] += times
        self.total += value * times

    def copy(self) -> Histogram:
        return Histogram(self.bounds, list(self.counts), self.total)


def histograms(max_model_len: int) -> dict[str, Histogram]:
    sized = one_two_five(max_model_len)
    return {name: Histogram(buckets or sized) for name, _, buckets in HISTOGRAMS}
