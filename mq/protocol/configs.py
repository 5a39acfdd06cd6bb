"""The enums of the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs), with Kafka's values."""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` for the resources mq serves configs of."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class AlterConfigOp(IntEnum):
    """Kafka's ``AlterConfigOp.OpType``: the operation of one IncrementalAlterConfigs entry."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource``: where a described value comes from."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6

    @property
    def tool_name(self) -> str:
        """The name Kafka's admin client and tools print (``ConfigEntry.ConfigSource``): TOPIC_CONFIG is
        DYNAMIC_TOPIC_CONFIG there."""
        return "DYNAMIC_TOPIC_CONFIG" if self is ConfigSource.TOPIC_CONFIG else self.name


class ConfigType(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigType`` of a described key."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
