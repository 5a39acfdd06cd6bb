"""make_certs: a CA whose broker and client certificates verify with Python's ssl, and the refused kinds."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import pkcs12

from mq.tools.certs import CertificateFiles, Certificates, make_certs
from tests.tls_helpers import handshake, server_context


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certs(
        tmp_path_factory.mktemp("certs"),
        clients=["alice", "bob"],
        hosts=["broker1.example"],
        expired=["old"],
        untrusted=["rogue"],
    )


def _client(ca: Path, identity: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if identity is not None:
        context.load_cert_chain(*identity)
    return context


@pytest.mark.parametrize("hostname", ["localhost", "127.0.0.1", "broker1.example"])
def test_broker_certificate_verifies_for_each_of_its_names(certs: Certificates, hostname: str) -> None:
    handshake(_client(certs.ca), server_context(certs.broker), hostname)


def test_broker_certificate_does_not_verify_for_another_name(certs: Certificates) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(_client(certs.ca), server_context(certs.broker), "other.example")


@pytest.mark.parametrize("name", ["alice", "bob"])
def test_client_certificates_authenticate_with_their_common_name(certs: Certificates, name: str) -> None:
    files = certs.clients[name]
    server = handshake(_client(certs.ca, (files.certificate, files.key)), server_context(certs.broker, certs.ca))
    peer = server.getpeercert()
    assert peer is not None
    assert dict(attribute[0] for attribute in peer["subject"]) == {"commonName": name}


def test_expired_certificate_is_refused(certs: Certificates) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
        handshake(_client(certs.ca), server_context(certs.expired["old"]))


def test_certificate_of_another_ca_is_refused_and_trusted_by_that_ca(certs: Certificates) -> None:
    assert certs.other_ca is not None
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
        handshake(_client(certs.ca), server_context(certs.untrusted["rogue"]))
    handshake(_client(certs.other_ca), server_context(certs.untrusted["rogue"]))


def test_client_certificate_of_another_ca_is_refused_by_the_broker(certs: Certificates) -> None:
    rogue = certs.untrusted["rogue"]
    with pytest.raises(ssl.SSLError):
        handshake(_client(certs.ca, (rogue.certificate, rogue.key)), server_context(certs.broker, certs.ca))


def test_pkcs12_stores_hold_key_certificate_and_ca_and_keys_are_private(certs: Certificates) -> None:
    key, certificate, others = pkcs12.load_key_and_certificates(
        certs.clients["alice"].pkcs12.read_bytes(), certs.password.encode()
    )
    assert key is not None and certificate is not None
    assert certificate.subject.rfc4514_string() == "CN=alice"
    assert [c.subject.rfc4514_string() for c in others] == ["CN=mq test CA"]
    for path in (certs.ca_key, certs.broker.key, certs.clients["alice"].key, certs.broker.pkcs12):
        assert path.stat().st_mode & 0o077 == 0, path


def test_script_writes_the_files_it_lists(tmp_path: Path) -> None:
    script = Path(__file__).parents[3] / "scripts" / "make_certs.py"
    result = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path), "--client", "carol"],
        capture_output=True,
        text=True,
        check=True,
    )
    listed = [Path(line) for line in result.stdout.splitlines()]
    assert [p.name for p in listed] == ["ca.pem", "broker.pem", "carol.pem"]
    broker = CertificateFiles(tmp_path / "broker.pem", tmp_path / "broker.key", tmp_path / "broker.p12")
    handshake(_client(tmp_path / "ca.pem"), server_context(broker))
