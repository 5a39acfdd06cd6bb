"""The special timestamps of a ListOffsets request (Kafka's ``ListOffsetsRequest``): a partition asked with one of
these gets that offset instead of the first offset whose record time is at or after the timestamp."""

from __future__ import annotations

from typing import Final

LATEST: Final = -1
"""The log end offset (the high watermark for consumers)."""
EARLIEST: Final = -2
"""The log start offset."""
MAX_TIMESTAMP: Final = -3
"""The record with the largest timestamp (KIP-734, v7+): its offset and timestamp."""
