"""Topic-partition identity, Kafka's topic-name rules and its topic filters (whitelist/blacklist regexes)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's wording), or None when it is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def java_topic_regex(text: str) -> str:
    """Kafka's topic-filter normalisation (0.8's ``TopicFilter``, kept by later tools): trimmed, "," as alternation,
    spaces removed, then leading and trailing quotes dropped (property files may bring them)."""
    return text.strip().replace(",", "|").replace(" ", "").strip("\"'")


@dataclass(frozen=True)
class TopicFilter:
    """Kafka 0.8's ``Whitelist``/``Blacklist``: ``regex`` (normalised on construction) must match a whole topic name
    (a blacklist: must not); internal topics are refused when excluded. ValueError for a regex that does not compile.
    ``pattern`` is the kind a ZooKeeper consumer registration names: ``white_list`` or ``black_list``."""

    regex: str
    blacklist: bool = False
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        regex = java_topic_regex(self.regex)
        try:
            compiled = re.compile(regex)
        except re.error:
            raise ValueError(f"{regex} is an invalid regex.") from None
        object.__setattr__(self, "regex", regex)
        object.__setattr__(self, "compiled", compiled)

    @property
    def pattern(self) -> str:
        return "black_list" if self.blacklist else "white_list"

    def allows(self, topic: str, exclude_internal: bool = True) -> bool:
        if exclude_internal and topic in INTERNAL_TOPICS:
            return False
        return (self.compiled.fullmatch(topic) is None) == self.blacklist
