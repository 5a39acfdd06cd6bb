"""What the metrics endpoint costs: kcat produce throughput against two standalone brokers started alike, one with
``metrics.listener`` set and one without, measured in alternating rounds in the same run (the median ratio is
printed), and the time of one scrape of ``/metrics`` with ``--partitions`` partitions on the broker.

Two produce cases: batched (``--records`` 100 B records from a file, librdkafka's default batching, acks=1) and one
record per request (linger.ms=0, batch.num.messages=1: the per-request cost of the request timing shows most there).
Within a round the two brokers take turns going first.

    PYTHONPATH=. python scripts/bench_metrics.py [--records 500000] [--rounds 5] [--partitions 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import cpu_seconds, free_port, wait_for_port


def start_broker(data: Path, metrics_port: int | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    overrides = [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}", "offsets.topic.replication.factor=1"]
    if metrics_port is not None:
        overrides.append(f"metrics.listener=http://127.0.0.1:{metrics_port}")
    command = [sys.executable, "-m", "mq", "server", "start"]
    for item in overrides:
        command += ["--override", item]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process, "mq")
    return process, f"127.0.0.1:{port}"


def kcat(bootstrap: str, topic: str, payload: Path, records: int, *extra: str) -> float:
    command = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=1", *extra, "-l", str(payload)]
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, timeout=600)
    return records / (time.perf_counter() - started)


def scrape_ms(port: int) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--single", type=int, default=20_000, help="records of the one-record-per-request case")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        payload = Path(tmp) / "records"
        payload.write_bytes(b"".join(b"%099d\n" % i for i in range(args.records)))
        single = Path(tmp) / "single"
        single.write_bytes(b"".join(b"%099d\n" % i for i in range(args.single)))
        metrics_port = free_port()
        on, on_bootstrap = start_broker(Path(tmp) / "on", metrics_port)
        off, off_bootstrap = start_broker(Path(tmp) / "off", None)
        try:
            for bootstrap in (on_bootstrap, off_bootstrap):
                admin = KafkaAdminClient(bootstrap_servers=bootstrap)
                admin.create_topics([NewTopic("bench", 1, 1)])
                admin.close()
                kcat(bootstrap, "bench", single, args.single)  # warm up
            for name, file, records, extra in (
                ("batched", payload, args.records, ()),
                ("one record per request", single, args.single, ("-X", "linger.ms=0", "-X", "batch.num.messages=1")),
            ):
                ratios, rates_on, rates_off, cpu_on, cpu_off = [], [], [], [], []
                for round_index in range(args.rounds):
                    measured: dict[bool, tuple[float, float]] = {}
                    for metrics in (True, False) if round_index % 2 == 0 else (False, True):  # neither always first
                        process, bootstrap = (on, on_bootstrap) if metrics else (off, off_bootstrap)
                        before = cpu_seconds(process.pid)
                        rate = kcat(bootstrap, "bench", file, records, *extra)
                        measured[metrics] = rate, (cpu_seconds(process.pid) - before) / records * 1e6
                    (rate_on, used_on), (rate_off, used_off) = measured[True], measured[False]
                    cpu_on.append(used_on)
                    cpu_off.append(used_off)
                    rates_on.append(rate_on)
                    rates_off.append(rate_off)
                    ratios.append(rate_on / rate_off)
                print(
                    f"{name}: metrics on {statistics.median(rates_on):,.0f} rec/s, off "
                    f"{statistics.median(rates_off):,.0f} rec/s, on/off median ratio {statistics.median(ratios):.3f} "
                    f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)}); broker CPU per record: on "
                    f"{statistics.median(cpu_on):.2f} µs, off {statistics.median(cpu_off):.2f} µs"
                )
            admin = KafkaAdminClient(bootstrap_servers=on_bootstrap)
            admin.create_topics([NewTopic("many", args.partitions, 1)])
            admin.close()
            time.sleep(2)
            times = [scrape_ms(metrics_port) for _ in range(7)]
            print(
                f"scrape with {args.partitions + 1} partitions: median {statistics.median(times):.1f} ms, "
                f"max {max(times):.1f} ms"
            )
        finally:
            for process in (on, off):
                process.terminate()
                process.wait(60)


if __name__ == "__main__":
    main()
