"""A mirror stream's bookkeeping without brokers: gaps found mid-run, resets of new partitions, and commits that
wait for the target's acknowledgements (and are skipped after a failed send)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import pytest

from mq.client.consumer import ConsumerRecord
from mq.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from mq.tools import mirror_maker
from mq.tools.mirror_maker import MirrorError, MirrorMaker, MirrorOptions, SourceConfig
from mq.topic_partition import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))


def make(
    reset: str = "earliest", abort: bool = True, listener: Listener | None = None
) -> tuple[MirrorMaker, list[str]]:
    lines: list[str] = []
    source = SourceConfig(
        {"bootstrap_servers": "127.0.0.1:1", "group_id": "g", "auto_offset_reset": "none", "enable_auto_commit": False},
        auto_offset_reset=reset,
    )
    target = {"bootstrap_servers": "127.0.0.1:2"}
    options = MirrorOptions([source], target, re.compile("t"), abort_on_send_failure=abort, rebalance_listener=listener)
    return MirrorMaker(options, lines.append), lines


@pytest.fixture
def log_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partition A's log holds offsets 0-9, B's 100-199."""
    starts, ends = {A: 0, B: 100}, {A: 10, B: 200}

    async def fake(cluster: Any, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        table = starts if set(timestamps.values()) == {-2} else ends
        return {tp: (table[tp], -1) for tp in timestamps}

    monkeypatch.setattr(mirror_maker, "list_offsets", fake)


def test_a_position_below_the_log_start_is_reported_counted_and_skipped(log_offsets: None) -> None:
    maker, lines = make()
    stream = maker.streams[0]
    fetcher = stream.consumer.fetcher
    fetcher.assign([A, B])
    fetcher.seek(A, 5)
    fetcher.seek(B, 40)
    asyncio.run(stream.resolve_gaps(fetcher.known_positions()))
    assert lines == [
        "GAP in source t-1: offsets 40 to 99 (60 records) were removed before they were mirrored; "
        "resuming at the log start offset 100"
    ]
    assert (maker.stats.gaps, maker.stats.records_lost) == (1, 60)
    assert fetcher.known_positions() == {A: 5, B: 100}
    assert stream.positions[B] == 100


def test_new_partitions_follow_the_reset_policy_and_committed_ones_are_checked(log_offsets: None) -> None:
    maker, lines = make("latest")
    stream = maker.streams[0]
    fetcher = stream.consumer.fetcher
    fetcher.assign([A, B])
    fetcher.seek(B, 250)  # B's committed offset is beyond its log end: the topic was recreated
    asyncio.run(stream.on_partitions_assigned([A, B]))
    assert len(lines) == 1 and lines[0].startswith("GAP in source t-1: position 250 is beyond the log end offset 200")
    assert stream.committed == {B: 250}  # what the group had, until the next commit
    assert fetcher.known_positions() == {B: 100}
    assert maker.stats.records_lost == 0


def test_no_committed_offset_with_reset_none_stops_the_stream(log_offsets: None) -> None:
    maker, _ = make("none")
    stream = maker.streams[0]
    stream.consumer.fetcher.assign([A])
    with pytest.raises(MirrorError, match="no committed offset for t-0 and auto.offset.reset is none"):
        asyncio.run(stream.on_partitions_assigned([A]))


def commits_of(maker: MirrorMaker) -> list[dict[TopicPartition, int]]:
    commits: list[dict[TopicPartition, int]] = []

    async def commit(offsets: Mapping[TopicPartition, int]) -> None:
        commits.append(dict(offsets))

    maker.streams[0].consumer.commit = commit  # type: ignore[method-assign,assignment]
    return commits


def test_a_commit_waits_for_every_acknowledgement_and_commits_only_what_moved() -> None:
    maker, _ = make()
    stream = maker.streams[0]
    commits = commits_of(maker)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        acked = loop.create_future()
        stream.sent = [acked]
        stream.positions = {A: 7, B: 3}
        stream.committed = {B: 3}
        committing = asyncio.create_task(stream.commit())
        await asyncio.sleep(0.05)
        assert not committing.done() and commits == []  # the target has not acknowledged yet
        acked.set_result(10)
        await committing
        assert commits == [{A: 7}]
        await stream.commit()
        assert commits == [{A: 7}]  # nothing moved since

    asyncio.run(main())


def queue(maker: MirrorMaker) -> asyncio.Future[int]:
    """A send of the first stream, as ``forward`` makes it."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    future.add_done_callback(maker.answered)
    maker.streams[0].sent.append(future)
    return future


def test_a_failed_send_stops_the_mirror_at_once_and_nothing_is_committed() -> None:
    maker, _ = make()
    stream = maker.streams[0]
    commits = commits_of(maker)

    async def main() -> None:
        acked, failed = queue(maker), queue(maker)
        stream.positions = {A: 7}
        committing = asyncio.create_task(stream.commit())
        await asyncio.sleep(0.01)
        failed.set_exception(KafkaError("too large", code=ErrorCode.MESSAGE_TOO_LARGE))
        await asyncio.sleep(0)
        assert maker.aborted and maker.stopping.is_set()  # before any commit comes due
        acked.set_result(3)
        await committing
        await stream.on_partitions_revoked([A])  # the revocation at close commits nothing either

    asyncio.run(main())
    assert commits == []
    assert (maker.stats.send_failures, maker.send_error) == (1, "too large")


def test_without_abort_a_failed_send_is_reported_once_and_skipped() -> None:
    maker, lines = make(abort=False)
    stream = maker.streams[0]
    commits = commits_of(maker)

    async def main() -> None:
        queue(maker).set_exception(KafkaError("too large", code=ErrorCode.MESSAGE_TOO_LARGE))
        queue(maker).set_result(1)
        stream.positions = {A: 7}
        await asyncio.sleep(0)
        await stream.commit()
        await stream.commit()

    asyncio.run(main())
    assert commits == [{A: 7}]
    assert lines == ["ERROR: a record was not mirrored and is skipped: too large"]
    assert maker.stats.send_failures == 1 and not maker.aborted


def test_the_users_listener_hears_of_partitions_after_the_mirror_committed_and_positioned(log_offsets: None) -> None:
    listener = Listener()
    maker, _ = make(listener=listener)
    stream = maker.streams[0]
    commits = commits_of(maker)
    stream.consumer.fetcher.assign([A])

    async def main() -> None:
        await stream.on_partitions_assigned([A])
        assert listener.calls == [("assigned", [A])]
        stream.positions = {A: 4}
        await stream.on_partitions_revoked([A])

    asyncio.run(main())
    assert commits == [{A: 4}]
    assert listener.calls == [("assigned", [A]), ("revoked", [A])]


@pytest.mark.parametrize("whole_batches", [False, True], ids=["records", "batches"])
def test_a_stop_abandons_a_poll_that_waits_and_still_commits(whole_batches: bool) -> None:
    maker, _ = make()
    stream = maker.streams[0]
    commits = commits_of(maker)
    polls: list[int] = []

    async def unreachable(timeout_ms: int = 0, max_records: int = 500) -> list[Any]:
        polls.append(timeout_ms)
        await asyncio.Event().wait()  # a source that never answers
        return []

    async def close() -> None:
        pass

    assert stream.whole_batches  # no message handler: it polls undecoded batches
    stream.whole_batches = whole_batches
    stream.consumer.poll = unreachable  # type: ignore[method-assign]
    stream.consumer.poll_entries = unreachable  # type: ignore[method-assign]
    stream.consumer.close = close  # type: ignore[method-assign]
    stream.positions = {A: 3}

    async def main() -> None:
        running = asyncio.create_task(stream.run())
        while not polls:
            await asyncio.sleep(0.01)
        maker.stop()
        await asyncio.wait_for(running, 10)

    asyncio.run(main())
    assert commits == [{A: 3}]


def test_an_out_of_range_fetch_mid_run_is_a_gap_and_the_stream_goes_on(log_offsets: None) -> None:
    maker, lines = make()
    stream = maker.streams[0]
    commits_of(maker)
    fetcher = stream.consumer.fetcher
    fetcher.assign([A, B])
    fetcher.seek(A, 3)
    fetcher.seek(B, 120)
    polls: list[int] = []

    async def poll(timeout_ms: int = 0, max_records: int = 500) -> list[ConsumerRecord]:
        polls.append(timeout_ms)
        if len(polls) == 1:
            fetcher.seek(B, 60)  # retention removed offsets up to 99 meanwhile
            raise OffsetOutOfRangeError("fetch position 60 is out of range for t-1")
        maker.stop()
        return []

    async def close() -> None:
        pass

    stream.whole_batches = False  # polls records (as with a message handler)
    stream.consumer.poll = poll  # type: ignore[method-assign]
    stream.consumer.close = close  # type: ignore[method-assign]
    asyncio.run(asyncio.wait_for(stream.run(), 10))
    assert len(polls) == 2
    assert lines == [
        "GAP in source t-1: offsets 60 to 99 (40 records) were removed before they were mirrored; "
        "resuming at the log start offset 100"
    ]
    assert fetcher.known_positions() == {A: 3, B: 100}


def test_a_retriable_poll_error_is_reported_and_polled_again() -> None:
    maker, lines = make()
    stream = maker.streams[0]
    commits_of(maker)
    polls: list[int] = []

    async def poll(timeout_ms: int = 0, max_records: int = 500) -> list[ConsumerRecord]:
        polls.append(timeout_ms)
        if len(polls) == 1:
            raise KafkaError("coordinator moved", code=ErrorCode.NOT_COORDINATOR)
        if len(polls) == 2:
            maker.stop()
            return []
        raise KafkaError("bad", code=ErrorCode.INVALID_REQUEST)

    async def close() -> None:
        pass

    stream.whole_batches = False  # polls records (as with a message handler)
    stream.consumer.poll = poll  # type: ignore[method-assign]
    stream.consumer.close = close  # type: ignore[method-assign]
    asyncio.run(asyncio.wait_for(stream.run(), 10))
    assert len(polls) == 2
    assert lines == ["WARNING: polling the source failed (coordinator moved); retrying"]
    stream.mirror.stopping.clear()
    with pytest.raises(KafkaError, match="bad"):
        asyncio.run(asyncio.wait_for(stream.run(), 10))
