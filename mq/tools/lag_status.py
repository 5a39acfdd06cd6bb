"""Per-partition consumer status over a window of samples, in the spirit of Burrow's evaluation rules.

A sample is what a tool sees at one instant: the group's committed offset (None: nothing committed), the partition's
log start and log end offsets, and whether an active group member owns the partition. Lag is never negative: it is
``log_end - max(committed, log_start)`` clamped at 0, so retention or compaction past the committed offset and a
committed offset beyond a truncated log end both read sensibly.

Rules, first match wins (samples oldest first):

* ``ERR``   no sample has a committed offset, or the newest committed offset is behind the log start offset
            (the consumer would be reset: its position was deleted by retention);
* ``OK``    the newest lag is 0;
* ``STOP``  lag > 0, the committed offset did not move over the window and no active member owns the partition
            (commits have stopped: the consumer is gone);
* ``STALL`` lag > 0, the committed offset did not move over two or more samples while a member owns the partition
            (the consumer is there and commits, but makes no progress);
* ``WARN``  the committed offset moved but the lag never shrank between consecutive samples and grew overall
            (the consumer falls behind);
* ``OK``    otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise


class Status(StrEnum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    ERR = "ERR"


@dataclass(frozen=True, slots=True)
class Sample:
    committed_offset: int | None
    log_start_offset: int
    log_end_offset: int
    owned: bool
    """An active member of the group has the partition assigned."""


def lag(committed_offset: int | None, log_start_offset: int, log_end_offset: int) -> int | None:
    """Messages left to consume; None without a committed offset; never negative."""
    if committed_offset is None:
        return None
    return max(0, log_end_offset - max(committed_offset, log_start_offset))


def evaluate(samples: Sequence[Sample]) -> Status:
    """The status of one partition over ``samples`` (oldest first; at least one)."""
    if not samples:
        raise ValueError("evaluate needs at least one sample")
    committed = [s for s in samples if s.committed_offset is not None]
    if not committed:
        return Status.ERR
    newest = committed[-1]
    assert newest.committed_offset is not None
    if newest.committed_offset < newest.log_start_offset:
        return Status.ERR
    lags = [lag(s.committed_offset, s.log_start_offset, s.log_end_offset) or 0 for s in committed]
    if lags[-1] == 0:
        return Status.OK
    moved = len({s.committed_offset for s in committed}) > 1
    if not moved and not newest.owned:
        return Status.STOP
    if not moved and len(committed) > 1:
        return Status.STALL
    if moved and lags[-1] > lags[0] and all(b >= a for a, b in pairwise(lags)):
        return Status.WARN
    return Status.OK
