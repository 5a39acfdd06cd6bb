from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.protocol.framing import FrameDecoder, FrameReceiver, InvalidFrameError, frame


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
