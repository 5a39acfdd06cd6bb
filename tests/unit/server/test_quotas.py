"""Client quotas without sockets: Kafka's sampled rate and throttle time on a driven clock, the eight levels of
precedence and which requests share a sensor, sanitized names, the dispatcher writing the throttle time into
responses (Produce's last field, other APIs' first) and muting the connection, and the quota handlers over the
local metadata store."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import decode_response, encode_response, response_schema
from mq.protocol.entities import build
from mq.protocol.produce_request import decode_produce_request
from mq.protocol.produce_response import PartitionResponse, encode_one_partition, encode_produce_response
from mq.server.api_dispatch import LATER, Api, ApiDispatcher, RequestContext
from mq.server.clock import ManualClock
from mq.server.handlers.client_quotas import alter_quotas, describe_quotas
from mq.server.network import ClientAddress
from mq.server.quotas import (
    DEFAULT,
    PRODUCER_BYTE_RATE,
    ClientQuotaManager,
    ClientQuotas,
    Rate,
    desanitize,
    entity_path,
    levels,
    parse_entity_path,
    read_all_quota_configs,
    sanitize,
)
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from tests.produce_frames import produce_frame

T0 = 1_700_000_000_000


# --- the rate and the throttle time --------------------------------------------------------------------------------


def test_a_fresh_rate_is_measured_over_at_least_window_num_minus_one_samples() -> None:
    rate = Rate(11, 1000)
    rate.record(5000, T0)
    assert rate.window_size_ms(T0) == 10_000
    assert rate.measure(T0) == 500.0
    assert rate.window_size_ms(T0 + 500) == 10_500  # the current sample's elapsed part counts on top
    assert rate.window_size_ms(T0 + 1000) == 10_000  # one whole sample elapsed: still padded to ten


def test_samples_roll_over_and_expire_after_the_whole_window() -> None:
    rate = Rate(3, 1000)
    for second in range(3):
        rate.record(100, T0 + second * 1000)
    assert rate.window_size_ms(T0 + 2500) == 2500  # three samples since T0: no padding
    assert rate.measure(T0 + 2500) == 300 / 2.5
    rate.record(100, T0 + 3000)  # a fourth sample replaces the first
    assert rate.measure(T0 + 3000) == 300 / 2.0
    assert rate.measure(T0 + 10_000) == 0.0  # every sample is older than the window


def test_throttle_time_is_the_time_the_window_must_grow_for_the_excess() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1000)
    manager.update((None, "A"), 1000.0)
    assert manager.record("ANONYMOUS", "A", 10_000, T0) == 0  # 1000 B/s over the padded 10 s window: at the bound
    # 11000 B over 10 s = 1100 B/s: 10% over the bound, for 10% of the 10 s window
    assert manager.record("ANONYMOUS", "A", 1000, T0) == 1000
    assert manager.record("ANONYMOUS", "B", 1_000_000, T0) == 0  # B has no quota


def test_a_steady_client_below_the_quota_is_not_throttled_and_one_over_it_is() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 2, 1000)
    manager.update((None, DEFAULT), 1000.0)
    throttles = [manager.record("u", "steady", 80, T0 + i * 100) for i in range(100)]  # 800 B/s for 10 s
    assert max(throttles) == 0
    fast = [manager.record("u", "fast", 200, T0 + i * 100) for i in range(100)]  # 2000 B/s
    assert min(fast[20:]) > 0  # the default applies to each client id on its own


# --- precedence -------------------------------------------------------------------------------------------------------


def test_the_eight_levels_in_kafkas_order() -> None:
    assert levels("u", "c") == (
        ("u", "c"),
        ("u", DEFAULT),
        ("u", None),
        (DEFAULT, "c"),
        (DEFAULT, DEFAULT),
        (DEFAULT, None),
        (None, "c"),
        (None, DEFAULT),
    )


@pytest.mark.parametrize("top", range(8))
def test_the_first_level_that_sets_a_quota_wins_and_names_the_sensor(top: int) -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1000)
    entities = levels("u", "c")
    for index, entity in enumerate(entities[top:], start=top):
        manager.update(entity, 1000.0 + index)
    manager.update(("other", "c"), 1.0)  # another user's quota never applies
    resolved = manager.resolve("u", "c")
    assert resolved is not None
    assert resolved.bound == 1000.0 + top
    user, client = entities[top]
    assert resolved.tags == ("u" if user is not None else "", "c" if client is not None else "")


def test_request_time_throttles_are_bounded_by_one_sample() -> None:
    quotas = ClientQuotas(11, 1, lambda: T0)
    quotas.update((None, "c"), {"request_percentage": "1", "producer_byte_rate": "1"})
    assert quotas.request.record("u", "c", 1000.0, T0) == 1000
    assert quotas.produce.record("u", "c", 1000.0, T0) == (1000 / 10 - 1) * 10_000


def test_a_user_quota_is_shared_by_its_clients_and_a_removed_quota_stops_throttling() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1000)
    manager.update(("u", None), 1000.0)
    assert manager.record("u", "c1", 10_000, T0) == 0
    assert manager.record("u", "c2", 1000, T0) == 1000  # the same sensor: 11000 B over 10 s
    manager.update(("u", None), None)
    assert manager.resolve("u", "c2") is None
    assert manager.record("u", "c2", 10**9, T0) == 0


def test_client_quotas_apply_stored_configs_and_ignore_unreadable_values() -> None:
    quotas = ClientQuotas(11, 1, lambda: T0)
    assert not quotas.enabled
    quotas.update((None, "c"), {"producer_byte_rate": "1024", "consumer_byte_rate": "x", "request_percentage": "-1"})
    assert quotas.enabled
    assert quotas.produce.overrides == {(None, "c"): 1024.0}
    assert not quotas.fetch.overrides and not quotas.request.overrides
    quotas.update((None, "c"), {})
    assert not quotas.enabled


def test_names_are_sanitized_as_kafka_does() -> None:
    assert sanitize("a b*c/é.-_") == "a%20b%2Ac%2F%C3%A9.-_"
    assert desanitize(sanitize("a b*c/é<default>")) == "a b*c/é<default>"
    assert sanitize("<default>") != DEFAULT
    for entity in [("u", "c"), ("u", None), (None, "c"), (DEFAULT, DEFAULT)]:
        assert parse_entity_path(entity_path(entity)) == entity
    assert parse_entity_path("topics/t") is None


# --- the dispatcher ---------------------------------------------------------------------------------------------------


def produce_api(now: bool) -> Api:
    """Produce answered with one partition's success (on the immediate path when ``now``)."""

    def answer(frame: bytearray, version: int, correlation_id: int) -> bytes:
        return encode_one_partition(version, correlation_id, "t", 0, 0, 5, -1, 0)

    async def handle(context: RequestContext, request: Any) -> bytes:
        return answer(bytearray(), context.version, context.header.correlation_id)

    def error(context: RequestContext, request: Any, code: ErrorCode) -> bytes:
        return encode_produce_response(
            context.version, context.header.correlation_id, [("t", [PartitionResponse(0, code)])]
        )

    def immediate(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> Any:
        return answer(frame, version, correlation_id) if now else LATER

    return Api(ApiKey.PRODUCE, 3, 9, handle, error, decode_produce_request, immediate)


class Muted:
    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, delay_ms: float) -> None:
        self.times.append(delay_ms)


def dispatch(dispatcher: ApiDispatcher, frame: bytearray, client: ClientAddress) -> Any:
    found = dispatcher.now(frame, client)
    if found is LATER:
        return asyncio.run(dispatcher(frame, client))
    return found


@pytest.mark.parametrize("version", [3, 8, 9])
@pytest.mark.parametrize("immediate", [True, False])
def test_a_produce_over_the_quota_carries_its_throttle_time_and_mutes_the_connection(
    version: int, immediate: bool
) -> None:
    clock = ManualClock(T0)
    quotas = ClientQuotas(11, 1, clock.time_ms)
    dispatcher = ApiDispatcher([produce_api(immediate)])
    dispatcher.quotas = quotas
    muted = Muted()
    client = ClientAddress("127.0.0.1", 1, 1, mute=muted)
    records = bytes(10_000)
    size = len(produce_frame(version, [("t", [(0, records)])], client_id="A"))
    quotas.update((None, "A"), {"producer_byte_rate": str(size)})  # one request a second
    schema = response_schema(ApiKey.PRODUCE, version)
    throttles = []
    for _ in range(12):
        response = dispatch(dispatcher, produce_frame(version, [("t", [(0, records)])], client_id="A"), client)
        _, decoded = decode_response(response[4:], schema)
        throttles.append(int(decoded.throttle_time.total_seconds() * 1000))
        assert decoded.responses[0].partition_responses[0].base_offset == 5
    # ten requests fill the padded 10 s window at the bound; the eleventh is 10% over, the twelfth 20%
    assert throttles == [0] * 10 + [1000, 2000]
    assert muted.times == [1000, 2000]
    other = ClientAddress("127.0.0.1", 2, 2, mute=muted)
    for _ in range(12):
        response = dispatch(dispatcher, produce_frame(version, [("t", [(0, records)])], client_id="B"), other)
    assert muted.times == [1000, 2000]  # client id B has no quota


def test_no_quota_anywhere_leaves_the_dispatcher_without_quotas() -> None:
    dispatcher = ApiDispatcher([produce_api(True)])
    assert dispatcher.quotas is None
    muted = Muted()
    response = dispatch(dispatcher, produce_frame(9, [("t", [(0, bytes(100))])]), ClientAddress("h", 1, 1, mute=muted))
    assert response == encode_one_partition(9, 7, "t", 0, 0, 5, -1, 0)
    assert not muted.times


@pytest.mark.parametrize(
    ("api_key", "version"), [(ApiKey.METADATA, 12), (ApiKey.METADATA, 4), (ApiKey.OFFSET_DELETE, 0)]
)
def test_the_throttle_time_of_other_apis_is_written_where_their_schema_has_it(api_key: ApiKey, version: int) -> None:
    """Metadata has it first (after a flexible header's tags from v9), OffsetDelete after its error code; time on the
    loop is recorded against ``request_percentage``: a tiny quota throttles the second request."""
    clock = ManualClock(T0)
    quotas = ClientQuotas(11, 1, clock.time_ms)
    quotas.update((DEFAULT, None), {"request_percentage": "0.000001"})
    schema = response_schema(api_key, version)
    body = {"brokers": [], "topics": [], "error_code": 0, "controller_id": 0}

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        await asyncio.sleep(0)  # a wait is not loop time
        return dict(body)

    api = Api(
        api_key,
        version,
        version,
        handle,
        lambda c, r, code: dict(body),
        decode=lambda f: (
            SimpleNamespace(api_version=version, correlation_id=3, client_id="c"),
            SimpleNamespace(replica_id=-1),
        ),
    )
    dispatcher = ApiDispatcher([api])
    dispatcher.quotas = quotas
    muted = Muted()
    client = ClientAddress("h", 1, 1, mute=muted)
    frame = bytearray(int(api_key).to_bytes(2, "big") + version.to_bytes(2, "big") + (3).to_bytes(4, "big"))
    asyncio.run(dispatcher(frame, client))
    response = asyncio.run(dispatcher(frame, client))
    assert len(muted.times) == 2 and muted.times[1] > 0
    _, decoded = decode_response(response[4:], schema)
    assert int(decoded.throttle_time.total_seconds() * 1000) == muted.times[1]
    unthrottled = encode_response(3, build(schema, {**body, "throttle_time": 0}))
    assert len(response) == len(unthrottled)


def test_exempt_apis_are_never_throttled() -> None:
    quotas = ClientQuotas(11, 1, lambda: T0)
    quotas.update((DEFAULT, None), {"request_percentage": "0.000001"})

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": [], "throttle_time": 0}

    api = Api(ApiKey.API_VERSIONS, 0, 3, handle, lambda c, r, code: {"error_code": code})
    dispatcher = ApiDispatcher([api])
    dispatcher.quotas = quotas
    muted = Muted()
    frame = bytearray(b"\x00\x12\x00\x00\x00\x00\x00\x03\x00\x01c")
    for _ in range(5):
        asyncio.run(dispatcher(frame, ClientAddress("h", 1, 1, mute=muted)))
    assert not muted.times


# --- the handlers over the metadata tree ----------------------------------------------------------------------------


def component(entity_type: str, match_type: int, match: str | None = None) -> Any:
    return SimpleNamespace(entity_type=entity_type, match_type=match_type, match=match)


def entry(entity: dict[str, str | None], **ops: float | None) -> Any:
    return SimpleNamespace(
        entity=[SimpleNamespace(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[SimpleNamespace(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
    )


@pytest.fixture
def zk(tmp_path: Path) -> KafkaZkClient:
    client = KafkaZkClient(LocalStore(tmp_path / "tree.json"))
    client.create_top_level_paths()
    return client


def described(
    zk: KafkaZkClient, *components: Any, strict: bool = False
) -> list[tuple[dict[str, Any], dict[str, float]]]:
    return [
        ({e["entity_type"]: e["entity_name"] for e in d["entity"]}, {v["key"]: v["value"] for v in d["values"]})
        for d in describe_quotas(zk, components, strict)
    ]


def test_alter_writes_kafkas_tree_and_describe_filters_it(zk: KafkaZkClient) -> None:
    answers = alter_quotas(
        zk,
        [
            entry({"client-id": "c 1"}, producer_byte_rate=1024),
            entry({"user": "alice", "client-id": None}, consumer_byte_rate=2048, request_percentage=12.5),
            entry({"user": None}, request_percentage=200),
        ],
        validate_only=False,
    )
    assert [a["error_code"] for a in answers] == [ErrorCode.NONE] * 3
    assert zk.get_entity_config("clients", "c%201") == {"producer_byte_rate": "1024"}
    assert zk.get_entity_config("users", "alice/clients/<default>") == {
        "consumer_byte_rate": "2048",
        "request_percentage": "12.5",
    }
    changes = zk.store.get_children("/config/changes")
    assert len(changes) == 3
    assert read_all_quota_configs(zk) == {
        (None, "c%201"): {"producer_byte_rate": "1024"},
        ("alice", DEFAULT): {"consumer_byte_rate": "2048", "request_percentage": "12.5"},
        (DEFAULT, None): {"request_percentage": "200.0"},
    }
    assert described(zk, component("client-id", 0, "c 1"), strict=True) == [
        ({"client-id": "c 1"}, {"producer_byte_rate": 1024.0})
    ]
    assert described(zk, component("user", 1), strict=True) == [({"user": None}, {"request_percentage": 200.0})]
    assert described(zk, component("user", 2), strict=True) == [({"user": None}, {"request_percentage": 200.0})]
    assert [e for e, _ in described(zk, component("user", 2))] == [
        {"user": None},
        {"user": "alice", "client-id": None},
    ]
    assert len(described(zk)) == 3
    assert described(zk, component("client-id", 1)) == [
        ({"user": "alice", "client-id": None}, {"consumer_byte_rate": 2048.0, "request_percentage": 12.5})
    ]
    # removing every key leaves nothing to describe
    alter_quotas(zk, [entry({"client-id": "c 1"}, producer_byte_rate=None)], validate_only=False)
    assert described(zk, component("client-id", 0, "c 1")) == []


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ({"producer_byte_rate": 0.0}, "must be a number greater than 0"),
        ({"consumer_byte_rate": -5.0}, "must be a number greater than 0"),
        ({"request_percentage": -0.5}, "must be a number greater than 0"),
        ({"producer_byte_rate": 10.5}, "Configuration producer_byte_rate must be a LONG value"),
        ({"bogus": 1.0}, "Invalid configuration key bogus"),
        ({"producer_byte_rate": float("inf")}, "must be a number greater than 0"),
        ({"request_percentage": float("nan")}, "must be a number greater than 0"),
    ],
)
def test_an_invalid_entry_fails_the_request_and_nothing_is_written(
    zk: KafkaZkClient, ops: dict[str, float], message: str
) -> None:
    before = zk.store.get_children("/config/changes")
    answers = alter_quotas(
        zk, [entry({"client-id": "ok"}, producer_byte_rate=100), entry({"client-id": "bad"}, **ops)], False
    )
    assert [a["error_code"] for a in answers] == [ErrorCode.INVALID_REQUEST] * 2
    assert message in answers[1]["error_message"]
    assert "another entry" in answers[0]["error_message"]
    assert read_all_quota_configs(zk) == {}
    assert zk.store.get_children("/config/changes") == before


def test_validate_only_writes_nothing(zk: KafkaZkClient) -> None:
    answers = alter_quotas(zk, [entry({"client-id": "c"}, producer_byte_rate=100)], validate_only=True)
    assert answers[0]["error_code"] == ErrorCode.NONE
    assert read_all_quota_configs(zk) == {}


def test_malformed_filters_and_entities_are_refused(zk: KafkaZkClient) -> None:
    from mq.errors import KafkaError

    for components, code in [
        ([component("user", 2), component("user", 1)], ErrorCode.INVALID_REQUEST),
        ([component("user", 7)], ErrorCode.INVALID_REQUEST),
        ([component("user", 0, None)], ErrorCode.INVALID_REQUEST),
        ([component("ip", 2)], ErrorCode.UNSUPPORTED_VERSION),
    ]:
        with pytest.raises(KafkaError) as raised:
            describe_quotas(zk, components, False)
        assert raised.value.code == code
    for entity in [{}, {"group": "g"}, {"user": ""}]:
        answers = alter_quotas(zk, [entry(entity, producer_byte_rate=1)], False)
        assert answers[0]["error_code"] == ErrorCode.INVALID_REQUEST


def test_response_schemas_of_both_apis_take_the_handlers_dicts() -> None:
    for version in (0, 1):
        describe = build(
            response_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version),
            {
                "throttle_time": 0,
                "error_code": 0,
                "error_message": None,
                "entries": [
                    {"entity": [{"entity_type": "user", "entity_name": None}], "values": [{"key": "k", "value": 1.0}]}
                ],
            },
        )
        assert dataclasses.is_dataclass(describe)
