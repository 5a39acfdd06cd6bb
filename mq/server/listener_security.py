"""Each listener's security from the broker's config: its TLS context, SASL mechanisms and principal mapping.

A listener's own ``listener.name.<listener>.<key>`` wins over the broker key (``ssl.*``, ``sasl.enabled.mechanisms``,
``connections.max.reauth.ms``, ``ssl.principal.mapping.rules``). PLAIN's users come from the listener's
``listener.name.<listener>.plain.sasl.jaas.config`` (``user_<name>="<password>"``), as Kafka's PLAIN server reads
them; SCRAM's credentials come from the metadata store (``/config/users/<name>``). Everything is checked at start: a
setting that cannot make a listener is one ConfigError line naming the key.

The broker's own connections to the other brokers (replica fetchers, the controller's requests, liveness probes,
controlled shutdown) are secured as Kafka's: ``inter_broker_security`` takes the protocol of the inter-broker listener
(``inter.broker.listener.name``, else the first of ``security.inter.broker.protocol``), a client TLS context from
that listener's ``ssl.*`` settings, and ``sasl.mechanism.inter.broker.protocol`` with the ``username`` and
``password`` of the listener's JAAS config for that mechanism.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from mq.client.security import PLAINTEXT, ClientSecurity
from mq.config import SASL_MECHANISMS, BrokerConfig, Listener
from mq.errors import ConfigError
from mq.security.jaas import JaasConfigError, LoginModule, login_module
from mq.security.principal import PrincipalMapper, PrincipalMappingError
from mq.security.tls import JAVA_KEYS, TlsConfigError, TlsSettings, client_context, server_context, tls_settings
from mq.server.network import ListenerSecurity
from mq.server.sasl_authenticator import MechanismFactory


def listener_tls_settings(config: BrokerConfig, listener: str) -> TlsSettings:
    """The ``ssl.*`` settings of ``listener`` (its own values over the broker's), Kafka's Java-style keys only."""
    return tls_settings(
        {key: value for key in JAVA_KEYS if (value := config.listener_value(listener, key)) is not None}
    )


def listener_security(
    config: BrokerConfig,
    listener: Listener,
    mechanisms: Callable[[str, str, LoginModule | None], MechanismFactory],
) -> ListenerSecurity:
    """``listener``'s security; ``mechanisms(listener, mechanism, its JAAS login module)`` makes the server factory of
    one SASL mechanism (ConfigError when it cannot)."""
    name, protocol = listener.name, listener.protocol
    tls = None
    tls_files: tuple[tuple[str, int], ...] = ()
    certificate_principal = None
    if protocol in ("SSL", "SASL_SSL"):
        settings = listener_tls_settings(config, name)
        files = [f for f in (settings.keystore_location, settings.truststore_location) if f]
        tls_files = tuple((f, os.stat(f).st_mtime_ns) for f in files if os.path.exists(f))
        try:
            tls = server_context(settings)
        except TlsConfigError as exc:
            raise ConfigError(f"listener {name}: {exc}") from None
        if protocol == "SSL":
            rules = config.listener_value(name, "ssl.principal.mapping.rules") or "DEFAULT"
            try:
                certificate_principal = PrincipalMapper(rules).principal_of_certificate
            except PrincipalMappingError as exc:
                raise ConfigError(f"listener {name}: {exc}") from None
    sasl = None
    if protocol.startswith("SASL_"):
        sasl = {
            mechanism: mechanisms(name, mechanism, jaas_login(config, name, mechanism))
            for mechanism in enabled_mechanisms(config, name)
        }
    lifetime = int(config.listener_value(name, "connections.max.reauth.ms") or 0)
    return ListenerSecurity(name, protocol, tls, sasl, lifetime, certificate_principal, tls_files=tls_files)


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to the other brokers: the inter-broker listener's protocol; for SSL and SASL_SSL a
    client context from that listener's ``ssl.*`` settings (its truststore verifies the other brokers, its keystore is
    presented when they ask for a certificate, ``ssl.endpoint.identification.algorithm`` checks their host names);
    for SASL ``sasl.mechanism.inter.broker.protocol`` with the ``username`` and ``password`` options of
    ``listener.name.<listener>.<mechanism>.sasl.jaas.config``. A standalone broker has no other brokers: PLAINTEXT,
    unchecked. Raises one ConfigError line naming the key that cannot make it."""
    if config.standalone:
        return PLAINTEXT
    listener = config.inter_broker_listener()
    name, protocol = listener.name, listener.protocol
    context, check_hostname = None, True
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = client_context(listener_tls_settings(config, name))
        except TlsConfigError as exc:
            raise ConfigError(f"inter-broker listener {name}: {exc}") from None
        check_hostname = context.check_hostname
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context, check_hostname)
    mechanism = config.sasl_mechanism_inter_broker_protocol.strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism}: mq's brokers authenticate to each other with "
            f"{', '.join(SASL_MECHANISMS)} (not {mechanism}); set sasl.mechanism.inter.broker.protocol"
        )
    if mechanism not in enabled_mechanisms(config, name):
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism} is not among the sasl.enabled.mechanisms of the "
            f"inter-broker listener {name}"
        )
    key = jaas_key(name, mechanism)
    login = jaas_login(config, name, mechanism)
    options = {} if login is None else login.options
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"the inter-broker listener {name} authenticates brokers with {mechanism}: set {key} with the brokers' "
            'username="..." and password="..." options'
        )
    return ClientSecurity(protocol, context, check_hostname, mechanism, options["username"], options["password"])


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    """The SASL mechanisms ``listener`` serves (its ``sasl.enabled.mechanisms``, else the broker's)."""
    enabled = config.listener_value(listener, "sasl.enabled.mechanisms") or ""
    return [m for m in (m.strip().upper() for m in enabled.split(",")) if m]


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def jaas_login(config: BrokerConfig, listener: str, mechanism: str) -> LoginModule | None:
    """The login module of ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, if set."""
    key = jaas_key(listener, mechanism)
    text = config.listener_keys.get(key)
    if text is None:
        return None
    try:
        return login_module(text)
    except JaasConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
