from __future__ import annotations

import kafka.errors

from mq.errors import (
    CorruptRecordError,
    ErrorCode,
    MessageTooLargeError,
    TopicExistsError,
    error_code_of,
    exception_for,
)


def test_codes_agree_with_an_independent_client() -> None:
    theirs = {
        cls.errno: cls
        for cls in vars(kafka.errors).values()
        if isinstance(cls, type) and issubclass(cls, kafka.errors.BrokerResponseError) and cls.errno is not None
    }
    newer = {ErrorCode.INVALID_REGULAR_EXPRESSION}  # Kafka 4.0's (KIP-848 regexes, KIP-1152); kafka-python lacks it
    assert {code.value for code in ErrorCode} - {code.value for code in newer} == set(theirs)
    assert ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.MESSAGE_TOO_LARGE == 10
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6


def test_retriable_flags() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.NOT_ENOUGH_REPLICAS.retriable
    assert not ErrorCode.MESSAGE_TOO_LARGE.retriable
    assert not ErrorCode.TOPIC_ALREADY_EXISTS.retriable


def test_exception_to_code() -> None:
    assert error_code_of(CorruptRecordError("bad crc")) == ErrorCode.CORRUPT_MESSAGE
    assert error_code_of(MessageTooLargeError()) == ErrorCode.MESSAGE_TOO_LARGE
    assert error_code_of(ValueError("boom")) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_code_to_exception() -> None:
    assert isinstance(exception_for(36, "Topic 'a' already exists."), TopicExistsError)
    assert str(exception_for(36, "Topic 'a' already exists.")) == "Topic 'a' already exists."
    assert isinstance(exception_for(2), CorruptRecordError)
    other = exception_for(ErrorCode.GROUP_ID_NOT_FOUND)
    assert other.code == ErrorCode.GROUP_ID_NOT_FOUND and str(other) == "GROUP_ID_NOT_FOUND"
