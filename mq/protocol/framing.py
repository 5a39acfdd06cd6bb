"""Kafka's size-prefixed framing, sans-IO.

Every request and response on the wire is ``int32 size`` followed by ``size`` bytes. ``FrameDecoder`` cuts a byte
stream into frames; ``FrameReceiver`` does the same for a reader that receives into buffers it is handed
(``recv_into``), so a large frame is copied once, by the kernel, into the buffer that becomes the frame. Both refuse
a frame larger than the limit as soon as its 4-byte prefix arrives, before any of its body is buffered.
"""

from __future__ import annotations

import struct

from mq.errors import ErrorCode, KafkaError

SIZE_PREFIX = struct.Struct(">i")


class InvalidFrameError(KafkaError):
    """The stream cannot be cut into frames: a negative size or one over the limit. Close the connection."""

    code = ErrorCode.INVALID_REQUEST


def _checked_size(size: int, max_frame_bytes: int) -> int:
    if size < 0:
        raise InvalidFrameError(f"invalid frame size {size}")
    if size > max_frame_bytes:
        raise InvalidFrameError(f"frame of {size} bytes is larger than the maximum of {max_frame_bytes} bytes")
    return size


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
                self._needed = _checked_size(SIZE_PREFIX.unpack_from(buffer, start)[0], self.max_frame_bytes)
                start += SIZE_PREFIX.size
            if len(buffer) - start < self._needed:
                break
            with memoryview(buffer) as view:  # released before the buffer is resized below
                frames.append(bytes(view[start : start + self._needed]))
            start += self._needed
            self._needed = -1
        if start:
            del buffer[:start]
        return frames


class FrameReceiver:
    """Cuts frames out of bytes received into the buffers ``get_buffer`` hands out (asyncio's BufferedProtocol).

    Frames that fit the receive buffer are cut from it with one copy each. A frame that does not fit gets its own
    ``bytearray`` of exactly its size, and the rest of its body is received straight into it: that array is the
    frame, so a large produce request's record set is never copied by Python.

    Invariant: ``buffer[start:end]`` holds received bytes not yet returned, less than one frame plus 4 bytes, and
    nothing is there while a large frame is being filled.
    """

    __slots__ = ("_buffer", "_end", "_filled", "_large", "_start", "_view", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int, buffer_bytes: int = 65536) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray(buffer_bytes)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._large: memoryview | None = None  # the frame being received into its own array
        self._filled = 0

    @property
    def buffered_bytes(self) -> int:
        return self._filled if self._large is not None else self._end - self._start

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go; never empty."""
        if self._large is not None:
            return self._large[self._filled :]
        if self._end == len(self._buffer):  # full: move the partial frame to the front
            pending = self._end - self._start
            self._buffer[:pending] = self._buffer[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def received(self, count: int) -> list[bytearray]:
        """``count`` bytes were written to the last buffer handed out; return every frame they complete, in
        order. Raises InvalidFrameError."""
        if self._large is not None:
            self._filled += count
            if self._filled < len(self._large):
                return []
            done = self._large.obj
            self._large.release()
            self._large = None
            assert isinstance(done, bytearray)
            return [done]
        self._end += count
        frames: list[bytearray] = []
        view, start, end = self._view, self._start, self._end
        while end - start >= SIZE_PREFIX.size:
            size = _checked_size(SIZE_PREFIX.unpack_from(view, start)[0], self.max_frame_bytes)
            body = start + SIZE_PREFIX.size
            if end - body >= size:
                frames.append(bytearray(view[body : body + size]))
                start = body + size
                continue
            if size + SIZE_PREFIX.size > len(self._buffer):
                large = memoryview(bytearray(size))
                self._filled = end - body
                large[: self._filled] = view[body:end]
                self._large = large
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size prefix."""
    return SIZE_PREFIX.pack(len(payload)) + bytes(payload)
