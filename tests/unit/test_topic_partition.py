from __future__ import annotations

import pytest

from mq.topic_partition import TopicPartition, topic_name_error


def test_str_is_the_directory_name() -> None:
    assert str(TopicPartition("my-topic", 3)) == "my-topic-3"


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "__consumer_offsets"])
def test_legal_names(name: str) -> None:
    assert topic_name_error(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", 'cannot be "." or ".."'),
        ("x" * 250, "can't be longer than 249 characters"),
        ("a b", "contains a character other than ASCII alphanumerics"),
        ("ü", "contains a character other than ASCII alphanumerics"),
    ],
)
def test_illegal_names(name: str, fragment: str) -> None:
    error = topic_name_error(name)
    assert error is not None and fragment in error
