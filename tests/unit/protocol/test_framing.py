from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.protocol.framing import MIN_GROWTH, FrameDecoder, FrameReceiver, InvalidFrameError, MemoryPool, frame


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_frames_survive_any_split(bodies: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(body) for body in bodies)
    points = sorted({min(cut, len(stream)) for cut in cuts} | {0, len(stream)})
    decoder = FrameDecoder(max_frame_bytes=1000)
    received: list[bytes] = []
    for start, end in itertools.pairwise(points):
        received.extend(decoder.feed(stream[start:end]))
    assert received == bodies
    assert decoder.buffered_bytes == 0


def test_oversized_frame_is_refused_from_its_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    with pytest.raises(InvalidFrameError, match="frame of 101 bytes is larger than the maximum of 100 bytes"):
        decoder.feed(struct.pack(">i", 101))


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    assert decoder.feed(frame(b"x" * 100)) == [b"x" * 100]


def test_negative_size_is_refused() -> None:
    with pytest.raises(InvalidFrameError, match="invalid frame size -2"):
        FrameDecoder(max_frame_bytes=100).feed(struct.pack(">i", -2))


def test_partial_prefix_waits() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.feed(b"\x00\x03ab") == []
    assert decoder.feed(b"c\x00") == [b"abc"]
    assert decoder.buffered_bytes == 1


def _receive(receiver: FrameReceiver, data: bytes, chunk: int) -> list[bytearray]:
    """Feed ``data`` the way recv_into does: at most ``chunk`` bytes, and never more than the buffer handed out."""
    frames: list[bytearray] = []
    position = 0
    while position < len(data):
        buffer = receiver.get_buffer()
        assert len(buffer) > 0
        count = min(len(buffer), chunk, len(data) - position)
        buffer[:count] = data[position : position + count]
        position += count
        frames.extend(receiver.received(count))
        del buffer  # as asyncio does: a buffer handed out is dropped before the next is asked for
    return frames


@settings(max_examples=300, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=200), max_size=10),
    buffer_bytes=st.integers(min_value=5, max_value=64),
    chunk=st.integers(min_value=1, max_value=300),
)
def test_receiver_frames_survive_any_buffer_and_read_size(bodies: list[bytes], buffer_bytes: int, chunk: int) -> None:
    receiver = FrameReceiver(max_frame_bytes=1000, buffer_bytes=buffer_bytes)
    received = _receive(receiver, b"".join(frame(body) for body in bodies), chunk)
    assert [bytes(f) for f in received] == bodies
    assert receiver.buffered_bytes == 0


def test_receiver_fills_a_large_frame_in_place() -> None:
    receiver = FrameReceiver(max_frame_bytes=10_000, buffer_bytes=64)
    body = bytes(range(256)) * 20
    assert _receive(receiver, frame(body)[:100], 100) == []
    buffer = receiver.get_buffer()
    assert len(buffer) == len(body) - 96  # the rest of the body goes straight into the frame's own array
    buffer[:] = body[96:]
    (done,) = receiver.received(len(buffer))
    assert done == body and isinstance(done, bytearray)


def test_receiver_refuses_oversized_and_negative_sizes() -> None:
    with pytest.raises(InvalidFrameError, match="frame of 101 bytes is larger than the maximum of 100 bytes"):
        _receive(FrameReceiver(max_frame_bytes=100), struct.pack(">i", 101), 4)
    with pytest.raises(InvalidFrameError, match="invalid frame size -2"):
        _receive(FrameReceiver(max_frame_bytes=100), struct.pack(">i", -2), 4)


def test_pool_grants_only_what_it_has_and_wakes_waiters_in_order() -> None:
    pool = MemoryPool(100)
    assert pool.try_reserve(60) and not pool.try_reserve(41)
    pool.take(50)  # bytes already received are charged even past the capacity
    assert pool.available == -10
    woken: list[str] = []
    pool.wait(lambda: woken.append("first") is None and pool.try_reserve(30))
    pool.wait(lambda: woken.append("second") is None and pool.try_reserve(30))
    pool.wait(lambda: woken.append("third") is None)
    pool.release(50)  # 40 available: the first gets 30, the second is refused and keeps its place
    assert woken == ["first", "second"] and pool.available == 10 and pool.waiting == 2
    pool.release(60)
    assert woken == ["first", "second", "second", "third"] and pool.waiting == 0
    pool.wait(lambda: False)
    pool.cancel(pool._waiters[0])
    assert pool.waiting == 0


def test_size_prefix_alone_reserves_little_and_the_frame_grows_as_it_arrives() -> None:
    pool = MemoryPool(1 << 30)
    receiver = FrameReceiver(max_frame_bytes=1 << 30, pool=pool, buffer_bytes=1024)
    size = 100 * 1024 * 1024
    assert _receive(receiver, struct.pack(">i", size) + b"abc", 100) == []
    assert pool.capacity - pool.available == 3 + MIN_GROWTH  # the bytes received and one growth step
    assert len(receiver.get_buffer()) == MIN_GROWTH
    body = bytes(range(256)) * 4096  # 1 MiB
    assert _receive(receiver, body[3:], 300_000) == []
    assert receiver.buffered_bytes == len(body)
    assert len(body) < pool.capacity - pool.available <= 2 * len(body)  # reserved: at most twice what arrived


def test_frame_grows_even_while_an_earlier_buffer_is_held() -> None:
    receiver = FrameReceiver(max_frame_bytes=1 << 22, buffer_bytes=64)
    body = bytes(range(256)) * 4096
    assert _receive(receiver, frame(body)[:64], 64) == []
    held = receiver.get_buffer()
    held[:MIN_GROWTH] = body[60 : 60 + MIN_GROWTH]
    assert receiver.received(MIN_GROWTH) == []
    (done,) = _receive(receiver, body[60 + MIN_GROWTH :], 1 << 20)  # the array grows while ``held`` exports it
    assert done == body
    held.release()


def test_receiver_charges_the_pool_for_frames_too_large_for_its_buffer() -> None:
    pool = MemoryPool(10_000_000)
    receiver = FrameReceiver(max_frame_bytes=10_000_000, pool=pool, buffer_bytes=64)
    large = bytes(range(256)) * 8000
    frames = _receive(receiver, frame(b"small") + frame(large) + frame(b"after"), 70_000)
    assert [bytes(f) for f in frames] == [b"small", large, b"after"]
    assert pool.capacity - pool.available == len(large)
    assert len(b"after") < receiver.min_pooled_frame <= len(large)


def test_frame_waits_for_pool_memory_and_resumes_when_released() -> None:
    pool = MemoryPool(MIN_GROWTH + 100)
    assert pool.try_reserve(MIN_GROWTH)  # held by another connection's request
    receiver = FrameReceiver(max_frame_bytes=1 << 20, pool=pool, buffer_bytes=64)
    body = bytes(range(256)) * 1024
    assert _receive(receiver, frame(body)[:50], 50) == []
    assert receiver.waiting_for_memory and pool.available == 100 - 46  # the 46 bytes received are charged
    pool.wait(receiver.grow)
    pool.release(MIN_GROWTH)
    assert not receiver.waiting_for_memory and pool.waiting == 0
    (done,) = _receive(receiver, body[46:], 100_000)
    assert done == body and pool.available == MIN_GROWTH + 100 - len(body)


def test_discard_returns_a_partial_frame_to_the_pool() -> None:
    pool = MemoryPool(1 << 30)
    receiver = FrameReceiver(max_frame_bytes=1 << 30, pool=pool, buffer_bytes=64)
    _receive(receiver, struct.pack(">i", 50_000_000) + bytes(1000), 1000)
    assert pool.available < pool.capacity
    receiver.discard()
    assert pool.available == pool.capacity and receiver.buffered_bytes == 0


def test_frames_waiting_for_each_others_memory_complete_one_at_a_time() -> None:
    size = 3 * MIN_GROWTH  # the largest frame, kept in reserve
    pool = MemoryPool(size + MIN_GROWTH + 100, reserve=size)
    first, second = (FrameReceiver(max_frame_bytes=size, pool=pool, buffer_bytes=64) for _ in range(2))
    bodies = [bytes([n]) * size for n in (1, 2)]
    assert _receive(first, frame(bodies[0])[:50], 50) == []  # granted a step from the unreserved part
    assert _receive(second, frame(bodies[1])[:50], 50) == []  # no step left: granted the rest of its frame
    assert not first.waiting_for_memory and not second.waiting_for_memory and pool.finishing
    assert _receive(first, bodies[0][46 : 46 + MIN_GROWTH], MIN_GROWTH) == []
    assert first.waiting_for_memory  # neither a step nor the rest: the second frame holds the reserve
    pool.wait(first.grow)
    (done,) = _receive(second, bodies[1][46:], 1 << 20)
    assert done == bodies[1] and not pool.finishing
    pool.release(len(done))  # its request was handled
    assert not first.waiting_for_memory
    (done,) = _receive(first, bodies[0][46 + MIN_GROWTH :], 1 << 20)
    assert done == bodies[0]
    pool.release(len(done))
    assert pool.available == pool.capacity
