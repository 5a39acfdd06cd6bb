"""``mq mirror --exactly-once`` between two broker processes: kill -9 of the mirror, of the target broker and of
the source broker while it copies, and still a read_committed consumer of the target sees every source record
exactly once, in order per key, and ``--check`` finds source and target equal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from test_mirror import (
    KEYS,
    PACING_HANDLER,
    Mirror,
    copied_whole,
    create_topic,
    no_mirror_left_behind,  # noqa: F401  (the autouse fixture that kills mirrors a test left running)
    produce,
    start_brokers,
    wait_mirrored,
)

pytestmark = pytest.mark.slow


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 3.0) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every committed record, read until every partition reached its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    except Exception:
        consumer.close()
        return []
    records: list[tuple[int, bytes, bytes]] = []
    at_end: set[int] = set()
    while len(at_end) < partitions:
        messages = consumer.consume(10_000, timeout=timeout)
        if not messages:
            break
        for m in messages:
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition())
                    continue
                break
            at_end.discard(m.partition())
            records.append((m.partition(), m.key(), m.value()))
    consumer.close()
    return records


def committed_count(bootstrap: str, topic: str) -> int:
    """Records visible to read_committed consumers in ``topic``'s 2 partitions."""
    return len(read_committed(bootstrap, topic, 2, timeout=1.0))


def assert_every_record_once_in_order(bootstrap: str, topic: str, total: int) -> None:
    """read_committed consumers of ``topic`` (2 partitions) see each of the ``total`` records ``produce`` made once,
    in order per key."""
    records = read_committed(bootstrap, topic, 2)
    assert len(records) == total
    per_key: dict[bytes, list[int]] = {}
    for partition, key, value in records:
        assert value.startswith(key + b":")
        per_key.setdefault(key, []).append(int(value.split(b":")[1]))
        assert partition in (0, 1)
    assert len(per_key) == KEYS
    for key, seqs in per_key.items():
        assert seqs == list(range(total // KEYS)), key  # every record once, in order


def paced_exactly_once(tmp_path: Path, wait_s: float) -> list[str]:
    """Mirror options: exactly once, committing every 300 ms, with a handler (written to ``tmp_path``) that waits
    ``wait_s`` every 100th record, so a run lasts long enough to be killed mid-way."""
    (tmp_path / "pacing.py").write_text(PACING_HANDLER)
    options = ["--exactly-once", "--offset.commit.interval.ms", "300", "--message.handler", "pacing:every_100th_waits"]
    return [*options, "--message.handler.args", str(wait_s)]


def test_the_exactly_once_mirror_survives_kill_9_of_itself_and_of_either_broker(
    mq_command: list[str], broker_factory: Callable[..., object], tmp_path: Path
) -> None:
    source, target = start_brokers(broker_factory)
    total = 20_000
    create_topic(source.bootstrap, "events", 2)
    produce(source.bootstrap, "events", total)
    options = paced_exactly_once(tmp_path, 0.1)  # about 20 s of copying: time for three kills
    mirror = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "events", *options).start()

    progress = [0]

    def advanced(by: int) -> Callable[[], bool]:
        def check() -> bool:
            count = committed_count(target.bootstrap, "events")
            if count >= progress[0] + by:
                progress[0] = count
                return True
            return False

        return check

    wait_mirrored(advanced(total // 8), mirror)
    mirror.kill()
    mirror.start()
    wait_mirrored(advanced(total // 8), mirror)
    target.kill()
    target.start()
    wait_mirrored(advanced(total // 8), mirror)
    source.kill()
    source.start()
    wait_mirrored(lambda: committed_count(target.bootstrap, "events") >= total, mirror, timeout=120)
    code, err = mirror.stop()
    assert code == 0, err

    assert_every_record_once_in_order(target.bootstrap, "events", total)

    check = mirror.check()
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("\tOK") == 2, check.stdout


def test_two_exactly_once_mirrors_share_partitions_and_one_takes_over_from_the_other(
    mq_command: list[str], broker_factory: Callable[..., object], tmp_path: Path
) -> None:
    """Two mirrors in one group split the partitions (a rebalance hands partitions over with their transactions
    committed); kill -9 of one: the other takes its partitions over, fencing its producers and aborting its open
    transactions; every record arrives once."""
    source, target = start_brokers(broker_factory)
    total = 12_000
    create_topic(source.bootstrap, "shared", 4)
    produce(source.bootstrap, "shared", total)
    options = paced_exactly_once(tmp_path, 0.15)
    first = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "shared", *options).start()
    wait_mirrored(lambda: len(read_committed(target.bootstrap, "shared", 4, timeout=1.0)) >= total // 8, first)
    second = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "shared", *options).start()
    wait_mirrored(lambda: len(read_committed(target.bootstrap, "shared", 4, timeout=1.0)) >= total // 3, second)
    first.kill()
    wait_mirrored(lambda: len(read_committed(target.bootstrap, "shared", 4, timeout=1.0)) >= total, second, timeout=120)
    code, err = second.stop()
    assert code == 0, err
    values = sorted(value for _, _, value in read_committed(target.bootstrap, "shared", 4))
    assert len(values) == total
    assert len(set(values)) == total  # every source record once (values are unique: key and its sequence)


def test_batches_copied_whole_are_committed_exactly_once(
    mq_command: list[str], broker_factory: Callable[..., object], tmp_path: Path
) -> None:
    source, target = start_brokers(broker_factory)
    total = 20_000
    create_topic(source.bootstrap, "whole", 2)
    produce(source.bootstrap, "whole", total, **{"compression.type": "lz4"})
    mirror = Mirror(
        mq_command,
        tmp_path,
        source.bootstrap,
        target.bootstrap,
        "whole",
        "--exactly-once",
        "--offset.commit.interval.ms",
        "300",
        producer_properties="linger.ms=5\nbatch.size=16384\n",
    ).start()
    wait_mirrored(lambda: committed_count(target.bootstrap, "whole") >= total, mirror, timeout=120)
    code, err = mirror.stop()
    assert code == 0, err

    assert_every_record_once_in_order(target.bootstrap, "whole", total)
    copied_whole(source.bootstrap, target.bootstrap, "whole", 2, 16384)
