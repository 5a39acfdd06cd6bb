"""``mq perf producer`` and ``mq perf consumer``: Kafka's producer and consumer perf tests, with their flags and
report lines, on mq's client or librdkafka (``--client confluent``)."""

from __future__ import annotations

import random
from pathlib import Path

import click

from mq.cli.common import EXIT_USAGE, ToolError, client_properties_file, handle_errors
from mq.tools.old_client_keys import current_consumer_keys, current_producer_keys

SETTINGS = {"help_option_names": ["-h", "--help"]}
CLIENT_OPTION = click.option(
    "--client",
    type=click.Choice(["mq", "confluent"]),
    default="mq",
    show_default=True,
    help="Load generator: mq's Python client, or librdkafka through confluent-kafka.",
)


class _SpreadValues(click.Command):
    """Accepts Kafka's ``--producer-props a=1 b=2`` (several values after one flag) as repeated flags."""

    spread = ("--producer-props",)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        current: str | None = None
        for arg in args:
            if arg.startswith("-"):
                current = arg if arg in self.spread else None
                if current is None:
                    rewritten.append(arg)
            elif current is not None:
                rewritten += [current, arg]
            else:
                rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


def _echo(line: str) -> None:
    click.echo(line)


def _warn(line: str) -> None:
    click.echo(line, err=True)


def _read_properties(path: str | None) -> dict[str, str]:
    return {} if path is None else client_properties_file(path)


def _usage(message: str) -> ToolError:
    return ToolError(message, EXIT_USAGE)


@click.group("perf", context_settings=SETTINGS)
def perf() -> None:
    """Measure producer or consumer throughput and latency (Kafka's perf tests)."""


@perf.command("producer", cls=_SpreadValues, context_settings=SETTINGS)
@click.option("--topic", required=True, help="Produce messages to this topic.")
@click.option("--num-records", type=int, required=True, help="Number of messages to produce.")
@click.option("--record-size", type=int, help="Message size in bytes (exactly one of this or --payload-file).")
@click.option("--payload-file", type=click.Path(dir_okay=False), help="File of payloads, picked at random.")
@click.option("--payload-delimiter", default="\\n", show_default=True, help="Delimiter of the payloads in the file.")
@click.option(
    "--throughput", type=float, required=True, help="Throttle to about this many messages/sec; -1 for no limit."
)
@click.option(
    "--producer-props",
    "producer_props",
    multiple=True,
    metavar="PROP-NAME=PROP-VALUE ...",
    help="Producer properties, e.g. bootstrap.servers acks linger.ms; they win over --producer.config.",
)
@click.option("--producer.config", "producer_config", help="Producer config properties file.")
@click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]", help="Sets bootstrap.servers.")
@CLIENT_OPTION
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def producer(
    topic: str,
    num_records: int,
    record_size: int | None,
    payload_file: str | None,
    payload_delimiter: str,
    throughput: float,
    producer_props: tuple[str, ...],
    producer_config: str | None,
    bootstrap: str | None,
    client: str,
    verbose: bool,
) -> None:
    """Produce --num-records messages and print throughput and latency every 5 s and at the end.

    Latency is measured per record from the send call to the broker's acknowledgement. Exit codes: 0 when every
    record was acknowledged, 1 when some failed, 2 for bad usage.
    """
    from mq.tools.perf import PerfError, ProducerRun, random_payloads, run_producer, split_payloads
    from mq.tools.perf_stats import parse_props

    if (record_size is None) == (payload_file is None):
        raise _usage("either --record-size or --payload-file must be specified but not both.")
    if num_records <= 0:
        raise _usage("--num-records should be greater than zero")
    if record_size is not None and record_size <= 0:
        raise _usage("--record-size should be greater than zero")
    props = _read_properties(producer_config)
    try:
        props.update(parse_props(producer_props))
        props = current_producer_keys(props, _warn, topic)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    if bootstrap is not None:
        props["bootstrap.servers"] = bootstrap
    if not props.get("bootstrap.servers"):
        raise _usage("bootstrap.servers is not set: give --bootstrap-server, --producer-props or --producer.config")
    try:
        if payload_file is not None:
            delimiter = "\n" if payload_delimiter == "\\n" else payload_delimiter
            payloads = split_payloads(Path(payload_file).read_bytes(), delimiter.encode())
        else:
            payloads = random_payloads(record_size or 0)
        run_producer(ProducerRun(topic, num_records, payloads, throughput, props, client), _echo, _warn)
    except PerfError as exc:
        raise ToolError(str(exc)) from None
    except ValueError as exc:
        raise _usage(str(exc)) from None


@perf.command("consumer", context_settings=SETTINGS)
@click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]", help="The server(s) to connect to.")
@click.option("--topic", required=True, help="The topic to consume from.")
@click.option("--messages", type=int, required=True, help="The number of messages to consume.")
@click.option("--group", default=None, help="The group id to consume on (default: perf-consumer-<random>).")
@click.option("--fetch-size", type=int, default=1024 * 1024, show_default=True, help="max.partition.fetch.bytes.")
@click.option("--consumer.config", "consumer_config", help="Consumer config properties file.")
@click.option(
    "--timeout", "timeout_ms", type=int, default=10_000, show_default=True, help="Max ms between returned records."
)
@click.option("--show-detailed-stats", is_flag=True, help="Print stats for each reporting interval.")
@click.option("--reporting-interval", type=int, default=5_000, show_default=True, help="Progress interval in ms.")
@click.option("--hide-header", is_flag=True, help="Do not print the header line.")
@click.option("--from-latest", is_flag=True, help="Without a committed offset, start at the end of the log.")
@CLIENT_OPTION
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def consumer(
    bootstrap: str | None,
    topic: str,
    messages: int,
    group: str | None,
    fetch_size: int,
    consumer_config: str | None,
    timeout_ms: int,
    show_detailed_stats: bool,
    reporting_interval: int,
    hide_header: bool,
    from_latest: bool,
    client: str,
    verbose: bool,
) -> None:
    """Consume --messages messages as a group member and print Kafka's consumer perf summary.

    Exit codes: 0 (also when --timeout passed before --messages arrived: a WARNING line says so), 1 on a failed
    fetch, 2 for bad usage.
    """
    from mq.tools.perf import ConsumerRun, PerfError, run_consumer

    if reporting_interval <= 0:
        raise _usage("Reporting interval must be greater than 0.")
    if messages <= 0:
        raise _usage("--messages should be greater than zero")
    if fetch_size <= 0:
        raise _usage("--fetch-size should be greater than zero")
    props = current_consumer_keys(_read_properties(consumer_config), _warn)
    if bootstrap is not None:
        props["bootstrap.servers"] = bootstrap
    if not props.get("bootstrap.servers"):
        raise _usage('Missing required argument "[bootstrap-server]"')
    run = ConsumerRun(
        topic=topic,
        messages=messages,
        group=group or f"perf-consumer-{random.randrange(100_000)}",
        fetch_size=fetch_size,
        props=props,
        timeout_ms=timeout_ms,
        detailed=show_detailed_stats,
        reporting_interval_ms=reporting_interval,
        hide_header=hide_header,
        from_latest=from_latest,
        client=client,
    )
    try:
        run_consumer(run, _echo, _warn)
    except PerfError as exc:
        raise ToolError(str(exc)) from None
    except ValueError as exc:
        raise _usage(str(exc)) from None
