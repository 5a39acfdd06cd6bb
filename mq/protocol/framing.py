"""Kafka's size-prefixed framing, sans-IO.

Every request and response on the wire is ``int32 size`` followed by ``size`` bytes. ``FrameDecoder`` cuts a byte
stream into frames and refuses a frame larger than the limit as soon as its 4-byte prefix arrives, before any of
its body is buffered.
"""

from __future__ import annotations

import struct

from mq.errors import ErrorCode, KafkaError

SIZE_PREFIX = struct.Struct(">i")


class InvalidFrameError(KafkaError):
    """The stream cannot be cut into frames: a negative size or one over the limit. Close the connection."""

    code = ErrorCode.INVALID_REQUEST


class FrameDecoder:
    """Accumulates received bytes and yields complete frame bodies (without their size prefix).

    Invariant: the buffer never holds more than one partial frame plus 4 bytes, and never more than
    ``max_frame_bytes`` of one frame's body.
    """

    __slots__ = ("_buffer", "_needed", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._needed = -1  # body size of the frame being read; -1 while its prefix is incomplete

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add ``data``; return every frame body it completes, in order. Raises InvalidFrameError."""
        self._buffer += data
        frames: list[bytes] = []
        start = 0
        buffer = self._buffer
        while True:
            if self._needed < 0:
                if len(buffer) - start < SIZE_PREFIX.size:
                    break
                size = SIZE_PREFIX.unpack_from(buffer, start)[0]
                if size < 0:
                    raise InvalidFrameError(f"invalid frame size {size}")
                if size > self.max_frame_bytes:
                    raise InvalidFrameError(
                        f"frame of {size} bytes is larger than the maximum of {self.max_frame_bytes} bytes"
                    )
                self._needed = size
                start += SIZE_PREFIX.size
            if len(buffer) - start < self._needed:
                break
            frames.append(bytes(buffer[start : start + self._needed]))
            start += self._needed
            self._needed = -1
        if start:
            del buffer[:start]
        return frames


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size prefix."""
    return SIZE_PREFIX.pack(len(payload)) + bytes(payload)
