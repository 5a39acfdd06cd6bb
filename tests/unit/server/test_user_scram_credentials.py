"""DescribeUserScramCredentials and AlterUserScramCredentials through the dispatcher (frames in, frames out) over
the local metadata store: Kafka's tree and notifications, Kafka's error codes per user, the audit line, and the
broker's credential cache reading what they wrote."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path
from typing import Any

import pytest
import scramp

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential, ScramMechanism, ScramServer
from mq.server.api_dispatch import ApiDispatcher
from mq.server.handlers.user_scram_credentials import user_scram_credential_apis
from mq.server.network import ClientAddress
from mq.server.scram_credentials import (
    ScramCredentialCache,
    read_all_credentials,
    read_user_credentials,
    write_user_config,
)
from mq.zk import paths
from mq.zk.codecs import decode_config_change
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore

CLIENT = ClientAddress("127.0.0.1", 5555, 1)
SALT = b"0123456789abcdef"


@pytest.fixture
def zk(tmp_path: Path) -> KafkaZkClient:
    client = KafkaZkClient(LocalStore(tmp_path / "tree.json"))
    client.create_top_level_paths()
    return client


def call(zk: KafkaZkClient, key: ApiKey, values: dict[str, Any]) -> Any:
    dispatcher = ApiDispatcher(user_scram_credential_apis(zk))
    body = build(request_schema(key, 0), values)  # type: ignore[arg-type]
    frame = encode_request(RequestHeader(key, 0, 7, "admin-client", 0), body)[4:]
    wire = asyncio.run(asyncio.wait_for(dispatcher(frame, CLIENT), 5))
    correlation_id, response = decode_response(wire[4:], response_schema(key, 0))
    assert correlation_id == 7
    return response


def upsertion(
    user: str, mechanism: int = 1, iterations: int = 8192, password: str = "secret", salt: bytes = SALT
) -> dict[str, Any]:
    hash_name = "sha512" if mechanism == 2 else "sha256"
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, max(iterations, 1))
    return {"name": user, "mechanism": mechanism, "iterations": iterations, "salt": salt, "salted_password": salted}


def alter(
    zk: KafkaZkClient, upsertions: list[dict[str, Any]], deletions: list[tuple[str, int]] | None = None
) -> dict[str, tuple[int, str | None]]:
    request = {"upsertions": upsertions, "deletions": [{"name": n, "mechanism": m} for n, m in deletions or []]}
    response = call(zk, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request)
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def describe(zk: KafkaZkClient, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    request = {"users": None if users is None else [{"name": u} for u in users]}
    response = call(zk, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request)
    assert response.error_code == ErrorCode.NONE
    return [
        (r.user, r.error_code, r.error_message, [(int(c.mechanism), int(c.iterations)) for c in r.credential_infos])
        for r in response.results
    ]


def authenticates(credential: ScramCredential | None, mechanism: ScramMechanism, user: str, password: str) -> bool:
    server = ScramServer(mechanism.name, lambda name: credential if name == user else None)
    client = scramp.ScramClient([mechanism.name], user, password)
    client.set_server_first(server.respond(client.get_client_first().encode()).decode())
    try:
        server.respond(client.get_client_final().encode())
    except Exception:
        return False
    return server.username == user


def test_an_upsertion_is_stored_as_kafka_stores_it_beside_the_quotas(
    zk: KafkaZkClient, caplog: pytest.LogCaptureFixture
) -> None:
    zk.set_entity_config("users", "alice%40example", {"producer_byte_rate": "1024"})
    with caplog.at_level(logging.INFO, logger="kafka.admin"):
        assert alter(zk, [upsertion("alice@example", 1, 8192), upsertion("alice@example", 2, 4096)]) == {
            "alice@example": (ErrorCode.NONE, None)
        }
    config = zk.get_entity_config("users", "alice%40example")
    assert set(config) == {"producer_byte_rate", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert config["SCRAM-SHA-256"].startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=")
    assert config["SCRAM-SHA-256"].endswith(",iterations=8192")
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        credential = ScramCredential.from_string(config[mechanism.name])
        assert authenticates(credential, mechanism, "alice@example", "secret")
        assert not authenticates(credential, mechanism, "alice@example", "wrong")
    changes = sorted(zk.store.get_children(paths.CONFIG_CHANGES))
    last = zk.store.get(f"{paths.CONFIG_CHANGES}/{changes[-1]}")[0]
    assert decode_config_change(last) == "users/alice%40example"
    audit = [r.getMessage() for r in caplog.records if r.name == "kafka.admin"]
    assert audit == [
        "Admin change by User:ANONYMOUS (clientId=admin-client, address=127.0.0.1:5555) with "
        "AlterUserScramCredentials: altered SCRAM credentials of user alice@example: set SCRAM-SHA-256 "
        "(iterations=8192), set SCRAM-SHA-512 (iterations=4096)"
    ]
    assert "salt" not in audit[0] and "secret" not in audit[0]


def test_describe_lists_every_user_with_credentials_or_the_named_ones(zk: KafkaZkClient) -> None:
    assert alter(zk, [upsertion("bob", 2, 4096), upsertion("alice", 1, 8192), upsertion("alice", 2, 10000)]) == {
        "bob": (ErrorCode.NONE, None),
        "alice": (ErrorCode.NONE, None),
    }
    zk.set_entity_config("users", "carol", {"consumer_byte_rate": "1"})  # quotas only
    everyone = [("alice", 0, None, [(1, 8192), (2, 10000)]), ("bob", 0, None, [(2, 4096)])]
    assert describe(zk, None) == everyone
    assert describe(zk, []) == everyone
    assert describe(zk, ["bob", "carol", "", "alice", "bob", "nobody"]) == [
        (
            "bob",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
            [],
        ),
        ("carol", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: carol", []),
        ("", ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty", []),
        ("alice", 0, None, [(1, 8192), (2, 10000)]),
        (
            "nobody",
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: nobody",
            [],
        ),
    ]


def test_refused_users_are_judged_apart_and_nothing_of_theirs_is_written(zk: KafkaZkClient) -> None:
    alter(zk, [upsertion("kept", 2)])
    answers = alter(
        zk,
        [
            upsertion("", 1),
            upsertion("unknown-mechanism", 3),
            upsertion("few", 1, 4095),
            upsertion("many", 2, 16385),
            upsertion("short-salt", 1, salt=b"too short"),
            upsertion("twice", 1),
            upsertion("twice", 1),
            upsertion("mixed", 1),
            upsertion("fine", 1),
        ],
        [("mixed", 0), ("kept", 1), ("twice-deleted", 2), ("twice-deleted", 2)],
    )
    assert answers == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "unknown-mechanism": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "short-salt": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must be at least 12 bytes"),
        "mixed": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "twice-deleted": (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        "kept": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "fine": (ErrorCode.NONE, None),
    }
    assert sorted(read_all_credentials(zk)) == ["fine", "kept"]
    assert set(read_user_credentials(zk, "kept")) == {"SCRAM-SHA-512"}


def test_a_deletion_removes_one_mechanism_and_then_the_user_is_unknown(zk: KafkaZkClient) -> None:
    alter(zk, [upsertion("alice", 1), upsertion("alice", 2)])
    assert alter(zk, [upsertion("alice", 1, 16384, "new-secret")], [("alice", 2)]) == {"alice": (0, None)}
    credentials = read_user_credentials(zk, "alice")
    assert set(credentials) == {"SCRAM-SHA-256"} and credentials["SCRAM-SHA-256"].iterations == 16384
    assert authenticates(credentials["SCRAM-SHA-256"], SCRAM_SHA_256, "alice", "new-secret")
    assert alter(zk, [], [("alice", 1)]) == {"alice": (0, None)}
    assert describe(zk, ["alice"])[0][1] == ErrorCode.RESOURCE_NOT_FOUND
    assert zk.get_entity_config("users", "alice") == {}


def test_the_cache_holds_what_the_store_holds_and_forgets_removed_users(zk: KafkaZkClient) -> None:
    alter(zk, [upsertion("alice", 1), upsertion("bob", 2)])
    write_user_config(zk, "mallory", {"SCRAM-SHA-256": "salt=AQID,iterations=4096"})  # not a credential
    stray = ScramCredential.from_password(SCRAM_SHA_256, "x", 4096).to_string()
    zk.set_entity_config("users", "<default>", {"SCRAM-SHA-256": stray})  # the default entity names no user
    cache = ScramCredentialCache()
    for user, credentials in read_all_credentials(zk).items():
        cache.update(user, credentials)
    assert cache.lookup("SCRAM-SHA-256", "alice") is not None and cache.lookup("SCRAM-SHA-512", "alice") is None
    assert cache.for_mechanism("SCRAM-SHA-512")("bob") == read_user_credentials(zk, "bob")["SCRAM-SHA-512"]
    assert cache.lookup("SCRAM-SHA-256", "mallory") is None and cache.lookup("SCRAM-SHA-256", "<default>") is None
    alter(zk, [], [("alice", 1)])
    cache.update("alice", read_user_credentials(zk, "alice"))
    assert cache.lookup("SCRAM-SHA-256", "alice") is None


def test_error_responses_name_every_user_of_the_request(zk: KafkaZkClient) -> None:
    apis = {api.key: api for api in user_scram_credential_apis(zk)}
    requests = {
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {
            "upsertions": [upsertion("a"), upsertion("b")],
            "deletions": [{"name": "a", "mechanism": 2}],
        },
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: {"users": None},
    }
    answers = {}
    for key, values in requests.items():
        body = build(request_schema(key, 0), values)  # type: ignore[arg-type]
        answer = apis[key].error_response(None, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)  # type: ignore[arg-type]
        assert isinstance(answer, dict)
        build(response_schema(key, 0), answer)  # the response schema takes it
        answers[key] = answer
    altered = answers[ApiKey.ALTER_USER_SCRAM_CREDENTIALS]["results"]
    assert [(r["user"], r["error_code"]) for r in altered] == [
        ("a", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ("b", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ]
    assert answers[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
