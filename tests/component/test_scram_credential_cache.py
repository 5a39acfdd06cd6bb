"""The broker's SCRAM credential cache: loaded from the metadata tree at start-up, then kept up to date by the
config change notifications that AlterUserScramCredentials writes, here sent by confluent-kafka (librdkafka salts
the passwords). What the cache holds authenticates the passwords the client chose."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import scramp
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from mq.security.errors import AuthenticationError
from mq.security.scram import SCRAM_SHA_256, ScramCredential, ScramServer
from mq.server.broker import METADATA_FILE
from mq.server.scram_credentials import write_user_config
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from tests.integration.waiting import wait_for


def on_loop(broker: Any, fn: Callable[[], Any]) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.loop).result(10)


def authenticates(broker: Any, mechanism: str, user: str, password: str) -> bool:
    """A SCRAM exchange against what the broker's cache holds, run on the broker's loop as SASL would run it."""
    server = ScramServer(mechanism, on_loop(broker, lambda: broker.server.scram_credentials.for_mechanism(mechanism)))
    client = scramp.ScramClient([mechanism], user, password)
    client.set_server_first(on_loop(broker, lambda: server.respond(client.get_client_first().encode())).decode())
    try:
        on_loop(broker, lambda: server.respond(client.get_client_final().encode()))
    except AuthenticationError:
        return False
    return server.username == user


def test_credentials_are_loaded_at_start_and_follow_every_change(
    in_process_broker: Callable[..., Any], tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    zk = KafkaZkClient(LocalStore(logs / METADATA_FILE))
    zk.create_top_level_paths()
    stored = ScramCredential.from_password(SCRAM_SHA_256, "alice-secret", 4096)
    write_user_config(zk, "alice", {"SCRAM-SHA-256": stored.to_string(), "producer_byte_rate": "1048576"})
    broker = in_process_broker([f"log.dirs={logs}"])
    cache = broker.server.scram_credentials
    assert on_loop(broker, lambda: cache.lookup("SCRAM-SHA-256", "alice")) == stored
    assert authenticates(broker, "SCRAM-SHA-256", "alice", "alice-secret")
    assert not authenticates(broker, "SCRAM-SHA-256", "alice", "wrong")

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(10)
    assert wait_for(lambda: on_loop(broker, lambda: cache.lookup("SCRAM-SHA-512", "bob")) is not None)
    assert on_loop(broker, lambda: cache.lookup("SCRAM-SHA-512", "bob")).iterations == 8192
    assert authenticates(broker, "SCRAM-SHA-512", "bob", "bob-pw")
    assert not authenticates(broker, "SCRAM-SHA-256", "bob", "bob-pw")

    delete = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)
    for future in admin.alter_user_scram_credentials([delete]).values():
        future.result(10)
    assert wait_for(lambda: on_loop(broker, lambda: cache.lookup("SCRAM-SHA-256", "alice")) is None)
    assert not authenticates(broker, "SCRAM-SHA-256", "alice", "alice-secret")
