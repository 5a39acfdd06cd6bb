"""TLS contexts from Kafka's ``ssl.*`` settings, for listeners (server side) and for connections to brokers (client
side: mq's clients and tools, and brokers connecting to each other). The one place key material is loaded.

Key material, in Java's spelling (Kafka's brokers and Java clients) or librdkafka's (confluent-kafka, kcat):

- trust (CAs that verify the peer): ``ssl.truststore.location`` (a PEM file or PKCS12 store,
  ``ssl.truststore.password``), ``ssl.truststore.certificates`` (PEM text), ``ssl.ca.location`` (a PEM file, a
  directory of hashed certificates, or ``probe``: the system's), ``ssl.ca.pem`` (PEM text); every one given is
  trusted; a client given none trusts the system's CAs;
- identity (the certificate chain and private key presented): ``ssl.keystore.location`` (a PEM file holding both, or
  a PKCS12 store, ``ssl.keystore.password``), ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (PEM text),
  ``ssl.certificate.location`` (+ ``ssl.key.location`` when the key is in a file of its own) or
  ``ssl.certificate.pem`` + ``ssl.key.pem``; one of them at most; an encrypted PEM key opens with
  ``ssl.key.password``.

A store's type (``ssl.keystore.type``, ``ssl.truststore.type``: PEM or PKCS12) is read from the file when not given
or given as JKS, Kafka's default (Java's JKS stores read PKCS12 files too); a Java KeyStore itself (JKS, JCEKS) is
refused with a way out (``keytool -importkeystore`` to PKCS12). PEM text written over continued properties lines
(one line, its base64 cut by spaces) is rewrapped before it is loaded. ``ssl.enabled.protocols`` bound the versions
(TLSv1.2, TLSv1.3; older ones are not offered), ``ssl.protocol`` caps them as Java's SSLContext protocol does;
``ssl.cipher.suites`` take OpenSSL or IANA names. A client verifies the peer's certificate unless
``enable.ssl.certificate.verification`` is false, and its host name unless ``ssl.endpoint.identification.algorithm``
is empty. A setting that cannot make a context raises one ``TlsConfigError`` line naming the key, never a password.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    pkcs12,
)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
"""``ssl.client.auth`` values and what they ask of a client's certificate."""

JAVA_KEYS = {
    "ssl.keystore.type": "keystore_type",
    "ssl.keystore.location": "keystore_location",
    "ssl.keystore.password": "keystore_password",
    "ssl.keystore.certificate.chain": "keystore_certificate_chain",
    "ssl.keystore.key": "keystore_key",
    "ssl.key.password": "key_password",
    "ssl.truststore.type": "truststore_type",
    "ssl.truststore.location": "truststore_location",
    "ssl.truststore.password": "truststore_password",
    "ssl.truststore.certificates": "truststore_certificates",
    "ssl.client.auth": "client_auth",
    "ssl.protocol": "protocol",
    "ssl.enabled.protocols": "enabled_protocols",
    "ssl.cipher.suites": "cipher_suites",
    "ssl.endpoint.identification.algorithm": "endpoint_identification_algorithm",
}
"""Kafka's (Java's) ``ssl.*`` keys and the ``TlsSettings`` field each sets."""

LIBRDKAFKA_KEYS = {
    "ssl.ca.location": "ca_location",
    "ssl.ca.pem": "ca_pem",
    "ssl.certificate.location": "certificate_location",
    "ssl.certificate.pem": "certificate_pem",
    "ssl.key.location": "key_location",
    "ssl.key.pem": "key_pem",
    "enable.ssl.certificate.verification": "certificate_verification",
}
"""librdkafka's keys beyond Java's (librdkafka also reads ``ssl.key.password``, ``ssl.keystore.location`` and
``ssl.keystore.password``, ``ssl.cipher.suites`` and ``ssl.endpoint.identification.algorithm``)."""

_VERSIONS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_CONTEXT_PROTOCOLS = {"TLS": None, "SSL": None, "TLSV1.3": None, "TLSV1.2": ssl.TLSVersion.TLSv1_2}
"""Java's ``ssl.protocol`` (the SSLContext's protocol): the highest version such a context speaks (None: any)."""

_TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_IANA_SUITE = re.compile(
    r"TLS_(?P<kx>ECDHE_ECDSA|ECDHE_RSA|DHE_RSA|RSA)_WITH_(?P<cipher>AES_128|AES_256|CHACHA20_POLY1305)"
    r"(?:_(?P<mode>GCM|CBC))?_(?P<mac>SHA|SHA256|SHA384)"
)
_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")
"""The first bytes of a JKS and of a JCEKS store."""
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


class TlsConfigError(ValueError):
    """The ``ssl.*`` settings cannot make a context; the message names the key, never a password."""


@dataclass(frozen=True)
class TlsSettings:
    """The ``ssl.*`` keys of one listener or client as written (None or empty: not set); see ``JAVA_KEYS`` and
    ``LIBRDKAFKA_KEYS`` for the key of each field."""

    keystore_type: str | None = None
    keystore_location: str | None = None
    keystore_password: str | None = field(default=None, repr=False)
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    truststore_type: str | None = None
    truststore_location: str | None = None
    truststore_password: str | None = field(default=None, repr=False)
    truststore_certificates: str | None = None
    ca_location: str | None = None
    ca_pem: str | None = None
    certificate_location: str | None = None
    certificate_pem: str | None = None
    key_location: str | None = None
    key_pem: str | None = field(default=None, repr=False)
    certificate_verification: str = "true"
    client_auth: str = "none"
    protocol: str | None = None
    enabled_protocols: str = "TLSv1.2,TLSv1.3"
    cipher_suites: str = ""
    endpoint_identification_algorithm: str = "https"


def tls_settings(values: Mapping[str, str]) -> TlsSettings:
    """The settings of the Kafka keys (``JAVA_KEYS``, ``LIBRDKAFKA_KEYS``) among ``values``; other keys are ignored."""
    fields = JAVA_KEYS | LIBRDKAFKA_KEYS
    return TlsSettings(**{fields[key]: value for key, value in values.items() if key in fields})


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: its key and certificate are required; clients are verified against the trusted CAs as
    ``ssl.client.auth`` asks."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions_and_suites(context, settings)
    if not _load_identity(context, settings):
        raise TlsConfigError("a TLS listener needs ssl.keystore.location or ssl.keystore.certificate.chain")
    mode = CLIENT_AUTH.get(settings.client_auth.strip().lower())
    if mode is None:
        raise TlsConfigError(f"ssl.client.auth must be none, requested or required, not {settings.client_auth!r}")
    if not _load_trust(context, settings) and mode != ssl.CERT_NONE:
        raise TlsConfigError(
            f"ssl.client.auth={settings.client_auth} needs ssl.truststore.location or ssl.truststore.certificates"
        )
    context.verify_mode = mode
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A context for connecting to brokers: the trusted CAs (else the system's) verify the broker, its host name too
    unless ``ssl.endpoint.identification.algorithm`` is empty; an identity, if set, is presented when the broker asks
    for a certificate. ``check_hostname`` of the context says whether host names are checked."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_versions_and_suites(context, settings)
    verify = _flag(settings.certificate_verification, "enable.ssl.certificate.verification")
    algorithm = settings.endpoint_identification_algorithm.strip().lower()
    if algorithm not in ("https", "", "none"):
        raise TlsConfigError(
            "ssl.endpoint.identification.algorithm must be https or empty, not "
            f"{settings.endpoint_identification_algorithm!r}"
        )
    if not _load_trust(context, settings):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_identity(context, settings)
    context.check_hostname = verify and algorithm == "https"
    if not verify:
        context.verify_mode = ssl.CERT_NONE
    return context


def _flag(value: str, key: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise TlsConfigError(f"{key} must be true or false, not {value!r}")
    return text == "true"


def _set_versions_and_suites(context: ssl.SSLContext, settings: TlsSettings) -> None:
    names = [n.strip() for n in settings.enabled_protocols.split(",") if n.strip()]
    unknown = [n for n in names if n.upper() not in _VERSIONS]
    if unknown or not names:
        raise TlsConfigError(
            f"ssl.enabled.protocols: {', '.join(unknown) or 'none'} not supported; use TLSv1.2 and/or TLSv1.3"
        )
    versions = sorted(_VERSIONS[n.upper()] for n in names)
    lowest, highest = versions[0], versions[-1]
    if settings.protocol:
        if settings.protocol.strip().upper() not in _CONTEXT_PROTOCOLS:
            raise TlsConfigError(f"ssl.protocol: {settings.protocol} not supported; use TLSv1.3, TLSv1.2 or TLS")
        cap = _CONTEXT_PROTOCOLS[settings.protocol.strip().upper()]
        highest = highest if cap is None else min(highest, cap)
        if highest < lowest:
            raise TlsConfigError("ssl.protocol and ssl.enabled.protocols leave no TLS version enabled")
    context.minimum_version, context.maximum_version = lowest, highest
    if settings.cipher_suites.strip():
        _set_suites(context, settings.cipher_suites)


def _set_suites(context: ssl.SSLContext, suites: str) -> None:
    """OpenSSL cipher names, or IANA suite names (Java's) translated to OpenSSL's. Python's ``ssl`` cannot narrow TLS
    1.3's suites: naming only TLS 1.3 suites restricts the connection to TLS 1.3."""
    names = [n.strip() for n in re.split(r"[,:]", suites) if n.strip()]
    openssl_names = []
    for name in names:
        if name in _TLS13_SUITES:
            continue
        if name.startswith("TLS_"):
            match = _IANA_SUITE.fullmatch(name)
            if match is None:
                raise TlsConfigError(f"ssl.cipher.suites: {name} is not a cipher suite mq knows")
            name = _openssl_suite(**match.groupdict())
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(name)
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: {name} is not supported by this OpenSSL") from None
        openssl_names.append(name)
    if openssl_names:
        context.set_ciphers(":".join(openssl_names))
    elif context.maximum_version < ssl.TLSVersion.TLSv1_3:
        raise TlsConfigError("ssl.cipher.suites names only TLS 1.3 suites, which ssl.enabled.protocols leaves out")
    else:
        context.minimum_version = ssl.TLSVersion.TLSv1_3


def _openssl_suite(kx: str, cipher: str, mode: str | None, mac: str) -> str:
    """OpenSSL's name of an IANA TLS 1.2 suite, e.g. TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 -> ECDHE-RSA-AES256-GCM-
    SHA384 (RSA key exchange has no prefix; CBC suites no mode; ChaCha20 no MAC)."""
    prefix = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    if cipher == "CHACHA20_POLY1305":
        return f"{prefix}CHACHA20-POLY1305"
    bulk = cipher.replace("_", "")
    return f"{prefix}{bulk}-GCM-{mac}" if mode == "GCM" else f"{prefix}{bulk}-{mac}"


def _load_trust(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Trust every CA the settings name; False when they name none."""
    trusted = False
    if settings.ca_location:
        location = settings.ca_location
        if location == "probe":
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        elif os.path.isdir(location):
            context.load_verify_locations(capath=location)
        else:
            _load_pem_trust(context, _read(location, "ssl.ca.location").decode("latin-1"), "ssl.ca.location")
        trusted = True
    for text, key in (
        (settings.ca_pem, "ssl.ca.pem"),
        (settings.truststore_certificates, "ssl.truststore.certificates"),
    ):
        if text:
            _load_pem_trust(context, text, key)
            trusted = True
    if settings.truststore_location:
        location = settings.truststore_location
        data = _read(location, "ssl.truststore.location")
        if _store_type(data, settings.truststore_type, "ssl.truststore", location) == "PEM":
            _load_pem_trust(context, data.decode("latin-1"), f"ssl.truststore.location {location}")
        else:
            _, certificate, chain = _pkcs12(data, settings.truststore_password, "ssl.truststore", location)
            certificates = [c for c in [certificate, *chain] if c is not None]
            if not certificates:
                raise TlsConfigError(f"ssl.truststore.location {location} holds no certificate")
            context.load_verify_locations(cadata="".join(_pem(c) for c in certificates))
        trusted = True
    return trusted


def _load_pem_trust(context: ssl.SSLContext, text: str, name: str) -> None:
    certificates = "".join(block for label, block in _pem_blocks(text) if label == "CERTIFICATE")
    if not certificates:
        raise TlsConfigError(f"{name} holds no PEM certificate")
    try:
        context.load_verify_locations(cadata=certificates)
    except (ssl.SSLError, ValueError) as exc:
        raise TlsConfigError(f"{name} holds no usable PEM certificate: {_reason(exc)}") from None


def _load_identity(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Load the one certificate chain and key the settings name; False when they name none."""
    s = settings
    for chain_key, chain_value, key_key, key_value in (
        ("ssl.keystore.certificate.chain", s.keystore_certificate_chain, "ssl.keystore.key", s.keystore_key),
        ("ssl.certificate.pem", s.certificate_pem, "ssl.key.pem", s.key_pem),
        ("ssl.certificate.location", s.certificate_location, "ssl.key.location", s.key_location),
    ):
        if key_value and not chain_value:
            raise TlsConfigError(f"{key_key} needs {chain_key}")
        if chain_value and not key_value and chain_key != "ssl.certificate.location":  # that file may hold the key
            raise TlsConfigError(f"{chain_key} needs {key_key}")
    sources = {
        "ssl.keystore.location": s.keystore_location,
        "ssl.keystore.certificate.chain": s.keystore_certificate_chain,
        "ssl.certificate.location": s.certificate_location,
        "ssl.certificate.pem": s.certificate_pem,
    }
    given = [key for key, value in sources.items() if value]
    if len(given) > 1:
        raise TlsConfigError(f"{' and '.join(given)} each name a certificate and key: set one")
    password = s.key_password
    if s.keystore_location:
        name = f"ssl.keystore.location {s.keystore_location}"
        data = _read(s.keystore_location, "ssl.keystore.location")
        if _store_type(data, s.keystore_type, "ssl.keystore", s.keystore_location) == "PEM":
            _load_pem_identity(context, data.decode("latin-1"), password, name)
        else:
            key, certificate, chain = _pkcs12(data, s.keystore_password, "ssl.keystore", s.keystore_location)
            if key is None or certificate is None:
                raise TlsConfigError(f"{name} holds no private key with its certificate")
            _load_key_and_chain(context, key, [certificate, *chain], name)
    elif s.certificate_location:
        name = f"ssl.certificate.location {s.certificate_location}"
        text = _read(s.certificate_location, "ssl.certificate.location").decode("latin-1")
        if s.key_location:
            name += f" with ssl.key.location {s.key_location}"
            text += "\n" + _read(s.key_location, "ssl.key.location").decode("latin-1")
        _load_pem_identity(context, text, password, name)
    elif s.keystore_certificate_chain and s.keystore_key:
        text = s.keystore_certificate_chain + "\n" + s.keystore_key
        _load_pem_identity(context, text, password, "ssl.keystore.certificate.chain with ssl.keystore.key")
    elif s.certificate_pem and s.key_pem:
        _load_pem_identity(
            context, s.certificate_pem + "\n" + s.key_pem, password, "ssl.certificate.pem with ssl.key.pem"
        )
    return bool(given)


def _load_pem_identity(context: ssl.SSLContext, text: str, password: str | None, name: str) -> None:
    blocks = _pem_blocks(text)
    keys = [block for label, block in blocks if label.endswith("PRIVATE KEY")]
    certificates = [block for label, block in blocks if label == "CERTIFICATE"]
    if len(keys) != 1 or not certificates:
        raise TlsConfigError(f"{name} must hold one PEM private key and its certificate chain")
    try:
        private_key = load_pem_private_key(keys[0].encode(), password.encode() if password is not None else None)
        chain = [x509.load_pem_x509_certificate(c.encode()) for c in certificates]
    except (ValueError, TypeError) as exc:
        text = str(exc).lower()
        if "password" in text or "decrypt" in text:
            reason = (
                "ssl.key.password does not decrypt the key"
                if password
                else "the key is encrypted: set ssl.key.password"
            )
        else:
            reason = _reason(exc)
        raise TlsConfigError(f"cannot load {name}: {reason}") from None
    _load_key_and_chain(context, private_key, chain, name)


def _pkcs12(
    data: bytes, password: str | None, prefix: str, location: str
) -> tuple[PrivateKeyTypes | None, x509.Certificate | None, list[x509.Certificate]]:
    """(key, certificate, other certificates) of a PKCS12 store, opened with ``<prefix>.password``."""
    try:
        key, certificate, others = pkcs12.load_key_and_certificates(
            data, password.encode() if password is not None else None
        )
    except ValueError:
        raise TlsConfigError(
            f"{prefix}.location {location} is not a PKCS12 store that {prefix}.password opens"
        ) from None
    return key, certificate, list(others)


def _load_key_and_chain(
    context: ssl.SSLContext, private_key: PrivateKeyTypes, chain: Sequence[x509.Certificate], name: str
) -> None:
    """Load a key and its chain held in memory: ``ssl`` reads them only from a file, so they pass through a private
    temporary file (mode 0600, removed at once) in which the key is encrypted with a one-time password."""
    public = chain[0].public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    if private_key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo) != public:
        raise TlsConfigError(f"cannot load {name}: the private key does not match the certificate")
    one_time = secrets.token_urlsafe(24)
    key_pem = private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time.encode()))
    handle, path = tempfile.mkstemp(prefix="mq-tls-", suffix=".pem")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(key_pem + "".join(_pem(c) for c in chain).encode("ascii"))
        context.load_cert_chain(path, password=one_time)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"cannot load {name}: {_reason(exc)}") from None
    finally:
        os.unlink(path)


def _store_type(data: bytes, declared: str | None, prefix: str, location: str) -> str:
    """PEM or PKCS12: the declared type, else (none, or Kafka's default JKS) what the file holds. A Java KeyStore is
    refused."""
    kind = (declared or "").strip().upper()
    if data[:4] in _JKS_MAGIC:
        shown = f" ({prefix}.type={declared})" if declared else ""
        raise TlsConfigError(
            f"{prefix}.location {location} is a Java KeyStore{shown}, which mq cannot read: convert it (keytool "
            f"-importkeystore -deststoretype PKCS12) and set {prefix}.type=PKCS12, or use PEM"
        )
    if kind in ("PEM", "PKCS12"):
        return kind
    if kind and kind not in ("JKS", "JCEKS"):
        raise TlsConfigError(f"{prefix}.type must be PEM or PKCS12 (JKS cannot be read), not {declared!r}")
    return "PEM" if b"-----BEGIN" in data else "PKCS12"


def _pem_blocks(text: str) -> list[tuple[str, str]]:
    """(label, block) of each PEM block of ``text``, rewrapped in 64-character lines: a value written over several
    properties lines with ``\\`` continuations (as Kafka's documentation shows) arrives as one line, its base64 cut
    by spaces. A block with headers (a legacy encrypted key) is kept as it is."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        label, body = match.group(1), match.group(2)
        if ":" in body:
            blocks.append((label, match.group(0) + "\n"))
            continue
        data = "".join(body.split())
        lines = [data[at : at + 64] for at in range(0, len(data), 64)]
        blocks.append((label, "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""])))
    return blocks


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(Encoding.PEM).decode("ascii")


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"cannot read {key} {path}: {exc.strerror or exc}") from None


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "reason", None) or exc)
