"""``mq replay-log-producer``: Kafka's ReplayLogProducer flags, plus a window, a rate limit and resumable runs."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from mq.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    bootstrap_from_zookeeper,
    default_format,
    format_option,
    handle_errors,
    print_table,
    verbose_option,
)
from mq.client.cluster import parse_bootstrap
from mq.tools.client_properties import producer_settings
from mq.tools.console import ConsoleError, parse_properties
from mq.tools.replay import (
    ReplayError,
    ReplayLogProducer,
    ReplayOptions,
    ReplaySummary,
    default_state_file,
    parse_bound,
)

SETTINGS = {"help_option_names": ["-h", "--help"]}
REPLAY_PRODUCER_DEFAULTS = {"acks": -1, "enable_idempotence": True, "linger_ms": 5}
"""Producer settings the replay starts from: idempotent, acknowledged by every in-sync replica."""


@click.command("replay-log-producer", context_settings=SETTINGS)
@click.option(
    "--broker-list",
    "--bootstrap-server",
    "broker_list",
    metavar="HOST:PORT[,...]",
    help="The brokers: the source (and the target unless --target-bootstrap-server); with --zookeeper the target.",
)
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[/CHROOT]",
    help="Find the source brokers in this ZooKeeper (read directly: no group is registered).",
)
@click.option("--inputtopic", required=True, help="The topic to read.")
@click.option("--outputtopic", required=True, help="The topic to write (created like the input when missing).")
@click.option("--messages", default=-1, show_default=True, help="Records each thread copies at most; -1: all.")
@click.option("--threads", default=1, show_default=True, help="Streams; the input's partitions are dealt to them.")
@click.option(
    "--reporting-interval",
    default=5000,
    show_default=True,
    help="A progress line on stderr (a terminal) every this many ms.",
)
@click.option("--sync", is_flag=True, help="Wait for each record's acknowledgement before sending the next.")
@click.option(
    "--property", "properties", multiple=True, metavar="K=V", help="Producer property (acks, linger.ms, ...)."
)
@click.option("--from", "start", default="earliest", show_default=True, help="Window start (inclusive), see above.")
@click.option("--to", "end", default="end", show_default=True, help="Window end (exclusive), see above.")
@click.option("--rate", type=float, help="Records per second at most (all threads together).")
@click.option("--target-bootstrap-server", metavar="HOST:PORT[,...]", help="Write to this cluster instead.")
@click.option("--state-file", type=click.Path(dir_okay=False), help="Progress file [replay-<in>-<out>.json].")
@click.option("--resume", is_flag=True, help="Continue the replay saved in the state file.")
@click.option(
    "--exactly-once",
    is_flag=True,
    help="Copy in transactions that record each partition's position on the target: exactly once on every "
    "partition mapping, whatever crashed (read the output with isolation.level=read_committed).",
)
@format_option()
@verbose_option()
@handle_errors
def replay_log_producer(**options: Any) -> None:
    """Copy the records of --inputtopic to --outputtopic, keeping key, value, headers and timestamp.

    \b
    Window bounds (--from / --to): an offset (same for every partition), @<epoch ms>, an ISO-8601 datetime (UTC
    unless it has an offset), --from earliest, --to end (the log end offset when the replay starts) or --to none
    (no end: stop once no record arrived for 10 s, as Kafka's tool does). A time stands for the first offset whose
    record has a timestamp at or after it, per partition; a time after every record for the log end offset.
    Output partition = input partition when the output topic has it, else by key.

    \b
    With --zookeeper the input is read from the brokers registered there, partition by partition, as without it:
    Kafka 0.8's tool ran a throw-away ZooKeeper group (its /consumers node deleted before each run, so its offsets
    were never reused); here the window and the state file say where to read, so no group is registered.
    \b
    Progress is saved in the state file (atomically, after the target acknowledged the records). --resume
    continues the saved window from there; when every input partition has its own output partition and nothing
    else writes the output topic, records copied after the last save are recognised and not sent again (exactly
    once), else they are sent again (at least once). Without a state file --resume starts a new replay.
    --exactly-once copies each input partition with its own transactional producer whose transactions also write
    the partition's position to the compacted topic mq-copy-positions on the target: a resumed replay fences the crashed
    one, its open transactions are aborted, and it continues from the positions the target committed, so a
    read_committed consumer of the output sees every record of the window exactly once, whatever the partition
    mapping.

    \b
    SIGINT or SIGTERM stops the replay cleanly: the copies in flight are acknowledged and the progress saved.
    Prints "Sent N messages" per thread and a summary. Exit codes: 0 success, 1 the replay failed or was stopped
    (its progress is saved), 2 bad usage.
    """
    replay = _options(options)
    try:
        summary = asyncio.run(ReplayLogProducer(replay, _report).run())
    except ReplayError as exc:
        raise ToolError(str(exc), EXIT_USAGE if exc.usage else EXIT_FAILED) from None
    _render(summary, options["output_format"] or default_format())
    if summary.stopped:
        state_file = replay.state_file or default_state_file(replay.input_topic, replay.output_topic)
        raise ToolError(f"stopped before the end of the window; --resume continues from {state_file}")


def _report(line: str) -> None:
    click.echo(line, err=True)


def _options(options: dict[str, Any]) -> ReplayOptions:
    source, target = _clusters(options["broker_list"], options["zookeeper"], options["target_bootstrap_server"])
    if options["inputtopic"] == options["outputtopic"] and source == target:
        raise ToolError("--inputtopic and --outputtopic name the same topic of the same cluster", EXIT_USAGE)
    if options["threads"] < 1:
        raise ToolError("--threads must be at least 1", EXIT_USAGE)
    if options["messages"] < -1:
        raise ToolError("--messages must be -1 (all) or a count", EXIT_USAGE)
    if options["rate"] is not None and options["rate"] <= 0:
        raise ToolError("--rate must be positive", EXIT_USAGE)
    if options["sync"] and options["exactly_once"]:
        raise ToolError(
            "--sync and --exactly-once do not go together (a transaction commits its records at once)", EXIT_USAGE
        )
    try:
        start = parse_bound(options["start"], is_end=False)
        end = parse_bound(options["end"], is_end=True)
        producer = _producer_settings(parse_properties(options["properties"]), options["sync"])
    except (ValueError, ConsoleError) as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    target = producer.pop("bootstrap_servers", None) or target
    for servers in (source, target):
        try:
            parse_bootstrap(servers)
        except ValueError as exc:
            raise ToolError(str(exc), EXIT_USAGE) from None
    state_file = options["state_file"]
    return ReplayOptions(
        source=source,
        target=target,
        input_topic=options["inputtopic"],
        output_topic=options["outputtopic"],
        start=start,
        end=end,
        messages=options["messages"],
        threads=options["threads"],
        rate=options["rate"],
        sync=options["sync"],
        producer=producer,
        state_file=Path(state_file) if state_file else None,
        resume=options["resume"],
        transactions=options["exactly_once"],
        reporting_interval_ms=options["reporting_interval"] if sys.stderr.isatty() else 0,
    )


def _clusters(broker_list: str | None, zookeeper: str | None, target: str | None) -> tuple[str, str]:
    """(source, target): Kafka's meaning with --zookeeper (source from ZooKeeper, --broker-list the target); else
    --broker-list is the source, and the target unless --target-bootstrap-server names another cluster."""
    if zookeeper is not None:
        if target is not None:
            raise ToolError(
                "with --zookeeper, --broker-list names the target; drop --target-bootstrap-server", EXIT_USAGE
            )
        if broker_list is None:
            raise ToolError('Missing required argument "[broker-list]"', EXIT_USAGE)
        return bootstrap_from_zookeeper(zookeeper), broker_list
    if broker_list is None:
        raise ToolError('Missing required argument "[broker-list]"', EXIT_USAGE)
    return broker_list, target or broker_list


def _producer_settings(properties: dict[str, str], sync: bool) -> dict[str, Any]:
    """The replay's producer defaults, overridden by --property; an explicit acks other than all turns the default
    idempotence off."""
    settings = producer_settings(properties, _report)
    merged = {**REPLAY_PRODUCER_DEFAULTS, **settings}
    if "acks" in settings and settings["acks"] != -1 and "enable_idempotence" not in settings:
        merged["enable_idempotence"] = False
    if merged["enable_idempotence"] and merged["acks"] != -1:
        raise ValueError("enable.idempotence=true requires acks=all")
    if sync:
        merged["linger_ms"] = 0
    return merged


def _render(summary: ReplaySummary, output_format: str) -> None:
    if output_format == "json":
        document = asdict(summary)
        document["rate"] = summary.rate
        click.echo(json.dumps(document))
        return
    for sent in summary.sent_per_stream:
        click.echo(f"Sent {sent} messages")
    click.echo(
        f"Replayed {summary.records} records ({summary.bytes} bytes) from {summary.input_topic} to "
        f"{summary.output_topic} in {summary.elapsed_s:.2f} s ({summary.rate:.1f} records/s)"
    )
    rows = [
        [
            str(p.partition),
            str(p.start),
            "none" if p.end is None else str(p.end),
            "-" if p.first is None else f"{p.first}-{p.last}",
            str(p.records),
            str(p.skipped),
        ]
        for p in summary.partitions
    ]
    if output_format == "table":
        print_table(["PARTITION", "WINDOW-START", "WINDOW-END", "COPIED", "RECORDS", "ALREADY-COPIED"], rows)
        return
    for partition, start, end, copied, records, skipped in rows:
        click.echo(
            f"Partition {partition}: window {start}-{end}, copied offsets {copied} ({records} records), "
            f"{skipped} already copied"
        )
