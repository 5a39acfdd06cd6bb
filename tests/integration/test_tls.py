"""TLS on a broker started as a user starts it, with certificates the test makes (``mq.tools.certs``): an SSL listener
that requires client certificates and names principals from them, a SASL_SSL listener with SCRAM-SHA-512, driven by
confluent-kafka (librdkafka), kafka-python and aiokafka; plaintext, garbage, untrusted and expired clients are closed
alone, with a logged reason."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, free_port
from round_trip import librdkafka_round_trip

from mq.tools.certs import Certificates, make_certs

pytestmark = pytest.mark.slow


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return make_certs(tmp_path / "certs", clients=["alice"], expired=["late"], untrusted=["stranger"])


def tls_broker(
    broker_factory: Callable[..., BrokerProcess], certs: Certificates, *extra: str
) -> tuple[BrokerProcess, str, str]:
    """A started broker: PLAINTEXT on ``broker.bootstrap``, SSL (client certificates required) and SASL_SSL (SCRAM)."""
    broker = broker_factory("broker")
    ssl_port, sasl_port = free_port(), free_port()
    broker.overrides += [
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs.broker.certificate.with_suffix('.both.pem')}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={certs.ca}",
        "listener.name.ssl.ssl.client.auth=required",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        *extra,
    ]
    both = certs.broker.certificate.with_suffix(".both.pem")
    both.write_bytes(certs.broker.certificate.read_bytes() + certs.broker.key.read_bytes())
    return broker.start(), f"127.0.0.1:{ssl_port}", f"127.0.0.1:{sasl_port}"


def librdkafka_ssl(bootstrap: str, certs: Certificates, client: str = "alice") -> dict[str, Any]:
    files = certs.clients[client]
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(files.certificate),
        "ssl.key.location": str(files.key),
    }


def test_client_certificates_name_principals_and_three_clients_work_over_ssl(
    broker_factory: Callable[..., BrokerProcess], certs: Certificates
) -> None:
    broker, ssl_bootstrap, _ = tls_broker(broker_factory, certs)
    config = librdkafka_ssl(ssl_bootstrap, certs)
    admin = AdminClient(config)
    admin.create_topics([NewTopic("by-alice", 1, 1)])["by-alice"].result(20)
    assert re.search(r"Admin change by User:CN=alice \(clientId=[^)]*\) with CreateTopics", broker.stderr())
    metadata = admin.list_topics(timeout=15)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", int(ssl_bootstrap.split(":")[1]))]
    assert librdkafka_round_trip(config, "tls-librdkafka") == [b"m0", b"m1", b"m2"]

    from kafka import KafkaConsumer, KafkaProducer

    files = certs.clients["alice"]
    security = {
        "security_protocol": "SSL",
        "ssl_cafile": str(certs.ca),
        "ssl_certfile": str(files.certificate),
        "ssl_keyfile": str(files.key),
    }
    producer = KafkaProducer(bootstrap_servers=ssl_bootstrap, **security)
    producer.send("tls-kafka-python", b"kp" * 5000).get(20)  # large enough for a fetch to send a file region
    producer.close()
    consumer = KafkaConsumer(
        "tls-kafka-python",
        bootstrap_servers=ssl_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **security,
    )
    assert next(iter(consumer)).value == b"kp" * 5000
    consumer.close()

    async def with_aiokafka() -> bytes:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        context = ssl.create_default_context(cafile=str(certs.ca))
        context.load_cert_chain(files.certificate, files.key)
        options = {"security_protocol": "SSL", "ssl_context": context}
        producer = AIOKafkaProducer(bootstrap_servers=ssl_bootstrap, **options)
        await producer.start()
        try:
            await producer.send_and_wait("tls-aiokafka", b"aio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "tls-aiokafka", bootstrap_servers=ssl_bootstrap, auto_offset_reset="earliest", **options
        )
        await consumer.start()
        try:
            return bytes((await asyncio.wait_for(consumer.getone(), 20)).value)
        finally:
            await consumer.stop()

    assert asyncio.run(with_aiokafka()) == b"aio"


PLAIN_JAAS = (
    "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_carol="carol-secret";'
)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl_with_three_clients_and_mqs_own_tools(
    mq_command: list[str],
    broker_factory: Callable[..., BrokerProcess],
    certs: Certificates,
    tmp_path: Path,
    mechanism: str,
) -> None:
    extra = ["sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN", PLAIN_JAAS] if mechanism == "PLAIN" else []
    broker, _, sasl_bootstrap = tls_broker(broker_factory, certs, *extra)
    if mechanism != "PLAIN":
        users = ["configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "users", "--entity-name", "carol"]
        result = subprocess.run(
            [*mq_command, *users, "--alter", "--add-config", "SCRAM-SHA-512=[password=carol-secret]"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
    config = {
        "bootstrap.servers": sasl_bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": "carol",
        "sasl.password": "carol-secret",
    }
    topic = f"{mechanism.lower()}-ssl"
    assert librdkafka_round_trip(config, f"{topic}-librdkafka") == [b"m0", b"m1", b"m2"]

    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=sasl_bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs.ca),
        sasl_mechanism=mechanism,
        sasl_plain_username="carol",
        sasl_plain_password="carol-secret",
    )
    producer.send(f"{topic}-kafka-python", b"k").get(20)
    producer.close()

    async def with_aiokafka() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=sasl_bootstrap,
            security_protocol="SASL_SSL",
            ssl_context=ssl.create_default_context(cafile=str(certs.ca)),
            sasl_mechanism=mechanism,
            sasl_plain_username="carol",
            sasl_plain_password="carol-secret",
        )
        await producer.start()
        try:
            await producer.send_and_wait(f"{topic}-aiokafka", b"a")
        finally:
            await producer.stop()

    asyncio.run(with_aiokafka())

    login = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    java_style = tmp_path / "admin.properties"  # Kafka's Java client properties
    java_style.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config=org.apache.kafka.common.security.{login} required username="carol" '
        'password="carol-secret";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs.ca}\n",
        encoding="utf-8",
    )
    tools = [*mq_command, "topics", "--bootstrap-server", sasl_bootstrap, "--command-config", str(java_style)]
    created = subprocess.run([*tools, "--create", "--topic", "tooled"], capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    listed = subprocess.run([*tools, "--list"], capture_output=True, text=True, timeout=60)
    assert "tooled" in listed.stdout.split() and f"{topic}-aiokafka" in listed.stdout.split(), listed.stderr
    librdkafka_style = tmp_path / "consumer.properties"
    librdkafka_style.write_text("".join(f"{k}={v}\n" for k, v in config.items() if k != "bootstrap.servers"))
    consumed = subprocess.run(
        [
            *mq_command,
            "console-consumer",
            "--bootstrap-server",
            sasl_bootstrap,
            "--topic",
            f"{topic}-kafka-python",
            "--from-beginning",
            "--max-messages",
            "1",
            "--consumer.config",
            str(librdkafka_style),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert consumed.stdout.splitlines() == ["k"], consumed.stderr
    wrong = java_style.read_text().replace("carol-secret", "not-it")
    java_style.write_text(wrong, encoding="utf-8")
    refused = subprocess.run([*tools, "--list", "--timeout", "10"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "not-it" not in refused.stderr


def _closed_by_broker(connect: Callable[[], Any]) -> bool:
    """True when the broker ends the connection (during or right after the handshake)."""
    try:
        sock = connect()
    except (ssl.SSLError, ConnectionError):
        return True
    with sock:
        sock.settimeout(10)
        try:
            sock.sendall(b"\x00\x00\x00\x04\x00\x12\x00\x00")
            return sock.recv(1) == b""
        except (ssl.SSLError, ConnectionError):
            return True


def test_plaintext_garbage_untrusted_and_expired_clients_are_closed_alone(
    broker_factory: Callable[..., BrokerProcess], certs: Certificates
) -> None:
    broker, ssl_bootstrap, _ = tls_broker(broker_factory, certs)
    host, port = ssl_bootstrap.split(":")
    config = librdkafka_ssl(ssl_bootstrap, certs)
    producer = Producer(config)  # an established client, served throughout
    producer.produce("steady", b"before")
    assert producer.flush(20) == 0

    def plaintext() -> socket.socket:
        return socket.create_connection((host, int(port)), timeout=10)

    def garbage() -> socket.socket:
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"\x16\x03\x01\x00\x05hello garbage that is no handshake")
        return sock

    def with_certificate(certificate: Path, key: Path) -> Callable[[], socket.socket]:
        def connect() -> socket.socket:
            context = ssl.create_default_context(cafile=str(certs.ca))
            context.load_cert_chain(certificate, key)
            raw = socket.create_connection((host, int(port)), timeout=10)
            return context.wrap_socket(raw, server_hostname="localhost")

        return connect

    untrusted, expired = certs.untrusted["stranger"], certs.expired["late"]
    for attempt in (
        plaintext,
        garbage,
        with_certificate(untrusted.certificate, untrusted.key),
        with_certificate(expired.certificate, expired.key),
    ):
        assert _closed_by_broker(attempt)
    stderr = broker.stderr()
    assert stderr.count("TLS handshake failed") >= 3, stderr
    producer.produce("steady", b"after")
    assert producer.flush(20) == 0


def test_a_pkcs12_keystore_and_mapping_rules_name_short_principals(
    broker_factory: Callable[..., BrokerProcess], certs: Certificates
) -> None:
    broker, ssl_bootstrap, _ = tls_broker(
        broker_factory,
        certs,
        "listener.name.ssl.ssl.keystore.type=PKCS12",
        f"listener.name.ssl.ssl.keystore.location={certs.broker.pkcs12}",
        f"listener.name.ssl.ssl.keystore.password={certs.password}",
        "ssl.principal.mapping.rules=RULE:^CN=(.*?)$/$1/U,DEFAULT",
    )
    admin = AdminClient(librdkafka_ssl(ssl_bootstrap, certs))
    admin.create_topics([NewTopic("by-ALICE", 1, 1)])["by-ALICE"].result(20)
    assert "Admin change by User:ALICE " in broker.stderr()
    assert certs.password not in broker.stderr()


def stored_tree(broker: BrokerProcess) -> str:
    """Every node's data of a standalone broker's metadata tree, decoded (the file holds it in base64)."""
    nodes = json.loads((broker.log_dir / "metadata-tree.json").read_text(encoding="utf-8"))["nodes"]
    return "\n".join(
        f"{path} {base64.b64decode(node['data']).decode(errors='replace')}" for path, node in nodes.items()
    )


def test_a_new_keystore_set_with_mq_configs_serves_the_next_connections_without_a_restart(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], certs: Certificates, tmp_path: Path
) -> None:
    broker, ssl_bootstrap, _ = tls_broker(
        broker_factory, certs, "listener.name.ssl.ssl.client.auth=none", "password.encoder.secret=encoder-secret"
    )
    renewed = make_certs(tmp_path / "renewed", password="renewed-store-secret")  # another CA: clients trusting only
    host, port = ssl_bootstrap.split(":")  # it refuse the old certificate

    def handshake_ok(ca: Path) -> bool:
        context = ssl.create_default_context(cafile=str(ca))
        try:
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                context.wrap_socket(raw, server_hostname="localhost").close()
            return True
        except ssl.SSLError:
            return False

    assert handshake_ok(certs.ca) and not handshake_ok(renewed.ca)
    configs = [*mq_command, "configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers"]
    new_store = (
        f"listener.name.ssl.ssl.keystore.type=PKCS12,listener.name.ssl.ssl.keystore.location={renewed.broker.pkcs12},"
        f"listener.name.ssl.ssl.keystore.password={renewed.password}"
    )
    result = subprocess.run(
        [*configs, "--entity-name", "1001", "--alter", "--add-config", new_store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 10
    while not handshake_ok(renewed.ca) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert handshake_ok(renewed.ca) and not handshake_ok(certs.ca)
    assert "listener SSL: TLS key and trust stores reloaded" in broker.stderr()
    assert renewed.password not in broker.stderr()
    stored = stored_tree(broker)
    assert renewed.password not in stored and "encryptedPassword" in stored  # encrypted as Kafka stores it


def test_a_secret_is_not_stored_without_an_encoder_secret(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], certs: Certificates
) -> None:
    broker, _, _ = tls_broker(broker_factory, certs)
    result = subprocess.run(
        [
            *mq_command, "configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
            "--entity-name", "1001", "--alter", "--add-config", "listener.name.ssl.ssl.key.password=never-stored",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: Password encoder secret not configured: cannot store listener.name.ssl.ssl.key.password (set "
        "password.encoder.secret on the brokers)"
    ]
    assert "never-stored" not in stored_tree(broker)
