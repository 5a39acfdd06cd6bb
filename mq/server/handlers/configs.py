"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, and DescribeConfigs for brokers.

A topic's effective value comes from its override (source TOPIC_CONFIG), else from a broker key set in the
properties file (STATIC_BROKER_CONFIG), else the default (DEFAULT_CONFIG); synonyms list that chain. Topic changes
are written to ``/config/topics/<T>`` with a change notification, which is how every broker learns of them.
Dynamic broker configuration is not offered: altering a broker resource answers INVALID_REQUEST.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from mq.config import INT_MAX, TOPIC_TO_BROKER_KEYS, BrokerConfig, TopicConfig, config_fields
from mq.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, RequestContext
from mq.zk.admin_zk_client import AdminZkClient


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_type(f: dataclasses.Field[Any]) -> ConfigType:
    type_name = str(f.type)
    if f.metadata.get("kind") == "policy":
        return ConfigType.LIST
    if "bool" in type_name:
        return ConfigType.BOOLEAN
    if "float" in type_name:
        return ConfigType.DOUBLE
    if "int" in type_name:
        large = isinstance(f.default, int) and f.default > INT_MAX
        return ConfigType.LONG if large or f.metadata["key"].endswith(".ms") else ConfigType.INT
    return ConfigType.STRING


_TOPIC_FIELDS = {f.metadata["key"]: f for f in config_fields(TopicConfig)}
_BROKER_FIELDS = {f.metadata["key"]: f for f in config_fields(BrokerConfig)}


def describe_topic_configs(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every topic config with value, source and synonyms (most specific first), sorted by name."""
    effective = broker.topic_defaults().with_overrides(overrides).to_properties()
    entries = []
    for key in sorted(_TOPIC_FIELDS):
        synonyms = []
        if key in overrides:
            synonyms.append({"name": key, "value": overrides[key], "source": ConfigSource.TOPIC_CONFIG})
        for broker_key in TOPIC_TO_BROKER_KEYS.get(key, ()):
            if broker_key in broker.explicit_keys:
                value = _render(getattr(broker, _BROKER_FIELDS[broker_key].name))
                synonyms.append({"name": broker_key, "value": value, "source": ConfigSource.STATIC_BROKER_CONFIG})
        default_key = TOPIC_TO_BROKER_KEYS.get(key, (key,))[-1]
        default_field = _BROKER_FIELDS.get(default_key, _TOPIC_FIELDS[key])
        synonyms.append(
            {"name": default_key, "value": _render(default_field.default), "source": ConfigSource.DEFAULT_CONFIG}
        )
        entries.append(
            {
                "name": key,
                "value": effective[key],
                "read_only": False,
                "config_source": synonyms[0]["source"],
                "is_sensitive": False,
                "synonyms": synonyms,
                "config_type": _config_type(_TOPIC_FIELDS[key]),
                "documentation": _TOPIC_FIELDS[key].metadata["doc"],
            }
        )
    return entries


def describe_broker_configs(broker: BrokerConfig) -> list[dict[str, Any]]:
    entries = []
    for key, f in sorted(_BROKER_FIELDS.items()):
        source = ConfigSource.STATIC_BROKER_CONFIG if key in broker.explicit_keys else ConfigSource.DEFAULT_CONFIG
        value = _render(getattr(broker, f.name))
        entries.append(
            {
                "name": key,
                "value": value,
                "read_only": True,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": [{"name": key, "value": value, "source": source}],
                "config_type": _config_type(f),
                "documentation": f.metadata["doc"],
            }
        )
    return entries


def configs_apis(admin: AdminZkClient, broker: BrokerConfig) -> list[Api]:
    zk = admin.zk

    def topic_overrides(topic: str) -> dict[str, str]:
        if zk.get_topic_assignment(topic) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        return zk.get_entity_config("topics", topic)

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
                entries = describe_topic_configs(broker, topic_overrides(resource.resource_name))
            elif resource.resource_type == ResourceType.BROKER:
                if resource.resource_name not in ("", str(broker.broker_id)):
                    raise KafkaError(f"Unexpected broker id {resource.resource_name}", ErrorCode.INVALID_REQUEST)
                entries = describe_broker_configs(broker)
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
        return {"throttle_time": 0, "results": [describe_one(r, synonyms, docs) for r in request.resources]}

    def describe_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        results = [
            {"error_code": code, "resource_type": r.resource_type, "resource_name": r.resource_name, "configs": []}
            for r in request.resources
        ]
        return {"throttle_time": 0, "results": results}

    def alter_one(resource: Any, validate_only: bool, incremental: bool) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            if resource.resource_type != ResourceType.TOPIC:
                raise KafkaError("Only topic configs can be altered on this broker.", ErrorCode.INVALID_REQUEST)
            topic = resource.resource_name
            current = topic_overrides(topic)
            if incremental:
                updated = _apply_incremental(current, resource.configs)
            else:
                updated = {c.name: c.value for c in resource.configs if c.value is not None}
            admin.validate_topic_config(updated)
            if not validate_only:
                admin.change_topic_config(topic, updated)
        except KafkaError as exc:
            return {**answer, "error_code": exc.code, "error_message": str(exc)}
        return answer

    def alter_handler(incremental: bool) -> Any:
        async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
            responses = [alter_one(r, bool(request.validate_only), incremental) for r in request.resources]
            return {"throttle_time": 0, "responses": responses}

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


def _apply_incremental(current: Mapping[str, str], changes: Any) -> dict[str, str]:
    """Kafka's SET / DELETE / APPEND / SUBTRACT on a topic's overrides (list values are comma-separated)."""
    updated = dict(current)
    for change in changes:
        op = AlterOp(change.config_operation)
        if op == AlterOp.SET:
            updated[change.name] = change.value or ""
        elif op == AlterOp.DELETE:
            updated.pop(change.name, None)
        else:
            f = _TOPIC_FIELDS.get(change.name)
            if f is None or _config_type(f) != ConfigType.LIST:
                raise KafkaError(
                    f"Config value append/subtract is not allowed for config key {change.name}",
                    ErrorCode.INVALID_CONFIG,
                )
            items = [v for v in updated.get(change.name, str(f.default)).split(",") if v]
            values = [v for v in (change.value or "").split(",") if v]
            if op == AlterOp.APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [v for v in items if v not in values]
            updated[change.name] = ",".join(items)
    return updated
