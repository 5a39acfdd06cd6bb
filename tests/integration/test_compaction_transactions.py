"""Log compaction of a transactional topic in a broker process: the records of an aborted transaction leave the
segments, then its marker does (past delete.retention.ms), while read_committed and read_uncommitted consumers both
read exactly the committed latest value of each key."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from mq.records import ABORT, COMMIT, iter_records, parse_control_key
from mq.records.batch_header import iter_headers
from mq.storage.checkpoints import OffsetCheckpointFile
from mq.topic_partition import TopicPartition as MqTopicPartition

pytestmark = pytest.mark.slow

TOPIC = "txn-state"


def create_topic(bootstrap: str) -> None:
    """Compacted, 2 KB segments (three fillers fill one, so cleaned segments do not merge into one), tombstones and
    markers kept for a second past the delete horizon."""
    settings = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.01",
        "segment.bytes": "2048",
        "delete.retention.ms": "1000",
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=settings)])[TOPIC].result(15)


def run_transactions(bootstrap: str) -> dict[bytes, bytes]:
    """Commit k0-k9, abort new values for k0-k9 and k-aborted, commit new values for k0-k4; the committed latest
    values."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "compacted-writer", "linger.ms": 5})
    producer.init_transactions(30)
    rounds = [
        ("c1", range(10), True),
        ("aborted", range(10), False),
        ("c3", range(5), True),
    ]
    expected: dict[bytes, bytes] = {}
    for tag, keys, commit in rounds:
        producer.begin_transaction()
        for i in keys:
            producer.produce(TOPIC, key=b"k%d" % i, value=b"%s-%d" % (tag.encode(), i))
        if not commit:
            producer.produce(TOPIC, key=b"k-aborted", value=b"aborted")
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            expected.update({b"k%d" % i: b"%s-%d" % (tag.encode(), i) for i in keys})
        else:
            producer.abort_transaction(30)
    return expected


class Fillers:
    """Plain records of distinct keys (never compacted away): each three fill most of a segment and roll it."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
        self.count = 0

    def segment(self) -> None:
        for _ in range(3):
            self.producer.produce(TOPIC, key=b"filler-%d" % self.count, value=b"f" * 600)
            self.count += 1
            self.producer.flush(30)


def read(bootstrap: str, isolation: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record a consumer of ``isolation`` reads from the start to the end of the partition,
    fillers left out, sorted."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    seen: list[tuple[bytes, bytes]] = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"read stopped after {len(seen)} records"
            if msg.error() is not None:
                assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
                break
            if not msg.key().startswith(b"filler-"):
                seen.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return sorted(seen)


def read_both(bootstrap: str) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """What a read_committed and a read_uncommitted consumer read (``read``), both at once."""
    with ThreadPoolExecutor(2) as pool:
        committed = pool.submit(read, bootstrap, "read_committed")
        uncommitted = pool.submit(read, bootstrap, "read_uncommitted")
        return committed.result(), uncommitted.result()


def stored(partition_dir: Path) -> tuple[list[bytes], list[str]]:
    """(values of the data records, COMMIT/ABORT/EMPTY of the control batches) in the partition's segment files,
    in offset order. Read again when the cleaner swapped segments meanwhile (a file vanished, or the file names
    changed), so one answer is one state of the log."""
    while True:
        names = sorted(partition_dir.glob("*.log"))
        try:
            contents = [path.read_bytes() for path in names]
        except FileNotFoundError:
            continue
        if sorted(partition_dir.glob("*.log")) == names:
            break
    values: list[bytes] = []
    markers: list[str] = []
    for data in contents:
        for header in iter_headers(data):
            records = list(iter_records(data, header))
            if header.is_control:
                kinds = [parse_control_key(r.key) for r in records]
                markers.append("EMPTY" if not kinds else {COMMIT: "COMMIT", ABORT: "ABORT"}[kinds[0]])
            else:
                values += [r.value for r in records if r.value is not None and not r.key.startswith(b"filler-")]
    return values, markers


def test_aborted_records_then_their_marker_leave_the_segments(
    broker_factory: Callable[..., object], mq_command: list[str]
) -> None:
    broker = broker_factory(overrides=["log.cleaner.backoff.ms=100", "log.segment.delete.delay.ms=1000"])
    broker.start()  # type: ignore[attr-defined]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    partition_dir = broker.log_dir / f"{TOPIC}-0"  # type: ignore[attr-defined]
    create_topic(bootstrap)
    expected = run_transactions(bootstrap)
    # the coordinator writes markers after answering EndTxn
    assert wait_for(lambda: stored(partition_dir)[1] == ["COMMIT", "ABORT", "COMMIT"], timeout=15)
    assert b"aborted" in stored(partition_dir)[0]
    assert sum(p.stat().st_size for p in partition_dir.glob("*.txnindex")) == 34  # one aborted transaction
    committed, uncommitted = read_both(bootstrap)
    assert dict(committed) == expected  # k0-k4 twice: not cleaned yet
    assert (b"k-aborted", b"aborted") in uncommitted

    fillers = Fillers(bootstrap)

    def aborted_records_gone() -> bool:  # and each committed value there once (no file was missed)
        fillers.segment()
        return sorted(stored(partition_dir)[0]) == sorted(expected.values())

    assert wait_for(aborted_records_gone, timeout=30, interval=0.2)
    assert read_both(bootstrap) == (sorted(expected.items()),) * 2  # each key once, its committed value

    def abort_marker_gone() -> bool:
        fillers.segment()
        values, markers = stored(partition_dir)
        assert "EMPTY" not in markers
        # both committed transactions keep records (k5-k9 of the first, k0-k4 of the last): their markers stay
        return markers == ["COMMIT", "COMMIT"] and sorted(values) == sorted(expected.values())

    assert wait_for(abort_marker_gone, timeout=30, interval=0.2)
    assert read_both(bootstrap) == (sorted(expected.items()),) * 2  # each key once, its committed value
    broker.stop()  # type: ignore[attr-defined]

    segments = ",".join(str(p) for p in sorted(partition_dir.glob("*.log")))
    dump = subprocess.run(
        [*mq_command, "dump-segments", "--deep-iteration", "--files", segments],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    batch_line = ""
    marker_lines = []
    for line in dump.splitlines():
        if line.startswith("baseOffset: "):
            batch_line = line
        elif " endTxnMarker: " in line:
            assert " isTransactional: true isControl: true " in batch_line
            marker_lines.append(line.split(" endTxnMarker: ")[1].split()[0])
    assert marker_lines == ["COMMIT", "COMMIT"]
    assert sum(p.stat().st_size for p in partition_dir.glob("*.txnindex")) == 0


def test_an_open_transaction_is_not_cleaned_until_it_ends(broker_factory: Callable[..., object]) -> None:
    """Cleaned while open, the open record would count as committed and shadow k0's committed value for good."""
    broker = broker_factory(overrides=["log.cleaner.backoff.ms=100"])
    broker.start()  # type: ignore[attr-defined]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    partition_dir = broker.log_dir / f"{TOPIC}-0"  # type: ignore[attr-defined]
    checkpoint = OffsetCheckpointFile(broker.log_dir / "cleaner-offset-checkpoint")  # type: ignore[attr-defined]
    create_topic(bootstrap)
    fillers = Fillers(bootstrap)
    committed = Producer({"bootstrap.servers": bootstrap, "transactional.id": "committer", "linger.ms": 0})
    committed.init_transactions(30)
    committed.begin_transaction()
    committed.produce(TOPIC, key=b"k0", value=b"committed")
    committed.commit_transaction(30)
    fillers.segment()
    opened = Producer({"bootstrap.servers": bootstrap, "transactional.id": "opener", "linger.ms": 0})
    opened.init_transactions(30)
    opened.begin_transaction()
    offsets: list[int] = []
    opened.produce(TOPIC, key=b"k0", value=b"open", on_delivery=lambda err, msg: offsets.append(msg.offset()))
    assert opened.flush(30) == 0
    [open_offset] = offsets

    def cleaned_up_to_the_open_transaction() -> bool:
        fillers.segment()
        return 0 < checkpoint.read().get(MqTopicPartition(TOPIC, 0), 0) <= open_offset

    assert wait_for(cleaned_up_to_the_open_transaction, timeout=30, interval=0.2)
    for _ in range(5):  # more dirty segments past the open transaction, each a chance for the cleaner to go on
        fillers.segment()
        time.sleep(0.2)
    assert checkpoint.read()[MqTopicPartition(TOPIC, 0)] <= open_offset
    assert stored(partition_dir)[0] == [b"committed", b"open"]

    opened.abort_transaction(30)
    assert wait_for(lambda: fillers.segment() or stored(partition_dir)[0] == [b"committed"], timeout=30, interval=0.2)
    assert read_both(bootstrap) == ([(b"k0", b"committed")],) * 2
