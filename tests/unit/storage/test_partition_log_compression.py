"""A log whose topic sets compression.type: produced entries are stored in that codec, offsets assigned from the log
end, the records unchanged; ``producer`` stores what was sent; config changes apply to the next append."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_batches import TS, legacy_batch, v2_batch

from mq.config import TopicConfig
from mq.errors import MessageTooLargeError
from mq.records import Codec, iter_headers, iter_records
from mq.records.batch_header import set_offset, set_partition_leader_epoch
from mq.storage.partition_log import Log


def stored(log: Log) -> bytes:
    return (log.dir / "00000000000000000000.log").read_bytes()


def contents(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.offset, r.timestamp, r.key, r.value) for h in iter_headers(data) for r in iter_records(data, h)]


def produced(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.timestamp, r.key, r.value) for h in iter_headers(data) for r in iter_records(data, h)]


def test_a_gzip_topic_stores_lz4_batches_in_gzip(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(compression_type="gzip"))
    sent = [v2_batch(3, codec=Codec.LZ4), v2_batch(4, codec=Codec.NONE), v2_batch(2, codec=Codec.GZIP)]
    infos = [log.append_as_leader(batch, leader_epoch=5) for batch in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 6), (7, 8)]
    data = stored(log)
    assert [(h.codec, h.offset, h.partition_leader_epoch) for h in iter_headers(data)] == [
        (Codec.GZIP, 0, 5),
        (Codec.GZIP, 3, 5),
        (Codec.GZIP, 7, 5),
    ]
    assert [t for _, t, _, _ in contents(data)] == [t for b in sent for t, _, _ in produced(b)]
    assert [o for o, _, _, _ in contents(data)] == list(range(9))
    assert [(k, v) for _, _, k, v in contents(data)] == [(k, v) for b in sent for _, k, v in produced(b)]
    assert infos[2].valid_bytes == list(iter_headers(data))[2].size


def test_producer_keeps_the_producers_bytes(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(compression_type="producer"))
    batch = v2_batch(3, codec=Codec.LZ4)
    log.append_as_leader(batch, leader_epoch=7)
    expected = bytearray(batch)
    set_partition_leader_epoch(expected, 0, 7)
    assert stored(log) == expected


def test_a_config_change_applies_to_the_next_append(tmp_path: Path) -> None:
    config = TopicConfig()
    log = Log(tmp_path / "t-0", config)
    log.append_as_leader(v2_batch(2, codec=Codec.SNAPPY), -1)
    log.update_config(TopicConfig(compression_type="zstd"))
    log.append_as_leader(v2_batch(2, codec=Codec.SNAPPY), -1)
    log.update_config(TopicConfig(compression_type="uncompressed"))
    log.append_as_leader(v2_batch(2, codec=Codec.SNAPPY), -1)
    data = stored(log)
    assert [h.codec for h in iter_headers(data)] == [Codec.SNAPPY, Codec.ZSTD, Codec.NONE]
    assert [o for o, _, _, _ in contents(data)] == list(range(6))


def test_a_batch_too_large_once_decompressed_is_refused(tmp_path: Path) -> None:
    """Kafka checks max.message.bytes again after recompression: RecordTooLargeException (MESSAGE_TOO_LARGE)."""
    batch = v2_batch(50, value_size=400, codec=Codec.GZIP)
    assert len(batch) < 2000
    log = Log(tmp_path / "t-0", TopicConfig(compression_type="uncompressed", max_message_bytes=2000))
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(batch, -1)
    assert (log.log_end_offset, stored(log)) == (0, b"")
    log.update_config(TopicConfig(compression_type="producer", max_message_bytes=2000))
    log.append_as_leader(batch, -1)
    assert log.log_end_offset == 50


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_messages_get_offsets_from_the_log_end(tmp_path: Path, magic: int) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(compression_type="snappy"))
    log.append_as_leader(v2_batch(2), -1)
    info = log.append_as_leader(legacy_batch(magic, 4, codec=Codec.GZIP), -1)
    info2 = log.append_as_leader(legacy_batch(magic, 3), -1)
    assert [(info.first_offset, info.last_offset), (info2.first_offset, info2.last_offset)] == [(2, 5), (6, 8)]
    data = stored(log)
    entries = [(h.magic, h.codec) for h in iter_headers(data)]
    assert entries == [(2, Codec.SNAPPY), (magic, Codec.SNAPPY), (magic, Codec.SNAPPY)]
    assert [o for o, _, _, _ in contents(data)] == list(range(9))
    assert [v for _, _, _, v in contents(data)][2:] == [b"m0", b"m1", b"m2", b"m3", b"m0", b"m1", b"m2"]


def test_legacy_messages_on_a_zstd_topic_become_a_v2_batch(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(compression_type="zstd"))
    log.append_as_leader(legacy_batch(1, 3, codec=Codec.LZ4), -1)
    data = stored(log)
    assert [(h.magic, h.codec, h.offset) for h in iter_headers(data)] == [(2, Codec.ZSTD, 0)]
    assert contents(data) == [(i, TS + i, None, b"m%d" % i) for i in range(3)]


def test_log_append_time_stamps_the_rewritten_batch(tmp_path: Path) -> None:
    config = TopicConfig(compression_type="lz4", message_timestamp_type="LogAppendTime")
    log = Log(tmp_path / "t-0", config, time_ms=lambda: TS + 777)
    info = log.append_as_leader(v2_batch(3, codec=Codec.GZIP), -1)
    data = stored(log)
    assert info.log_append_time_ms == TS + 777
    assert [(h.codec, h.max_timestamp) for h in iter_headers(data)] == [(Codec.LZ4, TS + 777)]
    assert {t for _, t, _, _ in contents(data)} == {TS + 777}


def test_a_follower_stores_the_leaders_batches_as_they_are(tmp_path: Path) -> None:
    """Only a leader rewrites: a follower appends the leader's bytes whatever its config says."""
    batch = bytearray(v2_batch(2, codec=Codec.LZ4))
    set_offset(batch, 0, 0)
    log = Log(tmp_path / "t-0", TopicConfig(compression_type="gzip"))
    log.append_as_follower(bytes(batch))
    assert stored(log) == bytes(batch)
