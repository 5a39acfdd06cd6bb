"""Short full garbage collections: the broker's long-lived objects are moved out of the collector's reach.

A full (generation 2) collection walks every tracked object while holding the GIL, so it stops the event loop for
as long as it takes: 80 ms and more once a broker holds a thousand partitions' logs, segments, indexes and metadata.
Those objects live as long as their partitions, so once they are made (after startup, after new partitions were
created) ``freeze`` moves every object the collector tracks into its permanent generation (``gc.freeze``, a list
splice): later full collections walk only what was made since. Objects in a reference cycle that is garbage at that
moment are kept; that is the little a freeze costs, where the alternative is a pause on every request in flight.
"""

from __future__ import annotations

import gc


def freeze() -> None:
    """Take every object the collector tracks now out of later collections."""
    gc.freeze()
