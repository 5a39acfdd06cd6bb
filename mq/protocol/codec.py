"""Request decoding and response encoding, sans-IO, on kio's generated schemas.

Request frame (after the size prefix)::

    int16 api_key, int16 api_version, int32 correlation_id,
    int16-length nullable string client_id            (header v1 and v2 alike)
    tagged fields (uvarint count, then tag/size/bytes) (header v2: flexible request versions only)
    body                                               (the request schema of (api_key, api_version))

Response frame: int32 correlation_id, then an empty tagged-field section for header v1 (flexible responses except
ApiVersions, whose response header is always v0), then the body. Record data in requests stays a ``bytes`` field of
the decoded entity: nothing here looks inside record batches.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from mq.errors import ErrorCode, KafkaError
from mq.protocol.acls import SCHEMAS as ACL_V0_SCHEMAS
from mq.protocol.frame_fields import FIELD_ERRORS, Frame, skip_tagged_fields
from mq.protocol.framing import SIZE_PREFIX
from mq.protocol.inter_broker import SCHEMAS as INTER_BROKER_SCHEMAS
from mq.protocol.legacy_schemas import SCHEMAS as LEGACY_SCHEMAS
from mq.protocol.length_guard import check_lengths
from mq.protocol.list_offsets import SCHEMAS as LIST_OFFSETS_V0_SCHEMAS
from mq.protocol.transactions import SCHEMAS as TRANSACTION_SCHEMAS

_HEADER_FIXED = struct.Struct(">hhih")
_CORRELATION_ID = struct.Struct(">i")


class InvalidRequestError(KafkaError):
    """A request frame that cannot be decoded: the connection that sent it is closed."""

    code = ErrorCode.INVALID_REQUEST


class UnsupportedVersionError(KafkaError):
    """An (api_key, api_version) this broker has no schema for."""

    code = ErrorCode.UNSUPPORTED_VERSION


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int
    """Bytes the header occupies in the frame; the body starts there."""


DECLARED_SCHEMAS = {
    **INTER_BROKER_SCHEMAS,
    **ACL_V0_SCHEMAS,
    **LIST_OFFSETS_V0_SCHEMAS,
    **LEGACY_SCHEMAS,
    **TRANSACTION_SCHEMAS,
}
"""(api_key, version) -> (request, response) schemas mq declares where kio has none (or reads a field unlike Kafka)."""

SAME_LAYOUT = {(35, 0): 1, (9, 0): 1}
"""Versions kio has no schema for whose request and response bytes are those of another version: DescribeLogDirs
v0 is v1 (v1 changed only when throttling is applied), OffsetFetch v0 is v1 (v1 reads offsets kept by the
coordinator, v0 those kept in ZooKeeper)."""


@cache
def request_schema(api_key: int, api_version: int) -> type[Any] | None:
    """kio's request class for (api_key, api_version) (or mq's, for the inter-broker APIs, ACL APIs v0, ListOffsets v0, Produce v0-v2, Fetch v0-v3, OffsetCommit v0-v1 and WriteTxnMarkers v0); None when
    there is none."""
    if (api_key, api_version) in DECLARED_SCHEMAS:
        return DECLARED_SCHEMAS[api_key, api_version][0]
    try:
        return cast(type[Any], load_request_schema(api_key, SAME_LAYOUT.get((api_key, api_version), api_version)))
    except (UnknownAPIKey, UnknownEntity):
        return None


@cache
def response_schema(api_key: int, api_version: int) -> type[Any]:
    if (api_key, api_version) in DECLARED_SCHEMAS:
        return DECLARED_SCHEMAS[api_key, api_version][1]
    return cast(type[Any], load_response_schema(api_key, SAME_LAYOUT.get((api_key, api_version), api_version)))


Reader = Callable[[bytes | memoryview, int], tuple[Any, int]]
Writer = Callable[[io.BytesIO, Any], None]
_READERS: dict[type[Any], Reader] = {}
_WRITERS: dict[type[Any], Writer] = {}


def _reader(schema: type[Any]) -> Reader:
    reader = _READERS.get(schema)
    if reader is None:
        reader = _READERS[schema] = cast(Reader, entity_reader(schema))
    return reader


def _writer(schema: type[Any]) -> Writer:
    writer = _WRITERS.get(schema)
    if writer is None:
        writer = _WRITERS[schema] = cast(Writer, entity_writer(schema))
    return writer


def parse_request_header(frame: Frame, flexible: bool) -> RequestHeader:
    """The header of a request frame; ``flexible`` says whether a tagged-field section follows client_id."""
    if len(frame) < _HEADER_FIXED.size:
        raise InvalidRequestError(f"request header truncated: {len(frame)} bytes")
    api_key, api_version, correlation_id, client_id_length = _HEADER_FIXED.unpack_from(frame, 0)
    position = _HEADER_FIXED.size
    client_id: str | None = None
    if client_id_length >= 0:
        end = position + client_id_length
        if end > len(frame):
            raise InvalidRequestError("request header truncated inside client_id")
        try:
            client_id = bytes(frame[position:end]).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("client_id is not valid UTF-8") from None
        position = end
    elif client_id_length != -1:
        raise InvalidRequestError(f"invalid client_id length {client_id_length}")
    if flexible:
        position = _skip_tagged_fields(frame, position)
    return RequestHeader(api_key, api_version, correlation_id, client_id, position)


def _skip_tagged_fields(frame: Frame, position: int) -> int:
    try:
        return skip_tagged_fields(frame, position, len(frame))
    except FIELD_ERRORS:
        raise InvalidRequestError("request header truncated inside tagged fields") from None


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, readable even when the version is unknown."""
    if len(frame) < 8:
        raise InvalidRequestError(f"request header truncated: {len(frame)} bytes")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Any]:
    """Header and body entity of a request frame.

    Raises UnsupportedVersionError when no schema exists for its (api_key, api_version), and InvalidRequestError
    when the bytes do not decode as that schema, or when a count or length in them exceeds the bytes left (checked
    before kio, which sizes an array from its count, reads it). Bytes after the body are ignored, as Kafka's brokers
    ignore them (librdkafka sends some after its flexible Metadata requests).
    """
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # kio reads only immutable buffers
    api_key, api_version, _ = peek_api(frame)
    schema = request_schema(api_key, api_version)
    if schema is None:
        raise UnsupportedVersionError(f"unsupported api key {api_key} version {api_version}")
    header = parse_request_header(frame, bool(schema.__flexible__))
    try:
        check_lengths(schema, frame, header.size)
        body, _ = _reader(schema)(frame, header.size)
    except Exception as exc:  # kio raises several types for malformed input; all mean the same here
        raise InvalidRequestError(f"malformed {schema.__name__} v{api_version}: {exc}") from None
    return header, body


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A complete framed request (size prefix included); used by mq's client and tests."""
    client_id = None if header.client_id is None else header.client_id.encode("utf-8")
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(
        _HEADER_FIXED.pack(
            header.api_key, header.api_version, header.correlation_id, -1 if client_id is None else len(client_id)
        )
    )
    if client_id is not None:
        out.write(client_id)
    if body.__flexible__:
        out.write(b"\0")
    _writer(type(body))(out, body)
    return _with_size(out)


def encode_response(correlation_id: int, body: Any) -> bytes:
    """A complete framed response: size, header (v0, or v1 with empty tagged fields), body."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_CORRELATION_ID.pack(correlation_id))
    if body.__header_schema__.__flexible__:
        out.write(b"\0")
    _writer(type(body))(out, body)
    return _with_size(out)


def decode_response(frame: bytes | memoryview, schema: type[Any]) -> tuple[int, Any]:
    """(correlation_id, body) of a response frame without its size prefix."""
    if not isinstance(frame, bytes):
        frame = bytes(frame)
    (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
    position = _CORRELATION_ID.size
    if schema.__header_schema__.__flexible__:
        position = _skip_tagged_fields(frame, position)
    body, _ = _reader(schema)(frame, position)
    return correlation_id, body


def _with_size(out: io.BytesIO) -> bytes:
    data = out.getbuffer()
    SIZE_PREFIX.pack_into(data, 0, len(data) - SIZE_PREFIX.size)
    del data
    return out.getvalue()
