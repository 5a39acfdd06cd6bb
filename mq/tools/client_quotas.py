"""kafka-configs for client and user quotas (``--entity-type clients|users``) over the admin APIs.

``describe_client_quotas`` prints Kafka's ``Quota configs for client-id 'c1' are producer_byte_rate=1024.0`` lines
(values as Java prints a double; keys in the broker's order, by name, where Kafka's follow a Java HashMap), one per
entity the strict filter matches: the named entity, the default one, or every entity of the type. ``alter_client_quotas`` checks the keys as
kafka-configs does (only quota keys; a key to delete must be set), then answers Kafka's ``Completed updating config
for client c1.`` / ``Completed updating default config for clients in the cluster.``. Failures raise
``ConfigCommandError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal

from mq.client.admin import ClientQuotaEntry
from mq.client.sync import SyncAdmin
from mq.errors import KafkaError
from mq.server.quotas import CLIENT_ID, QUOTA_KEYS, USER
from mq.tools.configs import ConfigCommandError

ENTITY_TYPES = {"clients": CLIENT_ID, "users": USER}
"""kafka-configs entity types -> DescribeClientQuotas / AlterClientQuotas entity types."""

_LABELS = {USER: "user-principal", CLIENT_ID: "client-id"}

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def java_double(value: float) -> str:
    """Java's ``Double.toString``: the shortest digits that read back as ``value``, plain from 10^-3 to below 10^7
    (at least one digit after the point), else ``d.dddE<exponent>``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    magnitude = len(text) + exponent - 1  # value = 0.d... * 10^(magnitude + 1)
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if magnitude >= 0:
            whole, fraction = text[: magnitude + 1].ljust(magnitude + 1, "0"), text[magnitude + 1 :]
        else:
            whole, fraction = "0", "0" * (-magnitude - 1) + text
        return f"{prefix}{whole}.{fraction or '0'}"
    return f"{prefix}{text[0]}.{text[1:] or '0'}E{magnitude}"


def _quota_type(entity_type: str) -> str:
    try:
        return ENTITY_TYPES[entity_type]
    except KeyError:
        raise ConfigCommandError(f"Unexpected entity type {entity_type}") from None


def _component(entity_type: str, entity_name: str | None, entity_default: bool) -> tuple[str, int, str | None]:
    quota_type = _quota_type(entity_type)
    if entity_default:
        return (quota_type, MATCH_DEFAULT, None)
    if entity_name is not None:
        return (quota_type, MATCH_EXACT, entity_name)
    return (quota_type, MATCH_ANY, None)


QuotaParts = Sequence[tuple[str, str | None, bool]]
"""An entity as (entity type, name, default) per type: a user, a client id, or a user with a client id."""


def _described(admin: SyncAdmin, parts: QuotaParts) -> list[ClientQuotaEntry]:
    try:
        return admin.describe_client_quotas([_component(*part) for part in parts], strict=True)
    except KafkaError as exc:
        raise ConfigCommandError(str(exc)) from None


def describe_client_quotas(admin: SyncAdmin, parts: QuotaParts) -> list[str]:
    """Kafka's lines for the quotas of the entity (per type: the name, the default, or, with neither, every entity of
    the type)."""
    lines = []
    for entry in _described(admin, parts):
        named = []
        for quota_type in (USER, CLIENT_ID):
            if quota_type in entry.entity:
                name = entry.entity[quota_type]
                label = _LABELS[quota_type]
                named.append(f"the default {label}" if name is None else f"{label} '{name}'")
        values = ", ".join(f"{k}={java_double(v)}" for k, v in entry.values.items())
        lines.append(f"Quota configs for {', '.join(named)} are {values}")
    return lines


def alter_client_quotas(
    admin: SyncAdmin, parts: QuotaParts, add: Mapping[str, str], delete: Sequence[str]
) -> list[str]:
    """Set ``add`` and remove ``delete`` on the entity (per type its name or the default); Kafka's completion line,
    which names the first type's entity."""
    if any(name is None and not default for _, name, default in parts):
        raise ConfigCommandError(
            "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
        )
    entity_type, entity_name, entity_default = parts[0]
    allowed = "quota configs" if entity_type == "clients" else "quota and SCRAM credential configs"
    unknown_added = [k for k in add if k not in QUOTA_KEYS]
    if unknown_added:
        raise ConfigCommandError(
            f"Only {allowed} can be added for '{entity_type}' using --bootstrap-server. "
            f"Unexpected config names: {','.join(unknown_added)}"
        )
    unknown_deleted = [k for k in delete if k not in QUOTA_KEYS]
    if unknown_deleted:
        raise ConfigCommandError(
            f"Only {allowed} can be deleted for '{entity_type}' using --bootstrap-server. "
            f"Unexpected config names: {','.join(unknown_deleted)}"
        )
    values: dict[str, float] = {}
    for key, text in add.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise ConfigCommandError(f"Cannot parse quota configuration value for {key}: {text}") from None
    found = _described(admin, parts)
    current = found[0].values if found else {}
    missing = [k for k in delete if k not in current]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
    try:
        entity = {_quota_type(kind): None if default else name for kind, name, default in parts}
        admin.alter_client_quotas(entity, values, list(delete))
    except KafkaError as exc:
        raise ConfigCommandError(str(exc)) from None
    if entity_default:
        return [f"Completed updating default config for {entity_type} in the cluster."]
    return [f"Completed updating config for {entity_type[:-1]} {entity_name}."]
