"""Each listener's security from the broker's config: its TLS context, SASL mechanisms and principal mapping.

A listener's own ``listener.name.<listener>.<key>`` wins over the broker key (``ssl.*``, ``sasl.enabled.mechanisms``,
``connections.max.reauth.ms``, ``ssl.principal.mapping.rules``). PLAIN's users come from the listener's
``listener.name.<listener>.plain.sasl.jaas.config`` (``user_<name>="<password>"``), as Kafka's PLAIN server reads
them; SCRAM's credentials come from the metadata store (``/config/users/<name>``). Everything is checked at start: a
setting that cannot make a listener is one ConfigError line naming the key.
"""

from __future__ import annotations

from collections.abc import Callable

from mq.config import BrokerConfig, Listener
from mq.errors import ConfigError
from mq.security.jaas import JaasConfigError, LoginModule, login_module
from mq.security.principal import PrincipalMapper, PrincipalMappingError
from mq.security.tls import JAVA_KEYS, TlsConfigError, TlsSettings, server_context, tls_settings
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
    certificate_principal = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            tls = server_context(listener_tls_settings(config, name))
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
        enabled = config.listener_value(name, "sasl.enabled.mechanisms") or ""
        sasl = {
            mechanism: mechanisms(name, mechanism, jaas_login(config, name, mechanism))
            for mechanism in (m.strip().upper() for m in enabled.split(","))
            if mechanism
        }
    lifetime = int(config.listener_value(name, "connections.max.reauth.ms") or 0)
    return ListenerSecurity(name, protocol, tls, sasl, lifetime, certificate_principal)


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
