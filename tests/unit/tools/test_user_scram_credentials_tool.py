"""kafka-configs for users' SCRAM credentials (``mq.tools.user_scram_credentials``): the credential syntax and its
bounds, Kafka's checks and lines over an admin that records what it is asked, and the ``--zookeeper`` path over the
local metadata store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
import scramp

from mq.client.admin import ScramUpsertion, UserScramCredentials
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential, ScramMechanism, ScramServer
from mq.server.scram_credentials import read_user_credentials
from mq.tools.configs import ConfigCommandError
from mq.tools.user_scram_credentials import (
    alter_user_credentials,
    alter_user_credentials_zk,
    describe_user_credentials,
    describe_users_zk,
    parse_credential,
)
from mq.zk import paths
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore

SECRET = "alice-secret"


class FakeAdmin:
    def __init__(self, described: list[UserScramCredentials] | None = None, refuse: str | None = None) -> None:
        self.described = described or []
        self.refuse = refuse
        self.asked: list[Sequence[str]] = []
        self.upsertions: list[ScramUpsertion] = []
        self.deletions: list[tuple[str, ScramMechanism]] = []

    def call(self, method: Callable[..., Any], *args: Any) -> Any:
        return getattr(self, method.__name__)(*args)

    def describe_user_scram_credentials(self, users: Sequence[str]) -> list[UserScramCredentials]:
        self.asked.append(users)
        return self.described

    def alter_user_scram_credentials(
        self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[tuple[str, ScramMechanism]]
    ) -> None:
        if self.refuse:
            raise KafkaError(self.refuse, ErrorCode.RESOURCE_NOT_FOUND)
        self.upsertions += upsertions
        self.deletions += deletions


def admin(fake: FakeAdmin) -> SyncAdmin:
    return cast(SyncAdmin, fake)


def authenticates(credential: ScramCredential, mechanism: ScramMechanism, password: str) -> bool:
    server = ScramServer(mechanism.name, lambda user: credential)
    client = scramp.ScramClient([mechanism.name], "alice", password)
    client.set_server_first(server.respond(client.get_client_first().encode()).decode())
    try:
        server.respond(client.get_client_final().encode())
    except KafkaError:
        return False
    return server.complete


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("password=alice-secret", (4096, SECRET)),
        ("iterations=8192,password=alice-secret", (8192, SECRET)),
        ("iterations=-1,password=alice-secret", (4096, SECRET)),
        ("iterations=16384,password=a,b=c", (16384, "a,b=c")),
    ],
)
def test_a_credential_is_iterations_and_password(value: str, parsed: tuple[int, str]) -> None:
    assert parse_credential(SCRAM_SHA_256, value) == parsed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("iterations=8192", "Invalid credential property SCRAM-SHA-256: expected [iterations=<n>,]password=<password>"),
        ("pasword=alice-secret", "Invalid credential property SCRAM-SHA-256: expected"),
        ("password=", "the password must not be empty"),
        ("iterations=,password=alice-secret", "iterations must be a number"),
        (
            "iterations=4095,password=alice-secret",
            "Iterations 4095 is less than the minimum 4096 required for SCRAM-SHA-256",
        ),
        (
            "iterations=16385,password=alice-secret",
            "Iterations 16385 is more than the maximum 16384 allowed for SCRAM-SHA-256",
        ),
    ],
)
def test_bad_credentials_are_one_line_without_the_password(value: str, message: str) -> None:
    with pytest.raises(ConfigCommandError) as failed:
        parse_credential(SCRAM_SHA_256, value)
    assert message in str(failed.value) and SECRET not in str(failed.value) and "\n" not in str(failed.value)


def test_the_tool_salts_the_password_and_sends_salt_and_salted_password() -> None:
    fake = FakeAdmin()
    add = {"SCRAM-SHA-256": "iterations=8192,password=alice-secret", "SCRAM-SHA-512": "password=alice-secret"}
    lines = alter_user_credentials(admin(fake), "alice", False, add, [])
    assert lines == ["Completed updating config for user alice."]
    assert [(u.user, u.mechanism, u.iterations) for u in fake.upsertions] == [
        ("alice", SCRAM_SHA_256, 8192),
        ("alice", SCRAM_SHA_512, 4096),
    ]
    assert fake.upsertions[0].salt != fake.upsertions[1].salt
    assert SECRET not in repr(fake.upsertions)
    for u in fake.upsertions:
        credential = ScramCredential.from_salted_password(u.mechanism, u.salt, u.salted_password, u.iterations)
        assert authenticates(credential, u.mechanism, SECRET) and not authenticates(credential, u.mechanism, "x")
    alter_user_credentials(admin(fake), "alice", False, {}, ["SCRAM-SHA-512"])
    assert fake.deletions == [("alice", SCRAM_SHA_512)]


@pytest.mark.parametrize(
    ("default", "add", "delete", "message"),
    [
        (False, {"SCRAM-SHA-1": "password=x", "SCRAM-SHA-256": "password=x"}, [],
         "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected "
         "config names: SCRAM-SHA-1"),
        (False, {}, ["SCRAM-SHA-256", "ssl.key"],
         "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. Unexpected "
         "config names: ssl.key"),
        (True, {"SCRAM-SHA-256": "password=x"}, [],
         "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using "
         "--bootstrap-server."),
        (False, {"SCRAM-SHA-256": "password=x"}, ["producer_byte_rate"],
         "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."),
    ],
)  # fmt: skip
def test_kafkas_checks_come_before_any_request(
    default: bool, add: dict[str, str], delete: list[str], message: str
) -> None:
    fake = FakeAdmin()
    with pytest.raises(ConfigCommandError) as failed:
        alter_user_credentials(admin(fake), None if default else "alice", default, add, delete)
    assert str(failed.value) == message
    assert not fake.upsertions and not fake.deletions


def test_a_refusal_of_the_broker_is_its_message() -> None:
    fake = FakeAdmin(refuse="Attempt to delete a user credential that does not exist")
    with pytest.raises(ConfigCommandError, match="^Attempt to delete a user credential that does not exist$"):
        alter_user_credentials(admin(fake), "alice", False, {}, ["SCRAM-SHA-512"])


def test_describe_prints_kafkas_lines_and_skips_users_without_credentials() -> None:
    fake = FakeAdmin(
        [
            UserScramCredentials("alice", (("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096))),
            UserScramCredentials("nobody", (), ErrorCode.RESOURCE_NOT_FOUND, "no credential"),
            UserScramCredentials("broken", (), ErrorCode.UNKNOWN_SERVER_ERROR, "Error processing describe"),
        ]
    )
    assert describe_user_credentials(admin(fake), None) == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096",
        "Error retrieving SCRAM credential configs for user-principal 'broken': UnknownServerException: "
        "Error processing describe",
    ]
    describe_user_credentials(admin(fake), "alice")
    assert fake.asked == [[], ["alice"]]


@pytest.fixture
def zk(tmp_path: Path) -> KafkaZkClient:
    client = KafkaZkClient(LocalStore(tmp_path / "tree.json"))
    client.create_top_level_paths()
    return client


def test_the_zookeeper_path_writes_the_credential_and_a_notification(zk: KafkaZkClient) -> None:
    zk.set_entity_config("users", "alice", {"producer_byte_rate": "1024"}, notify=False)
    add = {"SCRAM-SHA-256": "iterations=8192,password=alice-secret", "SCRAM-SHA-512": "password=alice-secret"}
    assert alter_user_credentials_zk(zk, "alice", False, add, []) == [
        "Completed updating config for entity: user-principal 'alice'."
    ]
    credentials = read_user_credentials(zk, "alice")
    assert {m: c.iterations for m, c in credentials.items()} == {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 4096}
    assert authenticates(credentials["SCRAM-SHA-512"], SCRAM_SHA_512, SECRET)
    assert len(zk.store.get_children(paths.CONFIG_CHANGES)) == 1
    (line,) = describe_users_zk(zk, "alice", False)
    stored = zk.get_entity_config("users", "alice")
    assert line == "Configs for user-principal 'alice' are " + ",".join(f"{k}={v}" for k, v in stored.items())
    assert line.startswith("Configs for user-principal 'alice' are producer_byte_rate=1024,SCRAM-SHA-256=salt=")

    assert alter_user_credentials_zk(zk, "alice", False, {}, ["SCRAM-SHA-512"])
    assert set(read_user_credentials(zk, "alice")) == {"SCRAM-SHA-256"}
    with pytest.raises(ConfigCommandError, match=r"^Invalid config\(s\): SCRAM-SHA-512$"):
        alter_user_credentials_zk(zk, "alice", False, {}, ["SCRAM-SHA-512"])
    zk.set_entity_config("users", "<default>", {"request_percentage": "50"})
    assert describe_users_zk(zk, None, True) == ["Configs for default user-principal are request_percentage=50"]
    assert [line.split(" are ")[0] for line in describe_users_zk(zk, None, False)] == [
        "Configs for default user-principal",
        "Configs for user-principal 'alice'",
    ]


def test_the_zookeeper_path_changes_only_scram_keys_of_named_users(zk: KafkaZkClient) -> None:
    with pytest.raises(ConfigCommandError) as failed:
        alter_user_credentials_zk(zk, "alice", False, {"SCRAM-SHA-256": "password=x", "producer_byte_rate": "5"}, [])
    assert str(failed.value) == (
        "--bootstrap-server option must be specified to update users configs: {add: [SCRAM-SHA-256, "
        "producer_byte_rate], delete: []}. User configuration updates using ZooKeeper are only supported for SCRAM "
        "credential updates."
    )
    with pytest.raises(ConfigCommandError, match="not allowed with User SCRAM Credentials.$"):
        alter_user_credentials_zk(zk, None, True, {"SCRAM-SHA-256": "password=x"}, [])
    assert zk.get_entity_config("users", "alice") == {} and not zk.store.get_children(paths.CONFIG_CHANGES)
