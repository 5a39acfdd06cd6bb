"""What security costs: kcat produce and consume throughput over SASL_SSL (SCRAM-SHA-512) against PLAINTEXT on the
same broker in alternating rounds (100 B and 1 KiB records; the median ratio is printed), SCRAM authentications per
second and the broker's CPU per authentication (connect, ApiVersions, SaslHandshake, SaslAuthenticate x2, close;
the client's key derivation bounds the rate) against plaintext connects, and an authenticated producer's throughput
while failed logins (PLAIN and SCRAM, wrong passwords, a connection each) hammer the SASL port against the same
producer without them.

    PYTHONPATH=. python scripts/bench_security.py [--records 200000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import cpu_seconds, free_port, wait_for_port

from mq.client.connection import BrokerConnection
from mq.client.security import ClientSecurity
from mq.tools.certs import make_certs

USER, PASSWORD = "bench", "bench-secret"


def start_broker(tmp: Path) -> tuple[subprocess.Popen[bytes], int, int, int, Path]:
    """A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners (SCRAM-SHA-512) and the bench user."""
    certs = make_certs(tmp / "certs")
    keystore = tmp / "certs" / "broker-both.pem"
    keystore.write_bytes(certs.broker.certificate.read_bytes() + certs.broker.key.read_bytes())
    plain, sasl, secure = free_port(), free_port(), free_port()
    overrides = [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},SASL_SSL://127.0.0.1:{secure}",
        f"log.dirs={tmp / 'logs'}",
        "offsets.topic.replication.factor=1",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
        f'listener.name.sasl_plaintext.plain.sasl.jaas.config=x required user_{USER}="{PASSWORD}";',
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
    ]
    command = [sys.executable, "-m", "mq", "server", "start"]
    for item in overrides:
        command += ["--override", item]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(plain, process, "mq")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mq",
            "configs",
            "--bootstrap-server",
            f"127.0.0.1:{plain}",
            "--entity-type",
            "users",
            "--entity-name",
            USER,
            "--alter",
            "--add-config",
            f"SCRAM-SHA-512=[password={PASSWORD}]",
        ],
        check=True,
        capture_output=True,
    )
    wait_for_credentials(sasl)
    return process, plain, sasl, secure, certs.ca


def wait_for_credentials(port: int) -> None:
    """Until the broker has heard of the bench user's credential (a change notification away)."""
    security = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", username=USER, password=PASSWORD)

    async def attempt() -> bool:
        connection = BrokerConnection("127.0.0.1", port, security=security)
        try:
            await connection.connect()
            return True
        except Exception:
            return False
        finally:
            await connection.close()

    deadline = time.monotonic() + 30
    while not asyncio.run(attempt()):
        if time.monotonic() > deadline:
            raise RuntimeError("the bench user's SCRAM credential never reached the broker")
        time.sleep(0.1)


def kcat_security(ca: Path, password: str = PASSWORD) -> list[str]:
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": password,
        "ssl.ca.location": str(ca),
    }
    return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]


def kcat_produce(port: int, topic: str, payload: Path, records: int, security: list[str]) -> float:
    command = ["kcat", "-P", "-b", f"127.0.0.1:{port}", "-t", topic, "-p", "0", "-X", "acks=1", *security]
    started = time.perf_counter()
    result = subprocess.run([*command, "-l", str(payload)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"kcat failed: {result.stderr.strip()[-500:]}")
    return records / (time.perf_counter() - started)


def kcat_consume(port: int, topic: str, records: int, security: list[str]) -> float:
    command = [
        "kcat",
        "-C",
        "-b",
        f"127.0.0.1:{port}",
        "-t",
        topic,
        "-p",
        "0",
        "-o",
        "0",
        "-c",
        str(records),
        "-e",
        "-q",
        *security,
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=600)
    return records / (time.perf_counter() - started)


def connects_per_second(port: int, security: ClientSecurity, seconds: float) -> float:
    async def run() -> float:
        count = 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            connection = BrokerConnection("127.0.0.1", port, security=security)
            await connection.connect()
            await connection.close()
            count += 1
        return count / (time.perf_counter() - started)

    return asyncio.run(run())


def hammer(port: int, mechanism: str, stop: threading.Event, failures: list[int]) -> None:
    """Failed logins with ``mechanism``, one connection each, until ``stop``."""
    wrong = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism=mechanism, username=USER, password="wrong")

    async def run() -> None:
        while not stop.is_set():
            connection = BrokerConnection("127.0.0.1", port, security=wrong)
            try:
                await connection.connect()
            except Exception:
                failures[0] += 1
            await connection.close()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        process, plain, sasl, secure, ca = start_broker(tmp)
        try:
            secured = kcat_security(ca)
            for size in (100, 1024):
                payload = tmp / f"records-{size}"
                payload.write_bytes(b"".join(b"%0*d\n" % (size - 1, i) for i in range(args.records)))
                produce: dict[str, list[float]] = {"PLAINTEXT": [], "SASL_SSL": []}
                consume: dict[str, list[float]] = {"PLAINTEXT": [], "SASL_SSL": []}
                for round_index in range(args.rounds):
                    order = [("PLAINTEXT", plain, []), ("SASL_SSL", secure, secured)]
                    for name, port, security in order if round_index % 2 == 0 else order[::-1]:
                        topic = f"bench-{size}-{name}-{round_index}"
                        produce[name].append(kcat_produce(port, topic, payload, args.records, security))
                        consume[name].append(kcat_consume(port, topic, args.records, security))
                for what, rates in (("produce", produce), ("consume", consume)):
                    ratios = [s / p for s, p in zip(rates["SASL_SSL"], rates["PLAINTEXT"], strict=True)]
                    print(
                        f"{what} {size} B: PLAINTEXT {statistics.median(rates['PLAINTEXT']):,.0f} rec/s, SASL_SSL "
                        f"{statistics.median(rates['SASL_SSL']):,.0f} rec/s, SASL_SSL/PLAINTEXT median "
                        f"{statistics.median(ratios):.3f} (rounds {', '.join(f'{r:.3f}' for r in ratios)})"
                    )
            scram = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", username=USER, password=PASSWORD)
            before = cpu_seconds(process.pid)
            base = connects_per_second(plain, ClientSecurity(), 5)
            base_cpu = (cpu_seconds(process.pid) - before) / (base * 5) * 1e6
            before = cpu_seconds(process.pid)
            authenticated = connects_per_second(sasl, scram, 5)
            scram_cpu = (cpu_seconds(process.pid) - before) / (authenticated * 5) * 1e6
            print(
                f"SCRAM-SHA-512 authentications: {authenticated:,.0f}/s, broker CPU {scram_cpu:,.0f} µs each "
                f"(connect, ApiVersions, handshake, two exchanges, close) against {base:,.0f}/s and {base_cpu:,.0f} µs "
                f"for plaintext connects"
            )
            payload = tmp / "records-100"
            measured: list[tuple[bool, float, float]] = []
            for attack in (False, True, False, True):
                stop, failures = threading.Event(), [0]
                mechanisms = ["PLAIN", "PLAIN", "SCRAM-SHA-512"] if attack else []
                attackers = [threading.Thread(target=hammer, args=(sasl, m, stop, failures)) for m in mechanisms]
                for thread in attackers:
                    thread.start()
                started = time.perf_counter()
                rate = kcat_produce(secure, f"attack-{len(measured)}", payload, args.records, secured)
                elapsed = time.perf_counter() - started
                stop.set()
                for thread in attackers:
                    thread.join()
                measured.append((attack, rate, failures[0] / elapsed * 60))
            quiet = statistics.median(r for a, r, _ in measured if not a)
            loud = statistics.median(r for a, r, _ in measured if a)
            per_minute = statistics.median(f for a, _, f in measured if a)
            print(
                f"authenticated SASL_SSL produce while failed logins hammer the broker ({per_minute:,.0f} failures/min):"
                f" {loud:,.0f} rec/s against {quiet:,.0f} rec/s without, ratio {loud / quiet:.3f}"
            )
        finally:
            process.terminate()
            process.wait(60)


if __name__ == "__main__":
    main()
