"""``mq consumer-groups``: list, describe, delete consumer groups and reset or delete their offsets, with Kafka 2.8's
kafka-consumer-groups flags and output."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from mq.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    admin_settings,
    command_config_option,
    default_format,
    format_option,
    handle_errors,
    isolation_level,
    print_table,
    zookeeper_store,
)
from mq.client.admin import GroupDescription
from mq.tools import consumer_groups as tool
from mq.tools.consumer_groups import GroupAdmin, GroupCommandError

ACTIONS = ("list_", "describe", "delete", "reset_offsets", "delete_offsets")
ACTION_NAMES = "--list, --describe, --delete, --reset-offsets, --delete-offsets"
F = TypeVar("F", bound=Callable[..., Any])
RESET_FLAGS = ", ".join(f"--{s.replace('_', '-')}" for s in tool.RESET_SPECS)


def status_options(prefix: str = "") -> Callable[[F], F]:
    """``--status``, ``--samples`` and ``--interval``: the sampled per-partition status of both group tools."""

    def decorate(fn: F) -> F:
        fn = click.option(
            "--interval",
            type=click.FloatRange(min=0),
            default=5.0,
            show_default=True,
            help="--status: seconds between.",
        )(fn)
        fn = click.option(
            "--samples", type=click.IntRange(min=1), default=3, show_default=True, help="--status: samples."
        )(fn)
        return click.option(
            "--status", is_flag=True, help=f"{prefix}Sample offsets and add a status (OK WARN STALL STOP ERR)."
        )(fn)

    return decorate


def sampling_sleep(group: str, samples: int, output_format: str) -> Callable[[float], None]:
    """``time.sleep``, showing which sample comes next on stderr while the output is a terminal table."""
    if output_format != "table":
        return time.sleep
    from rich.console import Console

    console = Console(stderr=True)
    upcoming = iter(range(2, samples + 1))

    def sleep(seconds: float) -> None:
        with console.status(f"Sampling group {group}: sample {next(upcoming)} of {samples} in {seconds:g} s"):
            time.sleep(seconds)

    return sleep


@click.command("consumer-groups", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="REQUIRED: The server(s) to connect to.")
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[,...][/CHROOT]",
    help="Instead of --bootstrap-server: the ZooKeeper-coordinated (old consumer) groups under /consumers.",
)
@command_config_option()
@click.option("--list", "list_", is_flag=True, help="List all consumer groups.")
@click.option("--describe", is_flag=True, help="Describe groups: offsets and lag (default), --members or --state.")
@click.option("--delete", is_flag=True, help="Delete groups (they must be empty).")
@click.option("--reset-offsets", is_flag=True, help="Reset offsets of inactive groups (dry run unless --execute).")
@click.option("--delete-offsets", is_flag=True, help="Delete a group's offsets of --topic partitions.")
@click.option("--group", "groups", multiple=True, metavar="GROUP", help="A consumer group (repeatable).")
@click.option("--all-groups", is_flag=True, help="Apply to all consumer groups.")
@click.option("--members", is_flag=True, help="describe: the group's members.")
@click.option("--offsets", is_flag=True, help="describe: committed offsets and lag per partition (the default).")
@click.option(
    "--state",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[STATES]",
    help="describe: the group's state; list: a GROUP STATE table, optionally only of comma-separated states.",
)
@click.option(
    "--type",
    "group_type",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[TYPES]",
    help="list: a GROUP TYPE table (with --state also STATE), optionally only of comma-separated types "
    "(classic, consumer).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="describe: members' assignments (--members); LAG-SECONDS after CLIENT-ID (--offsets, text format).",
)
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,...]", help="Reset/delete-offsets scope.")
@click.option("--all-topics", is_flag=True, help="reset: every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="reset: to the log start offset.")
@click.option("--to-latest", is_flag=True, help="reset: to the log end offset.")
@click.option("--to-current", is_flag=True, help="reset: to the committed offset (log end without one).")
@click.option("--to-offset", type=int, metavar="N", help="reset: to N (clamped into the log).")
@click.option("--shift-by", type=int, metavar="N", help="reset: committed offset plus N (may be negative).")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="reset: first offset at or after the time.")
@click.option("--by-duration", metavar="PnDTnHnMnS", help="reset: first offset at or after now minus the duration.")
@click.option("--from-file", type=click.Path(dir_okay=False), help="reset: offsets from a CSV file (--export's).")
@click.option("--dry-run", is_flag=True, help="reset: only show the plan (the default).")
@click.option("--execute", is_flag=True, help="reset: commit the plan.")
@click.option("--export", is_flag=True, help="reset: print the plan as CSV.")
@click.option(
    "--timeout",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    metavar="MS",
    help="Fail each admin call (retries included) that the brokers have not answered within this many ms.",
)
@status_options("describe: ")
@format_option()
@handle_errors
def consumer_groups(**options: Any) -> None:
    """List all consumer groups, describe a consumer group, delete consumer group info, or reset consumer group
    offsets.

    \b
    Beyond Kafka: LAG-SECONDS is now minus the timestamp of the first unconsumed record (0 without lag); it is a
    column in table and json output and, with --verbose, in text output after CLIENT-ID. --status samples the
    group --samples times, --interval seconds apart, and rates each partition (ERR: nothing committed or committed
    offset behind the log start; STOP: lag, offset frozen, no member owns the partition; STALL: lag, offset frozen
    although a member owns it; WARN: committing but lag grows; OK otherwise). LAG is never negative.

    \b
    With --zookeeper (Kafka 0.9-1.x) the groups are those of ZooKeeper-coordinated consumers (/consumers): members
    are the consumer threads owning partitions, offsets those in ZooKeeper (or the broker's when it has them);
    --delete removes /consumers/<group> of a group without registered consumers, --reset-offsets --execute writes
    /consumers/<group>/offsets.

    \b
    Exit codes: 0 success, 1 the operation failed (a group does not exist, a reset of an active group, a failed
    deletion), 2 bad usage.
    """
    output_format = options.pop("output_format") or default_format()
    _check_usage(options)
    from mq.client.sync import SyncAdmin

    config = admin_settings(options["command_config"], options["timeout"] / 1000)
    with contextlib.ExitStack() as stack:
        bootstrap = options["bootstrap_server"]
        groups = None
        if options["zookeeper"]:
            from mq.zk.consumer_groups import ZkConsumerGroups
            from mq.zk.kafka_zk_client import KafkaZkClient

            store = stack.enter_context(zookeeper_store(options["zookeeper"]))
            groups = ZkConsumerGroups(store)
            bootstrap = KafkaZkClient(store).bootstrap_servers()
            if not bootstrap:
                raise ToolError(f"no brokers are registered in {options['zookeeper']}")
        sync = stack.enter_context(SyncAdmin(bootstrap, **config))
        admin: GroupAdmin = tool.ClientGroupAdmin(sync, isolation_level(options["command_config"]))
        if groups is not None:
            from mq.tools.zk_groups import ZkGroupAdmin

            admin = ZkGroupAdmin(sync, groups)
        try:
            code = _run(admin, options, output_format)
        except GroupCommandError as exc:
            raise ToolError(str(exc), EXIT_USAGE if exc.usage else EXIT_FAILED) from None
    if code:
        sys.exit(code)


def _usage(message: str) -> ToolError:
    return ToolError(message, EXIT_USAGE)


def _check_usage(options: dict[str, Any]) -> None:
    if options["bootstrap_server"] and options["zookeeper"]:
        raise _usage('Option "[bootstrap-server]" can\'t be used with option "[zookeeper]"')
    if options["group_type"] is not None and options["zookeeper"]:
        raise _usage('Option "[type]" can\'t be used with option "[zookeeper]"')
    if options["group_type"] is not None and not options["list_"]:
        raise _usage("Option [type] needs [list]")
    if not options["bootstrap_server"] and not options["zookeeper"]:
        raise _usage('Missing required argument "[bootstrap-server]"')
    actions = [a for a in ACTIONS if options[a]]
    if len(actions) != 1:
        raise _usage(f"Command must include exactly one action: {ACTION_NAMES}")
    action = actions[0]
    groups, all_groups = options["groups"], options["all_groups"]
    if action in ("describe", "delete", "reset_offsets") and not groups and not all_groups:
        name = action.replace("_", "-")
        raise _usage(f"Option [{name}] takes one of these options: [all-groups], [group]")
    if groups and all_groups:
        raise _usage('Option "[all-groups]" can\'t be used with option "[group]"')
    if options["dry_run"] and options["execute"]:
        raise _usage('Option "[dry-run]" can\'t be used with option "[execute]"')
    if action == "delete_offsets" and (len(groups) != 1 or not options["topics"]):
        raise _usage("Option [delete-offsets] takes the options [group] (one) and [topic]")
    if action == "reset_offsets":
        specs = [s for s in tool.RESET_SPECS if options[s] not in (None, False)]
        if len(specs) != 1:
            raise _usage(f"Option '[reset-offsets]' requires one of the following scenarios: {RESET_FLAGS}")
        if specs[0] != "from_file" and not options["topics"] and not options["all_topics"]:
            raise _usage("One of the reset scopes should be defined: --all-topics, --topic.")
        if options["topics"] and options["all_topics"]:
            raise _usage('Option "[all-topics]" can\'t be used with option "[topic]"')
    if action != "describe" and (options["members"] or options["offsets"] or options["status"]):
        raise _usage("Options [members], [offsets] and [status] need [describe]")
    if (
        action == "describe"
        and sum(bool(x) for x in (options["members"], options["offsets"], options["state"] is not None)) > 1
    ):
        raise _usage("Option [describe] takes at most one of these options: [members], [offsets], [state]")


def _run(admin: GroupAdmin, options: dict[str, Any], output_format: str) -> int:
    if options["list_"]:
        return _list(admin, options["state"], options["group_type"], output_format)
    groups = tool.group_ids(admin, options["groups"], options["all_groups"])
    if options["describe"]:
        return _describe(admin, groups, options, output_format)
    if options["delete"]:
        return _delete(admin, groups, output_format)
    if options["delete_offsets"]:
        return _delete_offsets(admin, groups[0], options["topics"], output_format)
    return _reset(admin, groups, options, output_format)


def _list(admin: GroupAdmin, state: str | None, group_type: str | None, output_format: str) -> int:
    states = None if state is None else tool.parse_states(state)
    types = None if group_type is None else tool.parse_types(group_type)
    listings = admin.list_groups(states or None, types or None)
    if output_format == "json":
        click.echo(
            json.dumps(
                [{"group": g.group_id, "state": g.state, "type": tool.group_type_name(g.group_type)} for g in listings]
            )
        )
    elif group_type is not None:
        if output_format == "table":
            header = ["GROUP", "TYPE"] + (["STATE"] if state is not None else [])
            rows = [
                [g.group_id, tool.group_type_name(g.group_type)] + ([g.state] if state is not None else [])
                for g in listings
            ]
            print_table(header, rows)
        else:
            _echo(tool.list_type_lines(listings, state is not None))
    elif state is None:
        if output_format == "table":
            print_table(["GROUP"], [[g.group_id] for g in listings])
        else:
            for listing in listings:
                click.echo(listing.group_id)
    elif output_format == "table":
        print_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in listings])
    else:
        _echo(tool.list_state_lines(listings))
    return 0


def _note(group: str, state: str, output_format: str) -> bool:
    """Print Kafka's note for the group's state on stderr; False when the group does not exist."""
    note = tool.state_message(group, state)
    if note is None:
        return True
    message, is_error = note
    if output_format == "text":
        click.echo("", err=True)
    click.echo(f"Error: {message}" if is_error else message, err=True)
    return not is_error


def _describe(admin: GroupAdmin, groups: Sequence[str], options: dict[str, Any], output_format: str) -> int:
    descriptions = sorted(admin.describe_groups(groups), key=lambda d: d.group_id)
    failed = False
    documents: list[Any] = []
    for description in descriptions:
        exists = _note(description.group_id, description.state, output_format)
        failed |= not exists
        if options["members"]:
            members = tool.collect_members(description)
            documents.append(asdict(members))
            if exists and output_format != "json":
                _show_members(members, options["verbose"], output_format)
        elif options["state"] is not None:
            state = tool.collect_state(description)
            documents.append(asdict(state))
            if exists and output_format != "json":
                header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
                row = [state.group, state.coordinator, state.assignment_strategy, state.state, str(state.members)]
                _show(tool.state_lines(state), output_format, (header, [row]))
        else:
            report = _offsets(admin, description, options, output_format)
            documents.append(asdict(report))
            if exists and output_format != "json":
                extra = options["verbose"] or options["status"] or output_format == "table"
                _show(tool.offsets_lines(report, extra), output_format, tool.offsets_cells(report, extra))
    if output_format == "json":
        click.echo(json.dumps(documents, default=str))
    return EXIT_FAILED if failed else 0


def _offsets(
    admin: GroupAdmin, description: GroupDescription, options: dict[str, Any], output_format: str
) -> tool.GroupOffsets:
    if options["status"]:
        group, samples = description.group_id, options["samples"]
        sleep = sampling_sleep(group, samples, output_format)
        report = tool.sample_offsets(admin, group, samples, options["interval"], sleep=sleep)
    else:
        report = tool.collect_offsets(admin, description)
    if options["verbose"] or options["status"] or output_format != "text":
        report = tool.with_lag_seconds(admin, report)
    return report


def _show_members(members: tool.GroupMembers, verbose: bool, output_format: str) -> None:
    if output_format == "table" and members.members:
        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        rows = [
            [
                m.group,
                m.consumer_id,
                m.group_instance_id or "",
                m.host,
                m.client_id,
                str(len(m.assignment)),
                tool.format_assignment(m.assignment),
            ]
            for m in members.members
        ]
        print_table(header, rows)
        return
    _echo(tool.members_lines(members, verbose))


def _show(lines: list[str], output_format: str, cells: tuple[list[str], list[list[str]]] | None = None) -> None:
    """Text lines, or on ``table`` a rich table of ``cells`` when there are rows."""
    if output_format == "table" and cells is not None and cells[1]:
        print_table(*cells)
        return
    _echo(lines)


def _echo(lines: Sequence[str]) -> None:
    for line in lines:
        click.echo(line)


def _delete(admin: GroupAdmin, groups: Sequence[str], output_format: str) -> int:
    outcome = tool.delete_groups(admin, groups)
    if output_format == "json":
        click.echo(json.dumps({g: e.name for g, e in outcome.results.items()}))
        return EXIT_FAILED if outcome.failed else 0
    lines, errors = tool.delete_lines(outcome)
    for error in errors:
        click.echo(f"Error: {error}", err=True)
    _echo(lines)
    return EXIT_FAILED if outcome.failed else 0


def _delete_offsets(admin: GroupAdmin, group: str, topics: Sequence[str], output_format: str) -> int:
    outcome = tool.delete_offsets(admin, group, topics)
    failed = outcome.error.name != "NONE" or any(e.name != "NONE" for e in outcome.partitions.values())
    if output_format == "json":
        document = {
            "group": group,
            "error": outcome.error.name,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "error": e.name} for tp, e in outcome.partitions.items()
            ],
        }
        click.echo(json.dumps(document))
        return EXIT_FAILED if failed else 0
    lines, error = tool.delete_offsets_lines(outcome)
    if error is not None:
        click.echo(f"Error: {error}", err=True)
    _show(lines, output_format)
    return EXIT_FAILED if failed else 0


def _reset(admin: GroupAdmin, groups: Sequence[str], options: dict[str, Any], output_format: str) -> int:
    spec = _reset_spec(options)
    file_plans = None
    if spec.kind == "from_file":
        path = options["from_file"]
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise _usage(f"cannot read {path}: {exc.strerror}") from None
        file_plans = tool.parse_reset_csv(text, options["groups"])
    if not options["execute"] and not options["dry_run"]:
        click.echo(
            "WARN: No action will be performed as the --execute option is missing.In a future major release, "
            "this default may change: pass --dry-run to keep a dry run, --execute to commit the plan.",
            err=True,
        )
    outcome = tool.reset_offsets(
        admin,
        groups,
        spec,
        topics=options["topics"],
        all_topics=options["all_topics"],
        file_plans=file_plans,
        execute=options["execute"],
    )
    for warning in outcome.warnings:
        click.echo(warning, err=True)
    for error in outcome.errors:
        click.echo(f"Error: {error}", err=True)
    if options["export"]:
        click.echo(tool.export_csv(outcome.plans, len(options["groups"]) == 1))
    elif output_format == "json":
        document = [
            {"group": g, "topic": tp.topic, "partition": tp.partition, "offset": offset}
            for g, plan in outcome.plans.items()
            for tp, offset in plan.items()
        ]
        click.echo(json.dumps(document))
    else:
        rows = [[g, tp.topic, str(tp.partition), str(o)] for g, plan in outcome.plans.items() for tp, o in plan.items()]
        cells = (["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
        _show(tool.reset_lines(outcome.plans), output_format, cells)
    return EXIT_FAILED if outcome.errors else 0


def _reset_spec(options: dict[str, Any]) -> tool.ResetSpec:
    kind = next(s for s in tool.RESET_SPECS if options[s] not in (None, False))
    if kind == "to_datetime":
        return tool.ResetSpec(kind, tool.parse_datetime(options["to_datetime"]))
    if kind == "by_duration":
        return tool.ResetSpec(kind, int(time.time() * 1000) - tool.parse_duration(options["by_duration"]))
    if kind in ("to_offset", "shift_by"):
        return tool.ResetSpec(kind, options[kind])
    return tool.ResetSpec(kind)
