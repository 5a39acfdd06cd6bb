"""Offset specs, offset JSON, range splitting and rate limiting of the mq data source."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.spark.offsets import (
    OffsetRange,
    OffsetSpec,
    check_specified,
    offsets_from_json,
    offsets_to_json,
    option_name,
    parse_assign,
    parse_global_timestamp,
    parse_offset_spec,
    parse_subscribe,
    parse_timestamp_spec,
    rate_limit,
    split_ranges,
)
from mq.topic_partition import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_offsets_json_round_trip_is_ordered_by_topic_and_partition() -> None:
    offsets = {B0: 7, A1: 3, A0: -2}
    data = offsets_to_json(offsets)
    assert data == {"a": {"0": -2, "1": 3}, "b": {"0": 7}}
    assert list(data) == ["a", "b"]
    assert offsets_from_json(data) == offsets
    assert offsets_from_json('{"a": {"1": 3}}') == {A1: 3}


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', '{"a": {"x": 1}}', '{"a": {"0": "1"}}', '{"a": {"0": true}}', '{"a": {"-1": 0}}', "[1]", "{"],
)
def test_bad_offsets_json_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="startingOffsets"):
        parse_offset_spec(text, "startingOffsets")


def test_offset_specs() -> None:
    assert parse_offset_spec(" Earliest ", "startingOffsets") == OffsetSpec("earliest")
    assert parse_offset_spec("latest", "endingOffsets") == OffsetSpec("latest")
    spec = parse_offset_spec('{"a": {"0": 5, "1": -1}, "b": {"0": -2}}', "startingOffsets")
    assert spec.kind == "offsets"
    assert spec.as_map() == {A0: 5, A1: -1, B0: -2}
    with pytest.raises(ValueError, match="-3"):
        parse_offset_spec('{"a": {"0": -3}}', "startingOffsets")


def test_timestamp_specs() -> None:
    assert parse_global_timestamp("1700000000000", "startingTimestamp") == OffsetSpec(
        "timestamps", timestamp_ms=1700000000000
    )
    assert parse_timestamp_spec('{"a": {"0": 10}}', "startingOffsetsByTimestamp").as_map() == {A0: 10}
    with pytest.raises(ValueError, match="startingTimestamp"):
        parse_global_timestamp("soon", "startingTimestamp")
    with pytest.raises(ValueError, match="negative"):
        parse_timestamp_spec('{"a": {"0": -1}}', "startingOffsetsByTimestamp")


def test_assign_and_subscribe() -> None:
    assert parse_assign('{"a": [1, 0, 1], "b": [0]}') == [A1, A0, B0]
    for bad in ('{"a": 0}', '{"a": ["0"]}', "{}", '{"a": [-1]}'):
        with pytest.raises(ValueError, match="assign"):
            parse_assign(bad)
    assert parse_subscribe(" a, b ,") == ["a", "b"]
    with pytest.raises(ValueError, match="subscribe"):
        parse_subscribe(" , ")


def test_specific_offsets_must_name_every_partition_read() -> None:
    spec = parse_offset_spec('{"a": {"0": 1}}', "startingOffsets")
    check_specified(spec, [A0], "startingOffsets")
    check_specified(OffsetSpec("earliest"), [A0, A1], "startingOffsets")
    with pytest.raises(ValueError, match="missing: a-1; not read: none"):
        check_specified(spec, [A0, A1], "startingOffsets")


def test_split_ranges_drops_empty_ranges_and_splits_in_proportion() -> None:
    ranges = [OffsetRange(A0, 0, 90), OffsetRange(A1, 5, 5), OffsetRange(B0, 10, 40)]
    assert split_ranges(ranges, None) == [ranges[0], ranges[2]]
    assert split_ranges(ranges, 2) == [ranges[0], ranges[2]]
    assert split_ranges(ranges, 4) == [
        OffsetRange(A0, 0, 30),
        OffsetRange(A0, 30, 60),
        OffsetRange(A0, 60, 90),
        OffsetRange(B0, 10, 40),
    ]


def test_split_ranges_caps_the_records_of_a_piece() -> None:
    ranges = [OffsetRange(A0, 0, 25), OffsetRange(B0, 0, 5)]
    assert split_ranges(ranges, None, 10) == [
        OffsetRange(A0, 0, 8),
        OffsetRange(A0, 8, 16),
        OffsetRange(A0, 16, 25),
        OffsetRange(B0, 0, 5),
    ]
    # then minPartitions shares 8 pieces by size (8, 8, 9, 5 offsets: 2, 2, 2, 1 after rounding, as Spark rounds)
    assert [p.size for p in split_ranges(ranges, 8, 10)] == [4, 4, 4, 4, 4, 5, 5]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=6),
    st.integers(1, 50),
    st.none() | st.integers(1, 300),
)
def test_split_ranges_covers_each_range_exactly(
    bounds: list[tuple[int, int]], min_partitions: int, max_records: int | None
) -> None:
    ranges = [OffsetRange(TopicPartition("t", i), min(a, b), max(a, b)) for i, (a, b) in enumerate(bounds)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    if max_records is not None:
        assert all(p.size <= max_records for p in pieces)
    for r in ranges:
        mine = [p for p in pieces if p.tp == r.tp]
        assert all(p.size > 0 for p in mine)
        if r.size == 0:
            assert mine == []
        else:
            assert mine[0].start == r.start and mine[-1].end == r.end
            assert all(a.end == b.start for a, b in itertools.pairwise(mine))
            if max_records is None:
                assert max(p.size for p in mine) - min(p.size for p in mine) <= 1


def test_rate_limit_shares_the_limit_in_proportion_to_backlog() -> None:
    start = {A0: 0, A1: 100, B0: 50}
    end = {A0: 300, A1: 200, B0: 50}
    assert rate_limit(start, end, 1000) == end
    assert rate_limit(start, end, 100) == {A0: 75, A1: 125, B0: 50}
    assert rate_limit({A0: 0, A1: 0}, {A0: 1, A1: 1000}, 10) == {A0: 1, A1: 9}


@given(
    st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=1),
    st.integers(1, 300),
)
def test_rate_limit_stays_within_the_backlog(spans: dict[int, tuple[int, int]], limit: int) -> None:
    start = {TopicPartition("t", p): min(a, b) for p, (a, b) in spans.items()}
    end = {TopicPartition("t", p): max(a, b) for p, (a, b) in spans.items()}
    result = rate_limit(start, end, limit)
    assert set(result) == set(end)
    for tp in end:
        assert start[tp] <= result[tp] <= end[tp]
        if end[tp] > start[tp]:
            assert result[tp] > start[tp]
    moved = sum(result[tp] - start[tp] for tp in end)
    assert moved <= max(limit, sum(end[tp] - start[tp] for tp in end)) + len(end)


def test_option_names_for_messages() -> None:
    assert option_name(OffsetSpec("earliest"), "starting") == "startingOffsets"
    assert option_name(OffsetSpec("timestamps", timestamp_ms=1), "ending") == "endingTimestamp"
    assert option_name(OffsetSpec("timestamps", ((A0, 1),)), "starting") == "startingOffsetsByTimestamp"
