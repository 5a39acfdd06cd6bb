"""Malformed request frames for every (api_key, api_version): what the fuzz tests of both tiers send.

A frame starts from a valid body hypothesis draws from kio's schema for that version (random field values: the
semantic garbage a decoder accepts), encoded with its request header; a mutation then truncates it, extends it with
trailing bytes, replaces the body with random bytes, overwrites bytes, or writes a hostile length (a 32-bit or varint
length of 2^31-1) somewhere in the body. Frames carry no size prefix.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from typing import Any

from hypothesis import strategies as st
from kio.static.primitive import Records

from mq.protocol.codec import RequestHeader, encode_request, parse_request_header, request_schema
from tests.vectors import V2_HELLO

st.register_type_strategy(Records, st.one_of(st.just(Records(V2_HELLO)), st.binary(max_size=80).map(Records)))

MUTATIONS = ("valid", "truncate", "extend", "random_body", "overwrite", "hostile_length")
_HOSTILE_LENGTHS = (struct.pack(">i", 2**31 - 1), struct.pack(">h", 2**15 - 1), b"\xff\xff\xff\xff\x07")


def valid_frame(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A request frame (no size prefix) for ``body``, an instance of the request schema of that version."""
    framed = encode_request(RequestHeader(api_key, api_version, correlation_id, "fuzz", 0), body)
    return framed[4:]


@st.composite
def malformed_frames(draw: st.DrawFn, api_key: int, api_version: int, correlation_id: int) -> tuple[str, bytes]:
    """(mutation, frame) for one (api_key, api_version) the broker advertises; random bytes after a header when
    there is no schema to draw a valid body from."""
    schema = request_schema(api_key, api_version)
    if schema is None:
        header = struct.pack(">hhih", api_key, api_version, correlation_id, -1)
        return "random_body", header + draw(st.binary(max_size=256))
    frame = valid_frame(api_key, api_version, correlation_id, draw(st.from_type(schema)))
    body_start = parse_request_header(frame, bool(schema.__flexible__)).size
    mutation = draw(st.sampled_from(MUTATIONS))
    if mutation == "truncate":
        frame = frame[: draw(st.integers(body_start, len(frame) - 1))] if len(frame) > body_start else frame
    elif mutation == "extend":
        frame += draw(st.binary(min_size=1, max_size=64))
    elif mutation == "random_body":
        frame = frame[:body_start] + draw(st.binary(max_size=256))
    elif mutation in ("overwrite", "hostile_length"):
        patch = (
            draw(st.binary(min_size=1, max_size=8))
            if mutation == "overwrite"
            else draw(st.sampled_from(_HOSTILE_LENGTHS))
        )
        at = draw(st.integers(body_start, max(body_start, len(frame) - 1)))
        frame = frame[:at] + patch + frame[at + len(patch) :]
    return mutation, frame


def hostile_count_frame(api_key: int, api_version: int, correlation_id: int) -> bytes | None:
    """A frame whose body opens with an array count far beyond the frame (2^32 - 2 as a compact count, 2^31 - 1 as
    an int32 count) followed by a few bytes; None when the body of that version does not open with an array."""
    schema = request_schema(api_key, api_version)
    if schema is None:
        return None
    fields = [f for f in dataclasses.fields(schema) if "tag" not in f.metadata]
    hint = fields[0].type if fields else None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is not tuple:
        return None
    header = struct.pack(">hhih", api_key, api_version, correlation_id, -1)
    if schema.__flexible__:
        return header + b"\0" + b"\xff\xff\xff\xff\x0f" + b"\x03ab" * 4
    return header + struct.pack(">i", 2**31 - 1) + b"\0\2ab" * 4
