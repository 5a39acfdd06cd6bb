"""The command-line logic of ``mq configs`` (Kafka's kafka-configs): entities, --add-config parsing, output lines."""

from __future__ import annotations

import pytest

from mq.client.admin import ConfigEntry
from mq.protocol.configs import ConfigSource
from mq.tools.configs import (
    ConfigCommandError,
    Entity,
    config_line,
    parse_configs_to_add,
    parse_configs_to_delete,
    resolve_entity,
)

NO_SHORTHANDS: dict[str, str | None] = {"topics": None, "brokers": None, "clients": None, "users": None}


def test_add_config_groups_list_values_in_square_brackets() -> None:
    parsed = parse_configs_to_add("cleanup.policy=[compact,delete], retention.ms = 5,empty=", None)
    assert parsed == {"cleanup.policy": "compact,delete", "retention.ms": "5", "empty": ""}
    with pytest.raises(ConfigCommandError, match='must be in the format "key=val"'):
        parse_configs_to_add("retention.ms", None)
    with pytest.raises(ConfigCommandError, match="Only one of --add-config or --add-config-file"):
        parse_configs_to_add("a=b", "file.properties")
    assert parse_configs_to_delete(["a,b", " c "]) == ["a", "b", "c"]


def test_add_config_file_is_a_properties_file(tmp_path) -> None:
    path = tmp_path / "add.properties"
    path.write_text("# comment\nretention.ms=10\ncleanup.policy=compact,delete\n", encoding="utf-8")
    assert parse_configs_to_add(None, str(path)) == {"retention.ms": "10", "cleanup.policy": "compact,delete"}


def test_entities_from_generic_and_shorthand_flags() -> None:
    assert resolve_entity(["topics"], ["t"], NO_SHORTHANDS, [], False) == Entity("topics", "t")
    assert resolve_entity([], [], {**NO_SHORTHANDS, "brokers": "3"}, [], False) == Entity("brokers", "3")
    default = resolve_entity([], [], NO_SHORTHANDS, ["brokers"], False)
    assert default == Entity("brokers", None, default=True) and default.resource_name == ""
    assert default.zk_name() == "<default>"
    assert resolve_entity(["brokers"], [None], NO_SHORTHANDS, [], False).default


def test_a_user_combined_with_a_client_id() -> None:
    combined = resolve_entity(["users", "clients"], ["alice", None], NO_SHORTHANDS, [], False)
    assert combined == Entity("users", "alice", client=Entity("clients", None, default=True))
    assert combined.quota_parts() == [("users", "alice", False), ("clients", None, True)]
    shorthand = resolve_entity([], [], {**NO_SHORTHANDS, "clients": "c1"}, ["users"], False)
    assert shorthand.quota_parts() == [("users", None, True), ("clients", "c1", False)]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((["brokers"], ["x"], NO_SHORTHANDS, [], False), "must be a valid integer broker id, but it is: x"),
        ((["ips"], ["1.2.3.4"], NO_SHORTHANDS, [], False), "Invalid entity type ips"),
        ((["broker-loggers"], ["0"], NO_SHORTHANDS, [], True), "with the --zookeeper argument"),
        (([], [], NO_SHORTHANDS, [], False), "At least one entity type must be specified"),
        ((["topics"], [], {**NO_SHORTHANDS, "topics": "t"}, [], False), "should not be used in conjunction"),
        ((["topics"], ["bad name"], NO_SHORTHANDS, [], False), "is illegal"),
        ((["clients", "users"], ["c", "u"], NO_SHORTHANDS, [], False), "users and --entity-type clients, in that"),
        ((["users", "clients"], ["u"], NO_SHORTHANDS, [], False), "needs an --entity-name or --entity-default for"),
        ((["users", "clients"], ["u", "c"], NO_SHORTHANDS, [], True), "need --bootstrap-server"),
        (([], [], {**NO_SHORTHANDS, "topics": "t", "users": "u"}, [], False), "Only one entity flag may be given"),
    ],
)
def test_entity_errors_are_usage_errors(arguments: tuple, message: str) -> None:
    with pytest.raises(ConfigCommandError) as info:
        resolve_entity(*arguments)
    assert message in str(info.value) and info.value.usage


def test_describe_line_is_kafkas() -> None:
    entry = ConfigEntry(
        "retention.ms",
        "1000",
        False,
        ConfigSource.TOPIC_CONFIG,
        False,
        (
            ("retention.ms", "1000", ConfigSource.TOPIC_CONFIG),
            ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
        ),
    )
    assert config_line(entry) == (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    )
    assert (
        config_line(ConfigEntry("k", None, True, ConfigSource.UNKNOWN, True)) == "  k=null sensitive=true synonyms={}"
    )
