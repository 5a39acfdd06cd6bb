"""Producer ids for InitProducerId, handed out in blocks of 1000 claimed in ``/latest_producer_id_block``.

The znode holds the last claimed block (``{"version":1,"broker":B,"block_start":"S","block_end":"E"}``, bounds as
strings); a broker claims the next block with a version-conditional write, so ids are unique across brokers and
restarts.
"""

from __future__ import annotations

import json

from mq.zk import paths
from mq.zk.codecs import dumps
from mq.zk.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self._store = store
        self._broker_id = broker_id
        self._next = 0
        self._end = -1

    def next_id(self) -> int:
        if self._next > self._end:
            self._next, self._end = self._claim_block()
        producer_id = self._next
        self._next += 1
        return producer_id

    def _claim_block(self) -> tuple[int, int]:
        while True:
            try:
                data, stat = self._store.get(paths.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, version = b"", -2
            else:
                version = stat.version
            start = int(json.loads(data)["block_end"]) + 1 if data else 0
            end = start + BLOCK_SIZE - 1
            block = dumps({"version": 1, "broker": self._broker_id, "block_start": str(start), "block_end": str(end)})
            try:
                if version == -2:
                    self._store.create(paths.LATEST_PRODUCER_ID_BLOCK, block)
                else:
                    self._store.set(paths.LATEST_PRODUCER_ID_BLOCK, block, version)
            except (BadVersionError, NodeExistsError):
                continue
            return start, end
