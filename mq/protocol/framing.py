"""Kafka's size-prefixed framing, sans-IO.

Every request and response on the wire is ``int32 size`` followed by ``size`` bytes. ``FrameDecoder`` cuts a byte
stream into frames; ``FrameReceiver`` does the same for a reader that receives into buffers it is handed
(``recv_into``), so a large frame is copied once, by the kernel, into the buffer that becomes the frame. Both refuse
a frame larger than the limit as soon as its 4-byte prefix arrives, before any of its body is buffered.
``FrameReceiver`` charges what it holds to a ``MemoryPool`` and grows a large frame only as its bytes arrive.
"""

from __future__ import annotations

import contextlib
import struct
import sys
from collections import deque
from collections.abc import Callable

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


class MemoryPool:
    """The budget of bytes held by request frames that are being received or wait to be handled
    (``queued.max.request.bytes``).

    ``try_reserve`` grants bytes only while that leaves ``reserve`` bytes of the budget untouched; ``try_finish``
    grants a frame the whole rest of its size, from the reserve too, to one frame at a time (until ``finished``): so
    frames that have each received part of their bytes and wait for more memory cannot wait for one another forever,
    one of them always has what it needs to be completed. ``take`` always grants (for bytes already received into a
    connection's fixed receive buffer); ``release`` returns bytes and then offers the budget to the waiters in arrival
    order, each a callable that retries its reservation and says whether it succeeded.

    Invariant: ``available == capacity - (bytes granted and not released)``; it is negative only after ``take``.
    """

    __slots__ = ("_waiters", "available", "capacity", "finishing", "reserve")

    def __init__(self, capacity: int, reserve: int = 0) -> None:
        self.capacity = capacity
        self.reserve = reserve
        self.available = capacity
        self.finishing = False  # a frame holds the rest of its size from ``try_finish``
        self._waiters: deque[Callable[[], bool]] = deque()

    def try_reserve(self, count: int) -> bool:
        if self.available - count < self.reserve:
            return False
        self.available -= count
        return True

    def try_finish(self, count: int) -> bool:
        """Grant the rest of one frame's size, ``count`` bytes, if no other frame holds such a grant."""
        if self.finishing or count > self.available:
            return False
        self.available -= count
        self.finishing = True
        return True

    def finished(self) -> None:
        """The frame granted by ``try_finish`` is whole (or gone); another may be granted."""
        self.finishing = False

    def take(self, count: int) -> None:
        self.available -= count

    def release(self, count: int) -> None:
        self.available += count
        waiters = self._waiters
        while waiters and self.available > 0:
            if not waiters[0]():
                break
            waiters.popleft()

    def wait(self, retry: Callable[[], bool]) -> None:
        """Call ``retry`` when bytes are released, until it returns True."""
        self._waiters.append(retry)

    def cancel(self, retry: Callable[[], bool]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(retry)

    @property
    def waiting(self) -> int:
        return len(self._waiters)


UNBOUNDED = sys.maxsize
"""A MemoryPool capacity that never refuses."""

MIN_GROWTH = 262144
"""The smallest step by which a large frame's array grows."""


class FrameReceiver:
    """Cuts frames out of bytes received into the buffers ``get_buffer`` hands out (asyncio's BufferedProtocol).

    Frames that fit the receive buffer are cut from it with one copy each; the pool does not see them (what they
    can hold is bounded by the receive buffer and by how many its reader lets queue). A frame that does not fit gets
    its own ``bytearray``, and the rest of its body is received straight into it: that array becomes the frame, so a
    large produce request's record set is not copied by Python. The array grows as bytes arrive (doubling, at least
    ``MIN_GROWTH``, never past the declared size), each step reserved from the pool first, so a size prefix alone
    costs almost nothing. When the pool refuses a step, ``waiting_for_memory`` is set: the reader must stop reading
    and call ``grow`` again once memory is released. A frame of ``min_pooled_frame`` bytes or more holds
    ``len(frame)`` bytes of the pool until its owner releases them.

    Invariant: ``buffer[start:end]`` holds received bytes not yet returned, less than one frame plus 4 bytes, and
    nothing is there while a large frame is being filled; a large frame's array never exceeds its declared size
    and all of it is reserved from the pool (with the rest of the frame, once ``try_finish`` granted that).
    """

    __slots__ = (
        "_buffer",
        "_buffer_bytes",
        "_end",
        "_filled",
        "_finishing",
        "_granted",
        "_large",
        "_large_view",
        "_size",
        "_start",
        "_view",
        "max_frame_bytes",
        "min_pooled_frame",
        "pool",
        "waiting_for_memory",
    )

    def __init__(self, max_frame_bytes: int, pool: MemoryPool | None = None, buffer_bytes: int = 65536) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.pool = pool if pool is not None else MemoryPool(UNBOUNDED)
        self._buffer_bytes = buffer_bytes
        self._buffer = bytearray()  # allocated when the first bytes arrive: an idle connection costs no buffer
        self._view = memoryview(self._buffer)
        self.min_pooled_frame = buffer_bytes - SIZE_PREFIX.size + 1  # the smallest frame that does not fit
        self._start = 0
        self._end = 0
        self._large: bytearray | None = None  # the frame being received into its own array
        self._large_view = self._view
        self._size = 0  # the large frame's declared size
        self._granted = 0  # bytes reserved for the large frame's next growth, not yet added to its array
        self._finishing = False  # the pool granted the rest of the large frame at once (``try_finish``)
        self._filled = 0
        self.waiting_for_memory = False

    @property
    def buffered_bytes(self) -> int:
        return self._filled if self._large is not None else self._end - self._start

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go; never empty unless ``waiting_for_memory``."""
        if self._large is not None:
            if self._granted:  # resized here, not in ``received``: the last buffer handed out is still exported then
                self._large_view.release()
                zeros = bytes(self._granted)  # lazily mapped zero pages
                try:
                    self._large += zeros  # a large array is resized in place (mremap), not copied
                except BufferError:  # a buffer handed out earlier is still held: grow a copy instead
                    self._large = self._large + zeros
                self._large_view = memoryview(self._large)
                self._granted = 0
            return self._large_view[self._filled :]
        if self._end == len(self._buffer):  # full: move the partial frame to the front
            if not self._buffer:
                self._buffer = bytearray(self._buffer_bytes)
                self._view = memoryview(self._buffer)
            pending = self._end - self._start
            self._buffer[:pending] = self._buffer[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def grow(self) -> bool:
        """Reserve the next step of the full large frame's array from the pool, or else the whole rest of the frame
        (``try_finish``); the array grows by it in the next ``get_buffer``, and the rest is received without asking
        again. Sets ``waiting_for_memory`` when the pool refuses; returns whether it granted."""
        large = self._large
        assert large is not None and self._granted == 0 and self._filled == len(large) < self._size
        rest = self._size - len(large)
        step = min(rest, max(len(large), MIN_GROWTH))
        if self._finishing:
            self._granted = step  # reserved by ``try_finish`` already
        elif self.pool.try_reserve(step):
            self._granted = step
        elif self.pool.try_finish(rest):
            self._finishing = True
            self._granted = step
        else:
            self.waiting_for_memory = True
            return False
        self.waiting_for_memory = False
        return True

    def received(self, count: int) -> list[bytearray]:
        """``count`` bytes were written to the last buffer handed out; return every frame they complete, in
        order. Raises InvalidFrameError."""
        if self._large is not None:
            self._filled += count
            if self._filled < len(self._large):
                return []
            if self._filled < self._size:
                self.grow()
                return []
            done = self._large
            self._large_view.release()
            self._large = None
            if self._finishing:
                self._finishing = False
                self.pool.finished()
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
            if size >= self.min_pooled_frame:  # it cannot fit the buffer
                self.pool.take(end - body)
                self._large = bytearray(view[body:end])
                self._large_view = memoryview(self._large)
                self._size = size
                self._filled = end - body
                end = start  # the buffer keeps nothing past the frames cut before this one
                self.grow()
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def discard(self) -> None:
        """Drop the frame being received and return its bytes to the pool (its connection is gone)."""
        if self._large is not None:
            if self._finishing:
                self._finishing = False
                self.pool.finished()
                self.pool.release(self._size)
            else:
                self.pool.release(len(self._large) + self._granted)
            self._granted = 0
            self._large_view.release()
            self._large = None
        self._start = self._end = 0
        self.waiting_for_memory = False


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size prefix."""
    return SIZE_PREFIX.pack(len(payload)) + bytes(payload)
