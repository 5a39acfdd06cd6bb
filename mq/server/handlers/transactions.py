"""The transaction APIs: AddPartitionsToTxn (v0-v3, the client's path; v4-v5, brokers' batches of transactions, each
added or, with ``verify_only``, checked: NONE for a partition of the producer's ongoing transaction,
INVALID_TXN_STATE for another), AddOffsetsToTxn, EndTxn, TxnOffsetCommit (v3+: the consumer's member id, instance id
and generation fence offsets of a consumer that left or missed a rebalance, KIP-447),
WriteTxnMarkers (from coordinators to partition leaders), DescribeTransactions and ListTransactions (v2: only the ids
its ``transactional_id_pattern`` matches whole; INVALID_REGULAR_EXPRESSION for one that does not compile).

Transactions are Kafka's transaction.version 1 (the broker finalizes no features): the versions that only add the
TRANSACTION_ABORTABLE error (AddPartitionsToTxn v5, AddOffsetsToTxn, EndTxn and TxnOffsetCommit v4, KIP-890) are
served, and the coordinator never answers that error; EndTxn and TxnOffsetCommit v5 (transaction.version 2: an epoch
bump at every commit, offsets added implicitly) are not advertised.

PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to the versions before it existed (AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn before v2, TxnOffsetCommit before v3), as Kafka answers them.

With an authorizer, as Kafka: the transactional APIs need WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn needs WRITE on each topic (TOPIC_AUTHORIZATION_FAILED
for the refused ones and OPERATION_NOT_ATTEMPTED for the others); AddOffsetsToTxn and TxnOffsetCommit need READ on
the group (GROUP_AUTHORIZATION_FAILED), TxnOffsetCommit READ on each topic too; WriteTxnMarkers needs
CLUSTER_ACTION on the cluster (checked by the dispatcher), and so does AddPartitionsToTxn v4 (CLUSTER_AUTHORIZATION_FAILED);
DescribeTransactions and ListTransactions show only the ids
the client may DESCRIBE.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.consumer_offsets import OffsetCommitValue
from mq.protocol.transaction_log import TransactionState
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names, allows, allows_cluster
from mq.server.group_coordinator import GroupCoordinator
from mq.server.metadata_cache import MetadataCache
from mq.server.purgatory import settled
from mq.server.transaction_coordinator import TransactionCoordinator
from mq.server.transaction_state_manager import TransactionMetadata
from mq.topic_partition import TopicPartition

STATE_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
"""Kafka's names of the states, as DescribeTransactions and ListTransactions answer them."""
NO_START_TIME = datetime.datetime.fromtimestamp(0, datetime.UTC)
"""The start time answered for a transactional id with no transaction started: the epoch, where Kafka writes -1
(which the kio schemas cannot encode or read)."""


def fenced_for(version: int, fenced_from: int, code: ErrorCode) -> ErrorCode:
    """``code``, with PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH before version ``fenced_from``."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def transaction_apis(
    coordinator: TransactionCoordinator,
    groups: GroupCoordinator,
    cache: MetadataCache,
    config: BrokerConfig,
    acl: AclCache | None = None,
) -> list[Api]:
    """The transaction APIs over ``coordinator`` (and ``groups`` for offsets), authorized by ``acl`` (None: no
    authorizer)."""

    def txn_writable(context: RequestContext, transactional_id: str) -> bool:
        return allows(acl, context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)

    # --- AddPartitionsToTxn --------------------------------------------------------------------------------------

    def partition_results(by_topic: dict[str, dict[int, ErrorCode]]) -> list[dict[str, Any]]:
        return [
            {
                "name": topic,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": code} for p, code in partitions.items()
                ],
            }
            for topic, partitions in by_topic.items()
        ]

    async def add_partitions(context: RequestContext, request: Any) -> dict[str, Any]:
        if context.version >= 4:
            return await add_partitions_for_brokers(context, request)
        transactional_id = request.v3_and_below_transactional_id
        wanted = {t.name: list(t.partitions) for t in request.v3_and_below_topics}
        if not txn_writable(context, transactional_id):
            return add_partitions_error(context, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        writable = allowed_names(acl, context, AclOperation.WRITE, ResourceType.TOPIC, wanted)
        errors: dict[str, dict[int, ErrorCode]] = {}
        for topic, partitions in wanted.items():
            info = cache.topics.get(topic)
            for p in partitions:
                if topic not in writable:
                    errors.setdefault(topic, {})[p] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif info is None or p not in info.partitions:
                    errors.setdefault(topic, {})[p] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if errors:
            by_topic = {
                topic: {p: errors.get(topic, {}).get(p, ErrorCode.OPERATION_NOT_ATTEMPTED) for p in partitions}
                for topic, partitions in wanted.items()
            }
            return {"throttle_time": 0, "results_by_topic_v3_and_below": partition_results(by_topic)}
        code = await coordinator.add_partitions(
            transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            [TopicPartition(topic, p) for topic, partitions in wanted.items() for p in partitions],
        )
        return add_partitions_error(context, request, code)

    async def add_partitions_for_brokers(context: RequestContext, request: Any) -> dict[str, Any]:
        """v4: a batch of transactions from a partition leader, each added or, with ``verify_only``, checked."""
        if not allows_cluster(acl, context, AclOperation.CLUSTER_ACTION):
            return add_partitions_error(context, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results = []
        for txn in request.transactions:
            partitions = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
            if txn.verify_only:
                found = coordinator.verify_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions
                )
            else:
                code = await coordinator.add_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions
                )
                found = dict.fromkeys(partitions, code)
            by_topic: dict[str, dict[int, ErrorCode]] = {}
            for tp, code in found.items():
                by_topic.setdefault(tp.topic, {})[tp.partition] = code
            results.append({"transactional_id": txn.transactional_id, "topic_results": partition_results(by_topic)})
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}

    def add_partitions_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        if context.version >= 4:
            return {"throttle_time": 0, "error_code": code, "results_by_transaction": []}
        code = fenced_for(context.version, 2, code)
        by_topic = {t.name: dict.fromkeys(t.partitions, code) for t in request.v3_and_below_topics}
        return {"throttle_time": 0, "results_by_topic_v3_and_below": partition_results(by_topic)}

    # --- AddOffsetsToTxn -----------------------------------------------------------------------------------------

    async def add_offsets(context: RequestContext, request: Any) -> dict[str, Any]:
        if not txn_writable(context, request.transactional_id):
            return error_only(context, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not allows(acl, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return error_only(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        offsets_partition = TopicPartition("__consumer_offsets", groups.partition_for(request.group_id))
        code = await coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, [offsets_partition]
        )
        return error_only(context, request, code)

    def error_only(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        """The answer of AddOffsetsToTxn and EndTxn (PRODUCER_FENCED from v2)."""
        return {"throttle_time": 0, "error_code": fenced_for(context.version, 2, code)}

    # --- EndTxn --------------------------------------------------------------------------------------------------

    async def end_txn(context: RequestContext, request: Any) -> dict[str, Any]:
        if not txn_writable(context, request.transactional_id):
            return error_only(context, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        code = await coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed)
        )
        return error_only(context, request, code)

    # --- TxnOffsetCommit -----------------------------------------------------------------------------------------

    async def txn_offset_commit(context: RequestContext, request: Any) -> dict[str, Any]:
        if not txn_writable(context, request.transactional_id):
            return txn_offset_commit_error(context, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not allows(acl, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return txn_offset_commit_error(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        readable = allowed_names(acl, context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
        now = groups.time_ms()
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetCommitValue] = {}
        for t in request.topics:
            info = cache.topics.get(t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if t.name not in readable:
                    errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif info is None or tp.partition not in info.partitions:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata) > config.offset_metadata_max_bytes:
                    errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    epoch = int(getattr(p, "committed_leader_epoch", -1))
                    valid[tp] = OffsetCommitValue(int(p.committed_offset), metadata, now, epoch)
        code = await settled(
            groups.commit_txn_offsets(
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                valid,
                lambda found: found,
                (
                    getattr(request, "member_id", ""),
                    getattr(request, "group_instance_id", None),
                    int(getattr(request, "generation_id", -1)),
                ),
            )
        )
        code = fenced_for(context.version, 3, code)
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": errors.get(TopicPartition(t.name, p.partition_index), code),
                        }
                        for p in t.partitions
                    ],
                }
                for t in request.topics
            ],
        }

    def txn_offset_commit_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        code = fenced_for(context.version, 3, code)
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
                }
                for t in request.topics
            ],
        }

    # --- WriteTxnMarkers -----------------------------------------------------------------------------------------

    async def write_txn_markers(context: RequestContext, request: Any) -> dict[str, Any]:
        markers = []
        for m in request.markers:
            topics = []
            for t in m.topics:
                partitions = []
                for p in t.partition_indexes:
                    code = await coordinator.write_marker(
                        TopicPartition(t.name, p),
                        m.producer_id,
                        m.producer_epoch,
                        m.coordinator_epoch,
                        bool(m.transaction_result),
                    )
                    partitions.append({"partition_index": p, "error_code": code})
                topics.append({"name": t.name, "partitions": partitions})
            markers.append({"producer_id": m.producer_id, "topics": topics})
        return {"markers": markers}

    def write_txn_markers_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {
            "markers": [
                {
                    "producer_id": m.producer_id,
                    "topics": [
                        {
                            "name": t.name,
                            "partitions": [{"partition_index": p, "error_code": code} for p in t.partition_indexes],
                        }
                        for t in m.topics
                    ],
                }
                for m in request.markers
            ]
        }

    # --- DescribeTransactions, ListTransactions ------------------------------------------------------------------

    def described(transactional_id: str, code: ErrorCode, meta: TransactionMetadata | None) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "error_code": code,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": NO_START_TIME,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        if meta is None:
            return answer
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(meta.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {
            **answer,
            "transaction_state": STATE_NAMES[meta.state],
            "transaction_timeout": meta.timeout_ms,
            "transaction_start_time": datetime.datetime.fromtimestamp(max(meta.start_ms, 0) / 1000, datetime.UTC),
            "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "topics": [{"topic": topic, "partitions": ps} for topic, ps in by_topic.items()],
        }

    async def describe_transactions(context: RequestContext, request: Any) -> dict[str, Any]:
        states = []
        for transactional_id in request.transactional_ids:
            if not allows(acl, context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                states.append(described(transactional_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None))
                continue
            code, meta = coordinator.describe(transactional_id)
            states.append(described(transactional_id, code, meta))
        return {"throttle_time": 0, "transaction_states": states}

    def describe_transactions_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "transaction_states": [described(t, code, None) for t in request.transactional_ids]}

    async def list_transactions(context: RequestContext, request: Any) -> dict[str, Any]:
        known = {name: state for state, name in STATE_NAMES.items()}
        state_filters = set(request.state_filters)
        unknown = sorted(name for name in state_filters if name not in known)
        producer_filters = set(request.producer_id_filters)
        duration = int(getattr(request, "duration_filter", -1))
        pattern_text = getattr(request, "transactional_id_pattern", None)  # v2+ (KIP-1152)
        pattern = None
        if pattern_text:
            try:
                pattern = re.compile(pattern_text)
            except re.error:
                return list_transactions_error(context, request, ErrorCode.INVALID_REGULAR_EXPRESSION)
        now = coordinator.time_ms()
        listed = []
        for meta in coordinator.list():
            if state_filters and STATE_NAMES[meta.state] not in state_filters:
                continue
            if pattern is not None and not pattern.fullmatch(meta.transactional_id):
                continue
            if producer_filters and meta.producer_id not in producer_filters:
                continue
            if duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < duration):
                continue
            if not allows(
                acl, context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, meta.transactional_id, audit=False
            ):
                continue
            listed.append(
                {
                    "transactional_id": meta.transactional_id,
                    "producer_id": meta.producer_id,
                    "transaction_state": STATE_NAMES[meta.state],
                }
            )
        code = ErrorCode.NONE if coordinator.active else ErrorCode.COORDINATOR_NOT_AVAILABLE
        if coordinator.loading_partitions:
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return {"throttle_time": 0, "error_code": code, "unknown_state_filters": unknown, "transaction_states": listed}

    def list_transactions_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "unknown_state_filters": [], "transaction_states": []}

    return [
        Api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, add_partitions, add_partitions_error),
        Api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, add_offsets, error_only),
        Api(ApiKey.END_TXN, 0, 4, end_txn, error_only),
        Api(ApiKey.TXN_OFFSET_COMMIT, 0, 4, txn_offset_commit, txn_offset_commit_error),
        Api(ApiKey.WRITE_TXN_MARKERS, 1, 1, write_txn_markers, write_txn_markers_error),
        Api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions, describe_transactions_error),
        Api(ApiKey.LIST_TRANSACTIONS, 0, 2, list_transactions, list_transactions_error),
    ]
