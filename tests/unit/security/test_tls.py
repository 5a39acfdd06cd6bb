"""TLS contexts from Kafka's ``ssl.*`` settings: PEM and PKCS12 stores, client authentication, versions, suites,
and one clear error for each setting that cannot make a context."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

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
        ({"keystore_location": "/k.jks"}, "ssl.keystore.type=JKS cannot be read by mq: convert the store to PKCS12"),
        ({"keystore_type": "PEM", "keystore_location": "/missing.pem"}, "ssl.keystore.location /missing.pem: No such"),
        ({"keystore_type": "PEM", "keystore_certificate_chain": "x"}, "ssl.keystore.certificate.chain needs"),
        (
            {"keystore_type": "PKCS12", "keystore_location": "BROKER_P12", "keystore_password": "wrong"},
            "not PKCS12, or a wrong ssl.keystore.password",
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
            "ssl.cipher.suites: none of TLS_NO_SUCH_WITH_NOTHING is available",
        ),
    ],
)
def test_settings_that_cannot_make_a_listener_name_their_key(
    certs: Certificates, tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    replaced = {"BROKER_P12": str(certs.broker.pkcs12), "BROKER_PEM": pem_identity(certs, tmp_path)}
    values = {key: replaced.get(value, value) for key, value in settings.items()}
    with pytest.raises(TlsConfigError) as raised:
        server_context(TlsSettings(**values))
    assert message in str(raised.value)
    assert "wrong" not in str(raised.value).replace("a wrong ssl.keystore.password", "")


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
