"""Kafka's exception class names and default messages for the wire error codes tools print per partition or per log
directory, as Kafka's AdminClient turns a code into an exception (``Errors.exception()``)."""

from __future__ import annotations

from mq.errors import ErrorCode

PACKAGE = "org.apache.kafka.common.errors"

EXCEPTIONS: dict[ErrorCode, tuple[str, str]] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: (
        "UnknownServerException",
        "The server experienced an unexpected error when processing the request.",
    ),
    ErrorCode.OFFSET_OUT_OF_RANGE: (
        "OffsetOutOfRangeException",
        "The requested offset is not within the range of offsets maintained by the server.",
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: (
        "UnknownTopicOrPartitionException",
        "This server does not host this topic-partition.",
    ),
    ErrorCode.LEADER_NOT_AVAILABLE: (
        "LeaderNotAvailableException",
        "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (
        "NotLeaderOrFollowerException",
        "For requests intended only for the leader, this error indicates that the broker is not the current leader. "
        "For requests intended for any replica, this error indicates that the broker is not a replica of the topic "
        "partition.",
    ),
    ErrorCode.REQUEST_TIMED_OUT: ("TimeoutException", "The request timed out."),
    ErrorCode.NETWORK_EXCEPTION: (
        "NetworkException",
        "The server disconnected before a response was received.",
    ),
    ErrorCode.REPLICA_NOT_AVAILABLE: (
        "ReplicaNotAvailableException",
        "The replica is not available for the requested topic-partition.",
    ),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: ("TopicAuthorizationException", "Topic authorization failed."),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ("ClusterAuthorizationException", "Cluster authorization failed."),
    ErrorCode.POLICY_VIOLATION: (
        "PolicyViolationException",
        "Request parameters do not satisfy the configured policy.",
    ),
    ErrorCode.KAFKA_STORAGE_ERROR: (
        "KafkaStorageException",
        "Disk error when trying to access log file on the disk.",
    ),
    ErrorCode.LOG_DIR_NOT_FOUND: (
        "LogDirNotFoundException",
        "The user-specified log directory is not found in the broker config.",
    ),
}


def exception_class(code: ErrorCode) -> str:
    """The fully qualified name of Kafka's exception for ``code`` (``...errors.ApiException`` when not listed)."""
    return f"{PACKAGE}.{EXCEPTIONS.get(code, ('ApiException', ''))[0]}"


def exception_text(code: ErrorCode) -> str:
    """What Kafka's tools print for the exception of ``code``: ``<class>: <default message>``."""
    message = EXCEPTIONS[code][1] if code in EXCEPTIONS else code.name
    return f"{exception_class(code)}: {message}"
