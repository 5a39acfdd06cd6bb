"""``mq configs``: Kafka's kafka-configs. Describe and alter the dynamic config of topics and brokers (one broker id
or the cluster default), through the admin APIs (``--bootstrap-server``) or the metadata tree (``--zookeeper``).

Entities and lines follow Kafka 2.8's ConfigCommand. Through the admin APIs a topic is altered with
IncrementalAlterConfigs (SET and DELETE), a broker with AlterConfigs (its dynamic entries, replaced as a whole);
describing prints ``Dynamic configs for topic T are:`` (``All configs`` with ``--all``) and one
``  key=value sensitive=false synonyms={SOURCE:key=value, ...}`` line per entry whose source is the entity's
dynamic one (every entry with ``--all``). Through the metadata tree the znodes are read and written directly:
``Configs for topic 'T' are k=v,k2=v2`` and ``Completed updating config for entity: topic 'T'.``

Broker loggers (``--entity-type broker-loggers --entity-name ID``) describe every logger of that broker with its
level (``Dynamic configs for broker-logger 0 are:``, then ``  kafka.controller=INFO sensitive=false synonyms={}``)
and alter levels with IncrementalAlterConfigs: ``--add-config kafka.controller=DEBUG`` sets one, ``--delete-config``
lets it take its parent's level again.

Client and user quotas are delegated to ``mq.tools.client_quotas`` (``describe_client_quotas`` and
``alter_client_quotas``, called with the ``SyncAdmin``), users' SCRAM credentials (``SCRAM-SHA-256=[password=...]``)
to ``mq.tools.user_scram_credentials``, which also serves users with ``--zookeeper``; clients need
``--bootstrap-server``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mq.client.admin import AsyncAdmin, ConfigEntry
from mq.client.sync import SyncAdmin
from mq.config import parse_properties, sensitive_key
from mq.errors import ConfigError
from mq.protocol.configs import AlterConfigOp, ConfigSource, ResourceType
from mq.security.password_encoder import encode as encode_password
from mq.topic_partition import topic_name_error
from mq.zk.admin_zk_client import DEFAULT_BROKER_ENTITY, AdminZkClient
from mq.zk.kafka_zk_client import KafkaZkClient

BOOTSTRAP_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "broker-loggers")
ZOOKEEPER_ENTITY_TYPES = ("topics", "clients", "users", "brokers")
QUOTA_ENTITY_TYPES = ("clients", "users")
ENCODER_SECRET = "password.encoder.secret"
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
"""The broker keys Kafka lets ``--zookeeper`` change while the broker runs."""
ZOOKEEPER_WARNING = [
    "Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.",
    "Use --bootstrap-server instead to specify a broker to connect to.",
]

_ADD_CONFIG_SPLIT = r"(?=[^\]]*(?:\[|$))"
"""Kafka's split of ``--add-config``: at commas and ``=`` signs outside square brackets."""


class ConfigCommandError(Exception):
    """A failure printed in one line; ``usage`` when the command line itself is wrong (exit 2, else 1)."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class Entity:
    """What the command acts on: ``name`` None with ``default`` False means every entity of the type (describe)."""

    entity_type: str
    name: str | None
    default: bool = False
    client: Entity | None = None
    """With a users entity: the client id it is combined with (``--entity-type users --entity-name u --entity-type
    clients --entity-name c``, or ``--user u --client c``), a quota entity of both."""

    def quota_parts(self) -> list[tuple[str, str | None, bool]]:
        """(entity type, name, default) of this entity and of the client id combined with it."""
        parts = [(self.entity_type, self.name, self.default)]
        if self.client is not None:
            parts.append(("clients", self.client.name, self.client.default))
        return parts

    @property
    def resource_name(self) -> str:
        """The ConfigResource name: the cluster default broker is ``""``."""
        return "" if self.default else self.name or ""

    def zk_name(self) -> str:
        """The ``/config/<type>`` child: ``<default>`` for the default entity."""
        return DEFAULT_BROKER_ENTITY if self.default else self.name or ""


@dataclass
class DescribedEntity:
    """The entries of one entity as printed: ``header`` is Kafka's line before them."""

    entity: Entity
    header: str
    entries: list[ConfigEntry] = field(default_factory=list)


@dataclass
class ConfigsOutcome:
    """What the command did: text ``lines`` in Kafka's format, and for describe the entities behind them."""

    lines: list[str] = field(default_factory=list)
    described: list[DescribedEntity] = field(default_factory=list)


def resolve_entity(
    entity_types: Sequence[str],
    entity_names: Sequence[str | None],
    shorthands: Mapping[str, str | None],
    defaults: Sequence[str],
    zookeeper: bool,
) -> Entity:
    """The entity from ``--entity-type`` (once, or users then clients) with, in command-line order, an
    ``--entity-name`` or ``--entity-default`` each (``entity_names``: None for a default), or from shorthand flags
    (``shorthands``: entity type -> the value of ``--topic``, ``--broker``, ``--client``, ``--user``; ``defaults``:
    the entity types of ``--broker-defaults``, ``--user-defaults``, ``--client-defaults``), with Kafka's checks."""
    given = [(t, v) for t, v in shorthands.items() if v is not None] + [(t, None) for t in defaults]
    if (entity_types or entity_names) and given:
        raise ConfigCommandError(
            "--entity-{type,name,default} should not be used in conjunction with specific entity flags", usage=True
        )
    if given:
        kinds = sorted({t for t, _ in given})
        if len(given) > 1 and (len(given) != 2 or kinds != ["clients", "users"]):
            raise ConfigCommandError("Only one entity flag may be given, or a user and a client id", usage=True)
        named = dict(given)
        entity_types = ["users", "clients"] if len(given) == 2 else [given[0][0]]
        entity_names = [named[t] for t in entity_types]
    if not entity_types:
        raise ConfigCommandError("At least one entity type must be specified", usage=True)
    if len(entity_types) > 2 or (len(entity_types) == 2 and list(entity_types) != ["users", "clients"]):
        raise ConfigCommandError(
            "Only --entity-type users and --entity-type clients, in that order, may be combined", usage=True
        )
    if len(entity_names) > len(entity_types):
        raise ConfigCommandError("More --entity-name/--entity-default than --entity-type", usage=True)
    if len(entity_types) == 2 and len(entity_names) != 2:
        raise ConfigCommandError(
            "A combined entity needs an --entity-name or --entity-default for each type", usage=True
        )
    if len(entity_types) == 2 and zookeeper:
        raise ConfigCommandError("Combined user and client-id entities need --bootstrap-server", usage=True)
    parts = [
        Entity(t, entity_names[i] if i < len(entity_names) else None, i < len(entity_names) and entity_names[i] is None)
        for i, t in enumerate(entity_types)
    ]
    entity = parts[0] if len(parts) == 1 else Entity("users", parts[0].name, parts[0].default, client=parts[1])
    allowed, connect = (
        (ZOOKEEPER_ENTITY_TYPES, "--zookeeper") if zookeeper else (BOOTSTRAP_ENTITY_TYPES, "--bootstrap-server")
    )
    if entity.entity_type not in allowed:
        raise ConfigCommandError(
            f"Invalid entity type {entity.entity_type}, the entity type must be one of {','.join(allowed)} with the "
            f"{connect} argument",
            usage=True,
        )
    if entity.default and entity.entity_type not in ("brokers", *QUOTA_ENTITY_TYPES):
        raise ConfigCommandError(f"--entity-default cannot be used with entity type {entity.entity_type}", usage=True)
    numeric = entity.name is not None and entity.name.isascii() and entity.name.lstrip("-").isdigit()
    if entity.name is not None and entity.entity_type in ("brokers", "broker-loggers") and not numeric:
        raise ConfigCommandError(
            f"The entity name for {entity.entity_type} must be a valid integer broker id, but it is: {entity.name}",
            usage=True,
        )
    if entity.entity_type == "topics" and entity.name is not None:
        error = topic_name_error(entity.name)
        if error is not None:
            raise ConfigCommandError(error, usage=True)
    return entity


def parse_configs_to_add(add_config: str | None, add_config_file: str | None) -> dict[str, str]:
    """``--add-config 'k1=v1,k2=[v1,v2],k3=v3'`` (square brackets group values that hold commas) or the properties of
    ``--add-config-file``."""
    if add_config is not None and add_config_file is not None:
        raise ConfigCommandError("Only one of --add-config or --add-config-file must be specified", usage=True)
    if add_config_file is not None:
        try:
            return parse_properties(Path(add_config_file).read_text(encoding="utf-8"), add_config_file)
        except OSError as exc:
            raise ConfigCommandError(f"cannot read {add_config_file}: {exc.strerror}", usage=True) from None
        except ConfigError as exc:
            raise ConfigCommandError(str(exc), usage=True) from None
    configs: dict[str, str] = {}
    if add_config is None:
        return configs
    for item in re.split("," + _ADD_CONFIG_SPLIT, add_config):
        pair = re.split(r"\s*=\s*" + _ADD_CONFIG_SPLIT, item)
        if len(pair) != 2:
            raise ConfigCommandError(
                'Invalid entity config: all configs to be added must be in the format "key=val".', usage=True
            )
        configs[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return configs


def parse_configs_to_delete(items: Sequence[str]) -> list[str]:
    """``--delete-config k1,k2`` (repeatable): the keys, trimmed."""
    return [key.strip() for item in items for key in item.split(",") if key.strip()]


def _dynamic_source(entity: Entity) -> ConfigSource:
    if entity.entity_type == "topics":
        return ConfigSource.TOPIC_CONFIG
    return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if entity.default else ConfigSource.DYNAMIC_BROKER_CONFIG


def _resource_type(entity: Entity) -> ResourceType:
    if entity.entity_type == "broker-loggers":
        return ResourceType.BROKER_LOGGER
    return ResourceType.TOPIC if entity.entity_type == "topics" else ResourceType.BROKER


def config_line(entry: ConfigEntry) -> str:
    """Kafka's ``  key=value sensitive=false synonyms={SOURCE:key=value, ...}``; a value the broker withholds is
    ``null``."""
    synonyms = ", ".join(f"{_source_name(source)}:{name}={_value(value)}" for name, value, source in entry.synonyms)
    sensitive = "true" if entry.is_sensitive else "false"
    return f"  {entry.name}={_value(entry.value)} sensitive={sensitive} synonyms={{{synonyms}}}"


def _value(value: str | None) -> str:
    return "null" if value is None else value


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).tool_name
    except ValueError:
        return ConfigSource.UNKNOWN.name


def source_name(entry: ConfigEntry) -> str:
    return _source_name(entry.source)


def _entity_config(admin: SyncAdmin, entity: Entity, describe_all: bool) -> list[ConfigEntry]:
    entries = admin.call(AsyncAdmin.describe_configs, _resource_type(entity), entity.resource_name, None, True)
    if entity.entity_type == "broker-loggers":
        return entries  # every logger, root first, as the broker lists them
    wanted = _dynamic_source(entity)
    return sorted((e for e in entries if describe_all or e.source == wanted), key=lambda e: e.name)


def describe(admin: SyncAdmin, entity: Entity, describe_all: bool) -> ConfigsOutcome:
    """Kafka's describe through the admin APIs; without an entity name every topic (internal ones included) or every
    broker and then the cluster default."""
    if entity.entity_type in QUOTA_ENTITY_TYPES:
        from mq.tools.client_quotas import describe_client_quotas

        lines = describe_client_quotas(admin, entity.quota_parts())
        if entity.entity_type == "users" and not entity.default and entity.client is None:
            from mq.tools.user_scram_credentials import describe_user_credentials

            lines += describe_user_credentials(admin, entity.name)
        return ConfigsOutcome(lines=list(lines))
    if entity.name is not None or entity.default:
        entities = [entity]
    elif entity.entity_type == "topics":
        entities = [Entity("topics", name) for name in admin.list_topics(include_internal=True)]
    else:
        cluster = admin.call(AsyncAdmin.describe_cluster)
        entities = [Entity(entity.entity_type, str(b.node_id)) for b in cluster.brokers]
        if entity.entity_type == "brokers":
            entities.append(Entity("brokers", None, default=True))
    outcome = ConfigsOutcome()
    for one in entities:
        if one.default:
            header = f"Default configs for {one.entity_type} in the cluster are:"
        else:
            header = f"{'All' if describe_all else 'Dynamic'} configs for {one.entity_type[:-1]} {one.name} are:"
        described = DescribedEntity(one, header, _entity_config(admin, one, describe_all))
        outcome.described.append(described)
        outcome.lines += [header, *(config_line(e) for e in described.entries)]
    return outcome


def alter(admin: SyncAdmin, entity: Entity, add: Mapping[str, str], delete: Sequence[str]) -> ConfigsOutcome:
    """Kafka's alter through the admin APIs: a key to delete must be set on the entity."""
    if entity.name is None and not entity.default:
        raise ConfigCommandError(_name_required(entity), usage=True)
    if entity.entity_type == "users":
        from mq.tools.user_scram_credentials import alter_user_credentials, has_scram_keys

        if has_scram_keys(add, delete) and entity.client is None:
            return ConfigsOutcome(alter_user_credentials(admin, entity.name, entity.default, add, delete))
    if entity.entity_type in QUOTA_ENTITY_TYPES:
        from mq.tools.client_quotas import alter_client_quotas

        lines = alter_client_quotas(admin, entity.quota_parts(), dict(add), list(delete))
        return ConfigsOutcome(lines=list(lines))
    if entity.entity_type == "broker-loggers":
        return _alter_broker_loggers(admin, entity, add, delete)
    current = {e.name: e.value for e in _entity_config(admin, entity, False)}
    missing = [key for key in delete if key not in current]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
    if entity.entity_type == "topics":
        changes: dict[str, tuple[AlterConfigOp, str | None]] = {k: (AlterConfigOp.SET, v) for k, v in add.items()}
        changes.update({key: (AlterConfigOp.DELETE, None) for key in delete})
        admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.TOPIC, entity.resource_name, changes)
    else:
        updated = {k: v for k, v in {**current, **add}.items() if k not in delete}
        admin.call(AsyncAdmin.alter_configs, ResourceType.BROKER, entity.resource_name, updated)
    if entity.default:
        return ConfigsOutcome([f"Completed updating default config for {entity.entity_type} in the cluster."])
    return ConfigsOutcome([f"Completed updating config for {entity.entity_type[:-1]} {entity.name}."])


def _name_required(entity: Entity) -> str:
    if entity.entity_type in ("brokers", *QUOTA_ENTITY_TYPES):
        return "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
    return f"an entity name must be specified with --alter of {entity.entity_type}"


def _alter_broker_loggers(
    admin: SyncAdmin, entity: Entity, add: Mapping[str, str], delete: Sequence[str]
) -> ConfigsOutcome:
    """Kafka's broker-logger alter: every named logger must exist on the broker; levels are SET, deleted ones
    take their parent's level again (IncrementalAlterConfigs)."""
    loggers = {e.name for e in _entity_config(admin, entity, False)}
    invalid = [name for name in [*delete, *add] if name not in loggers]
    if invalid:
        raise ConfigCommandError(f"Invalid broker logger(s): {','.join(invalid)}")
    changes: dict[str, tuple[AlterConfigOp, str | None]] = {k: (AlterConfigOp.SET, v) for k, v in add.items()}
    changes.update({key: (AlterConfigOp.DELETE, "") for key in delete})
    admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.BROKER_LOGGER, entity.resource_name, changes)
    return ConfigsOutcome([f"Completed updating config for broker-logger {entity.name}."])


def _zk_entity_label(entity: Entity) -> str:
    """Kafka's ZooKeeper-mode entity text: ``topic 'T'``, ``brokers '0'``, ``default brokers``."""
    type_name = "topic" if entity.entity_type == "topics" else entity.entity_type
    return f"default {type_name}" if entity.default else f"{type_name} '{entity.name}'"


def describe_zk(zk: KafkaZkClient, entity: Entity) -> ConfigsOutcome:
    """``Configs for topic 'T' are k=v,...`` from the metadata tree; without a name, every entity that has a
    config znode. Users: every key of their node (quotas and SCRAM credentials as stored)."""
    if entity.entity_type == "users":
        from mq.tools.user_scram_credentials import describe_users_zk

        return ConfigsOutcome(describe_users_zk(zk, entity.name, entity.default))
    _refuse_quotas_zk(entity)
    if entity.name is not None or entity.default:
        configs = {entity.zk_name(): zk.get_entity_config(entity.entity_type, entity.zk_name())}
    else:
        configs = zk.get_all_entity_configs(entity.entity_type)
    outcome = ConfigsOutcome()
    for name, values in configs.items():
        one = (
            Entity(entity.entity_type, None, True)
            if name == DEFAULT_BROKER_ENTITY
            else Entity(entity.entity_type, name)
        )
        rendered = ",".join(f"{k}={v}" for k, v in values.items())
        outcome.lines.append(f"Configs for {_zk_entity_label(one)} are {rendered}")
        outcome.described.append(
            DescribedEntity(
                one,
                outcome.lines[-1],
                [ConfigEntry(k, v, False, int(_dynamic_source(one)), False) for k, v in values.items()],
            )
        )
    return outcome


def alter_zk(admin: AdminZkClient, entity: Entity, add: Mapping[str, str], delete: Sequence[str]) -> ConfigsOutcome:
    """Write ``/config/<type>/<name>`` and a change notification, as Kafka's ZooKeeper-mode tool: broker keys other
    than the throttle rates only while that broker (for the default: every broker) is not running; of users only the
    SCRAM credentials."""
    if entity.name is None and not entity.default:
        raise ConfigCommandError(_name_required(entity), usage=True)
    if entity.entity_type == "users":
        from mq.tools.user_scram_credentials import alter_user_credentials_zk

        return ConfigsOutcome(alter_user_credentials_zk(admin.zk, entity.name, entity.default, add, delete))
    _refuse_quotas_zk(entity)
    zk = admin.zk
    if entity.entity_type == "brokers":
        broker_id = None if entity.default or entity.name is None else int(entity.name)
        others = sorted(k for k in add if k not in THROTTLE_RATES)
        if others:
            running = broker_id in zk.get_all_brokers() if broker_id is not None else bool(zk.get_all_brokers())
            if running:
                where = (
                    f"when broker {broker_id} is running"
                    if broker_id is not None
                    else ("for default cluster if any broker is running")
                )
                raise ConfigCommandError(
                    f"--bootstrap-server option must be specified to update broker configs Set({', '.join(others)}) "
                    f"{where}. Broker configuration updates using ZooKeeper are supported for bootstrapping before "
                    "brokers are started to enable encrypted password configs to be stored in ZooKeeper."
                )
    configs = zk.get_entity_config(entity.entity_type, entity.zk_name())
    missing = [key for key in delete if key not in configs]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
    configs.update(_zk_encoded(entity, add))
    for key in delete:
        configs.pop(key, None)
    if entity.entity_type == "topics":
        admin.change_topic_config(entity.zk_name(), configs)
    else:
        admin.change_broker_config(None if entity.default else int(entity.zk_name()), configs)
    return ConfigsOutcome([f"Completed updating config for entity: {_zk_entity_label(entity)}."])


def _zk_encoded(entity: Entity, add: Mapping[str, str]) -> dict[str, str]:
    """``add`` as stored in ZooKeeper: a broker's secrets encrypted with the ``password.encoder.secret`` given among
    them (as Kafka's tool takes it; it is not stored)."""
    if entity.entity_type != "brokers":
        return dict(add)
    secret = add.get(ENCODER_SECRET)
    values = {k: v for k, v in add.items() if k != ENCODER_SECRET}
    secrets = sorted(k for k in values if sensitive_key(k))
    if secrets and not secret:
        raise ConfigCommandError(
            f"Password encoder secret not configured: add {ENCODER_SECRET}=<the brokers' secret> to --add-config to "
            f"store {', '.join(secrets)}"
        )
    return {k: encode_password(v, secret or "") if k in secrets else v for k, v in values.items()}


def _refuse_quotas_zk(entity: Entity) -> None:
    if entity.entity_type == "clients":
        raise ConfigCommandError(
            f"Entity type {entity.entity_type} needs --bootstrap-server with mq configs", usage=True
        )


def describe_document(outcome: ConfigsOutcome) -> list[dict[str, Any]]:
    """The ``--format json`` document of a describe: one object per entity with its entries and synonyms."""
    return [
        {
            "entity_type": d.entity.entity_type,
            "entity_name": None if d.entity.default else d.entity.name,
            "default": d.entity.default,
            "configs": [
                {
                    "name": e.name,
                    "value": e.value,
                    "source": source_name(e),
                    "read_only": e.read_only,
                    "sensitive": e.is_sensitive,
                    "synonyms": [{"name": n, "value": v, "source": _source_name(s)} for n, v, s in e.synonyms],
                }
                for e in d.entries
            ],
        }
        for d in outcome.described
    ]
