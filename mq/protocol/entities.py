"""Build kio's version-specific entities from plain, version-agnostic dicts.

Handlers describe a response once as nested dicts and lists; ``build(schema, values)`` shapes it into the schema of
the version being answered: keys the version lacks are dropped, fields the dict lacks take the schema's defaults,
lists of dicts become tuples of nested entities, ``int`` milliseconds become timedeltas and ``int`` error codes
become kio's ErrorCode. Field plans are computed once per schema class.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

_ENTITY, _ENTITIES, _TIMEDELTA, _ERROR, _TUPLE, _PLAIN = range(6)


@dataclass(frozen=True)
class _Field:
    name: str
    kind: int
    entity: type[Any] | None
    required: bool
    nullable: bool


_PLANS: dict[type[Any], tuple[_Field, ...]] = {}


def _is_entity(candidate: Any) -> bool:
    return isinstance(candidate, type) and dataclasses.is_dataclass(candidate) and hasattr(candidate, "__type__")


def _classify(hint: Any) -> tuple[int, type[Any] | None]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _classify(options[0]) if len(options) == 1 else (_PLAIN, None)
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        return (_ENTITIES, inner) if _is_entity(inner) else (_TUPLE, None)
    if _is_entity(hint):
        return _ENTITY, hint
    if hint in (i32Timedelta, i64Timedelta):
        return _TIMEDELTA, None
    if hint is KioErrorCode:
        return _ERROR, None
    return _PLAIN, None


def _plan(schema: type[Any]) -> tuple[_Field, ...]:
    plan = _PLANS.get(schema)
    if plan is None:
        hints = typing.get_type_hints(schema)
        fields = []
        for f in dataclasses.fields(schema):
            hint = hints[f.name]
            kind, entity = _classify(hint)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            nullable = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(
                hint
            )
            fields.append(_Field(f.name, kind, entity, required, nullable))
        plan = _PLANS[schema] = tuple(fields)
    return plan


def build(schema: type[Any], values: Mapping[str, Any]) -> Any:
    """An instance of ``schema`` from ``values``; a required field missing from ``values`` raises KeyError."""
    kwargs: dict[str, Any] = {}
    for f in _plan(schema):
        if f.name not in values:
            if f.required:
                kwargs[f.name] = _zero(f)
            continue
        value = values[f.name]
        if value is None and f.nullable:
            kwargs[f.name] = None
        elif f.kind == _ENTITIES:
            assert f.entity is not None
            kwargs[f.name] = tuple(v if _is_entity(type(v)) else build(f.entity, v) for v in value)
        elif f.kind == _ENTITY:
            assert f.entity is not None
            kwargs[f.name] = value if _is_entity(type(value)) else build(f.entity, value)
        elif f.kind == _TIMEDELTA:
            kwargs[f.name] = value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
        elif f.kind == _ERROR:
            kwargs[f.name] = value if isinstance(value, KioErrorCode) else KioErrorCode(int(value))
        elif f.kind == _TUPLE:
            kwargs[f.name] = tuple(value)
        else:
            kwargs[f.name] = value.value if isinstance(value, Enum) and not isinstance(value, int) else value
    return schema(**kwargs)


def _zero(f: _Field) -> Any:
    """The value a required field takes when a handler leaves it out: what Kafka's generated code defaults to."""
    if f.nullable:
        return None
    if f.kind in (_ENTITIES, _TUPLE):
        return ()
    if f.kind == _TIMEDELTA:
        return datetime.timedelta(0)
    if f.kind == _ERROR:
        return KioErrorCode.none
    raise KeyError(f"required field {f.name!r} is missing")
