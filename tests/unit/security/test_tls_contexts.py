"""TLS contexts from Kafka's ``ssl.*`` settings in Java's and librdkafka's spelling: PEM and PKCS12 stores, CA files
and directories, separate certificate and key files, client authentication, versions, suites, and one clear error for
each setting that cannot make a context."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
    load_pem_private_key,
)

from mq.security.tls import TlsConfigError, TlsSettings, client_context, server_context
from mq.tools.certs import Certificates, make_certs
from tests.tls_helpers import handshake


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certs(tmp_path_factory.mktemp("certs"), clients=["alice"])


def pem_identity(certs: Certificates, tmp_path: Path) -> str:
    both = tmp_path / "broker-both.pem"
    both.write_bytes(certs.broker.certificate.read_bytes() + certs.broker.key.read_bytes())
    return str(both)


def test_a_pem_listener_requiring_client_certificates_names_the_client(certs: Certificates, tmp_path: Path) -> None:
    server = server_context(
        TlsSettings(
            keystore_type="PEM",
            keystore_location=pem_identity(certs, tmp_path),
            truststore_type="PEM",
            truststore_location=str(certs.ca),
            client_auth="required",
        )
    )
    alice = certs.clients["alice"]
    client = client_context(
        TlsSettings(
            keystore_type="PEM",
            keystore_certificate_chain=alice.certificate.read_text(),
            keystore_key=alice.key.read_text(),
            truststore_type="PEM",
            truststore_certificates=certs.ca.read_text(),
        )
    )
    accepted = handshake(client, server)
    assert dict(x[0] for x in accepted.getpeercert()["subject"])["commonName"] == "alice"
    anonymous = client_context(TlsSettings(truststore_type="PEM", truststore_location=str(certs.ca)))
    with pytest.raises(ssl.SSLError):
        handshake(anonymous, server)


def test_pkcs12_stores_and_tls_versions(certs: Certificates) -> None:
    server = server_context(
        TlsSettings(
            keystore_type="PKCS12",
            keystore_location=str(certs.broker.pkcs12),
            keystore_password=certs.password,
            enabled_protocols="TLSv1.3",
        )
    )
    assert server.minimum_version == server.maximum_version == ssl.TLSVersion.TLSv1_3
    client = client_context(
        TlsSettings(
            truststore_type="PKCS12", truststore_location=str(certs.broker.pkcs12), truststore_password=certs.password
        )
    )
    assert handshake(client, server).version() == "TLSv1.3"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "a TLS listener needs ssl.keystore.location or ssl.keystore.certificate.chain"),
        (
            {"keystore_type": "JKS", "keystore_location": "JKS_FILE"},
            "is a Java KeyStore (ssl.keystore.type=JKS), which mq cannot read: convert it (keytool -importkeystore",
        ),
        ({"keystore_location": "/missing.pem"}, "cannot read ssl.keystore.location /missing.pem: No such"),
        ({"keystore_type": "PEM", "keystore_certificate_chain": "x"}, "ssl.keystore.certificate.chain needs"),
        (
            {"keystore_type": "PKCS12", "keystore_location": "BROKER_P12", "keystore_password": "wrong"},
            "is not a PKCS12 store that ssl.keystore.password opens",
        ),
        (
            {"keystore_type": "PEM", "keystore_location": "BROKER_PEM", "client_auth": "required"},
            "ssl.client.auth=required needs ssl.truststore.location",
        ),
        (
            {"keystore_type": "PEM", "keystore_location": "BROKER_PEM", "client_auth": "maybe"},
            "ssl.client.auth must be none, requested or required",
        ),
        (
            {"keystore_type": "PEM", "keystore_location": "BROKER_PEM", "enabled_protocols": "TLSv1.1"},
            "ssl.enabled.protocols: TLSv1.1 not supported",
        ),
        (
            {"keystore_type": "PEM", "keystore_location": "BROKER_PEM", "cipher_suites": "TLS_NO_SUCH_WITH_NOTHING"},
            "ssl.cipher.suites: TLS_NO_SUCH_WITH_NOTHING is not a cipher suite mq knows",
        ),
    ],
)
def test_settings_that_cannot_make_a_listener_name_their_key(
    certs: Certificates, tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    jks = tmp_path / "k.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + bytes(64))
    replaced = {
        "BROKER_P12": str(certs.broker.pkcs12),
        "BROKER_PEM": pem_identity(certs, tmp_path),
        "JKS_FILE": str(jks),
    }
    values = {key: replaced.get(value, value) for key, value in settings.items()}
    with pytest.raises(TlsConfigError) as raised:
        server_context(TlsSettings(**values))
    assert message in str(raised.value)
    assert "wrong" not in str(raised.value) and "\n" not in str(raised.value)


def test_iana_cipher_names_are_taken(certs: Certificates, tmp_path: Path) -> None:
    context = server_context(
        TlsSettings(
            keystore_type="PEM",
            keystore_location=pem_identity(certs, tmp_path),
            enabled_protocols="TLSv1.2",
            cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        )
    )
    assert "ECDHE-ECDSA-AES128-GCM-SHA256" in {c["name"] for c in context.get_ciphers()}


def test_a_client_context_from_librdkafka_keys_trusts_a_ca_directory_and_presents_separate_files(
    certs: Certificates, tmp_path: Path
) -> None:
    hashed = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(certs.ca)], capture_output=True, text=True, check=True
    )
    directory = tmp_path / "cas"
    directory.mkdir()
    (directory / f"{hashed.stdout.strip()}.0").write_bytes(certs.ca.read_bytes())
    alice = certs.clients["alice"]
    client = client_context(
        TlsSettings(
            ca_location=str(directory),
            certificate_location=str(alice.certificate),
            key_location=str(alice.key),
        )
    )
    server = server_context(
        TlsSettings(
            keystore_location=pem_identity(certs, tmp_path), truststore_location=str(certs.ca), client_auth="required"
        )
    )
    assert dict(x[0] for x in handshake(client, server).getpeercert()["subject"])["commonName"] == "alice"
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(client_context(TlsSettings(ca_location=str(tmp_path))), server)


def test_store_types_are_read_from_the_file_when_not_given_or_given_as_kafkas_default(certs: Certificates) -> None:
    """Kafka's default type is JKS, and Java's JKS stores read PKCS12 files: a PKCS12 or PEM file is taken as such."""
    server = server_context(
        TlsSettings(keystore_type="JKS", keystore_location=str(certs.broker.pkcs12), keystore_password=certs.password)
    )
    for declared in (None, "JKS"):
        client = client_context(TlsSettings(truststore_type=declared, truststore_location=str(certs.ca)))
        handshake(client, server)


def test_inline_pem_over_continued_lines_makes_a_listener(certs: Certificates) -> None:
    """Broker properties written as Kafka's documentation shows them: each PEM line ends with `` \\``."""

    def one_line(pem: str) -> str:
        return " ".join(pem.strip().splitlines())

    server = server_context(
        TlsSettings(
            keystore_type="PEM",
            keystore_certificate_chain=one_line(certs.broker.certificate.read_text()),
            keystore_key=one_line(certs.broker.key.read_text()),
        )
    )
    handshake(client_context(TlsSettings(ca_pem=one_line(certs.ca.read_text()))), server)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"keystore_location": "ALICE_PEM", "certificate_location": "ALICE_CERT"},
            "ssl.keystore.location and ssl.certificate.location each name a certificate and key: set one",
        ),
        ({"key_pem": "x"}, "ssl.key.pem needs ssl.certificate.pem"),
        ({"certificate_location": "ALICE_CERT"}, "must hold one PEM private key and its certificate chain"),
        (
            {"certificate_location": "ALICE_CERT", "key_location": "ENCRYPTED_KEY"},
            "the key is encrypted: set ssl.key.password",
        ),
        (
            {"certificate_location": "ALICE_CERT", "key_location": "ENCRYPTED_KEY", "key_password": "wrong"},
            "ssl.key.password does not decrypt the key",
        ),
        ({"ca_pem": "not a certificate"}, "ssl.ca.pem holds no PEM certificate"),
        ({"certificate_verification": "yes"}, "enable.ssl.certificate.verification must be true or false"),
        ({"enabled_protocols": "TLSv1.2", "cipher_suites": "TLS_AES_128_GCM_SHA256"}, "names only TLS 1.3 suites"),
    ],
)
def test_settings_that_cannot_make_a_client_context_name_their_key(
    certs: Certificates, tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    alice = certs.clients["alice"]
    encrypted = tmp_path / "encrypted.key"
    key = load_pem_private_key(alice.key.read_bytes(), None)
    encrypted.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"kp")))
    alice_pem = tmp_path / "alice.pem"
    alice_pem.write_bytes(alice.certificate.read_bytes() + alice.key.read_bytes())
    replaced = {"ALICE_PEM": str(alice_pem), "ALICE_CERT": str(alice.certificate), "ENCRYPTED_KEY": str(encrypted)}
    with pytest.raises(TlsConfigError) as raised:
        client_context(TlsSettings(**{key: replaced.get(value, value) for key, value in settings.items()}))
    assert message in str(raised.value)
    assert "wrong" not in str(raised.value) and "\n" not in str(raised.value)


def test_turned_off_verification_trusts_any_broker(certs: Certificates, tmp_path: Path) -> None:
    client = client_context(TlsSettings(certificate_verification="false"))
    assert (client.verify_mode, client.check_hostname) == (ssl.CERT_NONE, False)
    handshake(client, server_context(TlsSettings(keystore_location=pem_identity(certs, tmp_path))), "other.example")
