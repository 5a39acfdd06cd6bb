"""``mq server status`` logic: partition health from metadata, the metrics page, connections from /proc."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from mq.client.cluster import PartitionMetadata, TopicMetadata
from mq.tools.server_status import (
    LogDirUsage,
    ServerStatus,
    established_connections,
    parse_metrics,
    partition_health,
    status_lines,
)
from mq.topic_partition import TopicPartition as TP


def partition(index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionMetadata:
    return PartitionMetadata("t", index, leader, 0, replicas, isr)


def test_partition_health() -> None:
    topic = TopicMetadata(
        "t",
        None,
        False,
        (
            partition(0, 1, (1, 2), (1, 2)),
            partition(1, 2, (2, 1), (2,)),  # under-replicated
            partition(2, -1, (3, 1), ()),  # offline and under-replicated
            partition(3, 1, (1,), (1,)),
        ),
    )
    health = partition_health([topic])
    assert health.led == {1: 2, 2: 1}
    assert health.under_replicated == [TP("t", 1), TP("t", 2)] and health.offline == [TP("t", 2)]


def test_parse_metrics() -> None:
    page = (
        "# HELP process_start_time_seconds Start time\n"
        "process_start_time_seconds 1.7e9\n"
        'mq_network_connection_count{listener="PLAINTEXT"} 3.0\n'
        'mq_network_connection_count{listener="INTERNAL"} 2.0\n'
        "mq_other 7\n"
    )
    assert parse_metrics(page) == (1.7e9, 5)
    assert parse_metrics("mq_other 1\n") == (None, None)


def test_established_connections_on_the_listener_port(tmp_path: Path) -> None:
    fd = tmp_path / "42" / "fd"
    fd.mkdir(parents=True)
    for number, inode in ((3, 111), (4, 222), (5, 333), (6, 444)):
        os.symlink(f"socket:[{inode}]", fd / str(number))
    os.symlink("/dev/null", fd / "0")
    (tmp_path / "net").mkdir()
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    row = "   0: 0100007F:{port:04X} 0100007F:D431 {state} 00000000:00000000 00:00000000 00000000     0        0 {inode}\n"
    (tmp_path / "net" / "tcp").write_text(
        header
        + row.format(port=9092, state="0A", inode=111)  # the listening socket
        + row.format(port=9092, state="01", inode=222)  # an accepted client
        + row.format(port=40000, state="01", inode=333)  # an outgoing connection
        + row.format(port=9092, state="01", inode=999)  # another process's
    )
    (tmp_path / "net" / "tcp6").write_text(header + row.format(port=9092, state="01", inode=444))
    assert established_connections(42, 9092, proc=tmp_path) == 2
    assert established_connections(43, 9092, proc=tmp_path) is None


def test_status_lines() -> None:
    started = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    status = ServerStatus(
        "cid",
        1,
        [1, 2],
        partition_health([TopicMetadata("t", None, False, (partition(0, 1, (1, 2), (1,)),))]),
        [LogDirUsage(1, "/data", 10, None, 25, 100)],
        version="0.1.0",
        started=started,
        connections=4,
        local_broker=1,
    )
    lines = status_lines(status, started + datetime.timedelta(days=1, seconds=3661))
    assert lines == [
        "Cluster id: cid",
        "Brokers: 1,2",
        "Broker id: 1",
        "Controller: 1",
        "Version: 0.1.0",
        "Uptime: 1d 01:01:01 (started 2026-01-01T00:00:00+00:00)",
        "Connections: 4",
        "Partitions led: broker 1: 1",
        "Under-replicated partitions: 1 (t-0)",
        "Offline partitions: 0 (none)",
        "Log dir: broker 1 /data size 10 bytes, 25 bytes free of 100 (75.0% used)",
        "Status: unhealthy",
    ]
