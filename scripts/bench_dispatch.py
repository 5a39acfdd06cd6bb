"""What one small request costs the dispatcher: a one-record Produce (v9, acks=1, 100 B value) answered through the
immediate path (``ApiDispatcher.now``) and through the general path (``await dispatcher(frame, client)``), against
an in-process standalone broker (no sockets: the frame goes straight to the dispatcher on the broker's loop).

It prints CPU microseconds per request (the loop thread's CPU time, steadier than wall time on a shared machine) for both (the median of ``--runs`` rounds of ``--requests`` requests, each round
alternating the paths), for ApiVersions v3, a consumer's Fetch v12 at the high watermark (max_wait 0: answered
at once, empty) and OffsetCommit v8 of one partition too (an API without an immediate path takes the general path
in both columns), and with ``--profile CASE`` a cProfile of that case's immediate path sorted by own time.

    PYTHONPATH=. python scripts/bench_dispatch.py [--requests 20000] [--runs 5] [--profile produce]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from mq.config import BrokerConfig
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, encode_request, request_schema
from mq.protocol.entities import build
from mq.server.api_dispatch import LATER, ApiDispatcher
from mq.server.broker import KafkaServer
from mq.server.network import ClientAddress
from mq.topic_partition import TopicPartition

CLIENT = ClientAddress("127.0.0.1", 1, 1)
TOPIC = "bench"
IDLE = "bench-idle"
"""Never written to: a fetch of it is a consumer's at the high watermark."""


def frame(api_key: ApiKey, version: int, values: dict[str, Any]) -> bytes:
    body = build(request_schema(api_key, version), values)
    return encode_request(RequestHeader(api_key, version, 1, "rdkafka", 0), body)[4:]


def one_record_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"x" * 100, headers=[])
    return bytes(builder.build())


async def run(args: argparse.Namespace, log_dir: Path) -> None:
    config = BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={log_dir}"])
    server = KafkaServer(config)
    await server.startup()
    try:
        assert server.server is not None and server.replica_manager is not None
        dispatcher = server.server.handler
        assert isinstance(dispatcher, ApiDispatcher)
        topics = [{"name": name, "num_partitions": 1, "replication_factor": 1} for name in (TOPIC, IDLE)]
        await dispatcher(bytearray(frame(ApiKey.CREATE_TOPICS, 5, {"topics": topics, "timeout": 10_000})), CLIENT)
        while not {TopicPartition(TOPIC, 0), TopicPartition(IDLE, 0)} <= server.replica_manager.partitions.keys():
            await asyncio.sleep(0.01)
        records = one_record_batch()
        partitions = [{"index": 0, "records": records}]
        values = {
            "transactional_id": None,
            "acks": 1,
            "timeout": 1000,
            "topic_data": [{"name": TOPIC, "partition_data": partitions}],
        }
        produce = frame(ApiKey.PRODUCE, 9, values)
        versions = frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "kcat", "client_software_version": "1.7.0"})
        fetch_partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
        fetch_values = {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 50 << 20,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": IDLE, "partitions": [fetch_partition]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        fetch = frame(ApiKey.FETCH, 12, fetch_values)
        committed = [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]
        commit = frame(
            ApiKey.OFFSET_COMMIT,
            8,
            {
                "group_id": "bench-group",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": TOPIC, "partitions": committed}],
            },
        )

        async def now_round(request: bytes) -> float:
            start = time.thread_time()
            for _ in range(args.requests):
                answer = dispatcher.now(bytearray(request), CLIENT)
                if answer is LATER:
                    await dispatcher(bytearray(request), CLIENT)
                elif inspect.isawaitable(answer):
                    await answer
            return (time.thread_time() - start) / args.requests * 1e6

        async def general_round(request: bytes) -> float:
            start = time.thread_time()
            for _ in range(args.requests):
                await dispatcher(bytearray(request), CLIENT)
            return (time.thread_time() - start) / args.requests * 1e6

        cases = {
            "produce": ("Produce v9 acks=1, 1 record", produce),
            "api-versions": ("ApiVersions v3", versions),
            "fetch": ("Fetch v12 at the high watermark, max_wait 0", fetch),
            "offset-commit": ("OffsetCommit v8, 1 partition", commit),
        }
        for name, request in cases.values():
            now, general = [], []
            for _ in range(args.runs):
                now.append(await now_round(request))
                general.append(await general_round(request))
            print(f"{name}: immediate {statistics.median(now):.1f} µs, general {statistics.median(general):.1f} µs")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            await now_round(cases[args.profile][1])
            profile.disable()
            pstats.Stats(profile).sort_stats(args.sort).print_stats(40)
    finally:
        await server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", choices=["produce", "api-versions", "fetch", "offset-commit"])
    parser.add_argument("--sort", default="tottime", help="the profile's order: tottime or cumulative")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as log_dir:
        asyncio.run(run(args, Path(log_dir)))


if __name__ == "__main__":
    main()
