"""Kafka's wire error codes and mq's exception tree.

Every error a broker puts on the wire is an ``ErrorCode``; every exception mq raises for a Kafka-level failure is a
``KafkaError`` carrying one. Handlers turn exceptions into per-partition codes with ``error_code_of``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class ErrorCode(IntEnum):
    """The closed list of Kafka's wire error codes (names as Kafka's ``Errors`` enum)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128

    @property
    def retriable(self) -> bool:
        """True where a client may retry the same request and expect success later."""
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)


class RecordError(NamedTuple):
    """One refused record of a produced batch: its index in the batch and why (Produce v8+ ``record_errors``)."""

    batch_index: int
    message: str | None


class KafkaError(Exception):
    """Base of every error that maps onto a Kafka wire code; ``record_errors`` names the records at fault, when the
    error concerns records of a produced batch."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(
        self, message: str = "", code: ErrorCode | None = None, *, record_errors: tuple[RecordError, ...] = ()
    ) -> None:
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code
        self.record_errors = record_errors


class CorruptRecordError(KafkaError):
    """A record batch or message failed validation: bad size, magic or CRC."""

    code = ErrorCode.CORRUPT_MESSAGE


class CorruptFetchedBatchError(CorruptRecordError):
    """A fetched record batch whose checksum does not match its bytes: a consumer stops at it and says so (fetching
    it again gives the same bytes, so it is not retried)."""


class InvalidRecordError(KafkaError):
    """A record batch is well-formed but breaks a broker rule (offsets, nested compression, ...)."""

    code = ErrorCode.INVALID_RECORD


class MessageTooLargeError(KafkaError):
    """A batch is larger than ``max.message.bytes``."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(KafkaError):
    """A produce request's record set is larger than a segment can hold."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class UnsupportedCompressionError(KafkaError):
    """A codec that the message format or this installation cannot handle."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OffsetOutOfRangeError(KafkaError):
    """A requested offset lies outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidTimestampError(KafkaError):
    """A record timestamp is outside ``message.timestamp.difference.max.ms``."""

    code = ErrorCode.INVALID_TIMESTAMP


class KafkaStorageError(KafkaError):
    """A log directory or file could not be read or written."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptIndexError(KafkaError):
    """An offset or time index failed its sanity check."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptCheckpointError(KafkaError):
    """A checkpoint file does not follow the ``version / count / entries`` format."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class TopicExistsError(KafkaError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopicError(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class UnknownTopicOrPartitionError(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class TopicDeletionDisabledError(KafkaError):
    code = ErrorCode.TOPIC_DELETION_DISABLED


class NotLeaderOrFollowerError(KafkaError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicasError(KafkaError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS


class InvalidRequiredAcksError(KafkaError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


class ConfigError(KafkaError):
    """A configuration key is unknown or its value is of the wrong type or range."""

    code = ErrorCode.INVALID_CONFIG


def _subclasses(cls: type[KafkaError]) -> list[type[KafkaError]]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def exception_for(code: int, message: str = "") -> KafkaError:
    """The exception for a wire error code: its own class where mq has one, else KafkaError carrying the code."""
    error_code = ErrorCode(code)
    for cls in _subclasses(KafkaError):
        if cls.code == error_code and cls not in (CorruptIndexError, CorruptCheckpointError, KafkaStorageError):
            return cls(message or error_code.name)
    return KafkaError(message or error_code.name, error_code)


def error_code_of(exc: BaseException) -> ErrorCode:
    """The wire code for ``exc``: its own for a ``KafkaError``, UNKNOWN_SERVER_ERROR for anything else."""
    return exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
