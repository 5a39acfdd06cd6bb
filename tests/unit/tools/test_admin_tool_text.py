"""The offset JSON file of delete-records and the usable-version rule of broker-api-versions."""

from __future__ import annotations

import pytest

from mq.client.admin import DeletedRecords
from mq.client.cluster import BrokerMetadata
from mq.errors import ErrorCode
from mq.tools.broker_api_versions import api_text, node_api_versions_lines
from mq.tools.delete_records import OffsetJsonError, parse_offset_json, render_deleted
from mq.topic_partition import TopicPartition


def test_offset_json_in_file_order_with_default_version() -> None:
    text = '{"partitions":[{"topic":"b","partition":1,"offset":-1},{"topic":"a","partition":0,"offset":3}]}'
    assert parse_offset_json(text) == [(TopicPartition("b", 1), -1), (TopicPartition("a", 0), 3)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "The input string is not a valid JSON"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        ('{"version":1}', "Missing partitions field"),
        ('{"partitions":[{"topic":"a","partition":"0","offset":1}]}', "Invalid partition entry"),
    ],
)
def test_offset_json_errors(text: str, message: str) -> None:
    with pytest.raises(OffsetJsonError, match=message):
        parse_offset_json(text)


def test_render_deleted_counts_failures() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    lines, failed = render_deleted(
        [(a, 3), (b, 9)], {a: DeletedRecords(3, ErrorCode.NONE), b: DeletedRecords(-1, ErrorCode.UNKNOWN_SERVER_ERROR)}
    )
    assert failed == 1
    assert lines == [
        "partition: t-0\tlow_watermark: 3",
        "partition: t-1\terror: org.apache.kafka.common.errors.UnknownServerException: "
        "The server experienced an unexpected error when processing the request.",
    ]


def test_usable_version_rule() -> None:
    def client(key: int) -> tuple[int, int] | None:
        return {0: (3, 9), 1: (4, 12), 2: (0, 1), 3: (0, 3)}.get(key)

    assert api_text(0, (3, 11), client) == "Produce(0): 3 to 11 [usable: 9]"
    assert api_text(1, (13, 16), client) == "Fetch(1): 13 to 16 [unusable: node too new]"
    assert api_text(3, (5, 5), client) == "Metadata(3): 5 [unusable: node too new]"
    assert api_text(2, (0, 0), client) == "ListOffsets(2): 0 [usable: 0]"
    assert api_text(1, (0, 3), client) == "Fetch(1): 0 to 3 [unusable: node too old]"
    assert api_text(999, (0, 2), client) == "UNKNOWN(999): 0 to 2"
    lines = node_api_versions_lines(BrokerMetadata(5, "h", 1, "r1"), {0: (0, 9), 999: (1, 1)}, client)
    assert lines == [
        "h:1 (id: 5 rack: r1) -> (",
        "\tProduce(0): 0 to 9 [usable: 9],",
        "\tFetch(1): UNSUPPORTED,",
        "\tListOffsets(2): UNSUPPORTED,",
        "\tMetadata(3): UNSUPPORTED,",
        "\tUNKNOWN(999): 1",
        ")",
    ]


def test_log_dirs_document_keys_errors_and_topic_filter() -> None:
    from mq.client.admin import LogDirDescription, ReplicaLogInfo
    from mq.tools.log_dirs import BrokerListError, brokers_to_query, log_dirs_document, render_document

    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    dirs = (
        LogDirDescription(
            "/d1",
            ErrorCode.NONE,
            ((a0, ReplicaLogInfo("/d1", 10, 0)), (b0, ReplicaLogInfo("/d1", 20, 0))),
        ),
        LogDirDescription("/d2", ErrorCode.NONE, ((a0, ReplicaLogInfo("/d2", 4, 6, is_future=True)),)),
        LogDirDescription("/d3", ErrorCode.KAFKA_STORAGE_ERROR, ()),
    )
    assert render_document(log_dirs_document({3: dirs}, {"a"})) == (
        '{"version":1,"brokers":[{"broker":3,"logDirs":['
        '{"logDir":"/d1","error":null,"partitions":[{"partition":"a-0","size":10,"offsetLag":0,"isFuture":false}]},'
        '{"logDir":"/d2","error":null,"partitions":[{"partition":"a-0","size":4,"offsetLag":6,"isFuture":true}]},'
        '{"logDir":"/d3","error":"org.apache.kafka.common.errors.KafkaStorageException","partitions":[]}]}]}'
    )
    assert brokers_to_query([], [2, 1]) == [1, 2]
    with pytest.raises(BrokerListError, match="do not exist from --broker-list: 5,7. Current existent brokers: 1,2"):
        brokers_to_query([1, 5, 7], [2, 1])
