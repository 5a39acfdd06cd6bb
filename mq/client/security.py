"""How a client secures its broker connections: TLS, SASL, or both, as Kafka's ``security.protocol`` says.

``ClientSecurity`` is what ``BrokerConnection`` needs: the protocol, a client ``ssl.SSLContext`` (for SSL and
SASL_SSL), whether the broker's certificate must name the host connected to (Kafka's
``ssl.endpoint.identification.algorithm=https``, the default since Kafka 2.0), and the SASL mechanism and
credentials (for SASL_PLAINTEXT and SASL_SSL). ``client_security`` builds one from Kafka client properties written
in either style:

- librdkafka's (confluent-kafka, kcat): ``sasl.mechanism(s)``, ``sasl.username``, ``sasl.password``,
  ``ssl.ca.location`` / ``ssl.ca.pem``, ``ssl.certificate.location`` / ``ssl.certificate.pem``,
  ``ssl.key.location`` / ``ssl.key.pem``, ``ssl.key.password``, ``enable.ssl.certificate.verification``;
- Java's: ``sasl.mechanism``, ``sasl.jaas.config`` (``username`` and ``password`` options), ``ssl.truststore.*``
  (PEM or PKCS12 files, or PEM text in ``ssl.truststore.certificates``), ``ssl.keystore.*`` (PEM or PKCS12 files,
  or PEM text in ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``), ``ssl.key.password``,
  ``ssl.protocol``, ``ssl.enabled.protocols``;
- both: ``security.protocol``, ``ssl.endpoint.identification.algorithm``, ``ssl.cipher.suites`` (OpenSSL names,
  or Java's IANA names).

Without a trust store the system's certificate authorities are trusted, as both clients do. Java KeyStores (JKS)
cannot be read: a JKS store is refused with one line saying how to convert it. A bad or missing value raises
``ConfigError`` naming the key and where it came from; no message ever contains a password.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mq.errors import ConfigError
from mq.security.jaas import JaasConfigError, login_module

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

SECURITY_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.jaas.config",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "enable.ssl.certificate.verification",
        "ssl.endpoint.identification.algorithm",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
    }
)
"""The client properties ``client_security`` reads."""

_TLS_VERSIONS = {
    "TLSV1": ssl.TLSVersion.TLSv1,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
_CONTEXT_PROTOCOLS = {
    "TLS": None,
    "SSL": None,
    "TLSV1.3": None,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1": ssl.TLSVersion.TLSv1,
}
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
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


@dataclass(frozen=True)
class ClientSecurity:
    """The security of a client's broker connections (the default: PLAINTEXT).

    Invariants: ``protocol`` is one of ``PROTOCOLS``; SSL and SASL_SSL have an ``ssl_context`` (the system's
    default trust when none is given), whose ``check_hostname`` is set to ``check_hostname`` (the broker's
    certificate must name the host the connection was opened to); SASL_PLAINTEXT and SASL_SSL have a
    ``sasl_mechanism`` of ``MECHANISMS``, a ``username`` and a ``password``. ``repr`` never shows the password.
    """

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"security protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}")
        if self.uses_tls:
            context = self.ssl_context
            if context is None:
                context = ssl.create_default_context()
                object.__setattr__(self, "ssl_context", context)
            if self.check_hostname and context.verify_mode == ssl.CERT_NONE:
                raise ValueError("check_hostname needs an SSL context that verifies certificates")
            context.check_hostname = self.check_hostname
        if self.uses_sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise ValueError(f"SASL mechanism must be one of {', '.join(MECHANISMS)}, not {self.sasl_mechanism!r}")
            if self.username is None or self.password is None:
                raise ValueError(f"{self.protocol} needs a username and a password")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ClientSecurity()


def client_security(properties: Mapping[str, str], source: str = "client properties") -> ClientSecurity:
    """The ``ClientSecurity`` Kafka client ``properties`` (either style) describe; ``source`` names where they came
    from in errors. Raises ConfigError naming the key of a bad, missing or unreadable value."""
    props = {key: value.strip() for key, value in properties.items() if key in SECURITY_KEYS}
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise _invalid(props, "security.protocol", source, f"expected {', '.join(PROTOCOLS)}")
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        mechanism, username, password = _sasl(props, protocol, source)
    context, check_hostname = None, True
    if protocol.endswith("SSL"):
        context = _ssl_context(props, source)
        check_hostname = _check_hostname(props, source) and context.verify_mode != ssl.CERT_NONE
    return ClientSecurity(protocol, context, check_hostname, mechanism, username, password)


def _invalid(props: Mapping[str, str], key: str, source: str, expected: str) -> ConfigError:
    return ConfigError(f"invalid value '{props[key]}' for {key} in {source}: {expected}")


def _sasl(props: Mapping[str, str], protocol: str, source: str) -> tuple[str, str, str]:
    """(mechanism, username, password) of a SASL protocol."""
    named = {key: props[key].upper() for key in ("sasl.mechanism", "sasl.mechanisms") if props.get(key)}
    if len(set(named.values())) > 1:
        raise ConfigError(f"sasl.mechanism and sasl.mechanisms in {source} name different mechanisms")
    if not named:
        raise ConfigError(
            f"security.protocol {protocol} needs sasl.mechanism in {source} ({', '.join(MECHANISMS)}; "
            "Kafka's default GSSAPI is not supported)"
        )
    key, mechanism = next(iter(named.items()))
    if mechanism not in MECHANISMS:
        raise _invalid(props, key, source, f"mq's client supports {', '.join(MECHANISMS)}")
    if "sasl.jaas.config" in props:
        if "sasl.username" in props or "sasl.password" in props:
            raise ConfigError(f"{source} sets both sasl.jaas.config and sasl.username/sasl.password: keep one")
        try:
            module = login_module(props["sasl.jaas.config"])
        except JaasConfigError as exc:
            raise ConfigError(f"invalid sasl.jaas.config in {source}: {exc}") from None
        missing = [option for option in ("username", "password") if option not in module.options]
        if missing:
            raise ConfigError(
                f"sasl.jaas.config in {source}: login module {module.class_name} has no {' or '.join(missing)} option"
            )
        return mechanism, module.options["username"], module.options["password"]
    if "sasl.username" not in props or "sasl.password" not in props:
        raise ConfigError(
            f"security.protocol {protocol} with sasl.mechanism {mechanism} needs sasl.jaas.config "
            f"(or sasl.username and sasl.password) in {source}"
        )
    return mechanism, props["sasl.username"], props["sasl.password"]


def _check_hostname(props: Mapping[str, str], source: str) -> bool:
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", "", "none"):
        raise _invalid(props, "ssl.endpoint.identification.algorithm", source, "expected https or an empty value")
    return algorithm == "https"


def _flag(props: Mapping[str, str], key: str, source: str, default: bool) -> bool:
    value = props.get(key, str(default)).lower()
    if value not in ("true", "false"):
        raise _invalid(props, key, source, "expected true or false")
    return value == "true"


def _ssl_context(props: Mapping[str, str], source: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not _flag(props, "enable.ssl.certificate.verification", source, True):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    _load_trust(context, props, source)
    _load_identity(context, props, source)
    _set_versions(context, props, source)
    if props.get("ssl.cipher.suites"):
        _set_ciphers(context, props, source)
    return context


def _read(props: Mapping[str, str], key: str, source: str) -> bytes:
    try:
        with open(props[key], "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {key} {props[key]} in {source}: {exc.strerror or exc}") from None


def _store_type(props: Mapping[str, str], prefix: str, data: bytes, source: str) -> str:
    """PEM or PKCS12: ``<prefix>.type`` when given, else what the file holds (Kafka's default type, JKS, is not
    assumed). A Java KeyStore is refused."""
    location, type_key = f"{prefix}.location", f"{prefix}.type"
    declared = props.get(type_key, "").upper()
    if declared in ("JKS", "JCEKS") or data[:4] in _JKS_MAGIC:
        raise ConfigError(
            f"{location} {props[location]} in {source} is a Java KeyStore ({declared or 'JKS'}), which mq cannot "
            f"read: convert it (keytool -importkeystore -deststoretype PKCS12) and set {type_key}=PKCS12, or use PEM"
        )
    if declared and declared not in ("PEM", "PKCS12"):
        raise _invalid(props, type_key, source, "expected PEM or PKCS12 (JKS cannot be read)")
    return declared or ("PEM" if b"-----BEGIN" in data else "PKCS12")


def _load_trust(context: ssl.SSLContext, props: Mapping[str, str], source: str) -> None:
    """The certificate authorities the broker's certificate must chain to; the system's when none is named."""
    trusted = False
    if "ssl.ca.location" in props:
        location = props["ssl.ca.location"]
        if location == "probe":
            context.load_default_certs()
        elif os.path.isdir(location):
            context.load_verify_locations(capath=location)
        else:
            _load_pem_trust(
                context, _read(props, "ssl.ca.location", source).decode("latin-1"), "ssl.ca.location", source
            )
        trusted = True
    for key in ("ssl.ca.pem", "ssl.truststore.certificates"):
        if key in props:
            _load_pem_trust(context, props[key], key, source)
            trusted = True
    if "ssl.truststore.location" in props:
        data = _read(props, "ssl.truststore.location", source)
        if _store_type(props, "ssl.truststore", data, source) == "PEM":
            _load_pem_trust(context, data.decode("latin-1"), "ssl.truststore.location", source)
        else:
            _, _, certificates = _pkcs12(data, props, "ssl.truststore", source)
            if not certificates:
                raise ConfigError(
                    f"ssl.truststore.location {props['ssl.truststore.location']} in {source} holds no certificate"
                )
            context.load_verify_locations(cadata="".join(_pem(c) for c in certificates))
        trusted = True
    if not trusted:
        context.load_default_certs()


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


def _load_pem_trust(context: ssl.SSLContext, text: str, key: str, source: str) -> None:
    certificates = "".join(block for label, block in _pem_blocks(text) if label == "CERTIFICATE")
    if not certificates:
        raise ConfigError(f"{key} in {source} holds no PEM certificate")
    try:
        context.load_verify_locations(cadata=certificates)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{key} in {source} holds no usable PEM certificate: {_reason(exc)}") from None


def _load_identity(context: ssl.SSLContext, props: Mapping[str, str], source: str) -> None:
    """The client's own certificate chain and key, for brokers that authenticate clients by certificate."""
    key_password = props.get("ssl.key.password")
    if "ssl.certificate.location" in props or "ssl.key.location" in props:
        if "ssl.certificate.location" not in props:
            raise ConfigError(f"ssl.key.location in {source} needs ssl.certificate.location")
        for key in ("ssl.certificate.location", "ssl.key.location"):
            if key in props:
                _read(props, key, source)  # an unreadable file is named before ssl reports it without its name
        try:
            context.load_cert_chain(props["ssl.certificate.location"], props.get("ssl.key.location"), key_password)
        except ssl.SSLError as exc:
            raise _identity_error("ssl.certificate.location", source, exc) from None
    for chain_key, key_key in (
        ("ssl.certificate.pem", "ssl.key.pem"),
        ("ssl.keystore.certificate.chain", "ssl.keystore.key"),
    ):
        if chain_key in props or key_key in props:
            if chain_key not in props or key_key not in props:
                raise ConfigError(f"{chain_key} and {key_key} in {source} go together")
            _load_pem_identity(context, props[chain_key] + "\n" + props[key_key], key_password, chain_key, source)
    if "ssl.keystore.location" in props:
        data = _read(props, "ssl.keystore.location", source)
        if _store_type(props, "ssl.keystore", data, source) == "PEM":
            _load_pem_identity(context, data.decode("latin-1"), key_password, "ssl.keystore.location", source)
        else:
            private_key, certificate, chain = _pkcs12(data, props, "ssl.keystore", source)
            if private_key is None or certificate is None:
                raise ConfigError(
                    f"ssl.keystore.location {props['ssl.keystore.location']} in {source} holds no private key "
                    "with its certificate"
                )
            _load_key_and_chain(context, private_key, [certificate, *chain], "ssl.keystore.location", source)


def _load_pem_identity(context: ssl.SSLContext, text: str, password: str | None, key: str, source: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    blocks = _pem_blocks(text)
    keys = [block for label, block in blocks if label.endswith("PRIVATE KEY")]
    certs = [block for label, block in blocks if label == "CERTIFICATE"]
    if len(keys) != 1 or not certs:
        raise ConfigError(f"{key} in {source} must hold one PEM private key and its certificate chain")
    try:
        private_key = load_pem_private_key(keys[0].encode(), password.encode() if password is not None else None)
        chain = [x509.load_pem_x509_certificate(c.encode()) for c in certs]
    except (ValueError, TypeError) as exc:
        reason = "ssl.key.password does not decrypt the key" if "password" in str(exc).lower() else _reason(exc)
        raise ConfigError(f"cannot load the private key of {key} in {source}: {reason}") from None
    _load_key_and_chain(context, private_key, chain, key, source)


def _pkcs12(data: bytes, props: Mapping[str, str], prefix: str, source: str) -> tuple[Any, Any, list[Any]]:
    """(key, certificate, other certificates) of a PKCS12 store, opened with ``<prefix>.password``."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    password = props.get(f"{prefix}.password")
    try:
        key, certificate, others = pkcs12.load_key_and_certificates(
            data, password.encode() if password is not None else None
        )
    except ValueError:
        raise ConfigError(
            f"{prefix}.location {props[f'{prefix}.location']} in {source} is not a PKCS12 store that "
            f"{prefix}.password opens"
        ) from None
    return key, certificate, list(others)


def _pem(certificate: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return str(certificate.public_bytes(Encoding.PEM).decode("ascii"))


def _load_key_and_chain(context: ssl.SSLContext, private_key: Any, chain: Sequence[Any], key: str, source: str) -> None:
    """Load a key and its chain held in memory: ``ssl`` reads them only from a file, so they pass through a private
    temporary file in which the key is encrypted with a one-time password."""
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    one_time = secrets.token_urlsafe(24)
    key_pem = private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time.encode()))
    handle, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(key_pem + "".join(_pem(c) for c in chain).encode("ascii"))
        context.load_cert_chain(path, password=one_time)
    except ssl.SSLError as exc:
        raise _identity_error(key, source, exc) from None
    finally:
        os.unlink(path)


def _identity_error(key: str, source: str, exc: ssl.SSLError) -> ConfigError:
    return ConfigError(f"cannot load the client certificate and key of {key} in {source}: {_reason(exc)}")


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "reason", None) or exc)


def _set_versions(context: ssl.SSLContext, props: Mapping[str, str], source: str) -> None:
    highest: ssl.TLSVersion | None = None
    if "ssl.protocol" in props:
        name = props["ssl.protocol"].upper()
        if name not in _CONTEXT_PROTOCOLS:
            raise _invalid(props, "ssl.protocol", source, "expected TLSv1.3, TLSv1.2 or TLS")
        highest = _CONTEXT_PROTOCOLS[name]
    if props.get("ssl.enabled.protocols"):
        names = [n.strip().upper() for n in props["ssl.enabled.protocols"].split(",") if n.strip()]
        unknown = [n for n in names if n not in _TLS_VERSIONS]
        if unknown:
            raise _invalid(props, "ssl.enabled.protocols", source, "expected TLSv1.2, TLSv1.3 (comma-separated)")
        versions = sorted(_TLS_VERSIONS[n] for n in names)
        context.minimum_version = versions[0]
        highest = versions[-1] if highest is None else min(highest, versions[-1])
    if highest is not None:
        if highest < context.minimum_version:
            raise ConfigError(f"ssl.protocol and ssl.enabled.protocols in {source} leave no TLS version enabled")
        context.maximum_version = highest


def _set_ciphers(context: ssl.SSLContext, props: Mapping[str, str], source: str) -> None:
    """OpenSSL cipher names (librdkafka), or Java's IANA suite names translated to OpenSSL's. Python's ``ssl``
    cannot narrow TLS 1.3's suites: listing only TLS 1.3 suites restricts the connection to TLS 1.3."""
    names = [n.strip() for n in re.split(r"[,:]", props["ssl.cipher.suites"]) if n.strip()]
    if not any(n.startswith("TLS_") for n in names):
        openssl_names = names
    else:
        openssl_names = []
        for name in names:
            if name in _TLS13_SUITES:
                continue
            match = _IANA_SUITE.fullmatch(name)
            if match is None:
                raise _invalid(props, "ssl.cipher.suites", source, f"{name} is not a cipher suite mq knows")
            openssl_names.append(_openssl_suite(**match.groupdict()))
        if not openssl_names:
            context.minimum_version = ssl.TLSVersion.TLSv1_3
            return
    for name in openssl_names:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(name)
        except ssl.SSLError:
            raise _invalid(props, "ssl.cipher.suites", source, f"{name} is not supported by this OpenSSL") from None
    context.set_ciphers(":".join(openssl_names))


def _openssl_suite(kx: str, cipher: str, mode: str | None, mac: str) -> str:
    """OpenSSL's name of an IANA TLS 1.2 suite, e.g. TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 -> ECDHE-RSA-AES256-GCM-
    SHA384 (RSA key exchange has no prefix; CBC suites no mode; ChaCha20 no MAC)."""
    prefix = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    if cipher == "CHACHA20_POLY1305":
        return f"{prefix}CHACHA20-POLY1305"
    bulk = cipher.replace("_", "")
    return f"{prefix}{bulk}-GCM-{mac}" if mode == "GCM" else f"{prefix}{bulk}-{mac}"
