"""``mq configs``: describe or alter the dynamic config of topics, brokers, clients and users, with Kafka's
kafka-configs flags and output lines."""

from __future__ import annotations

import sys
from typing import Any

import click

from mq.cli.common import (
    EXIT_USAGE,
    ToolError,
    admin_options,
    admin_settings,
    default_format,
    echo_json,
    format_option,
    handle_errors,
    print_table,
    verbose_option,
)
from mq.tools.configs import (
    ZOOKEEPER_WARNING,
    ConfigCommandError,
    ConfigsOutcome,
    Entity,
    alter,
    alter_zk,
    describe,
    describe_document,
    describe_zk,
    parse_configs_to_add,
    parse_configs_to_delete,
    resolve_entity,
    source_name,
)


@click.command("configs", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (the admin APIs).")
@click.option(
    "--zookeeper", metavar="HOST:PORT[,...][/CHROOT]", help="Read and write the metadata tree directly (deprecated)."
)
@admin_options()
@click.option("--describe", is_flag=True, help="List configs for the given entity.")
@click.option("--alter", is_flag=True, help="Alter the configuration for the entity.")
@click.option("--all", "describe_all", is_flag=True, help="describe: every config, not only the dynamic ones.")
@click.option(
    "--entity-type",
    multiple=True,
    metavar="TYPE",
    help="topics, clients, users, brokers or broker-loggers; users then clients for a user's quota per client id.",
)
@click.option(
    "--entity-name", multiple=True, metavar="NAME", help="Topic name, client id, user principal or broker id."
)
@click.option("--entity-default", is_flag=True, help="The default entity (brokers, clients, users).")
@click.option("--topic", metavar="NAME", help="The topic's name.")
@click.option("--broker", metavar="ID", help="The broker's id.")
@click.option("--broker-defaults", is_flag=True, help="The config defaults for all brokers.")
@click.option("--broker-logger", metavar="ID", help="The broker's id for its logger config.")
@click.option("--client", metavar="ID", help="The client's id.")
@click.option("--user", metavar="PRINCIPAL", help="The user's principal name.")
@click.option("--user-defaults", is_flag=True, help="The default user (quotas).")
@click.option("--client-defaults", is_flag=True, help="The default client id (quotas).")
@click.option("--add-config", metavar="K=V,K2=[A,B]", help="Configs to add; square brackets group values with commas.")
@click.option("--add-config-file", metavar="FILE", help="A properties file of configs to add.")
@click.option("--delete-config", multiple=True, metavar="K1,K2", help="Config keys to remove.")
@format_option()
@verbose_option()
@handle_errors
def configs(**options: Any) -> None:
    """Describe or alter the dynamic config of a topic, broker, client or user (Kafka's kafka-configs).

    Exit codes: 0 success, 1 the operation failed, 2 bad usage.
    """
    output_format = options["output_format"] or default_format()
    if int(options["describe"]) + int(options["alter"]) != 1:
        raise ToolError("Command must include exactly one action: --describe, --alter", EXIT_USAGE)
    for flag in ("add_config", "add_config_file", "delete_config"):
        if options["describe"] and options[flag]:
            invalid = flag.replace("_", "-")
            raise ToolError(f'Option "[describe]" can\'t be used with option "[{invalid}]"', EXIT_USAGE)
    if options["bootstrap_server"] is None and options["zookeeper"] is None:
        raise ToolError("One of the required --bootstrap-server or --zookeeper arguments must be specified", EXIT_USAGE)
    if options["bootstrap_server"] is not None and options["zookeeper"] is not None:
        raise ToolError("Only one of --bootstrap-server or --zookeeper must be specified", EXIT_USAGE)
    if options["describe_all"] and options["zookeeper"] is not None:
        raise ToolError("--bootstrap-server must be specified for --all", EXIT_USAGE)
    try:
        defaults = [
            kind
            for kind, flag in (
                ("brokers", "broker_defaults"),
                ("users", "user_defaults"),
                ("clients", "client_defaults"),
            )
            if options[flag]
        ]
        entity = resolve_entity(
            options["entity_type"],
            _entity_names(sys.argv[1:]) if options["entity_default"] else list(options["entity_name"]),
            {
                "topics": options["topic"],
                "brokers": options["broker"],
                "broker-loggers": options["broker_logger"],
                "users": options["user"],
                "clients": options["client"],
            },
            defaults,
            zookeeper=options["zookeeper"] is not None,
        )
        add = parse_configs_to_add(options["add_config"], options["add_config_file"])
        delete = parse_configs_to_delete(options["delete_config"])
        if options["alter"] and not (add or delete or options["add_config_file"]):
            raise ConfigCommandError(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter",
                usage=True,
            )
        if options["zookeeper"] is not None:
            outcome = _run_zookeeper(options["zookeeper"], entity, add, delete, bool(options["alter"]))
        else:
            outcome = _run_bootstrap(options, entity, add, delete)
    except ConfigCommandError as exc:
        raise ToolError(str(exc), EXIT_USAGE if exc.usage else 1) from None
    _render(outcome, output_format, zookeeper=options["zookeeper"] is not None)


def _entity_names(arguments: list[str]) -> list[str | None]:
    """The ``--entity-name`` values and ``--entity-default`` flags (as None) in command-line order, which is how
    Kafka's tool pairs them with the ``--entity-type`` values."""
    names: list[str | None] = []
    for index, argument in enumerate(arguments):
        if argument == "--entity-default":
            names.append(None)
        elif argument == "--entity-name" and index + 1 < len(arguments):
            names.append(arguments[index + 1])
        elif argument.startswith("--entity-name="):
            names.append(argument.partition("=")[2])
    return names


def _run_bootstrap(options: dict[str, Any], entity: Entity, add: dict[str, str], delete: list[str]) -> ConfigsOutcome:
    from mq.client.sync import SyncAdmin

    with SyncAdmin(
        options["bootstrap_server"], **admin_settings(options["command_config"], options["timeout"])
    ) as admin:
        if options["alter"]:
            return alter(admin, entity, add, delete)
        return describe(admin, entity, bool(options["describe_all"]))


def _run_zookeeper(
    connect: str, entity: Entity, add: dict[str, str], delete: list[str], alter_: bool
) -> ConfigsOutcome:
    from mq.zk.admin_zk_client import AdminZkClient
    from mq.zk.kafka_zk_client import KafkaZkClient
    from mq.zk.zk_store import ZooKeeperStore

    store = ZooKeeperStore(connect, session_timeout_ms=30000)
    try:
        zk = KafkaZkClient(store)
        return alter_zk(AdminZkClient(zk), entity, add, delete) if alter_ else describe_zk(zk, entity)
    finally:
        store.close()


def _render(outcome: ConfigsOutcome, output_format: str, zookeeper: bool) -> None:
    if output_format == "json":
        echo_json(describe_document(outcome) if outcome.described else outcome.lines)
        return
    if zookeeper:
        for line in ZOOKEEPER_WARNING:
            click.echo(line)
    if output_format == "table" and outcome.described:
        for described in outcome.described:
            click.echo(described.header)
            print_table(
                ("Name", "Value", "Source", "Sensitive"),
                [
                    (e.name, str(e.value), source_name(e), "true" if e.is_sensitive else "false")
                    for e in described.entries
                ],
            )
        return
    for line in outcome.lines:
        click.echo(line)
