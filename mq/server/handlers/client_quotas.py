"""DescribeClientQuotas (48) and AlterClientQuotas (49) over the quota tree (``/config/users``, ``/config/clients``).

Entities on the wire are lists of (entity_type, entity_name) with entity types ``user`` and ``client-id``; a null
name is the default entity. Describe filters: each component matches one entity type exactly (match type 0, by
name), its default (1) or any name (2); an entity type without a component matches anything, or, when ``strict``,
only entities without that type. Alter validates the whole request before writing anything: an unknown key, a
quota that is not a positive number (byte rates must also be whole numbers) or a malformed entity fails the entry
with INVALID_REQUEST and a message, and the other entries of that request are then not applied either (each says
so); ``validate_only`` writes nothing. The tree is read and written off the loop; each changed entity notifies every
broker through ``/config/changes``, as Kafka's ZooKeeper mode does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    USER,
    Entity,
    desanitize,
    read_all_quota_configs,
    read_quota_config,
    sanitize,
    write_quota_config,
)
from mq.zk.kafka_zk_client import KafkaZkClient

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2

WHOLE_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})
"""Quota keys that are LONG in Kafka (request_percentage is a DOUBLE)."""


class _Invalid(KafkaError):
    code = ErrorCode.INVALID_REQUEST


def _component(name: str | None) -> str:
    """The tree's component for a wire entity name (null: the default)."""
    return DEFAULT if name is None else sanitize(name)


def _wire_name(component: str) -> str | None:
    return None if component == DEFAULT else desanitize(component)


def _wire_entity(entity: Entity) -> list[dict[str, Any]]:
    user, client = entity
    out = []
    if user is not None:
        out.append({"entity_type": USER, "entity_name": _wire_name(user)})
    if client is not None:
        out.append({"entity_type": CLIENT_ID, "entity_name": _wire_name(client)})
    return out


Filter = tuple[int, str | None] | None
"""(match type, tree component for an exact match) of one entity type, or None when the request has no component."""


def parse_filter(components: Sequence[Any]) -> tuple[Filter, Filter]:
    """The user and client-id filters of DescribeClientQuotas components."""
    found: dict[str, tuple[int, str | None]] = {}
    for c in components:
        entity_type = c.entity_type
        if entity_type == "":
            raise _Invalid("Unexpected empty filter component entity type")
        if entity_type not in (USER, CLIENT_ID):
            raise KafkaError(f"Custom entity type '{entity_type}' not supported", ErrorCode.UNSUPPORTED_VERSION)
        if entity_type in found:
            raise _Invalid(f"Duplicate {'user' if entity_type == USER else 'client'} filter component entity type")
        match_type = int(c.match_type)
        if match_type == MATCH_EXACT:
            if c.match is None:
                raise _Invalid(f"Filter component of {entity_type} matches exactly but names no entity")
            found[entity_type] = (MATCH_EXACT, sanitize(c.match))
        elif match_type in (MATCH_DEFAULT, MATCH_ANY):
            found[entity_type] = (match_type, None)
        else:
            raise _Invalid(f"Unexpected match type {match_type}")
    return found.get(USER), found.get(CLIENT_ID)


def matches(component: str | None, wanted: Filter, strict: bool) -> bool:
    """Whether an entity's component (None: the entity lacks that type) passes a filter."""
    if wanted is None:
        return component is None or not strict
    match_type, name = wanted
    if component is None:
        return False
    if match_type == MATCH_EXACT:
        return component == name
    if match_type == MATCH_DEFAULT:
        return component == DEFAULT
    return True


def describe_quotas(zk: KafkaZkClient, components: Sequence[Any], strict: bool) -> list[dict[str, Any]]:
    """The response entries of the entities holding quotas that the filter matches."""
    user_filter, client_filter = parse_filter(components)
    entries = []
    for entity, config in sorted(read_all_quota_configs(zk).items(), key=lambda item: str(item[0])):
        if matches(entity[0], user_filter, strict) and matches(entity[1], client_filter, strict):
            values = [{"key": k, "value": float(v)} for k, v in sorted(config.items())]
            entries.append({"entity": _wire_entity(entity), "values": values})
    return entries


def parse_entity(components: Sequence[Any]) -> Entity:
    """The tree entity of an AlterClientQuotas entry."""
    if not components:
        raise _Invalid("Invalid empty client quota entity")
    user: str | None = None
    client: str | None = None
    seen: set[str] = set()
    for c in components:
        entity_type, name = c.entity_type, c.entity_name
        if entity_type not in (USER, CLIENT_ID):
            raise _Invalid(f"Unhandled client quota entity type: {entity_type}")
        if entity_type in seen:
            raise _Invalid(f"Duplicate {entity_type} in client quota entity")
        seen.add(entity_type)
        if name is not None and name == "":
            raise _Invalid(f"Empty {entity_type} not supported")
        if entity_type == USER:
            user = _component(name)
        else:
            client = _component(name)
    return user, client


def altered(current: dict[str, str], ops: Sequence[Any]) -> dict[str, str]:
    """``current`` quota keys after ``ops``; raises INVALID_REQUEST for an unknown key or a value out of range."""
    updated = dict(current)
    for op in ops:
        key = op.key
        if op.remove:
            updated.pop(key, None)
            continue
        if key not in QUOTA_KEYS:
            raise _Invalid(f"Invalid configuration key {key}")
        value = float(op.value)
        if not math.isfinite(value) or value <= 0:
            raise _Invalid(f"Invalid quota {key}={value}: a quota must be a number greater than 0")
        if key in WHOLE_KEYS:
            whole = int(value + 1e-6)
            if abs(whole - value) > 1e-6:
                raise _Invalid(f"Configuration {key} must be a LONG value")
            updated[key] = str(whole)
        else:
            updated[key] = str(value)
    return updated


def alter_quotas(zk: KafkaZkClient, entries: Sequence[Any], validate_only: bool) -> list[dict[str, Any]]:
    """Validate every entry, then (unless ``validate_only`` or an entry failed) write each changed entity."""
    answers: list[dict[str, Any]] = []
    changes: list[tuple[Entity, dict[str, str]]] = []
    failed = False
    for entry in entries:
        wire = [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in entry.entity]
        answer: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None, "entity": wire}
        try:
            entity = parse_entity(entry.entity)
            current = read_quota_config(zk, entity)
            updated = altered(current, entry.ops)
        except KafkaError as exc:
            answer.update(error_code=exc.code, error_message=str(exc))
            failed = True
        else:
            if updated != current:
                changes.append((entity, updated))
        answers.append(answer)
    if failed:
        for answer in answers:
            if answer["error_code"] == ErrorCode.NONE:
                answer.update(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Not altered: another entry of the request is invalid",
                )
        return answers
    if not validate_only:
        for entity, updated in changes:
            write_quota_config(zk, entity, updated)
    return answers


def client_quota_apis(zk: KafkaZkClient) -> list[Api]:
    async def describe(context: RequestContext, request: Any) -> dict[str, Any]:
        try:
            entries = await asyncio.to_thread(describe_quotas, zk, request.components, bool(request.strict))
        except KafkaError as exc:
            return {"throttle_time": 0, "error_code": exc.code, "error_message": str(exc), "entries": None}
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}

    def describe_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": None, "entries": None}

    async def alter(context: RequestContext, request: Any) -> dict[str, Any]:
        answers = await asyncio.to_thread(alter_quotas, zk, request.entries, bool(request.validate_only))
        if not request.validate_only:
            for entry, answer in zip(request.entries, answers, strict=True):
                if answer["error_code"] == ErrorCode.NONE:
                    entity = ",".join(f"{c.entity_type}={c.entity_name or '<default>'}" for c in entry.entity)
                    ops = ",".join(f"{o.key}={'<removed>' if o.remove else o.value}" for o in entry.ops)
                    audit(context, f"altered client quotas of {entity}: {ops}")
        return {"throttle_time": 0, "entries": answers}

    def alter_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        entries = [
            {
                "error_code": code,
                "error_message": None,
                "entity": [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in e.entity],
            }
            for e in request.entries
        ]
        return {"throttle_time": 0, "entries": entries}

    return [
        Api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, describe, describe_error),
        Api(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, alter, alter_error),
    ]
