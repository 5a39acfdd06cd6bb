"""What validating every produced record costs: kcat produce throughput against this tree's broker and against a
baseline commit's broker (before record validation) in the same run, and against Redis Streams XADD.

The baseline is checked out with ``git worktree add`` into a temporary directory (removed at the end); both brokers
run from source (``python -m mq`` with PYTHONPATH set to their tree) on temporary log dirs, side by side, and the
runs alternate between them so drifting load on the machine hits both alike. Each run produces ``--records`` lines
of a file with kcat (librdkafka in C: no per-record work in Python on the client side) to a new single-partition
topic, acks=1, ``linger.ms=50``, ``batch.num.messages=10000`` (about 9,000 records of 100 B per 1 MB batch):

* uniform: 100 B records (what bench.py's kcat case sends, and the target: produce >= 2.0x Redis XADD 100 B);
* mixed sizes: records of 50 to 150 B (the vector walk's prediction fails; record starts are found by a Python loop);
* gzip: 100 B records compressed by kcat (``compression.codec=gzip``): each batch is decompressed to be checked.

Besides records/s it prints the broker's CPU time per record (user + system, from /proc), steadier than wall time on
a 2-core machine shared with the load generator. Redis: ``redis-benchmark -P 64 -c 1 XADD`` of 100 B values, as
bench.py measures it.

    python scripts/bench_validation.py [--records 1000000] [--runs 3] [--baseline 97b4cae]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import cpu_seconds, free_port, load_average, redis_benchmark, redis_cli, running

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "97b4cae"
"""The last commit before produced records were validated one by one."""
KCAT_OPTIONS = ["-X", "acks=1", "-X", "linger.ms=50", "-X", "batch.num.messages=10000"]


@contextlib.contextmanager
def baseline_tree(revision: str, tmp: Path) -> Iterator[Path]:
    """A detached worktree of ``revision``, removed when the block ends."""
    path = tmp / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), revision], check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=True)


@contextlib.contextmanager
def broker(tree: Path, tmp: Path, name: str) -> Iterator[tuple[str, int]]:
    """A broker running ``tree``'s code (started in ``tmp``: ``python -m`` would import from its working directory
    first); yields (bootstrap, pid)."""
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    command = [sys.executable, "-m", "mq", "server", "start", "--override", f"listeners=PLAINTEXT://{bootstrap}"]
    command += ["--override", f"log.dirs={tmp / ('logs-' + name)}"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with running(command, port, f"{name} broker (log: {tmp / name}.log)", tmp / f"{name}.log", env=env, cwd=tmp) as pid:
        yield bootstrap, pid


def kcat(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["kcat", *args], capture_output=True, check=True, timeout=600)


def count(bootstrap: str, topic: str) -> int:
    """Records in partition 0 of ``topic``, as kcat's consumer sees them."""
    done = kcat("-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "0", "-e", "-q", "-f", "x")
    return len(done.stdout)


def produce(
    bootstrap: str, pid: int, topic: str, payload: Path, records: int, options: list[str]
) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of kcat producing every line of ``payload`` to a new topic."""
    create = [sys.executable, "-m", "mq", "topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic]
    subprocess.run(create, capture_output=True, check=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    cpu = cpu_seconds(pid)
    start = time.perf_counter()
    kcat("-P", "-b", bootstrap, "-t", topic, "-p", "0", *KCAT_OPTIONS, *options, "-l", str(payload))
    elapsed = time.perf_counter() - start
    used = cpu_seconds(pid) - cpu
    stored = count(bootstrap, topic)
    if stored != records:
        raise RuntimeError(f"{bootstrap}: {stored} of {records} records stored in {topic}")
    return records / elapsed, used / records * 1e6


def payloads(tmp: Path, records: int) -> dict[str, tuple[Path, list[str]]]:
    uniform = tmp / "uniform.txt"
    uniform.write_bytes((b"k" * 100 + b"\n") * records)
    mixed = tmp / "mixed.txt"
    rng = random.Random(1)
    mixed.write_bytes(b"".join(b"m" * rng.randrange(50, 151) + b"\n" for _ in range(records)))
    return {
        "uniform 100 B": (uniform, []),
        "mixed 50-150 B": (mixed, []),
        "gzip 100 B": (uniform, ["-z", "gzip"]),
    }


def redis_xadd(port: int, records: int) -> float:
    """Records/s of ``redis-benchmark -P 64 -c 1 XADD`` of 100 B values into an emptied stream."""
    redis_cli(port, "DEL", "s")
    rate = redis_benchmark(port, "-P", "64", "-c", "1", "-n", str(records), "XADD", "s", "*", "f", "x" * 100)
    print(f"  redis XADD 100 B: {rate:,.0f} records/s", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per run (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per case and broker (default 3)")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit to compare with (default {BASELINE})")
    args = parser.parse_args()
    for tool in ("kcat", "redis-server", "redis-benchmark", "git"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing")
    print(f"{os.cpu_count()} CPUs, load average {load_average()}, Python {sys.version.split()[0]}, {args.runs} runs")
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="mq-bench-validation-") as name:
        tmp = Path(name)
        cases = payloads(tmp, args.records)
        redis_port = free_port()
        redis_command = ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""]
        redis_rates = []
        with (
            running([*redis_command, "--appendonly", "no"], redis_port, "redis-server", tmp / "redis.log"),
            baseline_tree(args.baseline, tmp) as base,
            broker(base, tmp, "baseline") as (base_bootstrap, base_pid),
            broker(ROOT, tmp, "now") as (now_bootstrap, now_pid),
        ):
            brokers = {f"baseline {args.baseline}": (base_bootstrap, base_pid), "now": (now_bootstrap, now_pid)}
            for run in range(args.runs):
                redis_rates.append(redis_xadd(redis_port, args.records))
                for case, (payload, options) in cases.items():
                    for label, (bootstrap, pid) in brokers.items():
                        topic = f"{case.split()[0]}-{run}"
                        rate, cpu = produce(bootstrap, pid, topic, payload, args.records, options)
                        results.setdefault((case, label), []).append((rate, cpu))
                        print(f"  {case}, {label}: {rate:,.0f} records/s, broker {cpu:.2f} µs CPU/record", flush=True)
    redis = statistics.median(redis_rates)
    print(f"\nRedis XADD 100 B (median): {redis:,.0f} records/s")
    print(f"{'case':<16} {'broker':<18} {'records/s':>12} {'CPU µs/rec':>11} {'vs baseline':>12} {'vs Redis':>9}")
    for case in cases:
        base_rate = statistics.median(r for r, _ in results[case, f"baseline {args.baseline}"])
        for label in brokers:
            rate = statistics.median(r for r, _ in results[case, label])
            cpu = statistics.median(c for _, c in results[case, label])
            print(f"{case:<16} {label:<18} {rate:>12,.0f} {cpu:>11.2f} {rate / base_rate:>12.2f} {rate / redis:>9.2f}")
    now_uniform = statistics.median(r for r, _ in results["uniform 100 B", "now"])
    verdict = "met" if now_uniform / redis >= 2.0 else "missed"
    print(f"\ntarget: produce 100 B (kcat, now) / Redis XADD 100 B = {now_uniform / redis:.2f} (>= 2.0: {verdict})")


if __name__ == "__main__":
    main()
