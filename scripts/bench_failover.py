"""Leader failover time with the shipped defaults: kill -9 of a partition leader to the first acks=all produce the
new leader acknowledges.

A 3-broker cluster (mq.tools.local_cluster, its own ZooKeeper) started without overrides, so every broker runs with
the shipped zookeeper.session.timeout.ms and broker.liveness.interval.ms; a topic with 1 partition, RF 3 and
min.insync.replicas 2; an idempotent acks=all confluent-kafka producer sends continuously while the current leader
is killed (bench_cluster.failover_round: the killed broker is restarted and rejoins the ISR before the next kill).
Printed: each failover time, the median and the max, and the session timeout, the time a kill took to notice
before brokers pinged each other, as the same-run baseline the median is compared with.

    python scripts/bench_failover.py [--kills 5] [--base-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
from pathlib import Path

from bench_cluster import create_topic, failover_round

from mq.config import BrokerConfig
from mq.tools.local_cluster import LocalCluster
from mq.zk.zk_store import ZooKeeperStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5, help="leader kills")
    parser.add_argument("--base-dir", help="keep the cluster's data and logs here (default: a temporary dir)")
    args = parser.parse_args()
    defaults = BrokerConfig()
    with contextlib.ExitStack() as stack:
        base = args.base_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="mq-bench-failover-"))
        cluster = LocalCluster(Path(base), log=lambda _: None)
        state = cluster.start(3)
        store = ZooKeeperStore(cluster.zookeeper_connect(state))
        try:
            print(
                f"cluster: 3 brokers, shipped defaults (zookeeper.session.timeout.ms="
                f"{defaults.zookeeper_session_timeout_ms}, broker.liveness.interval.ms="
                f"{defaults.broker_liveness_interval_ms})"
            )
            create_topic(cluster.bootstrap(state), "failover", 1, 3, {"min.insync.replicas": "2"})
            times = []
            for i in range(args.kills):
                to_leader, to_ack = failover_round(cluster, state, store, "failover")
                times.append(to_ack)
                print(
                    f"kill {i + 1}: new leader after {to_leader:.2f} s, first acknowledged produce after {to_ack:.2f} s"
                )
            median = statistics.median(times)
            session_s = defaults.zookeeper_session_timeout_ms / 1000
            print(f"failover (kill -> first ack): median {median:.2f} s, max {max(times):.2f} s")
            print(
                f"baseline: a kill noticed by session expiry alone waits zookeeper.session.timeout.ms = {session_s:.0f} s;"
                f" the median is {session_s / median:.1f}x shorter"
            )
        finally:
            store.close()
            cluster.stop()


if __name__ == "__main__":
    main()
