"""The fake nccl-tests ``all_reduce_perf`` (installed at /opt/nccl-tests/build/all_reduce_perf).

Options as nccl-tests' getopt: ``-b/--minbytes`` and ``-e/--maxbytes`` (sizes with K/M/G),
``-f/--stepfactor``, ``-i/--stepbytes``, ``-g/--ngpus``, ``-t/--nthreads``, ``-c/--check``,
``-n/--iters``, ``-w/--warmup_iters``; the others are accepted and change nothing printed but their
header field (-m agg iters, -G graph) or nothing. Output as nccl-tests prints it with ``-g N`` in one
process (the layout of tests/fixtures/real/nccl-tests/azure-nd-h200-v5-8gpu-all-reduce-8g.txt and the
printf formats of nccl-tests' common.cu): the header, ``# Using devices`` with one line per rank
(``[0x%02x]`` the GPU's PCI bus), the ``NCCL version`` line, the table, one row per size, then
``# Out of bounds values``, ``# Avg bus bandwidth`` (the mean busbw over every row, both halves),
``#`` and NCCL's empty last-error line. The bandwidths are sim/nccl_model.py's ring.

More GPUs than the node has (a GPU off the bus): CUDA's ``invalid device ordinal`` on the device
that is missing, nccl-tests' failure trace, exit status 2 (testCudaError, as main returns it). A
ring with nothing to cross between baseboards (every RoCE port down): NCCL's system error, status 3.

The run takes 1-3 s (the sizes' rows printed as they finish) and loads the ring's GPUs in the thermal
model meanwhile, so nvidia-smi and the RoCE counters see the traffic.
"""

from __future__ import annotations

import getopt
import os
import random
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from gpufleet_sim import nccl_model, thermal
from gpufleet_sim import state as sim_state
from gpufleet_sim.state import State, present_gpus

# NCCL's version string by the node's CUDA major (the real captures: 2.19.3 with CUDA 12.2 on H200,
# 2.28.7 with CUDA 13.0 on GB300).
NCCL_VERSIONS = {"12": "2.19.3", "13": "2.28.7"}
WORD = 4  # float, the default datatype
ROOT = -1  # all-reduce has no root
MAX_ROWS = 2000
# Wall time of a run (s): start-up, then the rows, in all between these bounds.
STARTUP_S = 0.3
MIN_RUN_S = 1.0
MAX_RUN_S = 3.0
ROW_S = 0.05
GIB = 1 << 30
# How the run waits (tests replace it to run without waiting).
pause = time.sleep
# Each measured time wanders this much (relative) from the model, the same way on every run.
JITTER = 0.003

_SHORT = "t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:hG:C:a:F:"
_LONG = [
    "nthreads=",
    "ngpus=",
    "minbytes=",
    "maxbytes=",
    "stepbytes=",
    "stepfactor=",
    "iters=",
    "agg_iters=",
    "warmup_iters=",
    "parallel_init=",
    "check=",
    "op=",
    "datatype=",
    "root=",
    "blocking=",
    "stream_null=",
    "timeout=",
    "cudagraph=",
    "report_cputime=",
    "average=",
    "output_file=",
    "help",
]
_LONG_TO_SHORT = {
    "--nthreads": "-t",
    "--ngpus": "-g",
    "--minbytes": "-b",
    "--maxbytes": "-e",
    "--stepbytes": "-i",
    "--stepfactor": "-f",
    "--iters": "-n",
    "--agg_iters": "-m",
    "--warmup_iters": "-w",
    "--check": "-c",
    "--cudagraph": "-G",
    "--help": "-h",
}


class Failed(Exception):
    def __init__(self, text: str, rc: int) -> None:
        super().__init__(text)
        self.text = text
        self.rc = rc


def parse_size(value: str) -> int | None:
    """nccl-tests' parsesize: a number with an optional K/M/G (powers of 1024); None if invalid."""
    text = value.strip()
    units = {"k": 1 << 10, "m": 1 << 20, "g": GIB}
    scale = 1
    if text and text[-1].lower() in units:
        scale, text = units[text[-1].lower()], text[:-1].strip()
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number * scale) if number >= 0 else None


def _int(value: str) -> int:
    """strtol(value, NULL, 0): a leading integer (0x hex, 0 octal), 0 if none."""
    text = value.strip()
    for end in range(len(text), 0, -1):
        try:
            return int(text[:end], 0)
        except ValueError:
            continue
    return 0


def usage(name: str) -> str:
    options = (
        "[-t,--nthreads <num threads>]",
        "[-g,--ngpus <gpus per thread>]",
        "[-b,--minbytes <min size in bytes>]",
        "[-e,--maxbytes <max size in bytes>]",
        "[-i,--stepbytes <increment size>]",
        "[-f,--stepfactor <increment factor>]",
        "[-n,--iters <iteration count>]",
        "[-m,--agg_iters <aggregated iteration count>]",
        "[-w,--warmup_iters <warmup iteration count>]",
        "[-p,--parallel_init <0/1>]",
        "[-c,--check <0/1>]",
        "[-o,--op <sum/prod/min/max/avg/mulsum/all>]",
        "[-d,--datatype <nccltype/all>]",
        "[-r,--root <root>]",
        "[-z,--blocking <0/1>]",
        "[-y,--stream_null <0/1>]",
        "[-T,--timeout <time in seconds>]",
        "[-G,--cudagraph <num graph launches>]",
        "[-C,--report_cputime <0/1>]",
        "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]",
        "[-h,--help]",
    )
    return f"USAGE: {name} \n\t" + " \n\t".join(options) + "\n"


def parse(argv: list[str]) -> dict[str, int] | str:
    """The settings, or the text to print and exit 0 with (help, an unknown option)."""
    settings = {"t": 1, "g": 1, "b": 32 << 20, "e": 32 << 20, "i": 1 << 20, "f": 1, "n": 20, "w": 5}
    settings.update({"m": 1, "c": 1, "G": 0})
    try:
        options, _ = getopt.gnu_getopt(argv, _SHORT, _LONG)
    except getopt.GetoptError as err:
        sys.stderr.write(f"all_reduce_perf: {err}\n")
        return "invalid option '?'\n" + usage("all_reduce_perf")
    for flag, value in options:
        letter = _LONG_TO_SHORT.get(flag, flag)[1:] if flag.startswith("--") else flag[1:]
        if letter == "h":
            return usage("all_reduce_perf")
        if letter in ("b", "e"):
            size = parse_size(value)
            if size is None:
                which = "minbytes" if letter == "b" else "maxbytes"
                raise Failed(f"invalid size specified for '{which}'\n", 255)
            settings[letter] = size
        elif letter in settings:
            settings[letter] = _int(value)
    if settings["b"] > settings["e"]:
        raise Failed(f"invalid sizes for 'minbytes' and 'maxbytes': {settings['b']} > {settings['e']}\n", 255)
    return settings


def sizes(settings: dict[str, int]) -> list[int]:
    out: list[int] = []
    size = settings["b"]
    while size <= settings["e"] and len(out) < MAX_ROWS:
        out.append(size)
        if settings["f"] > 1:
            size *= settings["f"]
        elif settings["i"] > 0:
            size += settings["i"]
        else:
            break
    return out


def header(settings: dict[str, int]) -> str:
    step, kind = (settings["f"], "factor") if settings["f"] > 1 else (settings["i"], "bytes")
    return (
        f"# nThread {settings['t']} nGpus {settings['g']} minBytes {settings['b']} maxBytes {settings['e']} "
        f"step: {step}({kind}) warmup iters: {settings['w']} iters: {settings['n']} agg iters: "
        f"{settings['m']} validation: {settings['c']} graph: {settings['G']}\n#\n# Using devices\n"
    )


def device_line(rank: int, host: str, gpu: dict[str, object]) -> str:
    bus = int(str(gpu["pci_bus_id"]).split(":")[1], 16)
    return (
        f"#  Rank {rank:2d} Group {0:2d} Pid {os.getpid():6d} on {host:>10s} device {rank:2d} "
        f"[0x{bus:02x}] {gpu['name']}\n"
    )


def _columns(widths: tuple[int, ...], texts: tuple[str, ...], gaps: tuple[str, ...]) -> str:
    """One header line: "#" and each text right-aligned in its width after its gap."""
    return "#" + "".join(
        f"{gap}{text:>{width}}" for width, text, gap in zip(widths, texts, gaps, strict=True)
    )


_WIDTHS = (10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6)
_UNIT_WIDTHS = (10, 12, 8, 6, 6, 7, 6, 6, 5, 7, 6, 6, 5)
_NAME_GAPS = (" ", "  ", "  ", "  ", "  ", "  ", "  ", "  ", " ", "  ", "  ", "  ", " ")
_UNIT_GAPS = (" ", *("  ",) * 12)


def table_header() -> str:
    """nccl-tests' three header lines (its printf formats, trailing blanks included)."""
    blank = _columns(_WIDTHS[:5], ("",) * 5, _NAME_GAPS[:5])
    meta = f"{blank}           out-of-place                       in-place          "
    half = ("time", "algbw", "busbw", "#wrong")
    names = ("size", "count", "type", "redop", "root", *half, *half)
    units = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
    return f"#\n{meta}\n{_columns(_WIDTHS, names, _NAME_GAPS)}\n{_columns(_UNIT_WIDTHS, units, _UNIT_GAPS)}\n"


def time_text(time_us: float) -> str:
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def row(ring: nccl_model.Ring, host: str, size: int, check: bool, bws: list[float]) -> str:
    """One size's row: out-of-place then in-place; each busbw also appended to ``bws``."""
    count = size // WORD
    nbytes = count * WORD
    text = f"{nbytes:12d}  {count:12d}  {'float':>8s}  {'sum':>6s}  {ROOT:6d}"
    for half in ("out", "in"):
        jitter = 1.0 + random.Random(f"{host}/{nbytes}/{half}").uniform(-JITTER, JITTER)
        time_us = ring.time_us(nbytes) * jitter
        algbw = nbytes / time_us / 1e3
        busbw = algbw * (2 * (ring.ranks - 1) / ring.ranks if ring.ranks > 1 else 0.0)
        bws.append(busbw)
        wrong = f"{0:5d}" if check else f"{'N/A':>5s}"
        text += f"  {time_text(time_us):>7s}  {algbw:6.2f}  {busbw:6.2f}  {wrong}"
    return text + "\n"


def _trace(host: str) -> str:
    return f" .. {host} pid {os.getpid()}: Test failure common.cu:1112\n"


def _cuda_failure(host: str, what: str) -> Failed:
    return Failed(f"{host}: Test CUDA failure common.cu:892 '{what}'\n{_trace(host)}", 2)


def _nccl_failure(host: str) -> Failed:
    what = "unhandled system error (run with NCCL_DEBUG=INFO for details) / "
    return Failed(f"{host}: Test NCCL failure common.cu:958 '{what}'\n{_trace(host)}", 3)


_STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def run(settings: dict[str, int], node_dir: Path) -> None:
    """Prints each part as the real run would, rows as their sizes finish."""
    node: State = sim_state.load(node_dir)
    host = str(node["name"]).split(".")[0]
    ranks = settings["t"] * settings["g"]
    write = sys.stdout.write
    write(header(settings))
    sys.stdout.flush()
    gpus = present_gpus(node)
    if ranks < 1 or ranks > len(gpus):
        raise _cuda_failure(host, "invalid device ordinal")
    ring_gpus = gpus[:ranks]
    for rank, gpu in enumerate(ring_gpus):
        write(device_line(rank, host, gpu))
    max_bytes = (min(int(g["memory_total_mib"]) for g in ring_gpus) * (1 << 20) - GIB) // (
        3 if settings["c"] else 2
    )
    if settings["e"] > max_bytes:
        settings["e"] = max_bytes
        write(f"#\n# Reducing maxBytes to {max_bytes} due to memory limitation\n")
    ring = nccl_model.ring(node_dir, node, ring_gpus)
    if ranks > 1 and ring.busbw_gbps <= 0:
        raise _nccl_failure(host)
    major = str(node.get("cuda_version", "12")).split(".")[0]
    write(f"NCCL version {NCCL_VERSIONS.get(major, NCCL_VERSIONS['12'])}+cuda{node.get('cuda_version')}\n")
    write(table_header())
    sys.stdout.flush()
    todo = sizes(settings)
    per_row = (min(max(ROW_S * len(todo), MIN_RUN_S), MAX_RUN_S) - STARTUP_S) / max(len(todo), 1)
    uuids = [str(g["uuid"]) for g in ring_gpus]
    with sim_state.locked(node_dir) as live:
        thermal.change_load(live, uuids, 1, time.time())
    try:
        pause(STARTUP_S)
        bws: list[float] = []
        for size in todo:
            pause(per_row)
            write(row(ring, host, size, bool(settings["c"]), bws))
            sys.stdout.flush()
    finally:
        with sim_state.locked(node_dir) as live:
            thermal.change_load(live, uuids, -1, time.time())
    average = sum(bws) / len(bws) if bws else 0.0
    write("# Out of bounds values : 0 OK\n")
    write(f"# Avg bus bandwidth    : {average:g} \n")
    write("#\n\n")


def main(argv: list[str], node_dir: Path) -> int:
    try:
        parsed = parse(argv)
        if isinstance(parsed, str):
            sys.stdout.write(parsed)
            return 0
        # a run killed by its caller (a timeout, a lost ssh session) still takes its load off the GPUs
        handlers = {signum: signal.signal(signum, _on_signal) for signum in _STOPS}
        try:
            run(parsed, node_dir)
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
    except Failed as failed:
        stream = sys.stderr if failed.rc == 255 else sys.stdout
        stream.write(failed.text)
        sys.stdout.flush()
        return failed.rc
    return 0
