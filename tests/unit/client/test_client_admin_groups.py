"""AsyncAdmin's consumer group methods against fake brokers: coordinator routing, request shapes, decoding."""

from __future__ import annotations

from typing import Any

import pytest
from client_fakes import FakeBroker, with_coordinator

from mq.client.admin import AsyncAdmin
from mq.client.group_protocol import Assignment, encode_assignment
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.topic_partition import TopicPartition as TP

GROUP_VERSIONS = {
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.OFFSET_FETCH: (1, 8),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
}

EMPTY_GROUP = {"group_state": "Empty", "protocol_type": "consumer", "protocol_data": "", "members": []}


def with_groups(test: Any, versions: dict[int, tuple[int, int]] | None = None) -> None:
    """Two brokers; broker 1 coordinates every group."""
    with_coordinator(test, versions or GROUP_VERSIONS)


def test_describe_groups_decodes_assignments_and_maps_unknown_groups_to_dead() -> None:
    assignment = encode_assignment(Assignment((TP("t", 1), TP("t", 0), TP("u", 3))))

    def describe(header: RequestHeader, body: Any) -> dict[str, Any]:
        (group_id,) = body.groups
        if group_id == "gone":
            return {"groups": [{"group_id": group_id, "error_code": 69, **EMPTY_GROUP, "group_state": "Dead"}]}
        member = {
            "member_id": "c-1",
            "client_id": "c",
            "client_host": "/127.0.0.1",
            "member_metadata": b"",
            "member_assignment": assignment,
        }
        return {
            "groups": [
                {
                    "group_id": group_id,
                    "error_code": 0,
                    "group_state": "Stable",
                    "protocol_type": "consumer",
                    "protocol_data": "range",
                    "members": [member, {**member, "member_id": "c-2", "member_assignment": b""}],
                }
            ]
        }

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.DESCRIBE_GROUPS] = describe
        (described, gone) = await admin.describe_groups(["g", "gone"])
        assert (described.state, described.protocol, described.coordinator.node_id) == ("Stable", "range", 1)
        assert [m.assignment for m in described.members] == [(TP("t", 1), TP("t", 0), TP("u", 3)), ()]
        assert described.members[0].host == "/127.0.0.1"
        assert gone.state == "Dead"
        assert brokers[0].of(ApiKey.FIND_COORDINATOR)[0][1].coordinator_keys == ("g",)

    with_groups(test)


def test_coordinator_moves_are_retried() -> None:
    answers = iter([16, 0])

    def describe(header: RequestHeader, body: Any) -> dict[str, Any]:
        code = next(answers)
        return {"groups": [{"group_id": "g", "error_code": code, **EMPTY_GROUP}]}

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.DESCRIBE_GROUPS] = describe
        (described,) = await admin.describe_groups(["g"])
        assert described.state == "Empty"
        assert len(brokers[1].of(ApiKey.DESCRIBE_GROUPS)) == 2

    with_groups(test)


def test_list_groups_asks_every_broker_with_the_states_filter() -> None:
    def lister(*groups: tuple[str, str]) -> Any:
        def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
            return {
                "error_code": 0,
                "groups": [{"group_id": g, "protocol_type": "consumer", "group_state": s} for g, s in groups],
            }

        return handle

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[0].handlers[ApiKey.LIST_GROUPS] = lister(("b", "Empty"))
        brokers[1].handlers[ApiKey.LIST_GROUPS] = lister(("a", "Stable"), ("c", "Empty"))
        assert [(g.group_id, g.state) for g in await admin.list_groups()] == [
            ("a", "Stable"),
            ("b", "Empty"),
            ("c", "Empty"),
        ]
        assert [g.group_id for g in await admin.list_groups(["Empty"])] == ["b", "c"]
        assert brokers[0].of(ApiKey.LIST_GROUPS)[-1][1].states_filter == ("Empty",)

    with_groups(test)


def offsets_partitions(code: int = 0) -> list[dict[str, Any]]:
    return [
        {"partition_index": 0, "committed_offset": 5, "error_code": code},
        {"partition_index": 1, "committed_offset": -1, "error_code": code},
    ]


@pytest.mark.parametrize("high", [8, 7])
def test_list_group_offsets_in_both_response_shapes(high: int) -> None:
    def fetch(header: RequestHeader, body: Any) -> dict[str, Any]:
        topics = [{"name": "t", "partitions": offsets_partitions()}]
        if header.api_version >= 8:
            assert body.groups[0].group_id == "g" and body.groups[0].topics is None
            return {"groups": [{"group_id": "g", "error_code": 0, "topics": topics}]}
        assert body.group_id == "g" and body.topics is None
        return {"error_code": 0, "topics": topics}

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.OFFSET_FETCH] = fetch
        assert await admin.list_group_offsets("g") == {TP("t", 0): 5}
        assert brokers[1].of(ApiKey.OFFSET_FETCH)[0][0].api_version == high

    with_groups(test, {**GROUP_VERSIONS, ApiKey.OFFSET_FETCH: (1, high), ApiKey.FIND_COORDINATOR: (0, 3)})


def test_alter_group_offsets_commits_as_an_admin_and_raises_the_coordinator_error() -> None:
    codes = iter([0, ErrorCode.UNKNOWN_MEMBER_ID])

    def commit(header: RequestHeader, body: Any) -> dict[str, Any]:
        code = next(codes)
        return {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
                }
                for t in body.topics
            ]
        }

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.OFFSET_COMMIT] = commit
        await admin.alter_group_offsets("g", {TP("t", 0): 3, TP("t", 1): 4})
        body = brokers[1].of(ApiKey.OFFSET_COMMIT)[0][1]
        assert (body.generation_id_or_member_epoch, body.member_id) == (-1, "")
        assert [(p.partition_index, p.committed_offset) for p in body.topics[0].partitions] == [(0, 3), (1, 4)]
        with pytest.raises(KafkaError) as info:
            await admin.alter_group_offsets("g", {TP("t", 0): 3})
        assert info.value.code == ErrorCode.UNKNOWN_MEMBER_ID

    with_groups(test)


def test_delete_groups_and_offsets_report_per_entry() -> None:
    def delete(header: RequestHeader, body: Any) -> dict[str, Any]:
        return {"results": [{"group_id": g, "error_code": 68 if g == "busy" else 0} for g in body.groups_names]}

    def delete_offsets(header: RequestHeader, body: Any) -> dict[str, Any]:
        topics = [
            {
                "name": t.name,
                "partitions": [{"partition_index": p.partition_index, "error_code": 86} for p in t.partitions],
            }
            for t in body.topics
        ]
        return {"error_code": 0 if body.group_id == "g" else 69, "topics": topics}

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.DELETE_GROUPS] = delete
        brokers[1].handlers[ApiKey.OFFSET_DELETE] = delete_offsets
        assert await admin.delete_groups(["g", "busy"]) == {"g": ErrorCode.NONE, "busy": ErrorCode.NON_EMPTY_GROUP}
        assert await admin.delete_group_offsets("g", [TP("t", 1)]) == {TP("t", 1): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}
        with pytest.raises(KafkaError) as info:
            await admin.delete_group_offsets("other", [TP("t", 1)])
        assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND

    with_groups(test)
