"""The leader epoch cache of one partition log: which leader epoch wrote which offsets.

Entries are ``(epoch, start_offset)``: epoch ``e`` wrote the offsets from its start offset up to the next entry's
start offset (the last entry: up to the log end). Invariant: epochs and start offsets both strictly increase.
Every change is written at once to the partition directory's ``leader-epoch-checkpoint`` (atomic replace), so the
file always equals the cache. A lock makes each operation atomic (appends, retention threads and requests meet here).
"""

from __future__ import annotations

import bisect
import logging
import threading

from mq.storage.checkpoints import LeaderEpochCheckpointFile

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """``(epoch, start_offset)`` entries kept in ``checkpoint``; loaded from it on construction (an empty file is
    created when there is none, as Kafka does)."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile) -> None:
        self.checkpoint = checkpoint
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        checkpoint.path.touch(exist_ok=True)
        for epoch, start in checkpoint.read():
            self._put(epoch, start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        """The newest epoch, or None for an empty cache."""
        with self._lock:
            return self._epochs[-1] if self._epochs else None

    def _flush(self) -> None:
        self.checkpoint.write(list(zip(self._epochs, self._starts, strict=True)))

    def _put(self, epoch: int, start_offset: int) -> bool:
        """Append the entry after removing every entry it contradicts (epoch >= ``epoch`` or start offset >=
        ``start_offset``). False, and nothing changes, when the latest entry already is ``epoch`` starting at or
        before ``start_offset``."""
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._starts[keep - 1] >= start_offset):
            keep -= 1
        if keep < len(self._epochs) - 1 or (keep < len(self._epochs) and self._starts[keep] != start_offset):
            log.warning(
                "New epoch entry (%d, %d) caused truncation of conflicting entries %s in %s",
                epoch,
                start_offset,
                list(zip(self._epochs[keep:], self._starts[keep:], strict=True)),
                self.checkpoint.path,
            )
        del self._epochs[keep:], self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` wrote from ``start_offset`` on. A no-op when the latest entry is that epoch from an
        earlier or equal offset (the common case); a newer assignment wins over entries it contradicts. Negative
        epochs or offsets are ValueError."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        epochs, starts = self._epochs, self._starts
        if epochs and epochs[-1] == epoch and starts[-1] <= start_offset:
            return  # a leader's every append: read without the lock, the entries change only on the appending thread
        with self._lock:
            if self._put(epoch, start_offset):
                self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for ``requested_epoch``: the largest known epoch <= it, and the first offset not
        written by that epoch (the start of the next higher epoch; the log end for the latest epoch). A requested
        epoch below every entry answers ``(requested_epoch, first start offset)``; an undefined (-1) one, one above
        the latest, or an empty cache answer ``(-1, -1)``."""
        with self._lock:
            epochs = self._epochs
            if requested_epoch == UNDEFINED_EPOCH or not epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == epochs[-1]:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, self._starts[0]
            return epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated to it)."""
        with self._lock:
            keep = bisect.bisect_left(self._starts, end_offset)
            if end_offset >= 0 and keep < len(self._starts):
                del self._epochs[keep:], self._starts[keep:]
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget what lies below ``start_offset`` (the log start moved to it): the entries starting at or before it
        go except the last of them, which is kept as starting at ``start_offset``."""
        with self._lock:
            below = bisect.bisect_right(self._starts, start_offset)
            if below == 0 or (below == 1 and self._starts[0] == start_offset):
                return
            epoch = self._epochs[below - 1]
            del self._epochs[:below], self._starts[:below]
            self._epochs.insert(0, epoch)
            self._starts.insert(0, start_offset)
            self._flush()

    def clear(self) -> None:
        """Drop every entry (the log was emptied)."""
        with self._lock:
            if self._epochs:
                self._epochs.clear()
                self._starts.clear()
                self._flush()
