"""Leader failover time and replicated produce throughput on a local 3-broker cluster (ZooKeeper + mq brokers).

Starts the cluster with mq.tools.local_cluster (what scripts/cluster.sh runs) in a temporary base dir, then:

(a) failover: an idempotent confluent-kafka producer (acks=all) sends continuously to a topic with 1 partition, RF 3 and
    min.insync.replicas 2; the partition leader is killed with SIGKILL. Printed per round: the time from the kill to
    the controller's write of the new leader into ZooKeeper's partition state, and to the first produce
    acknowledged after that write (the new leader's). The killed broker is restarted and rejoins the ISR before the
    next round. The other brokers notice a killed broker when its port refuses connections (broker.liveness.interval.ms),
    well before its ZooKeeper session expires (--session-timeout-ms).
(b) throughput: confluent-kafka produces --records records of --size bytes to a topic with RF 3 and acks=all, then
    to one with RF 1 and acks=1 (same partition count, same cluster); records/s and MB/s (1e6 bytes) per run and
    min/median/max over --runs runs. The topics' high watermarks must then account for every record.

    python scripts/bench_cluster.py [--rounds 3] [--records 500000] [--size 100] [--runs 3] [--partitions 3]
        [--session-timeout-ms 6000] [--base-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mq.tools.local_cluster import ClusterState, LocalCluster
from mq.zk import paths
from mq.zk.codecs import PartitionState
from mq.zk.zk_store import ZooKeeperStore


def create_topic(bootstrap: str, topic: str, partitions: int, replicas: int, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas, config=configs)])[topic].result(30)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def failover_round(
    cluster: LocalCluster, state: ClusterState, store: ZooKeeperStore, topic: str
) -> tuple[float, float]:
    """One kill of the leader under a continuous acks=all producer; (kill→new leader, kill→first ack) in s.

    The new leader's time is the modification time of the partition state znode the controller wrote (ZooKeeper's
    clock: the same machine). An acknowledgement received after that write cannot come from the dead leader."""
    path = paths.partition_state(topic, 0)

    def partition_state() -> tuple[PartitionState, float]:
        data, stat = store.get(path)
        return PartitionState.decode(data), stat.mtime_ms / 1000

    wait_for(lambda: len(partition_state()[0].isr) == 3, 120, "a full ISR")
    acks: list[float] = []
    failures: list[str] = []

    def delivered(err, _msg) -> None:
        if err is None:
            acks.append(time.time())
        else:
            failures.append(str(err))

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap(state), "acks": "all", "enable.idempotence": True, "linger.ms": 1}
    )
    stop = threading.Event()

    def send_until_stopped() -> None:
        while not stop.is_set():
            producer.produce(topic, b"x" * 100, partition=0, on_delivery=delivered)
            producer.poll(0.001)

    sender = threading.Thread(target=send_until_stopped)
    sender.start()
    try:
        wait_for(lambda: len(acks) >= 200, 60, "acknowledgements before the kill")
        old_leader = partition_state()[0].leader
        killed_at = time.time()
        cluster.kill_broker(old_leader)
        wait_for(lambda: partition_state()[0].leader not in (old_leader, -1), 120, "a new leader")
        elected_at = partition_state()[1]
        wait_for(lambda: acks[-1] > elected_at, 120, "an acknowledgement from the new leader")
        first_ack = next(t for t in acks if t > elected_at)
    finally:
        stop.set()
        sender.join()
        producer.flush(120)
    if failures:
        raise RuntimeError(f"{len(failures)} produce failures, e.g. {failures[0]}")
    cluster.start_broker(old_leader)
    wait_for(lambda: len(partition_state()[0].isr) == 3, 120, f"broker {old_leader} back in the ISR")
    return elected_at - killed_at, first_ack - killed_at


def produce_run(bootstrap: str, topic: str, acks: str, records: int, size: int) -> float:
    """Seconds to produce ``records`` records and receive every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    payload = b"x" * size
    failures = 0

    def delivered(err, _msg) -> None:
        nonlocal failures
        failures += err is not None

    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
    if producer.flush(300) != 0 or failures:
        raise RuntimeError(f"{topic}: {failures} failed deliveries")
    return time.perf_counter() - start


def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Records up to the high watermarks of every partition (the topics are only appended to)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-cluster", "enable.auto.commit": False})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(partitions))
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="failover rounds")
    parser.add_argument("--records", type=int, default=500_000, help="records per throughput run")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--runs", type=int, default=3, help="throughput runs per configuration")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the throughput topics")
    parser.add_argument("--session-timeout-ms", type=int, default=6000, help="brokers' zookeeper.session.timeout.ms")
    parser.add_argument("--base-dir", help="keep the cluster's data and logs here (default: a temporary dir)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        base = args.base_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="mq-bench-cluster-"))
        cluster = LocalCluster(
            Path(base), overrides=[f"zookeeper.session.timeout.ms={args.session_timeout_ms}"], log=lambda _: None
        )
        state = cluster.start(3)
        bootstrap = cluster.bootstrap(state)
        store = ZooKeeperStore(cluster.zookeeper_connect(state))
        try:
            print(f"cluster: 3 brokers, zookeeper.session.timeout.ms={args.session_timeout_ms}")
            create_topic(bootstrap, "failover", 1, 3, {"min.insync.replicas": "2"})
            elected, first_acks = [], []
            for i in range(args.rounds):
                to_leader, to_ack = failover_round(cluster, state, store, "failover")
                elected.append(to_leader)
                first_acks.append(to_ack)
                print(
                    f"failover {i + 1}: new leader in ZooKeeper after {to_leader:.2f} s, first ack after {to_ack:.2f} s"
                )
            print(
                f"failover median: new leader {statistics.median(elected):.2f} s, "
                f"first ack {statistics.median(first_acks):.2f} s"
            )
            configs = [("RF 3 acks=all", "rf3", 3, "all"), ("RF 1 acks=1", "rf1", 1, "1")]
            for _, topic, replicas, _ in configs:
                create_topic(
                    bootstrap, topic, args.partitions, replicas, {"min.insync.replicas": "2"} if replicas > 1 else {}
                )
            for label, topic, _, acks in configs:
                rates = []
                for run in range(args.runs):
                    seconds = produce_run(bootstrap, topic, acks, args.records, args.size)
                    rates.append(args.records / seconds)
                    print(
                        f"{label}, run {run + 1}: {args.records} records in {seconds:.2f} s = "
                        f"{rates[-1]:,.0f} records/s, {rates[-1] * args.size / 1e6:.1f} MB/s"
                    )
                stored = stored_records(bootstrap, topic, args.partitions)
                if stored != args.runs * args.records:
                    raise RuntimeError(f"{topic} holds {stored} records, {args.runs * args.records} were acknowledged")
                low, mid, high = min(rates), statistics.median(rates), max(rates)
                print(
                    f"{label} ({args.partitions} partitions, {args.size}-byte records): records/s min {low:,.0f} "
                    f"median {mid:,.0f} max {high:,.0f}; MB/s min {low * args.size / 1e6:.1f} "
                    f"median {mid * args.size / 1e6:.1f} max {high * args.size / 1e6:.1f}"
                )
        finally:
            store.close()
            cluster.stop()


if __name__ == "__main__":
    main()
