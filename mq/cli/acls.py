"""``mq acls``: add, remove or list ACLs, with Kafka's kafka-acls flags and output lines."""

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
from mq.tools.acls import (
    AclCommandError,
    AclOptions,
    AclService,
    AdminService,
    Listing,
    StoreService,
    add,
    check_args,
    check_authorizer,
    listing,
    listing_document,
    listing_lines,
    pattern_type_named,
    remove,
    zookeeper_connect,
)

_FLAGS = (
    "add",
    "remove",
    "list",
    "producer",
    "consumer",
    "idempotent",
    "cluster",
    "force",
)
_VALUES = (
    "topic",
    "group",
    "transactional_id",
    "delegation_token",
    "allow_principal",
    "deny_principal",
    "allow_host",
    "deny_host",
    "operation",
    "principal",
)


@click.command("acls", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (the ACL admin APIs).")
@admin_options()
@click.option("--authorizer", metavar="CLASS", help="The authorizer of --authorizer-properties (Kafka's names).")
@click.option(
    "--authorizer-properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Write the metadata tree directly: zookeeper.connect=HOST:PORT[/CHROOT].",
)
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove ACLs (asks first, unless --force).")
@click.option("--list", is_flag=True, help="List the ACLs of the resources given (of all when none is).")
@click.option("--topic", multiple=True, metavar="NAME", help="A topic; * is every topic.")
@click.option("--group", multiple=True, metavar="NAME", help="A consumer group; * is every group.")
@click.option("--cluster", is_flag=True, help="The cluster.")
@click.option("--transactional-id", multiple=True, metavar="ID", help="A transactional id; * is every one.")
@click.option("--delegation-token", multiple=True, metavar="ID", help="A delegation token; * is every one.")
@click.option(
    "--resource-pattern-type",
    default="literal",
    metavar="TYPE",
    help="literal (default) or prefixed; to list or remove also any (every pattern type, the name exactly) or "
    "match (every pattern that applies to the name).",
)
@click.option("--allow-principal", multiple=True, metavar="TYPE:NAME", help="A principal allowed, e.g. User:alice.")
@click.option("--deny-principal", multiple=True, metavar="TYPE:NAME", help="A principal denied (deny wins).")
@click.option("--allow-host", multiple=True, metavar="HOST", help="Host of the allowed principals (default *).")
@click.option("--deny-host", multiple=True, metavar="HOST", help="Host of the denied principals (default *).")
@click.option(
    "--operation", multiple=True, metavar="OP", help="Read, Write, Create, Delete, Alter, Describe, ... or All."
)
@click.option("--producer", is_flag=True, help="The producer role: WRITE, DESCRIBE, CREATE on the topics.")
@click.option("--idempotent", is_flag=True, help="With --producer: IDEMPOTENT_WRITE on the cluster.")
@click.option("--consumer", is_flag=True, help="The consumer role: READ, DESCRIBE on the topics, READ on the groups.")
@click.option("--principal", multiple=True, metavar="TYPE:NAME", help="With --list: only this principal's ACLs.")
@click.option("--force", is_flag=True, help="Remove without asking.")
@format_option()
@verbose_option()
@handle_errors
def acls(**options: Any) -> None:
    """Add, remove or list ACLs (Kafka's kafka-acls).

    Exit codes: 0 success, 1 the operation failed, 2 bad usage.
    """
    output_format = options["output_format"] or default_format()
    bootstrap = options["bootstrap_server"]
    given = frozenset(
        [name.replace("_", "-") for name in _FLAGS if options[name]]
        + [name.replace("_", "-") for name in _VALUES if options[name]]
    )
    try:
        acl_options = AclOptions(
            action=next((a for a in ("add", "remove", "list") if options[a]), ""),
            topics=options["topic"],
            groups=options["group"],
            transactional_ids=options["transactional_id"],
            delegation_tokens=options["delegation_token"],
            cluster=options["cluster"],
            pattern_type=pattern_type_named(options["resource_pattern_type"]),
            allow_principals=options["allow_principal"],
            deny_principals=options["deny_principal"],
            allow_hosts=options["allow_host"],
            deny_hosts=options["deny_host"],
            operations=options["operation"],
            producer=options["producer"],
            idempotent=options["idempotent"],
            consumer=options["consumer"],
            list_principals=options["principal"],
            force=options["force"],
            given=given,
        )
        _check_connection(options)
        check_args(acl_options)
        run = _run_bootstrap if bootstrap is not None else _run_store
        found = run(options, acl_options)
    except AclCommandError as exc:
        raise ToolError(str(exc), EXIT_USAGE if exc.usage else 1) from None
    _render(found, acl_options, output_format)


def _check_connection(options: dict[str, Any]) -> None:
    """Kafka's checks of --bootstrap-server, --authorizer, --authorizer-properties and --command-config."""
    bootstrap = options["bootstrap_server"] is not None
    if bootstrap and options["authorizer"] is not None:
        raise ToolError("Only one of --bootstrap-server or --authorizer must be specified", EXIT_USAGE)
    if not bootstrap and not options["authorizer_properties"]:
        raise ToolError('Missing required argument "[authorizer-properties]"', EXIT_USAGE)
    if options["command_config"] is not None and not bootstrap:
        raise ToolError("The --command-config option can only be used with --bootstrap-server option", EXIT_USAGE)
    if options["authorizer_properties"] and bootstrap:
        raise ToolError("The --authorizer-properties option can only be used with --authorizer option", EXIT_USAGE)
    if options["authorizer"] is not None:
        check_authorizer(options["authorizer"])


def _run(service: AclService, acl_options: AclOptions) -> Listing:
    if acl_options.action == "add":
        return add(service, acl_options, click.echo)
    if acl_options.action == "remove":
        return remove(service, acl_options, click.echo, _confirm)
    return listing(service, acl_options)


def _confirm(question: str) -> bool:
    """Kafka's question and answer: the change goes ahead on ``y`` (any case), on nothing else."""
    click.echo(question)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


def _run_bootstrap(options: dict[str, Any], acl_options: AclOptions) -> Listing:
    from mq.client.sync import SyncAdmin

    with SyncAdmin(
        options["bootstrap_server"], **admin_settings(options["command_config"], options["timeout"])
    ) as admin:
        return _run(AdminService(admin), acl_options)


def _run_store(options: dict[str, Any], acl_options: AclOptions) -> Listing:
    from mq.zk.zk_store import ZooKeeperStore

    properties: dict[str, str] = {}
    for item in options["authorizer_properties"]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid authorizer property '{item}': expected key=value", EXIT_USAGE)
        properties[key.strip()] = value.strip()
    store = ZooKeeperStore(zookeeper_connect(properties), session_timeout_ms=30000)
    try:
        return _run(StoreService(store, click.echo), acl_options)
    finally:
        store.close()


def _render(found: Listing, acl_options: AclOptions, output_format: str) -> None:
    principals = acl_options.list_principals
    if output_format == "json":
        echo_json(listing_document(found, principals))
    elif output_format == "table":
        rows = [
            (
                p.resource_type.name,
                p.name,
                p.pattern_type.name,
                e.principal,
                e.host,
                e.operation.name,
                e.permission_type.name,
            )
            for p, entries in found.items()
            for e in entries
            if not principals or e.principal in principals
        ]
        print_table(("ResourceType", "Name", "PatternType", "Principal", "Host", "Operation", "Permission"), rows)
    else:
        for line in listing_lines(found, principals):
            click.echo(line)
