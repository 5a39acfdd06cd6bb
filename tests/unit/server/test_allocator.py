"""Request frames reuse freed memory once the broker's malloc is tuned: growing and freeing megabyte frames, as
the receiver does, faults in new pages each time by default and hardly ever after ``keep_request_memory``."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMES = """
import resource, sys
from mq.server.allocator import keep_request_memory
if sys.argv[1] == "tuned":
    assert keep_request_memory()
def frames(n):
    for _ in range(n):
        frame = bytearray(65536)
        while len(frame) < 1 << 20:
            frame += bytes(len(frame))  # doubled as the bytes of a large frame arrive
        del frame
frames(5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
frames(100)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

PAGES_PER_FRAME = (1 << 20) // 4096


def faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", FRAMES, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_megabyte_frames_reuse_freed_memory_once_tuned() -> None:
    assert faults("default") > 50 * PAGES_PER_FRAME  # each frame maps new pages
    assert faults("tuned") < 5 * PAGES_PER_FRAME
