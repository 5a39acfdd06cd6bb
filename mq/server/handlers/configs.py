"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

A topic's effective value comes from its override (source TOPIC_CONFIG, which Kafka's tools call
DYNAMIC_TOPIC_CONFIG), else from its broker keys as this broker sees them: its own dynamic entry
(DYNAMIC_BROKER_CONFIG), the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file
(STATIC_BROKER_CONFIG), the built-in default (DEFAULT_CONFIG); synonyms list that chain, grouped by source as Kafka
does. Topic changes are written to ``/config/topics/<T>`` with a change notification, which is how every broker learns
of them; an empty ``cleanup.policy`` (SUBTRACT of its last value, as Kafka 4.1 allows) keeps every segment.

BROKER resources are named by a broker id, or ``""`` for the cluster-wide default. Only the dynamic keys can be
altered: the replication throttle rates (``DynamicBrokerConfig``) and the broker keys whose update mode is not
read-only; they live in ``/config/brokers/<id>`` and ``/config/brokers/<default>``, so any broker can answer for any
broker id (the broker a resource names also checks the keys against its others, e.g. ``advertised.listeners``
against its ``listeners``). A read-only key is refused with INVALID_REQUEST (``Cannot update these configs dynamically: Set(k)``), an
unknown key or ill-typed value with INVALID_CONFIG, and nothing of a refused resource is written. Describing this
broker lists every key (read-only unless its update mode lets it change); describing another broker lists the
throttle rates and the dynamic keys set for it, and describing ``""`` lists the cluster defaults that are set.

BROKER_LOGGER resources (Kafka's Log4jController) name the broker that answers: describing lists every logger with
its effective level (source DYNAMIC_BROKER_LOGGER_CONFIG, no synonyms); only IncrementalAlterConfigs changes them,
SET to one of Kafka's levels, DELETE to take the parent's level again (not for ``root``). An unknown logger or level
is INVALID_CONFIG, APPEND/SUBTRACT or AlterConfigs INVALID_REQUEST. Levels live in the process: a restart reads the
logging config again, as Kafka's do.

With an authorizer, a TOPIC resource needs DESCRIBE_CONFIGS (describe) or ALTER_CONFIGS (alter) on the topic, else
TOPIC_AUTHORIZATION_FAILED; BROKER and BROKER_LOGGER resources need the same operation on the cluster, else
CLUSTER_AUTHORIZATION_FAILED. Decided on the loop, before the resources are read or written on a worker thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from mq.config import (
    DYNAMIC_BROKER_CONFIG_KEYS,
    INT_MAX,
    TOPIC_TO_BROKER_KEYS,
    BrokerConfig,
    DynamicBrokerConfig,
    TopicConfig,
    config_fields,
    sensitive_key,
)
from mq.config_catalog import KAFKA_TOPIC_DEFAULTS, KAFKA_TOPIC_KEYS
from mq.errors import ErrorCode, InvalidTopicError, KafkaError, UnknownTopicOrPartitionError
from mq.protocol.api_keys import ApiKey
from mq.protocol.configs import AlterConfigOp, ConfigSource, ConfigType, ResourceType
from mq.security.acl import AclOperation
from mq.security.acl import ResourceType as AclResourceType
from mq.security.password_encoder import encode as encode_password
from mq.server import logging_config
from mq.server.acl_cache import AclCache
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, Handler, RequestContext
from mq.server.authorization import DENIED_MESSAGES, allows, allows_cluster
from mq.topic_partition import topic_name_error
from mq.zk.admin_zk_client import DEFAULT_BROKER_ENTITY, AdminZkClient, broker_entity


def _render(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_LONG_KEYS = frozenset({"retention.bytes", "log.retention.bytes", "log.cleaner.dedupe.buffer.size"})
"""Keys Kafka types LONG that neither end in ``.ms`` nor default beyond an INT."""


def _config_type(f: dataclasses.Field[Any]) -> ConfigType:
    type_name = str(f.type)
    if f.metadata.get("kind") in ("policy", "replicas"):
        return ConfigType.LIST
    if "bool" in type_name:
        return ConfigType.BOOLEAN
    if "float" in type_name:
        return ConfigType.DOUBLE
    if "int" in type_name:
        large = isinstance(f.default, int) and f.default > INT_MAX
        long = large or f.metadata["key"].endswith(".ms") or f.metadata["key"] in _LONG_KEYS
        return ConfigType.LONG if long else ConfigType.INT
    return ConfigType.STRING


_TOPIC_FIELDS = {f.metadata["key"]: f for f in config_fields(TopicConfig)}
_BROKER_FIELDS = {f.metadata["key"]: f for f in config_fields(BrokerConfig)}
_THROTTLE_FIELDS = {f.metadata["key"]: f for f in config_fields(DynamicBrokerConfig)}
_DYNAMIC_FIELDS = {**_THROTTLE_FIELDS, **{k: f for k, f in _BROKER_FIELDS.items() if k in DYNAMIC_BROKER_CONFIG_KEYS}}
"""Every key ``/config/brokers/<id>`` and ``/config/brokers/<default>`` may hold."""


def _synonym(name: str, value: str | None, source: ConfigSource) -> dict[str, Any]:
    return {"name": name, "value": value, "source": source}


def _broker_synonyms(
    keys: tuple[str, ...], broker: BrokerConfig, per_broker: Mapping[str, str], default: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Kafka's chain for broker keys ``keys`` (most specific first): every dynamic per-broker value, then every
    dynamic cluster default, every static value, every built-in default."""
    synonyms = []
    for source, values in (
        (ConfigSource.DYNAMIC_BROKER_CONFIG, per_broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, default),
    ):
        synonyms += [_synonym(k, values[k], source) for k in keys if k in values and k in _DYNAMIC_FIELDS]
    for key in keys:
        if key in broker.explicit_keys and key in _BROKER_FIELDS:
            value = _render(getattr(broker, _BROKER_FIELDS[key].name))
            synonyms.append(_synonym(key, value, ConfigSource.STATIC_BROKER_CONFIG))
    for key in keys:
        f = _DYNAMIC_FIELDS.get(key, _BROKER_FIELDS.get(key))
        if f is not None and f.default is not None:
            synonyms.append(_synonym(key, _render(f.default), ConfigSource.DEFAULT_CONFIG))
    return synonyms


def _entry(name: str, value: str | None, read_only: bool, synonyms: list[dict[str, Any]], f: Any) -> dict[str, Any]:
    """A described config; a secret's value (and its synonyms') is null and the entry sensitive, as Kafka's."""
    sensitive = sensitive_key(name)
    if sensitive:
        value = None
        synonyms = [{**synonym, "value": None} for synonym in synonyms]
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": synonyms[0]["source"] if synonyms else ConfigSource.DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": synonyms,
        "config_type": _config_type(f) if f is not None else ConfigType.UNKNOWN,
        "documentation": f.metadata["doc"] if f is not None else None,
    }


def describe_topic_configs(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    per_broker: Mapping[str, str] | None = None,
    default: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every topic config with value, source and synonyms (most specific first), sorted by name: the topic's
    override (TOPIC_CONFIG), then the topic's broker keys as this broker sees them (``per_broker``: its own
    ``/config/brokers/<id>``, ``default``: ``/config/brokers/<default>``, then the properties file, then defaults)."""
    per_broker, default = per_broker or {}, default or {}
    effective = DynamicBrokerConfig.apply(broker, default, per_broker).topic_defaults().with_overrides(overrides)
    properties = effective.to_properties()
    entries = []
    for key in sorted(_TOPIC_FIELDS):
        synonyms = []
        if key in overrides:
            synonyms.append(_synonym(key, overrides[key], ConfigSource.TOPIC_CONFIG))
        broker_keys = TOPIC_TO_BROKER_KEYS.get(key, ())
        synonyms += _broker_synonyms(broker_keys, broker, per_broker, default)
        if not broker_keys:
            synonyms.append(_synonym(key, _render(_TOPIC_FIELDS[key].default), ConfigSource.DEFAULT_CONFIG))
        entries.append(_entry(key, properties[key], False, synonyms, _TOPIC_FIELDS[key]))
    for key in sorted(overrides.keys() & KAFKA_TOPIC_KEYS.keys()):  # set, accepted, not used by mq
        synonyms = [_synonym(key, overrides[key], ConfigSource.TOPIC_CONFIG)]
        entries.append({**_entry(key, overrides[key], False, synonyms, None), **_catalogue_type(key)})
    for key, (broker_key, value) in KAFKA_TOPIC_DEFAULTS.items():
        if key not in overrides:
            synonyms = [_synonym(broker_key, value, ConfigSource.DEFAULT_CONFIG)]
            entries.append({**_entry(key, value, False, synonyms, None), **_catalogue_type(key)})
    return sorted(entries, key=lambda entry: str(entry["name"]))


_CATALOGUE_TYPES = {"boolean": ConfigType.BOOLEAN, "int": ConfigType.INT, "long": ConfigType.LONG}


def _catalogue_type(key: str) -> dict[str, Any]:
    """The described type and documentation of a topic key mq accepts without using it."""
    since = KAFKA_TOPIC_KEYS[key][0]
    return {
        "config_type": _CATALOGUE_TYPES.get(KAFKA_TOPIC_KEYS[key][2] or "", ConfigType.STRING),
        "documentation": f"Kafka {since}+ topic config; accepted and stored, not used by mq",
    }


def describe_dynamic_broker_configs(
    per_broker: Mapping[str, str] | None, default: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The dynamic keys of a broker this broker is not (``per_broker`` = its entry) or, when ``per_broker`` is None,
    the cluster defaults that are set: the throttle rates always (with their default when not stored), the other
    dynamic keys when stored. Sorted by name."""
    entries = []
    for key, f in sorted(_DYNAMIC_FIELDS.items()):
        stored = {k: v for k, v in (per_broker or {}).items() if k == key}
        if key not in default and not stored and (per_broker is None or key not in _THROTTLE_FIELDS):
            continue
        synonyms = _broker_synonyms((key,), BrokerConfig(), stored, default)
        entries.append(_entry(key, synonyms[0]["value"], False, synonyms, f))
    return entries


def describe_broker_configs(
    broker: BrokerConfig, per_broker: Mapping[str, str], default: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Every key of this broker: its value from its own dynamic entry, the cluster default, the properties file or
    the built-in default, in that order; read-only unless the key's update mode lets it change."""
    effective = DynamicBrokerConfig.apply(broker, default, per_broker)
    entries = []
    for key, f in sorted(_BROKER_FIELDS.items()):
        synonyms = _broker_synonyms((key,), broker, per_broker, default)
        value = _render(getattr(effective, f.name))
        entries.append(_entry(key, value, key not in DYNAMIC_BROKER_CONFIG_KEYS, synonyms, f))
    return entries


def configs_apis(admin: AdminZkClient, broker: BrokerConfig, broker_id: int, acl: AclCache | None = None) -> list[Api]:
    """The config APIs of broker ``broker_id`` (its actual id, also when ``broker.id`` was generated), authorized by
    ``acl`` (None: no authorizer)."""
    zk = admin.zk

    def refusal(context: RequestContext, resource: Any, operation: AclOperation) -> ErrorCode | None:
        """Why the client may not do ``operation`` on the configs of ``resource``; None when it may (or the type
        is not one of these: the resource is refused as such)."""
        kind = resource.resource_type
        if kind == ResourceType.TOPIC and not allows(
            acl, context, operation, AclResourceType.TOPIC, resource.resource_name
        ):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and not allows_cluster(acl, context, operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return None

    def topic_overrides(topic: str) -> dict[str, str]:
        error = topic_name_error(topic)
        if error is not None:
            raise InvalidTopicError(error)
        if zk.get_topic_assignment(topic) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        return zk.get_entity_config("topics", topic)

    def describe_broker(name: str) -> list[dict[str, Any]]:
        described = _broker_id(name)
        default = zk.get_entity_config("brokers", DEFAULT_BROKER_ENTITY)
        if described is None:
            return describe_dynamic_broker_configs(None, default)
        per_broker = zk.get_entity_config("brokers", str(described))
        dynamic = describe_dynamic_broker_configs(per_broker, default)
        if described != broker_id:
            return dynamic
        throttles = [entry for entry in dynamic if entry["name"] in _THROTTLE_FIELDS]
        entries = describe_broker_configs(broker, per_broker, default) + throttles
        return sorted(entries, key=lambda entry: str(entry["name"]))

    def describe_one(resource: Any, include_synonyms: bool, include_docs: bool) -> dict[str, Any]:
        result: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        try:
            if resource.resource_type == ResourceType.TOPIC:
                entries = describe_topic_configs(
                    broker, topic_overrides(resource.resource_name), *admin.dynamic_broker_configs(broker_id)
                )
            elif resource.resource_type == ResourceType.BROKER:
                entries = describe_broker(resource.resource_name)
            elif resource.resource_type == ResourceType.BROKER_LOGGER:
                _check_own_broker(resource.resource_name, broker_id)
                entries = describe_broker_loggers()
            else:
                raise KafkaError(f"Unsupported resource type {resource.resource_type}", ErrorCode.INVALID_REQUEST)
        except KafkaError as exc:
            return {**result, "error_code": exc.code, "error_message": str(exc)}
        wanted = resource.configuration_keys
        for entry in entries:
            if wanted is not None and entry["name"] not in wanted:
                continue
            if not include_synonyms:
                entry["synonyms"] = []
            if not include_docs:
                entry["documentation"] = None
            result["configs"].append(entry)
        return result

    async def describe(context: RequestContext, request: Any) -> dict[str, Any]:
        synonyms = bool(getattr(request, "include_synonyms", False))
        docs = bool(getattr(request, "include_documentation", False))
        refused = [refusal(context, r, AclOperation.DESCRIBE_CONFIGS) for r in request.resources]

        def described() -> list[dict[str, Any]]:
            return [
                describe_one(r, synonyms, docs)
                if code is None
                else {**refused_resource(r, code, DENIED_MESSAGES[code]), "configs": []}
                for r, code in zip(request.resources, refused, strict=True)
            ]

        return {"throttle_time": 0, "results": await asyncio.to_thread(described)}

    def refused_resource(resource: Any, code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {
            "error_code": code,
            "error_message": message,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }

    def describe_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        results = [
            {"error_code": code, "resource_type": r.resource_type, "resource_name": r.resource_name, "configs": []}
            for r in request.resources
        ]
        return {"throttle_time": 0, "results": results}

    def alter_one(context: RequestContext, resource: Any, validate_only: bool, incremental: bool) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            name = resource.resource_name
            if resource.resource_type == ResourceType.TOPIC:
                updated = _altered(topic_overrides(name), resource.configs, incremental, _TOPIC_FIELDS)
                admin.validate_topic_config(updated)
                if not validate_only:
                    admin.change_topic_config(name, updated)
            elif resource.resource_type == ResourceType.BROKER:
                target = _broker_id(name)
                current = zk.get_entity_config("brokers", broker_entity(target))
                updated = _altered(current, resource.configs, incremental, _DYNAMIC_FIELDS)
                admin.validate_broker_config(updated, per_broker=target is not None)
                if target == broker_id:  # the keys this broker would apply must suit its other keys (listeners)
                    DynamicBrokerConfig.apply(broker, zk.get_entity_config("brokers", DEFAULT_BROKER_ENTITY), updated)
                updated.update(_encoded_secrets(resource.configs, broker))
                if not validate_only:
                    admin.change_broker_config(target, updated)
            elif resource.resource_type == ResourceType.BROKER_LOGGER:
                if not incremental:
                    raise KafkaError(
                        "AlterConfigs is not supported for BROKER_LOGGER, use IncrementalAlterConfigs",
                        ErrorCode.INVALID_REQUEST,
                    )
                _check_own_broker(name, broker_id)
                _alter_log_levels(resource.configs, validate_only)
            else:
                raise KafkaError(f"Unsupported resource type {resource.resource_type}", ErrorCode.INVALID_REQUEST)
        except KafkaError as exc:
            return {**answer, "error_code": exc.code, "error_message": str(exc)}
        if not validate_only:
            kind = ResourceType(resource.resource_type).name.lower().replace("_", " ")
            changes = ", ".join(_change_text(c, incremental) for c in resource.configs)
            audit(context, f"altered the config of {kind} {resource.resource_name!r}: {changes or 'none'}")
        return answer

    def alter_handler(incremental: bool) -> Handler:
        async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
            validate_only = bool(request.validate_only)
            refused = [
                None
                if r.resource_type == ResourceType.BROKER_LOGGER and not incremental  # refused as invalid first
                else refusal(context, r, AclOperation.ALTER_CONFIGS)
                for r in request.resources
            ]

            def altered() -> list[dict[str, Any]]:
                return [
                    alter_one(context, r, validate_only, incremental)
                    if code is None
                    else refused_resource(r, code, None)
                    for r, code in zip(request.resources, refused, strict=True)
                ]

            return {"throttle_time": 0, "responses": await asyncio.to_thread(altered)}

        return handle

    def alter_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        responses = [
            {"error_code": code, "resource_type": r.resource_type, "resource_name": r.resource_name}
            for r in request.resources
        ]
        return {"throttle_time": 0, "responses": responses}

    return [
        Api(ApiKey.DESCRIBE_CONFIGS, 1, 4, describe, describe_error),
        Api(ApiKey.ALTER_CONFIGS, 0, 2, alter_handler(False), alter_error),
        Api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, alter_handler(True), alter_error),
    ]


def _altered(
    current: Mapping[str, str], changes: Any, incremental: bool, fields: Mapping[str, dataclasses.Field[Any]]
) -> dict[str, str]:
    """The stored overrides after an AlterConfigs (which replaces them all) or an IncrementalAlterConfigs."""
    if incremental:
        return _apply_incremental(current, changes, fields)
    return {c.name: c.value for c in changes if c.value is not None}


def _encoded_secrets(changes: Any, broker: BrokerConfig) -> dict[str, str]:
    """The secrets ``changes`` set, encrypted with ``password.encoder.secret`` as Kafka stores them; KafkaError
    INVALID_CONFIG when a secret is set and the broker has no encoder secret."""
    secrets = {c.name: c.value for c in changes if c.value is not None and sensitive_key(c.name)}
    if secrets and not broker.password_encoder_secret:
        raise KafkaError(
            f"Password encoder secret not configured: cannot store {', '.join(sorted(secrets))} (set "
            "password.encoder.secret on the brokers)",
            ErrorCode.INVALID_CONFIG,
        )
    return {name: encode_password(value, broker.password_encoder_secret or "") for name, value in secrets.items()}


def _change_text(change: Any, incremental: bool) -> str:
    """``key=value`` of one alteration (a secret's value hidden); ``key`` and its operation for an incremental one
    other than SET."""
    op = AlterConfigOp(change.config_operation) if incremental else AlterConfigOp.SET
    if op != AlterConfigOp.SET:
        return f"{op.name} {change.name}"
    return f"{change.name}=(hidden)" if sensitive_key(change.name) else f"{change.name}={change.value}"


def describe_broker_loggers() -> list[dict[str, Any]]:
    """Every logger of this process with its effective level (Kafka's names), as Kafka describes BROKER_LOGGER."""
    return [
        {
            "name": name,
            "value": level,
            "read_only": False,
            "config_source": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": ConfigType.STRING,
            "documentation": None,
        }
        for name, level in logging_config.loggers().items()
    ]


def _check_own_broker(name: str, broker_id: int) -> None:
    """A BROKER_LOGGER resource names the broker that answers."""
    if name == "":
        raise KafkaError("Broker id must not be empty", ErrorCode.INVALID_REQUEST)
    if _broker_id(name) != broker_id:
        raise KafkaError(f"Unexpected broker id, expected {broker_id} but received {name}", ErrorCode.INVALID_REQUEST)


def _alter_log_levels(changes: Any, validate_only: bool) -> None:
    """Kafka's checks of a BROKER_LOGGER alteration (every change first), then SET / DELETE of each level."""
    for change in changes:
        op = AlterConfigOp(change.config_operation)
        if op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            raise KafkaError(
                f"{op.name} operation is not allowed for the BROKER_LOGGER resource", ErrorCode.INVALID_REQUEST
            )
        if not logging_config.logger_exists(change.name):
            raise KafkaError(f"Logger {change.name} does not exist!", ErrorCode.INVALID_CONFIG)
        if op == AlterConfigOp.SET and change.value not in logging_config.KAFKA_LEVELS:
            raise KafkaError(
                f"Cannot set the log level of {change.name} to {change.value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(logging_config.KAFKA_LEVELS)}",
                ErrorCode.INVALID_CONFIG,
            )
        if op == AlterConfigOp.DELETE and change.name == logging_config.ROOT_LOGGER:
            raise KafkaError(
                f"Removing the log level of the {logging_config.ROOT_LOGGER} logger is not allowed",
                ErrorCode.INVALID_REQUEST,
            )
    if validate_only:
        return
    for change in changes:
        if AlterConfigOp(change.config_operation) == AlterConfigOp.SET:
            logging_config.set_level(change.name, change.value)
        else:
            logging_config.unset_level(change.name)


def _broker_id(name: str) -> int | None:
    """The broker id a BROKER resource names; None for ``""``, the cluster-wide default."""
    if name == "":
        return None
    if not (name.isascii() and name.isdigit()):
        raise KafkaError(f"Broker id must be an integer, but it is: {name}", ErrorCode.INVALID_REQUEST)
    return int(name)


def _apply_incremental(
    current: Mapping[str, str], changes: Any, fields: Mapping[str, dataclasses.Field[Any]]
) -> dict[str, str]:
    """Kafka's SET / DELETE / APPEND / SUBTRACT on stored overrides (list values are comma-separated)."""
    updated = dict(current)
    for change in changes:
        op = AlterConfigOp(change.config_operation)
        if op == AlterConfigOp.SET:
            updated[change.name] = change.value or ""
        elif op == AlterConfigOp.DELETE:
            updated.pop(change.name, None)
        else:
            f = fields.get(change.name)
            if f is None or _config_type(f) != ConfigType.LIST:
                raise KafkaError(
                    f"Config value append/subtract is not allowed for config key {change.name}",
                    ErrorCode.INVALID_CONFIG,
                )
            items = [v for v in updated.get(change.name, str(f.default)).split(",") if v]
            values = [v for v in (change.value or "").split(",") if v]
            if op == AlterConfigOp.APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [v for v in items if v not in values]
            updated[change.name] = ",".join(items)
    return updated
