"""Kafka 0.8's operations chapter, "Mirroring data between clusters": MirrorMaker with a consumer.properties per
source cluster (ZooKeeper-coordinated, offsets in ZooKeeper) and a producer.properties for the target, a whitelist
of the topics to copy, stopped with ^C; the target then holds the source's messages, and the mirror's group shows
in the source's ZooKeeper with its offsets."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_for

from .conftest import HELPERS, Runbook, listening, seed_copy

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).parents[2] / "config" / "server.properties"


@pytest.fixture
def target(runbook: Runbook) -> Iterator[str]:
    """The destination cluster: a standalone broker from mq's shipped server.properties."""
    port = HELPERS.free_port()
    address = f"127.0.0.1:{port}"
    overrides = [f"listeners=PLAINTEXT://{address}", f"log.dirs={runbook.dir / 'target-logs'}"]
    with open(runbook.dir / "target.out", "ab") as out:
        process = subprocess.Popen(
            [runbook.mq, "server", "start", str(CONFIG), *(f"--override={o}" for o in overrides)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=runbook.dir,
        )
    try:
        assert wait_for(lambda: listening(port)), (runbook.dir / "target.out").read_text()
        yield address
    finally:
        process.kill()
        process.wait(10)


def test_mirror_maker_copies_the_whitelisted_topics_to_another_cluster(runbook: Runbook, target: str) -> None:
    runbook.out("mq topics --zookeeper {zk} --create --topic mirrored --partitions 2 --replication-factor 2")
    runbook.out("mq topics --zookeeper {zk} --create --topic not-mirrored --partitions 1 --replication-factor 1")
    messages = [f"mirrored {i}" for i in range(10)]
    runbook.out(
        "mq console-producer --broker-list {broker0},{broker1} --topic mirrored", stdin="\n".join(messages) + "\n"
    )
    runbook.out("mq console-producer --broker-list {broker0} --topic not-mirrored", stdin="stays\n")
    seed_copy(
        "consumer.properties",
        runbook.dir / "config" / "consumer-1.properties",
        {
            "zookeeper.connect=127.0.0.1:2181": runbook.line("zookeeper.connect={zk}"),
            "group.id=mygid": "group.id=mirror",
            "consumer.id=mycid": "consumer.id=mirror-1",
        },
    )
    seed_copy(
        "producer.properties",
        runbook.dir / "config" / "target-producer.properties",
        {"metadata.broker.list=127.0.0.1:9092": f"metadata.broker.list={target}"},
    )
    mirror = runbook.start(
        "mq mirror --consumer.config config/consumer-1.properties --producer.config config/target-producer.properties"
        " --whitelist mirrored --offset.commit.interval.ms 500"
    )

    def copied() -> list[str]:
        found = []
        for partition in (0, 1):
            done = runbook.sh(
                f"mq simple-consumer-shell --broker-list {target} --topic mirrored --partition {partition}"
                " --offset -2 --no-wait-at-logend"
            )
            found += [line for line in done.stdout.splitlines() if line.startswith("mirrored ")]
        return sorted(found)

    assert wait_for(lambda: copied() == sorted(messages), timeout=60, interval=1), copied()
    code, err = mirror.interrupt()
    assert code == 0, err
    exported = runbook.out("mq export-zk-offsets --zkconnect {zk} --group mirror --output-file /dev/stdout")
    offsets = sorted(line for line in exported if line.startswith("/consumers/mirror/offsets/"))
    assert len(offsets) == 2 and sum(int(line.rsplit(":", 1)[1]) for line in offsets) == 10, exported
    listed = runbook.out(f"mq topics --bootstrap-server {target} --list")
    assert "mirrored" in listed and "not-mirrored" not in listed
