"""TLS contexts from Kafka's ``ssl.*`` settings, for listeners (server side) and for connections to brokers.

Key material as Kafka 2.7+ accepts it: ``ssl.keystore.type`` PEM (``ssl.keystore.location``: a file holding the
certificate chain and the private key, or ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key`` inline; an
encrypted key's password in ``ssl.key.password``) or PKCS12 (``ssl.keystore.password``); ``ssl.truststore.type`` PEM
(a CA file, or ``ssl.truststore.certificates`` inline) or PKCS12. JKS is refused with a way out (``keytool
-importkeystore`` to PKCS12). ``ssl.enabled.protocols`` bound the versions (TLSv1.2, TLSv1.3; older ones are not
offered by mq); ``ssl.cipher.suites`` take OpenSSL or IANA names (TLS 1.2 suites; TLS 1.3 keeps OpenSSL's).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    pkcs12,
)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
"""``ssl.client.auth`` values and what they ask of a client's certificate."""

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    """The ``ssl.*`` settings cannot make a context; the message names the key, never a password."""


@dataclass(frozen=True)
class TlsSettings:
    """Kafka's ``ssl.*`` keys of one listener or client, unparsed."""

    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: str = "TLSv1.2,TLSv1.3"
    cipher_suites: str = ""
    endpoint_identification_algorithm: str = "https"


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: its key and certificate are required; clients are verified against the truststore as
    ``ssl.client.auth`` asks."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, settings)
    if not _has_keystore(settings):
        raise TlsConfigError("a TLS listener needs ssl.keystore.location or ssl.keystore.certificate.chain")
    _load_keystore(context, settings)
    mode = CLIENT_AUTH.get(settings.client_auth.strip().lower())
    if mode is None:
        raise TlsConfigError(f"ssl.client.auth must be none, requested or required, not {settings.client_auth!r}")
    if mode != ssl.CERT_NONE:
        _load_truststore(context, settings, required="ssl.client.auth=" + settings.client_auth)
    context.verify_mode = mode
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A context for connecting to brokers: the truststore's CAs (else the system's) verify the broker, its host
    name too unless ``ssl.endpoint.identification.algorithm`` is empty; a keystore, if set, is presented."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, settings)
    if settings.truststore_location or settings.truststore_certificates:
        _load_truststore(context, settings, required="")
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = settings.endpoint_identification_algorithm.strip().lower() == "https"
    if _has_keystore(settings):
        _load_keystore(context, settings)
    return context


def _common(context: ssl.SSLContext, settings: TlsSettings) -> None:
    names = [p.strip() for p in settings.enabled_protocols.split(",") if p.strip()]
    unknown = [p for p in names if p not in _VERSIONS]
    if unknown or not names:
        raise TlsConfigError(
            f"ssl.enabled.protocols: {', '.join(unknown) or 'none'} not supported; use TLSv1.2 and/or TLSv1.3"
        )
    versions = sorted(_VERSIONS[p] for p in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    named = [_openssl_cipher(s.strip()) for s in settings.cipher_suites.split(",") if s.strip()]
    suites = [s for s in named if s is not None]
    if suites:
        try:
            context.set_ciphers(":".join(suites))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: none of {settings.cipher_suites} is available") from None


def _openssl_cipher(name: str) -> str | None:
    """OpenSSL's name of a TLS 1.2 suite given by its IANA name (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` ->
    ``ECDHE-RSA-AES128-GCM-SHA256``) or by OpenSSL's; None for a TLS 1.3 suite (OpenSSL enables those itself)."""
    if not name.startswith("TLS_"):
        return name
    exchange, sep, cipher = name[4:].partition("_WITH_")
    if not sep:
        return None  # TLS_AES_128_GCM_SHA256 and the other TLS 1.3 suites
    cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256").replace("_", "-")
    cipher = cipher.replace("CHACHA20-POLY1305-SHA256", "CHACHA20-POLY1305")
    exchange = "" if exchange == "RSA" else exchange.replace("_", "-") + "-"
    return exchange + cipher


def _has_keystore(settings: TlsSettings) -> bool:
    return bool(settings.keystore_location or settings.keystore_certificate_chain)


def _store_type(value: str, key: str) -> str:
    kind = value.strip().upper()
    if kind == "JKS":
        raise TlsConfigError(
            f"{key}=JKS cannot be read by mq: convert the store to PKCS12 (keytool -importkeystore -deststoretype "
            f"PKCS12) or PEM and set {key} accordingly"
        )
    if kind not in ("PEM", "PKCS12"):
        raise TlsConfigError(f"{key} must be PEM or PKCS12, not {value!r}")
    return kind


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    kind = _store_type(settings.keystore_type, "ssl.keystore.type")
    if kind == "PKCS12":
        if not settings.keystore_location:
            raise TlsConfigError("ssl.keystore.type=PKCS12 needs ssl.keystore.location")
        pem = _pkcs12_key_pem(_read(settings.keystore_location, "ssl.keystore.location"), settings.keystore_password)
        with _secret_file(pem) as path:
            context.load_cert_chain(path)
        return
    if settings.keystore_location:
        try:
            context.load_cert_chain(settings.keystore_location, password=settings.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"ssl.keystore.location {settings.keystore_location}: {_reason(exc)}") from None
        return
    if not settings.keystore_key:
        raise TlsConfigError("ssl.keystore.certificate.chain needs ssl.keystore.key")
    chain = settings.keystore_certificate_chain or ""
    with _secret_file((chain.strip() + "\n" + settings.keystore_key.strip() + "\n").encode()) as path:
        try:
            context.load_cert_chain(path, password=settings.key_password)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.keystore.certificate.chain/ssl.keystore.key: {_reason(exc)}") from None


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings, required: str) -> None:
    if settings.truststore_certificates:
        try:
            context.load_verify_locations(cadata=settings.truststore_certificates)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.truststore.certificates: {_reason(exc)}") from None
        return
    if not settings.truststore_location:
        raise TlsConfigError(f"{required} needs ssl.truststore.location or ssl.truststore.certificates")
    kind = _store_type(settings.truststore_type, "ssl.truststore.type")
    if kind == "PKCS12":
        data = _read(settings.truststore_location, "ssl.truststore.location")
        password = settings.truststore_password.encode() if settings.truststore_password else None
        try:
            _, certificate, more = pkcs12.load_key_and_certificates(data, password)
        except ValueError:
            raise TlsConfigError(
                f"ssl.truststore.location {settings.truststore_location}: not PKCS12, or a wrong password"
            ) from None
        certificates = [c for c in [certificate, *more] if c is not None]
        context.load_verify_locations(cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certificates))
        return
    try:
        context.load_verify_locations(cafile=settings.truststore_location)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.truststore.location {settings.truststore_location}: {_reason(exc)}") from None


def _pkcs12_key_pem(data: bytes, password: str | None) -> bytes:
    """The private key and certificate chain of a PKCS12 store as PEM (the key unencrypted, for a private file)."""
    try:
        key, certificate, more = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise TlsConfigError("ssl.keystore.location: not PKCS12, or a wrong ssl.keystore.password") from None
    if key is None or certificate is None:
        raise TlsConfigError("ssl.keystore.location: the PKCS12 store holds no private key and certificate")
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return pem + b"".join(c.public_bytes(Encoding.PEM) for c in [certificate, *more])


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{key} {path}: {exc.strerror}") from None


@contextmanager
def _secret_file(data: bytes) -> Iterator[str]:
    """A private temporary file holding ``data`` (ssl loads key material only from files), removed after use."""
    descriptor, path = tempfile.mkstemp(prefix="mq-tls-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        yield path
    finally:
        os.unlink(path)


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError) and exc.strerror:
        return exc.strerror
    return str(getattr(exc, "reason", None) or exc)
