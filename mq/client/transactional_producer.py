"""Transactional producer: Kafka's transaction protocol over the idempotent ``AsyncProducer``.

``start`` finds the coordinator of ``transactional_id`` (FindCoordinator, key type 1) and asks it for the producer
id (InitProducerId with the id): the coordinator bumps the id's epoch, which fences every older producer of the id
and completes or aborts the transaction such a producer left open. Then, per transaction:

- ``begin_transaction``; ``send``/``send_many`` as usual. A partition's batches are held in its queue until
  AddPartitionsToTxn added the partition to the transaction (the partitions waiting are added in one request);
- ``send_offsets_to_transaction`` adds the group (AddOffsetsToTxn) and commits the offsets to the group's
  coordinator (TxnOffsetCommit): they count only if the transaction commits;
- ``commit_transaction`` flushes, then EndTxn(commit). A record that failed makes it raise
  ``AbortableTransactionError`` instead: the caller aborts and rewinds its input;
- ``abort_transaction`` drops the batches not sent yet, waits for those in flight (no more retries), then
  EndTxn(abort). When a batch was dropped or failed after its sequence numbers were fixed, the epoch is bumped
  (InitProducerId with the current id and epoch, KIP-360) so that sequences restart at 0.

Coordinator calls retry a moved, loading or busy coordinator (CONCURRENT_TRANSACTIONS, after ``CONCURRENT_RETRY_MS``)
until ``max_block_ms``.
Fatal errors (``FATAL``: fenced by a newer producer of the id, not authorized) raise ``TransactionFatalError``; the
producer can then only be closed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from mq.client.admin import COORDINATOR_MOVED, GROUP_KEY, TRANSACTION_KEY, AsyncAdmin
from mq.client.cluster import MAX_BACKOFF_MS, kafka_error
from mq.client.producer import AsyncProducer, _Batch
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.topic_partition import TopicPartition

FATAL = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
"""Errors after which a transactional producer cannot go on (Kafka's fatal transaction errors)."""

CLIENT_VERSION = 3
"""The version of AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit a client sends (v4+ of
AddPartitionsToTxn batches several transactional ids and is the brokers' own)."""


CONCURRENT_RETRY_MS = 20
"""Retry pause after CONCURRENT_TRANSACTIONS: the previous transaction's markers are being written, which takes
milliseconds (Kafka's producer also retries this faster than its retry.backoff.ms)."""


class TransactionFatalError(KafkaError):
    """The producer was fenced or is not authorized: close it (a new producer of the id may start)."""


class AbortableTransactionError(KafkaError):
    """A record or offset of the transaction failed: abort it and send its input again."""


class TransactionalProducer(AsyncProducer):
    """An ``AsyncProducer`` whose records are written in transactions of ``transactional_id`` (acks=all,
    idempotent)."""

    def __init__(self, transactional_id: str, *, transaction_timeout_ms: int = 60_000, **settings: Any) -> None:
        settings.update(acks=-1, enable_idempotence=True)
        super().__init__(**settings)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._admin = AsyncAdmin(cluster=self.cluster)
        self._coordinator: int | None = None
        self._in_transaction = False
        self._added: set[TopicPartition] = set()
        self._wanted: set[TopicPartition] = set()
        self._adding: asyncio.Task[None] | None = None
        self._groups_added: set[str] = set()
        """The groups whose offsets the open transaction commits (AddOffsetsToTxn sent)."""
        self._error: KafkaError | None = None
        """The first failure of the open transaction (it can only abort)."""
        self._fatal: KafkaError | None = None
        self._aborting = False
        self._bump = False
        """A batch was dropped or failed after its sequence numbers were fixed: the epoch must be bumped."""

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    # --- the coordinator -----------------------------------------------------------------------------------------

    async def _call(
        self, api_key: int, body: Mapping[str, Any], errors: Callable[[Any], list[int]], *, group: str | None = None
    ) -> Any:
        """Send to the transaction coordinator (or ``group``'s coordinator) until the response's ``errors`` hold no
        moved-coordinator or retriable code, or ``max_block_ms`` passed (then the last error is raised). A fatal
        code raises TransactionFatalError; any other error code is left in the response for the caller."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_block_ms / 1000
        attempt = 0
        node = self._coordinator if group is None else None
        while True:
            try:
                if node is None:
                    key, key_type = (
                        (group, GROUP_KEY) if group is not None else (self.transactional_id, TRANSACTION_KEY)
                    )
                    assert key is not None
                    node = (await self._admin.find_coordinator(key, key_type)).node_id
                    if group is None:
                        self._coordinator = node
                version = None if api_key == ApiKey.INIT_PRODUCER_ID else CLIENT_VERSION
                response = await self.cluster.send(node, api_key, body, version)
                codes = [code for code in errors(response) if code != ErrorCode.NONE]
                fatal = next((code for code in codes if code in FATAL), None)
                if fatal is not None:
                    raise self._fatal_error(kafka_error(fatal, None, f"transactional id {self.transactional_id!r}"))
                retry = next((code for code in codes if code in COORDINATOR_MOVED or ErrorCode(code).retriable), None)
                if retry is None:
                    return response
                error: KafkaError = kafka_error(retry, None, f"transactional id {self.transactional_id!r}")
                if retry in COORDINATOR_MOVED:
                    node = None
            except TransactionFatalError:
                raise
            except KafkaError as exc:
                if not exc.code.retriable:
                    raise
                error, node = exc, None
            if node is None and group is None:
                self._coordinator = None
            attempt += 1
            delay = min(self.retry_backoff_ms * 2 ** min(attempt - 1, 10), MAX_BACKOFF_MS) / 1000
            if error.code == ErrorCode.CONCURRENT_TRANSACTIONS:
                delay = CONCURRENT_RETRY_MS / 1000
            if loop.time() + delay > deadline:
                raise error
            await asyncio.sleep(delay)

    def _fatal_error(self, error: KafkaError) -> TransactionFatalError:
        fatal = TransactionFatalError(str(error), code=error.code)
        self._fatal = fatal
        return fatal

    async def _init_producer_id(self) -> None:
        """InitProducerId for the transactional id; with a producer id already held, the KIP-360 bump of its
        epoch."""
        body = {
            "transactional_id": self.transactional_id,
            "transaction_timeout": self.transaction_timeout_ms,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
        }
        response = await self._call(ApiKey.INIT_PRODUCER_ID, body, lambda r: [r.error_code])
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, None, f"init producer id of {self.transactional_id!r}")
        self.producer_id = int(response.producer_id)
        self.producer_epoch = int(response.producer_epoch)
        self._next_sequence.clear()

    # --- a transaction -------------------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def begin_transaction(self) -> None:
        self._check_usable()
        if self._in_transaction:
            raise KafkaError("a transaction is already open", code=ErrorCode.INVALID_TXN_STATE)
        self._in_transaction = True
        self._error = None

    def _check_send(self) -> None:
        super()._check_send()
        self._check_usable()
        if not self._in_transaction:
            raise KafkaError("send outside a transaction (call begin_transaction)", code=ErrorCode.INVALID_TXN_STATE)

    def _may_send(self, tp: TopicPartition) -> bool:
        if tp in self._added:
            return True
        self._wanted.add(tp)
        if self._adding is None or self._adding.done():
            self._adding = asyncio.create_task(self._add_partitions())
        return False

    async def _add_partitions(self) -> None:
        """Add the partitions waiting for the transaction (AddPartitionsToTxn v3); those refused get their queued
        records failed with the coordinator's error."""
        while self._wanted:
            adding = sorted(self._wanted, key=lambda tp: (tp.topic, tp.partition))
            self._wanted.clear()
            topics: dict[str, list[int]] = defaultdict(list)
            for tp in adding:
                topics[tp.topic].append(tp.partition)
            names = [{"name": name, "partitions": parts} for name, parts in topics.items()]
            body = {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": names,
            }
            try:
                response = await self._call(ApiKey.ADD_PARTITIONS_TO_TXN, body, _partition_errors)
            except KafkaError as exc:
                for tp in adding:
                    self._fail_queued(tp, exc)
                continue
            for topic in response.results_by_topic_v3_and_below:
                for result in topic.results_by_partition:
                    tp = TopicPartition(topic.name, int(result.partition_index))
                    code = ErrorCode(result.partition_error_code)
                    if code == ErrorCode.NONE:
                        self._added.add(tp)
                    else:
                        self._fail_queued(tp, kafka_error(code, None, f"add {tp} to the transaction"))
        self._wakeup.set()

    def _fail_queued(self, tp: TopicPartition, error: KafkaError) -> None:
        """Fail every batch of ``tp`` not sent yet."""
        queue = self._batches[tp]
        while queue:
            self._give_up(queue.popleft(), error)

    def _failed(self, batch: _Batch, error: KafkaError) -> None:
        if self._aborting:
            self._give_up(batch, error)
        else:
            super()._failed(batch, error)

    def _give_up(self, batch: _Batch, error: KafkaError) -> None:
        if batch.data is not None:
            self._bump = True
        if error.code in FATAL and self._fatal is None:
            self._fatal_error(error)
        if self._error is None:
            self._error = error
        super()._give_up(batch, error)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        """Commit ``offsets`` (the next offset to read per partition) for ``group_id`` as part of the transaction."""
        self._check_send()
        if group_id not in self._groups_added:
            body = {**self._txn_producer(), "group_id": group_id}
            response = await self._call(ApiKey.ADD_OFFSETS_TO_TXN, body, lambda r: [r.error_code])
            if response.error_code != ErrorCode.NONE:
                raise self._abortable(kafka_error(response.error_code, None, f"add group {group_id!r}"))
            self._groups_added.add(group_id)
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, offset in offsets.items():
            topics[tp.topic].append({"partition_index": tp.partition, "committed_offset": offset})
        commit: dict[str, Any] = {
            **self._txn_producer(),
            "group_id": group_id,
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": group_instance_id,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        }
        response = await self._call(ApiKey.TXN_OFFSET_COMMIT, commit, _partition_errors, group=group_id)
        for code in _partition_errors(response):
            if code != ErrorCode.NONE:
                raise self._abortable(kafka_error(code, None, f"commit offsets of group {group_id!r}"))

    def _abortable(self, error: KafkaError) -> AbortableTransactionError:
        abortable = AbortableTransactionError(str(error), code=error.code)
        if self._error is None:
            self._error = abortable
        return abortable

    async def commit_transaction(self) -> None:
        """Flush and commit; AbortableTransactionError when anything of the transaction failed."""
        self._check_send()
        await self.flush()
        self._check_usable()
        if self._error is not None:
            raise AbortableTransactionError(f"the transaction must be aborted: {self._error}", code=self._error.code)
        await self._end(commit=True)

    async def abort_transaction(self) -> None:
        """Drop what was not sent, wait for what is in flight, abort (and bump the epoch when sequences were
        spent on records that will not be written)."""
        self._check_usable()
        if not self._in_transaction:
            raise KafkaError("no transaction to abort", code=ErrorCode.INVALID_TXN_STATE)
        self._aborting = True
        try:
            aborted = KafkaError("the transaction was aborted", code=ErrorCode.OPERATION_NOT_ATTEMPTED)
            for tp in list(self._batches):
                self._fail_queued(tp, aborted)
            self._wanted.clear()
            await self.flush()
            self._check_usable()
            await self._end(commit=False)
            if self._bump:
                await self._init_producer_id()
                self._bump = False
        finally:
            self._aborting = False

    async def _end(self, commit: bool) -> None:
        if self._added or self._groups_added:
            body = {**self._txn_producer(), "committed": commit}
            response = await self._call(ApiKey.END_TXN, body, lambda r: [r.error_code])
            if response.error_code != ErrorCode.NONE:
                raise kafka_error(response.error_code, None, f"end the transaction of {self.transactional_id!r}")
        self._in_transaction = False
        self._added.clear()
        self._groups_added.clear()
        self._error = None

    def _txn_producer(self) -> dict[str, Any]:
        """The transactional id, producer id and epoch that AddOffsetsToTxn, TxnOffsetCommit and EndTxn carry."""
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
        }


def _partition_errors(response: Any) -> list[int]:
    """The partition error codes of an AddPartitionsToTxn (v0-3) or TxnOffsetCommit response."""
    topics = getattr(response, "results_by_topic_v3_and_below", None)
    if topics is not None:
        return [int(r.partition_error_code) for t in topics for r in t.results_by_partition]
    return [int(p.error_code) for t in response.topics for p in t.partitions]
