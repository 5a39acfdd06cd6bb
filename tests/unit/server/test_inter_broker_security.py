"""inter_broker_security: the broker's own connections to other brokers take the inter-broker listener's protocol,
a client TLS context from that listener's ssl.* settings (checked by in-memory handshakes against a broker that asks
for a certificate) and SASL credentials from its JAAS config for sasl.mechanism.inter.broker.protocol; a setting
that cannot make them is one line naming the key."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from mq.client.security import PLAINTEXT
from mq.config import BrokerConfig
from mq.errors import ConfigError
from mq.server.listener_security import inter_broker_security
from mq.tools.certs import Certificates, make_certs
from tests.tls_helpers import handshake, server_context

SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";'
)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certs(tmp_path_factory.mktemp("certs"), untrusted=["rogue"])


def cluster_config(*overrides: str) -> BrokerConfig:
    return BrokerConfig.load(None, ["zookeeper.connect=127.0.0.1:2181", *overrides])


def sasl_ssl(certs: Certificates, *overrides: str) -> list[str]:
    """A broker whose only listener is SASL_SSL, with SCRAM-SHA-512 between brokers."""
    return [
        "listeners=SASL_SSL://127.0.0.1:9093",
        "security.inter.broker.protocol=SASL_SSL",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={certs.broker.pkcs12}",
        f"ssl.keystore.password={certs.password}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={certs.ca}",
        *overrides,
    ]


def test_plaintext_between_brokers_and_a_standalone_broker_take_no_security() -> None:
    assert inter_broker_security(cluster_config()) == PLAINTEXT
    standalone = BrokerConfig.load(None, ["listeners=SASL_SSL://:9093", "sasl.enabled.mechanisms=PLAIN"])
    assert inter_broker_security(standalone) == PLAINTEXT


def test_sasl_ssl_between_brokers_with_scram(certs: Certificates) -> None:
    security = inter_broker_security(cluster_config(*sasl_ssl(certs)))
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "broker",
        "broker-secret",
    )
    assert security.check_hostname and security.ssl_context is not None
    handshake(security.ssl_context, server_context(certs.broker), "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(security.ssl_context, server_context(certs.untrusted["rogue"]), "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(security.ssl_context, server_context(certs.broker), "other.example")


def test_the_inter_broker_listeners_own_keys_win_and_host_names_can_go_unchecked(
    certs: Certificates, tmp_path: Path
) -> None:
    config = cluster_config(
        "listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name=INTERNAL",
        "ssl.truststore.location=/nonexistent/other-ca.pem",
        "listener.name.internal.ssl.keystore.type=PEM",
        f"listener.name.internal.ssl.keystore.certificate.chain={certs.broker.certificate.read_text()}",
        f"listener.name.internal.ssl.keystore.key={certs.broker.key.read_text()}",
        f"listener.name.internal.ssl.truststore.location={certs.ca}",
        "listener.name.internal.ssl.client.auth=required",
        "listener.name.internal.ssl.endpoint.identification.algorithm=",
    )
    security = inter_broker_security(config)
    assert (security.protocol, security.sasl_mechanism, security.check_hostname) == ("SSL", None, False)
    assert security.ssl_context is not None
    other_broker = server_context(certs.broker, certs.ca)  # asks for a certificate, as ssl.client.auth=required
    peer = handshake(security.ssl_context, other_broker, "other.example").getpeercert()
    assert dict(a[0] for a in peer["subject"])["commonName"] == "localhost"


PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="broker-secret";'


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["sasl.mechanism.inter.broker.protocol=GSSAPI"],
            "sasl.mechanism.inter.broker.protocol=GSSAPI: mq's brokers authenticate to each other with PLAIN, "
            "SCRAM-SHA-256, SCRAM-SHA-512 (not GSSAPI); set sasl.mechanism.inter.broker.protocol",
        ),
        (
            ["sasl.mechanism.inter.broker.protocol=PLAIN"],
            "sasl.mechanism.inter.broker.protocol=PLAIN is not among the sasl.enabled.mechanisms of the inter-broker "
            "listener SASL_SSL",
        ),
        (
            [
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol=PLAIN",
                f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
            ],
            "the inter-broker listener SASL_SSL authenticates brokers with PLAIN: set "
            'listener.name.sasl_ssl.plain.sasl.jaas.config with the brokers\' username="..." and password="..." options',
        ),
        (
            ["sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256", "sasl.enabled.mechanisms=SCRAM-SHA-256"],
            "set listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config with the brokers'",
        ),
        (
            ["listener.name.sasl_ssl.ssl.truststore.location=/nonexistent/ca.pem"],
            "inter-broker listener SASL_SSL: cannot read ssl.truststore.location /nonexistent/ca.pem",
        ),
    ],
)
def test_settings_that_cannot_secure_the_brokers_connections_are_one_line(
    certs: Certificates, overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        inter_broker_security(cluster_config(*sasl_ssl(certs, *overrides)))
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert "broker-secret" not in str(raised.value)
