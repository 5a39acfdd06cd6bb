"""The broker process's malloc tuned for request frames: large frames come from the heap and the memory of one is
reused by the next instead of going back to the kernel.

glibc serves an allocation from 128 KiB up with its own mmap (a threshold it raises, up to 32 MiB, to the largest
such chunk freed so far) and returns free heap space above 128 KiB at the heap's top to the kernel (twice the mmap
threshold once that moved). A produce request of a megabyte is such an allocation, grown while its bytes arrive:
each one's pages are mapped, zeroed by the kernel and faulted in again, about 500 page faults per MiB produced, and
on a VM each new page is costly (kcat producing 1 KiB records: 1.5-2 s of system CPU per GiB, against 0.6 with the
memory reused, measured on a 2-core VM).

``keep_request_memory`` sets both thresholds for the process: frames up to ``MMAP_THRESHOLD`` (glibc's maximum) come
from the heap, and up to ``TRIM_THRESHOLD`` of free space stays at its top for the next frames. The request memory
pool (``queued.max.request.bytes``) still bounds what frames hold at once; this only decides whether memory they
freed is kept. A C library without ``mallopt`` (not glibc) is left as it is.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameters (malloc.h)."""
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024


def keep_request_memory() -> bool:
    """Tune this process's malloc as the module says; False when the C library has no ``mallopt``."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    done = all(mallopt(parameter, value) == 1 for parameter, value in settings)
    if not done:
        log.warning("malloc refused the request memory thresholds; large requests map new memory each time")
    return done
