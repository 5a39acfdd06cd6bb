"""Checks a request body's array counts against the bytes that remain, before kio decodes it.

kio's native reader reserves room for an array's elements from its count prefix before reading them, so a small
frame announcing 2^31-1 elements (a 32-bit count) or 2^35 (a compact array's unsigned varint) costs gigabytes, or
aborts the process, before the decoder finds the frame too short. Every element takes at least one byte, so a count
larger than the bytes left cannot be honest: ``check_lengths`` walks the body's layout (fields in order, tagged
fields of flexible versions, nested entities) and raises LengthError at the first such count, at any length that
runs past the end, and at a null (a negative length or count) where the schema allows none, which Kafka's brokers
refuse too (kio would decode it as None). Values are left for kio to judge.

Layouts (``flexible`` = compact encodings, unsigned varint N meaning length N-1 and 0 meaning null)::

    string         int16 length | uvarint length+1
    bytes/records  int32 length | uvarint length+1
    array          int32 count  | uvarint count+1, then the elements
    nullable entity   int8 marker (-1 null), then the entity
    flexible entity   its fields, then uvarint tag count, then (uvarint tag, uvarint size, size bytes) per tag
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from mq.protocol.frame_fields import FIELD_ERRORS, I16, I32, length, uvarint

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_STRING, _BYTES = -1, -2
"""Element kinds besides a fixed size in bytes (a positive int) or a nested entity (a ``_Layout``)."""


class LengthError(ValueError):
    """A length or count in a request body runs past the end of its frame."""


@dataclass(frozen=True, slots=True)
class _Step:
    kind: int | _Layout
    array: bool
    nullable: bool
    """The array, string, bytes or entity may be null."""
    nullable_elements: bool
    fixed: int
    """The bytes a run of fixed-size fields takes; 0 for any other step."""


def _step(kind: int | _Layout, array: bool, nullable: bool, nullable_elements: bool) -> _Step:
    fixed = kind if isinstance(kind, int) and kind > 0 and not array else 0
    return _Step(kind, array, nullable, nullable_elements, fixed)


@dataclass(slots=True)
class _Layout:
    flexible: bool
    steps: list[_Step] = dataclasses.field(default_factory=list)
    tagged: dict[int, _Step] = dataclasses.field(default_factory=dict)
    fixed: int = 0
    """The size of every instance when it has one (fixed-size fields only, no tagged-field section), else 0."""
    fixed_fields: int = 0
    """For a flexible entity of fixed-size fields only: their size (the tagged-field section follows), else 0."""


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return options[0], True
    return hint, False


_LAYOUTS: dict[tuple[type[Any], bool], _Layout] = {}


def _layout(schema: type[Any], flexible: bool) -> _Layout:
    layout = _LAYOUTS.get((schema, flexible))
    if layout is None:
        layout = _LAYOUTS[schema, flexible] = _plan(schema, flexible)
    return layout


def _plan(schema: type[Any], flexible: bool) -> _Layout:
    layout = _Layout(flexible)
    for f in dataclasses.fields(schema):
        hint, nullable = _strip_optional(f.type)
        array = typing.get_origin(hint) is tuple
        nullable_elements = False
        if array:
            hint, nullable_elements = _strip_optional(typing.get_args(hint)[0])
        kafka_type = f.metadata.get("kafka_type")
        kind: int | _Layout
        if kafka_type is None:
            kind = _layout(hint, flexible)
        elif kafka_type == "string":
            kind = _STRING
        elif kafka_type in ("bytes", "records"):
            kind = _BYTES
        else:
            kind = _FIXED_SIZES[kafka_type]
        step = _step(kind, array, nullable, nullable_elements)
        if "tag" in f.metadata:
            layout.tagged[int(f.metadata["tag"])] = step
        elif step.fixed and layout.steps and layout.steps[-1].fixed:  # one step skips a run of fixed fields
            layout.steps[-1] = _step(layout.steps[-1].fixed + step.fixed, False, False, False)
        else:
            layout.steps.append(step)
    if len(layout.steps) == 1:
        if flexible:
            layout.fixed_fields = layout.steps[0].fixed
        else:
            layout.fixed = layout.steps[0].fixed
    return layout


def check_lengths(schema: type[Any], frame: bytes, position: int) -> None:
    """Raise LengthError when a length or count in the body of ``schema`` at ``position`` does not fit."""
    try:
        _entity(_layout(schema, bool(schema.__flexible__)), frame, position, len(frame))
    except LengthError:
        raise
    except FIELD_ERRORS:
        raise LengthError(f"{schema.__name__} ends inside a length") from None


def _entity(layout: _Layout, frame: bytes, position: int, end: int) -> int:
    flexible = layout.flexible
    for step in layout.steps:
        fixed = step.fixed
        position = position + fixed if fixed else _field(step, flexible, frame, position, end)
    return _tagged_fields(layout, frame, position, end) if flexible else position


def _tagged_fields(layout: _Layout, frame: bytes, position: int, end: int) -> int:
    if frame[position] == 0:  # no tagged fields, the usual case
        return position + 1
    count, position = uvarint(frame, position)
    for _ in range(count):
        tag, position = uvarint(frame, position)
        size, position = uvarint(frame, position)
        value_end = position + size
        if value_end > end:
            raise LengthError(f"a tagged field of {size} bytes runs past the end")
        known = layout.tagged.get(tag)
        if known is not None:
            _field(known, True, frame, position, value_end)
        position = value_end
    return position


def _field(step: _Step, flexible: bool, frame: bytes, position: int, end: int) -> int:
    if not step.array:
        return _value(step.kind, step.nullable, flexible, frame, position, end)
    count, position = length(frame, position, flexible, I32)
    if count < 0 and not step.nullable:
        raise LengthError("a null array where none is allowed")
    if count > end - position:
        raise LengthError(f"an array of {count} elements in {end - position} bytes")
    kind = step.kind
    element_size = kind if isinstance(kind, int) else 0 if step.nullable_elements else kind.fixed
    if element_size > 0:
        size = max(count, 0) * element_size
        if size > end - position:
            raise LengthError(f"an array of {count} elements of {element_size} bytes in {end - position} bytes")
        return position + size
    if isinstance(kind, _Layout) and kind.fixed_fields and not step.nullable_elements:
        fixed = kind.fixed_fields
        for _ in range(count):
            position += fixed
            position = position + 1 if frame[position] == 0 else _tagged_fields(kind, frame, position, end)
        return position
    if isinstance(kind, _Layout) and not step.nullable_elements:
        for _ in range(count):
            position = _entity(kind, frame, position, end)
        return position
    for _ in range(count):
        position = _value(kind, step.nullable_elements, flexible, frame, position, end)
    return position


def _value(kind: int | _Layout, nullable: bool, flexible: bool, frame: bytes, position: int, end: int) -> int:
    if isinstance(kind, _Layout):
        if nullable:
            if frame[position] == 0xFF:  # int8 -1: null
                return position + 1
            position += 1
        return _entity(kind, frame, position, end)
    if kind > 0:
        return position + kind
    size, position = length(frame, position, flexible, I16 if kind == _STRING else I32)
    if size < 0 and not nullable:
        raise LengthError("a null string or bytes where none is allowed")
    if size > end - position:
        raise LengthError(f"a length of {size} with {end - position} bytes left")
    return position + max(size, 0)
