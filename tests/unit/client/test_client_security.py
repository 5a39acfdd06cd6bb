"""client_security: Kafka client properties of both styles (librdkafka's and Java's) to a ClientSecurity whose SSL
context really trusts and presents what they name (checked by in-memory TLS handshakes), and one clear error per
bad value."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)
from cryptography.x509 import load_pem_x509_certificate

from mq.client.security import PLAINTEXT, ClientSecurity, client_security
from mq.config import parse_properties
from mq.errors import ConfigError
from mq.tools.certs import Certificates, make_certs
from tests.tls_helpers import handshake, server_context

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cret-pw";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="s3cret-pw";'


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certs(tmp_path_factory.mktemp("certs"), clients=["alice"], untrusted=["rogue"])


def _peer_cn(security: ClientSecurity, certs: Certificates) -> str | None:
    """The common name the broker saw in the client's certificate (None: no certificate) after a handshake with a
    broker of ``certs`` that asks for one."""
    assert security.ssl_context is not None
    server = server_context(certs.broker, certs.ca)
    server.verify_mode = ssl.CERT_OPTIONAL
    peer = handshake(security.ssl_context, server).getpeercert()
    return dict(a[0] for a in peer["subject"])["commonName"] if peer else None


def test_no_properties_mean_plaintext() -> None:
    security = client_security({"client.id": "x"})
    assert security == PLAINTEXT
    assert (security.protocol, security.ssl_context, security.sasl_mechanism) == ("PLAINTEXT", None, None)


def test_librdkafka_sasl_ssl_plain(certs: Certificates) -> None:
    security = client_security(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "s3cret-pw",
            "ssl.ca.location": str(certs.ca),
        }
    )
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_SSL",
        "PLAIN",
        "alice",
        "s3cret-pw",
    )
    assert security.check_hostname and security.ssl_context is not None and security.ssl_context.check_hostname
    assert _peer_cn(security, certs) is None
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(security.ssl_context, server_context(certs.untrusted["rogue"]))


def test_password_never_shows_in_repr() -> None:
    security = client_security(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM_JAAS}
    )
    assert (security.sasl_mechanism, security.username, security.password) == ("SCRAM-SHA-256", "bob", "s3cret-pw")
    assert "s3cret-pw" not in repr(security) and "bob" in repr(security)
    assert security.ssl_context is None


def test_librdkafka_client_certificate_with_encrypted_key(certs: Certificates, tmp_path: Path) -> None:
    alice = certs.clients["alice"]
    key = load_pem_private_key(alice.key.read_bytes(), None)
    encrypted = tmp_path / "alice-encrypted.key"
    encrypted.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"kp")))
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(alice.certificate),
            "ssl.key.location": str(encrypted),
            "ssl.key.password": "kp",
        }
    )
    assert _peer_cn(security, certs) == "alice"


def test_librdkafka_inline_pem(certs: Certificates) -> None:
    alice = certs.clients["alice"]
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.pem": certs.ca.read_text(),
            "ssl.certificate.pem": alice.certificate.read_text(),
            "ssl.key.pem": alice.key.read_text(),
        }
    )
    assert _peer_cn(security, certs) == "alice"


def test_java_pem_truststore_and_pkcs12_keystore(certs: Certificates) -> None:
    security = client_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(certs.clients["alice"].pkcs12),
            "ssl.keystore.password": certs.password,
        },
        "client.properties",
    )
    assert (security.username, security.password) == ("alice", "s3cret-pw")
    assert _peer_cn(security, certs) == "alice"


def test_java_pkcs12_truststore_without_type(certs: Certificates, tmp_path: Path) -> None:
    ca = load_pem_x509_certificate(certs.ca.read_bytes())
    store = tmp_path / "truststore.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], BestAvailableEncryption(b"tp")))
    security = client_security(
        {"security.protocol": "SSL", "ssl.truststore.location": str(store), "ssl.truststore.password": "tp"}
    )
    assert security.ssl_context is not None
    handshake(security.ssl_context, server_context(certs.broker))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(security.ssl_context, server_context(certs.untrusted["rogue"]))


def test_java_inline_pem_truststore_and_keystore_with_key_password(certs: Certificates) -> None:
    alice = certs.clients["alice"]
    key = load_pem_private_key(alice.key.read_bytes(), None)
    encrypted = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"kp")).decode()
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": certs.ca.read_text(),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": alice.certificate.read_text(),
            "ssl.keystore.key": encrypted,
            "ssl.key.password": "kp",
        }
    )
    assert _peer_cn(security, certs) == "alice"


def test_inline_pem_written_over_continued_properties_lines(certs: Certificates) -> None:
    """As Kafka's documentation writes them: each PEM line ends with `` \\``, so the value arrives as one line."""

    def continued(pem: str) -> str:
        return " \\\n".join(pem.strip().splitlines())

    alice = certs.clients["alice"]
    text = (
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.certificates={continued(certs.ca.read_text())}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.certificate.chain={continued(alice.certificate.read_text())}\n"
        f"ssl.keystore.key={continued(alice.key.read_text())}\n"
    )
    properties = parse_properties(text, "client.properties")
    assert "\n" not in properties["ssl.truststore.certificates"]
    assert _peer_cn(client_security(properties, "client.properties"), certs) == "alice"


def test_java_pem_keystore_file(certs: Certificates, tmp_path: Path) -> None:
    alice = certs.clients["alice"]
    keystore = tmp_path / "keystore.pem"
    keystore.write_text(alice.key.read_text() + alice.certificate.read_text())
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(certs.ca),
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.type": "PEM",
        }
    )
    assert _peer_cn(security, certs) == "alice"


def test_host_name_check_follows_endpoint_identification(certs: Certificates) -> None:
    base = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    checked = client_security(base)
    assert checked.check_hostname and checked.ssl_context is not None
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(checked.ssl_context, server_context(certs.broker), "other.example")
    unchecked = client_security({**base, "ssl.endpoint.identification.algorithm": ""})
    assert not unchecked.check_hostname and unchecked.ssl_context is not None
    handshake(unchecked.ssl_context, server_context(certs.broker), "other.example")
    with pytest.raises(ssl.SSLCertVerificationError):  # the certificate is still verified
        handshake(unchecked.ssl_context, server_context(certs.untrusted["rogue"]), "other.example")


def test_certificate_verification_can_be_turned_off(certs: Certificates) -> None:
    security = client_security({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})
    assert security.ssl_context is not None and security.ssl_context.verify_mode == ssl.CERT_NONE
    assert not security.check_hostname
    handshake(security.ssl_context, server_context(certs.untrusted["rogue"]), "other.example")


def test_without_a_trust_store_the_system_authorities_are_trusted(certs: Certificates) -> None:
    security = client_security({"security.protocol": "SSL"})
    assert security.ssl_context is not None and security.ssl_context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(security.ssl_context, server_context(certs.broker))


def test_protocol_versions_and_cipher_suites(certs: Certificates) -> None:
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        }
    )
    context = security.ssl_context
    assert context is not None
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"}
    server = handshake(context, server_context(certs.broker))
    assert server.version() == "TLSv1.2"
    assert server.cipher()[0] in tls12
    openssl_names = client_security({"security.protocol": "SSL", "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"})
    assert openssl_names.ssl_context is not None
    assert {c["name"] for c in openssl_names.ssl_context.get_ciphers() if c["protocol"] == "TLSv1.2"} == {
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    }
    only13 = client_security({"security.protocol": "SSL", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    assert only13.ssl_context is not None and only13.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3
    capped = client_security({"security.protocol": "SSL", "ssl.protocol": "TLSv1.2"})
    assert capped.ssl_context is not None and capped.ssl_context.maximum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"security.protocol": "SASL_TLS"}, "invalid value 'SASL_TLS' for security.protocol in f.properties"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "needs sasl.mechanism in f.properties"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "for sasl.mechanism in f.properties"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256"},
            "name different mechanisms",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl.jaas.config"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice"},
            "(or sasl.username and sasl.password)",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "PlainLoginModule x;"},
            "invalid sasl.jaas.config in f.properties: login module PlainLoginModule: flag must be",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";',
            },
            "has no password option",
        ),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
            "f.properties: ssl.endpoint.identification.algorithm must be https or empty",
        ),
        (
            {"security.protocol": "SSL", "enable.ssl.certificate.verification": "no"},
            "enable.ssl.certificate.verification must be true or false",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
            "f.properties: cannot read ssl.ca.location /nonexistent/ca.pem",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.type": "BCFKS", "ssl.truststore.location": "/etc/hostname"},
            "ssl.truststore.type must be PEM or PKCS12",
        ),
        (
            {"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.2,SSLv3"},
            "ssl.enabled.protocols: SSLv3 not supported",
        ),
        ({"security.protocol": "SSL", "ssl.protocol": "TLSv1.4"}, "ssl.protocol: TLSv1.4 not supported"),
        (
            {"security.protocol": "SSL", "ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"},
            "leave no TLS version enabled",
        ),
        ({"security.protocol": "SSL", "ssl.cipher.suites": "TLS_FOO_WITH_BAR"}, "TLS_FOO_WITH_BAR is not a cipher"),
        ({"security.protocol": "SSL", "ssl.cipher.suites": "NO-SUCH-CIPHER"}, "NO-SUCH-CIPHER is not supported"),
        ({"security.protocol": "SSL", "ssl.key.location": "/etc/hostname"}, "needs ssl.certificate.location"),
        (
            {"security.protocol": "SSL", "ssl.keystore.key": "x"},
            "ssl.keystore.key needs ssl.keystore.certificate.chain",
        ),
    ],
)
def test_bad_values_raise_one_error_naming_the_key(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        client_security(properties, "f.properties")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("declared", [None, "JKS"])
def test_java_keystores_are_refused_in_one_line(tmp_path: Path, declared: str | None) -> None:
    store = tmp_path / "truststore.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + bytes(64))
    properties = {"security.protocol": "SSL", "ssl.truststore.location": str(store)}
    if declared:
        properties["ssl.truststore.type"] = declared
    with pytest.raises(ConfigError) as info:
        client_security(properties, "f.properties")
    message = str(info.value)
    assert message.startswith(f"f.properties: ssl.truststore.location {store} is a Java KeyStore")
    assert "PKCS12" in message and "\n" not in message


def test_wrong_passwords_are_named_without_the_password(certs: Certificates, tmp_path: Path) -> None:
    wrong_store = {
        "security.protocol": "SSL",
        "ssl.keystore.location": str(certs.clients["alice"].pkcs12),
        "ssl.keystore.password": "not-the-password",
    }
    with pytest.raises(
        ConfigError, match="ssl.keystore.location .* is not a PKCS12 store that ssl.keystore.password"
    ) as info:
        client_security(wrong_store)
    assert "not-the-password" not in str(info.value)
    alice = certs.clients["alice"]
    key = load_pem_private_key(alice.key.read_bytes(), None)
    encrypted = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"kp")).decode()
    inline = {
        "security.protocol": "SSL",
        "ssl.keystore.certificate.chain": alice.certificate.read_text(),
        "ssl.keystore.key": encrypted,
        "ssl.key.password": "wrong-kp",
    }
    with pytest.raises(ConfigError, match="ssl.key.password does not decrypt the key") as info:
        client_security(inline)
    assert "wrong-kp" not in str(info.value)
    plain_key = tmp_path / "k.pem"
    plain_key.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    with pytest.raises(
        ConfigError, match="cannot load ssl.certificate.location .* the private key does not match the certificate"
    ):
        client_security(
            {
                "security.protocol": "SSL",
                "ssl.certificate.location": str(certs.untrusted["rogue"].certificate),
                "ssl.key.location": str(plain_key),
            }
        )


def test_direct_construction_checks_its_invariants() -> None:
    with pytest.raises(ValueError, match="security protocol"):
        ClientSecurity("TLS")
    with pytest.raises(ValueError, match="SASL mechanism"):
        ClientSecurity("SASL_PLAINTEXT", username="a", password="b")
    with pytest.raises(ValueError, match="username and a password"):
        ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="a")
    unverified = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError, match="check_hostname"):
        ClientSecurity("SSL", unverified)
    default = ClientSecurity("SSL")
    assert default.ssl_context is not None and default.ssl_context.check_hostname
