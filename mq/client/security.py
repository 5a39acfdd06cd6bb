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

The ``ssl.*`` keys become ``mq.security.tls.TlsSettings`` and the context comes from ``client_context``, which
loads the key material as the brokers' listeners do: without a trust store the system's certificate authorities are
trusted, as both clients do, and a Java KeyStore (JKS) is refused with one line saying how to convert it. A bad or
missing value raises ``ConfigError`` naming the key and where it came from; no message ever contains a password.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from mq.errors import ConfigError
from mq.security.jaas import JaasConfigError, login_module
from mq.security.tls import JAVA_KEYS, LIBRDKAFKA_KEYS, TlsConfigError, client_context, tls_settings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

SASL_KEYS = frozenset({"sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.jaas.config"})
SECURITY_KEYS = frozenset({"security.protocol", *SASL_KEYS, *JAVA_KEYS, *LIBRDKAFKA_KEYS}) - {"ssl.client.auth"}
"""The client properties ``client_security`` reads."""


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
        # an empty value is no value, but for an empty ssl.endpoint.identification.algorithm (no host name check)
        given = {k: v for k, v in props.items() if v or k == "ssl.endpoint.identification.algorithm"}
        try:
            context = client_context(tls_settings(given))
        except TlsConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        check_hostname = context.check_hostname
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
