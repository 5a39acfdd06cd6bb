"""The Produce response (v3-v9), encoded by hand: it answers every produce request, so its cost is per request.

Layout (v9 is flexible: compact lengths and a tagged-field section after each structure)::

    correlation_id int32 [tagged fields: v9]
    responses: [name string,
                partition_responses: [index int32, error_code int16, base_offset int64,
                                      log_append_time_ms int64, log_start_offset int64 (v5+),
                                      record_errors [batch_index int32, batch_index_error_message nullable
                                                     string] (v8+),
                                      error_message nullable string (v8+)]]
    throttle_time_ms int32
"""

from __future__ import annotations

from dataclasses import dataclass

from mq.errors import RecordError
from mq.protocol.response_writer import I16, I32, I64, ResponseWriter

MIN_VERSION = 3
MAX_VERSION = 9


@dataclass(frozen=True, slots=True)
class PartitionResponse:
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[RecordError, ...] = ()
    """The records of the refused batch at fault (sent from v8)."""


def encode_produce_response(
    version: int, correlation_id: int, topics: list[tuple[str, list[PartitionResponse]]], throttle_time_ms: int = 0
) -> bytes:
    """The framed response for ``version`` (3-9); below v8 without record_errors and error_message."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"produce response version {version} is not supported")
    w = ResponseWriter(flexible=version >= 9)
    w.run += I32.pack(correlation_id)
    w.tags()
    w.array_length(len(topics))
    for name, partitions in topics:
        w.string(name)
        w.array_length(len(partitions))
        for p in partitions:
            w.run += I32.pack(p.index) + I16.pack(p.error_code) + I64.pack(p.base_offset)
            w.run += I64.pack(p.log_append_time_ms)
            if version >= 5:
                w.run += I64.pack(p.log_start_offset)
            if version >= 8:
                w.array_length(len(p.record_errors))
                for record_error in p.record_errors:
                    w.run += I32.pack(record_error.batch_index)
                    w.string(record_error.message)
                    w.tags()
                w.string(p.error_message)
            w.tags()
        w.tags()
    w.run += I32.pack(throttle_time_ms)
    w.tags()
    return w.finish_bytes()
