"""SASL on a broker started as a user starts it: a SASL_PLAINTEXT listener beside the PLAINTEXT one, PLAIN users from
the listener's JAAS config and SCRAM users made with ``mq configs``, driven by confluent-kafka (librdkafka),
kafka-python and aiokafka; wrong passwords, requests before authentication and expired sessions over raw sockets."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from conftest import BrokerProcess, free_port
from round_trip import librdkafka_round_trip
from wire import recv_exactly

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build

pytestmark = pytest.mark.slow

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" '
    'user_admin="admin-secret";'
)


def sasl_broker(broker_factory: Callable[..., BrokerProcess], *extra: str) -> tuple[BrokerProcess, str]:
    """A started broker whose PLAINTEXT address is ``broker.bootstrap`` (for setting up), and its SASL_PLAINTEXT
    address."""
    broker = broker_factory("broker")
    sasl_port = free_port()
    broker.overrides += [
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        *extra,
    ]
    return broker.start(), f"127.0.0.1:{sasl_port}"


def librdkafka(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def test_plain_users_produce_and_consume_with_three_clients_and_metadata_names_the_sasl_listener(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    _, bootstrap = sasl_broker(broker_factory)
    config = librdkafka(bootstrap, "PLAIN", "alice", "alice-secret")
    metadata = AdminClient(config).list_topics(timeout=15)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", int(bootstrap.split(":")[1]))]
    assert librdkafka_round_trip(config, "plain-librdkafka") == [b"m0", b"m1", b"m2"]

    from kafka import KafkaConsumer, KafkaProducer

    security = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, **security)
    producer.send("plain-kafka-python", b"kp").get(20)
    producer.close()
    consumer = KafkaConsumer(
        "plain-kafka-python",
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **security,
    )
    assert next(iter(consumer)).value == b"kp"
    consumer.close()

    async def with_aiokafka() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        options = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "admin",
            "sasl_plain_password": "admin-secret",
        }
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **options)
        await producer.start()
        try:
            await producer.send_and_wait("plain-aiokafka", b"aio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "plain-aiokafka", bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options
        )
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), 20)
            return [message.value]
        finally:
            await consumer.stop()

    assert asyncio.run(with_aiokafka()) == [b"aio"]


def test_scram_users_made_with_mq_configs_authenticate_and_a_wrong_password_is_refused_unlogged(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess]
) -> None:
    broker, bootstrap = sasl_broker(broker_factory)
    users = ["configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "users", "--entity-name", "bob"]
    add = "SCRAM-SHA-256=[iterations=8192,password=bob-secret],SCRAM-SHA-512=[password=bob-secret]"
    result = subprocess.run(
        [*mq_command, *users, "--alter", "--add-config", add], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        config = librdkafka(bootstrap, mechanism, "bob", "bob-secret")
        topic = f"scram-{mechanism.lower()}"
        assert librdkafka_round_trip(config, topic) == [b"m0", b"m1", b"m2"]

    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )
    producer.send("scram-kafka-python", b"s").get(20)
    producer.close()

    kcat = [
        "kcat",
        "-b",
        bootstrap,
        "-t",
        "scram-kcat",
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        "sasl.username=bob",
        "-X",
        "sasl.password=bob-secret",
    ]
    # Debian's kcat links a librdkafka older than 2.6.1, which repeats its nonce in the client-final message
    produced = subprocess.run([*kcat, "-P"], input="k1\nk2\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [*kcat, "-C", "-o", "0", "-c", "2", "-e", "-q"], capture_output=True, text=True, timeout=60
    )
    assert consumed.stdout.split() == ["k1", "k2"], consumed.stderr

    errors: list[str] = []
    refused = Producer(
        {**librdkafka(bootstrap, "SCRAM-SHA-512", "bob", "not-the-secret"), "error_cb": lambda e: errors.append(str(e))}
    )
    refused.produce("scram-refused", b"x")
    assert refused.flush(5) == 1
    assert any("SASL authentication error" in e and "invalid credentials" in e for e in errors), errors
    stderr = broker.stderr()
    assert "Failed authentication with 127.0.0.1:" in stderr
    assert "not-the-secret" not in stderr and "bob-secret" not in stderr


def _request(api_key: ApiKey, version: int, body: dict[str, Any], correlation_id: int = 1) -> bytes:
    schema = request_schema(api_key, version)
    assert schema is not None
    return encode_request(RequestHeader(int(api_key), version, correlation_id, "raw", 0), build(schema, body))


def _exchange(sock: socket.socket, request: bytes, api_key: ApiKey, version: int) -> Any:
    sock.sendall(request)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return decode_response(recv_exactly(sock, size), response_schema(api_key, version))[1]


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _authenticate_plain(sock: socket.socket, user: str, password: str) -> Any:
    handshake = _exchange(sock, _request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}), ApiKey.SASL_HANDSHAKE, 1)
    assert handshake.error_code == 0 and "PLAIN" in handshake.mechanisms
    token = f"\0{user}\0{password}".encode()
    request = _request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}, 2)
    return _exchange(sock, request, ApiKey.SASL_AUTHENTICATE, 2)


def test_requests_before_authentication_close_the_connection_and_an_expired_session_ends(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker, bootstrap = sasl_broker(broker_factory, "connections.max.reauth.ms=1500")
    host, port = bootstrap.split(":")
    metadata = _request(
        ApiKey.METADATA,
        9,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )

    with socket.create_connection((host, int(port)), timeout=10) as sock:  # Metadata first: closed, unanswered
        sock.sendall(metadata)
        assert _closed(sock)

    with socket.create_connection((host, int(port)), timeout=10) as sock:  # ApiVersions is answered first
        versions = _exchange(
            sock,
            _request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"}),
            ApiKey.API_VERSIONS,
            3,
        )
        advertised = {int(k.api_key): (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[int(ApiKey.SASL_HANDSHAKE)] == (0, 1)
        assert advertised[int(ApiKey.SASL_AUTHENTICATE)] == (0, 2)
        failed = _authenticate_plain(sock, "alice", "wrong")
        assert failed.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert failed.error_message == "Authentication failed: Invalid username or password"
        assert _closed(sock)

    with socket.create_connection((host, int(port)), timeout=10) as sock:
        answer = _authenticate_plain(sock, "alice", "alice-secret")
        assert answer.error_code == 0 and answer.session_lifetime.total_seconds() == 1.5
        assert _exchange(sock, metadata, ApiKey.METADATA, 9).cluster_id
        time.sleep(2)  # the session ends without a re-authentication
        sock.sendall(metadata)
        assert _closed(sock)
    assert "its SASL session expired" in broker.stderr()

    with socket.create_connection((host, int(port)), timeout=10) as sock:  # a re-authentication renews it
        assert _authenticate_plain(sock, "alice", "alice-secret").error_code == 0
        time.sleep(1)
        assert _authenticate_plain(sock, "alice", "alice-secret").error_code == 0
        time.sleep(1)
        assert _exchange(sock, metadata, ApiKey.METADATA, 9).cluster_id
        answer = _authenticate_plain(sock, "admin", "admin-secret")  # another principal may not take it over
        assert answer.error_code == 58
        assert _closed(sock)


def test_a_plain_listener_without_users_and_an_unserved_mechanism_are_refused_at_start(
    mq_command: list[str], tmp_path: Path
) -> None:
    base = [
        *mq_command,
        "server",
        "start",
        "--override",
        f"log.dirs={tmp_path / 'logs'}",
        "--override",
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
    ]
    plain = subprocess.run(
        [*base, "--override", "sasl.enabled.mechanisms=PLAIN"], capture_output=True, text=True, timeout=30
    )
    assert plain.returncode == 1
    assert plain.stderr.strip() == (
        "Error: listener SASL_PLAINTEXT serves PLAIN: set listener.name.sasl_plaintext.plain.sasl.jaas.config with "
        'its users (user_<name>="<password>")'
    )
    gssapi = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert gssapi.returncode == 1
    assert gssapi.stderr.strip() == (
        "Error: sasl.enabled.mechanisms=GSSAPI: mq serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (not GSSAPI); set "
        "sasl.enabled.mechanisms"
    )
    assert not (tmp_path / "logs").exists()


def test_client_quotas_apply_to_authenticated_users_with_kafkas_precedence(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess]
) -> None:
    broker, bootstrap = sasl_broker(broker_factory, "quota.window.num=2", "quota.window.size.seconds=1")
    configs = [*mq_command, "configs", "--bootstrap-server", broker.bootstrap, "--alter"]
    for args in (
        ["--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=20480"],
        ["--entity-type", "clients", "--entity-name", "fast", "--add-config", "producer_byte_rate=104857600"],
        ["--entity-type", "clients", "--entity-name", "slow", "--add-config", "producer_byte_rate=20480"],
        [
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--entity-type",
            "clients",
            "--entity-name",
            "own",
            "--add-config",
            "producer_byte_rate=104857600",
        ],
    ):
        result = subprocess.run([*configs, *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    described = subprocess.run(
        [
            *mq_command,
            "configs",
            "--bootstrap-server",
            broker.bootstrap,
            "--describe",
            "--user",
            "alice",
            "--client",
            "own",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.stdout.splitlines() == [
        "Quota configs for user-principal 'alice', client-id 'own' are producer_byte_rate=1.048576E8"
    ], described.stderr

    def throttled(user: str, password: str, client_id: str) -> bool:
        events: list[int] = []
        producer = Producer(
            {
                **librdkafka(bootstrap, "PLAIN", user, password),
                "client.id": client_id,
                "throttle_cb": lambda event: events.append(event.throttle_time),
            }
        )
        for _ in range(40):
            producer.produce(f"quota-{user}-{client_id}", b"q" * 4096)
            producer.poll(0)
        assert producer.flush(60) == 0
        producer.poll(1)
        return any(t > 0 for t in events)

    assert throttled("alice", "alice-secret", "fast")  # the user's quota wins over its client id's
    assert not throttled("alice", "alice-secret", "own")  # the user's quota for this client id wins over both
    assert not throttled("admin", "admin-secret", "fast")  # another user: its client id's quota
    assert throttled("admin", "admin-secret", "slow")
