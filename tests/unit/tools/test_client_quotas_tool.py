"""kafka-configs' quota lines and checks (``mq.tools.client_quotas``) over an admin that records what it is asked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import cast

import pytest

from mq.client.admin import ClientQuotaEntry
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.tools.client_quotas import alter_client_quotas, describe_client_quotas, java_double
from mq.tools.configs import ConfigCommandError


class FakeAdmin:
    def __init__(self, entries: list[ClientQuotaEntry], refuse: str | None = None) -> None:
        self.entries = entries
        self.refuse = refuse
        self.filters: list[tuple[list[tuple[str, int, str | None]], bool]] = []
        self.altered: list[tuple[dict[str, str | None], dict[str, float], list[str]]] = []

    def describe_client_quotas(
        self, components: Sequence[tuple[str, int, str | None]], strict: bool = False
    ) -> list[ClientQuotaEntry]:
        self.filters.append((list(components), strict))
        return self.entries

    def alter_client_quotas(
        self, entity: Mapping[str, str | None], add: Mapping[str, float], remove: Iterable[str] = ()
    ) -> None:
        if self.refuse:
            raise KafkaError(self.refuse, ErrorCode.INVALID_REQUEST)
        self.altered.append((dict(entity), dict(add), list(remove)))


def admin(fake: FakeAdmin) -> SyncAdmin:
    return cast(SyncAdmin, fake)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1024.0, "1024.0"),
        (1048576.0, "1048576.0"),
        (1e7, "1.0E7"),
        (10485760.0, "1.048576E7"),
        (12.5, "12.5"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (200.0, "200.0"),
    ],
)
def test_values_print_as_java_prints_a_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_describe_lines_and_strict_filters() -> None:
    fake = FakeAdmin(
        [
            ClientQuotaEntry({"client-id": "c1"}, {"producer_byte_rate": 1024.0}),
            ClientQuotaEntry(
                {"user": "alice", "client-id": None}, {"consumer_byte_rate": 2e7, "request_percentage": 50.0}
            ),
            ClientQuotaEntry({"user": None}, {"request_percentage": 200.0}),
        ]
    )
    assert describe_client_quotas(admin(fake), [("clients", "c1", False)]) == [
        "Quota configs for client-id 'c1' are producer_byte_rate=1024.0",
        "Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2.0E7, "
        "request_percentage=50.0",
        "Quota configs for the default user-principal are request_percentage=200.0",
    ]
    describe_client_quotas(admin(fake), [("users", None, True)])
    describe_client_quotas(admin(fake), [("users", None, False)])
    assert fake.filters == [
        ([("client-id", 0, "c1")], True),
        ([("user", 1, None)], True),
        ([("user", 2, None)], True),
    ]


def test_alter_sends_the_entity_and_answers_kafkas_line() -> None:
    fake = FakeAdmin([ClientQuotaEntry({"client-id": "c1"}, {"consumer_byte_rate": 5.0})])
    lines = alter_client_quotas(
        admin(fake), [("clients", "c1", False)], {"producer_byte_rate": "1024"}, ["consumer_byte_rate"]
    )
    assert lines == ["Completed updating config for client c1."]
    assert fake.altered == [({"client-id": "c1"}, {"producer_byte_rate": 1024.0}, ["consumer_byte_rate"])]
    lines = alter_client_quotas(admin(fake), [("users", None, True)], {"request_percentage": "150"}, [])
    assert lines == ["Completed updating default config for users in the cluster."]
    lines = alter_client_quotas(
        admin(fake), [("users", "u1", False), ("clients", None, True)], {"request_percentage": "9"}, []
    )
    assert lines == ["Completed updating config for user u1."]
    assert fake.altered[-1] == ({"user": "u1", "client-id": None}, {"request_percentage": 9.0}, [])
    assert fake.altered[1] == ({"user": None}, {"request_percentage": 150.0}, [])


@pytest.mark.parametrize(
    ("entity_type", "add", "delete", "message"),
    [
        ("clients", {"retention.ms": "5"}, [], "Only quota configs can be added for 'clients'"),
        ("users", {"bogus": "5"}, [], "Only quota and SCRAM credential configs can be added for 'users'"),
        ("clients", {}, ["bogus"], "Only quota configs can be deleted for 'clients'"),
        (
            "clients",
            {"producer_byte_rate": "fast"},
            [],
            "Cannot parse quota configuration value for producer_byte_rate",
        ),
        ("clients", {}, ["request_percentage"], "Invalid config(s): request_percentage"),
        ("groups", {}, [], "Unexpected entity type groups"),
    ],
)
def test_alter_refuses_what_kafka_configs_refuses(
    entity_type: str, add: dict[str, str], delete: list[str], message: str
) -> None:
    fake = FakeAdmin([])
    with pytest.raises(ConfigCommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        alter_client_quotas(admin(fake), [(entity_type, "c1", False)], add, delete)
    assert not fake.altered


def test_a_broker_refusal_is_a_tool_error() -> None:
    fake = FakeAdmin([], refuse="Invalid quota producer_byte_rate=0.0: a quota must be a number greater than 0")
    with pytest.raises(ConfigCommandError, match="must be a number greater than 0"):
        alter_client_quotas(admin(fake), [("clients", "c1", False)], {"producer_byte_rate": "0"}, [])
