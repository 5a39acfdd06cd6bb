"""Certificates for trying TLS locally: a CA, a broker certificate and client certificates, all PEM, plus PKCS12.

``make_certs(out)`` writes into ``out``:

- ``ca.pem`` / ``ca.key``: a self-signed certificate authority (``CN=mq test CA``);
- ``broker.pem`` / ``broker.key`` / ``broker.p12``: the broker's certificate, signed by the CA, for the names
  localhost, 127.0.0.1 and every host given (server and client use, so brokers can also present it to each other);
- ``<name>.pem`` / ``<name>.key`` / ``<name>.p12`` per client: ``CN=<name>`` (client use), signed by the CA, for
  brokers that authenticate clients by certificate (Kafka's principal ``User:CN=<name>``);
- per name of ``expired``: a certificate like the broker's, signed by the CA, whose validity ended yesterday;
- per name of ``untrusted``: a certificate like the broker's signed by another CA (``other-ca.pem``).

Keys are EC P-256, unencrypted PKCS8 PEM (mode 0600); each ``.p12`` holds the key, its certificate and the CA
certificate, protected by ``password``. Certificates are valid from an hour ago for ``days`` days.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    pkcs12,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_PASSWORD = "mq-secret"
BROKER_NAMES = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class CertificateFiles:
    """One certificate's files: PEM certificate, PEM private key, PKCS12 store (key, certificate and CA)."""

    certificate: Path
    key: Path
    pkcs12: Path


@dataclass(frozen=True)
class Certificates:
    """What ``make_certs`` wrote."""

    ca: Path
    ca_key: Path
    broker: CertificateFiles
    clients: dict[str, CertificateFiles] = field(default_factory=dict)
    expired: dict[str, CertificateFiles] = field(default_factory=dict)
    untrusted: dict[str, CertificateFiles] = field(default_factory=dict)
    other_ca: Path | None = None
    """The CA of the ``untrusted`` certificates (None when there are none)."""
    password: str = DEFAULT_PASSWORD
    """The password of every ``.p12`` file."""


@dataclass(frozen=True)
class _Authority:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def make_certs(
    out: Path | str,
    *,
    clients: Sequence[str] = (),
    hosts: Sequence[str] = (),
    expired: Sequence[str] = (),
    untrusted: Sequence[str] = (),
    days: int = 365,
    password: str = DEFAULT_PASSWORD,
) -> Certificates:
    """Write a CA and the certificates named (see the module docstring) into ``out`` (created if missing)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days))
    ca = _authority("mq test CA", valid)
    ca_path = _write(out / "ca.pem", ca.certificate.public_bytes(Encoding.PEM))
    ca_key = _write_key(out / "ca.key", ca.key)
    names = [*BROKER_NAMES, *(h for h in hosts if h not in BROKER_NAMES)]

    broker = _issue(out, "broker", ca, names, valid, password)
    issued = {name: _issue(out, name, ca, (), valid, password) for name in clients}
    past = (now - datetime.timedelta(days=30), now - datetime.timedelta(days=1))
    expired_files = {name: _issue(out, name, ca, names, past, password) for name in expired}
    other_ca_path = None
    untrusted_files: dict[str, CertificateFiles] = {}
    if untrusted:
        other = _authority("mq other CA", valid)
        other_ca_path = _write(out / "other-ca.pem", other.certificate.public_bytes(Encoding.PEM))
        untrusted_files = {name: _issue(out, name, other, names, valid, password) for name in untrusted}
    return Certificates(ca_path, ca_key, broker, issued, expired_files, untrusted_files, other_ca_path, password)


def _issue(
    out: Path,
    name: str,
    authority: _Authority,
    server_names: Sequence[str],
    valid: tuple[datetime.datetime, datetime.datetime],
    password: str,
) -> CertificateFiles:
    """A certificate for ``name`` signed by ``authority``: a server's (CN the first of ``server_names``, all of them
    as subject alternative names, server and client use) when ``server_names`` are given, else a client's
    (``CN=<name>``, client use)."""
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = _builder(server_names[0] if server_names else name, authority.certificate.subject, key, valid)
    if server_names:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        alternatives = x509.SubjectAlternativeName([_general_name(n) for n in server_names])
        builder = builder.add_extension(alternatives, critical=False)
    certificate = (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()), critical=False)
        .sign(authority.key, hashes.SHA256())
    )
    store = pkcs12.serialize_key_and_certificates(
        name.encode(), key, certificate, [authority.certificate], BestAvailableEncryption(password.encode())
    )
    return CertificateFiles(
        _write(out / f"{name}.pem", certificate.public_bytes(Encoding.PEM)),
        _write_key(out / f"{name}.key", key),
        _write(out / f"{name}.p12", store, private=True),
    )


def _builder(
    cn: str,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    valid: tuple[datetime.datetime, datetime.datetime],
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
    )


def _authority(cn: str, valid: tuple[datetime.datetime, datetime.datetime]) -> _Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    certificate = (
        _builder(cn, name, key, valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _Authority(certificate, key)


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write(path: Path, data: bytes, *, private: bool = False) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    return _write(path, key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()), private=True)
