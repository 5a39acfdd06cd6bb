"""``mq simple-consumer-shell``: Kafka 0.8's SimpleConsumerShell, reading one partition from a given offset."""

from __future__ import annotations

import sys

import click

from mq.cli.common import EXIT_FAILED, EXIT_USAGE
from mq.errors import KafkaError
from mq.tools.console import ConsoleError, Formatter, parse_properties
from mq.tools.simple_consumer_shell import (
    DEFAULT_CLIENT_ID,
    DEFAULT_FORMATTER,
    EARLIEST,
    LATEST,
    USE_LEADER_REPLICA,
    ShellError,
    check_start_offset,
    end_of_log_line,
    fetch_broker,
    next_offset_line,
    prints_messages,
)
from mq.topic_partition import TopicPartition


def _fail(message: str, code: int = EXIT_FAILED) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


@click.command("simple-consumer-shell", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--broker-list", "bootstrap", required=True, metavar="HOST:PORT[,...]")
@click.option("--topic", required=True, help="The topic to consume from.")
@click.option("--partition", type=int, default=0, show_default=True, help="The partition to consume from.")
@click.option(
    "--replica", type=int, default=USE_LEADER_REPLICA, show_default=True, help="The replica to read (-1: the leader)."
)
@click.option(
    "--offset", type=int, default=EARLIEST, show_default=True, help="-2 from the beginning, -1 from the end, or N."
)
@click.option("--clientId", "client_id", default=DEFAULT_CLIENT_ID, show_default=True, help="The client id.")
@click.option("--fetchsize", type=click.IntRange(min=1), default=1024 * 1024, show_default=True)
@click.option("--formatter", default=DEFAULT_FORMATTER, show_default=True, help="Or kafka.tools.NoOpMessageFormatter.")
@click.option(
    "--property", "properties", multiple=True, metavar="K=V", help="Formatter properties: print.key, key.separator..."
)
@click.option("--print-offsets", is_flag=True, help="Print 'next offset = N' before each message.")
@click.option("--max-wait-ms", type=click.IntRange(min=0), default=1000, show_default=True)
@click.option("--max-messages", type=click.IntRange(min=0), default=2**31 - 1, show_default=True)
@click.option("--skip-message-on-error", is_flag=True, help="Skip a message that cannot be printed.")
@click.option("--no-wait-at-logend", is_flag=True, help="Stop at the end of the log instead of waiting.")
def simple_consumer_shell(
    bootstrap: str,
    topic: str,
    partition: int,
    replica: int,
    offset: int,
    client_id: str,
    fetchsize: int,
    formatter: str,
    properties: tuple[str, ...],
    print_offsets: bool,
    max_wait_ms: int,
    max_messages: int,
    skip_message_on_error: bool,
    no_wait_at_logend: bool,
) -> None:
    """Print the messages of one partition of a topic, read from its leader, starting at --offset.

    Stops after --max-messages, or with --no-wait-at-logend when a fetch finds no message at the end of the log
    (printing "Terminating. Reached the end of partition (t, p) at offset o"); otherwise waits for new messages.
    Exit codes: 0 normally, 1 a refusal or failed fetch ("Error: ..." on stderr), 2 bad usage.
    """
    from mq.client.admin import AsyncAdmin
    from mq.client.sync import SyncAdmin, SyncConsumer

    try:
        render = Formatter.from_properties(parse_properties(properties)) if prints_messages(formatter) else None
    except (ConsoleError, ValueError) as exc:
        _fail(str(exc), EXIT_USAGE)
    tp = TopicPartition(topic, partition)
    try:
        with SyncAdmin(bootstrap, client_id=client_id, api_timeout_ms=max(max_wait_ms, 1000)) as admin:
            try:
                [metadata] = admin.call(AsyncAdmin.describe_topics, [topic])
            except KafkaError as exc:
                raise ShellError(
                    f"no valid topic metadata for topic: {topic}, what we get from server is only: {exc}"
                ) from None
        fetch_broker(topic, partition, replica, metadata.partitions)
        check_start_offset(offset)
    except ShellError as exc:
        _fail(str(exc))
    except KafkaError as exc:
        _fail(str(exc))
    consumed = 0
    position = offset
    out = sys.stdout
    try:
        with SyncConsumer(
            bootstrap,
            client_id=client_id,
            auto_offset_reset="none",
            fetch_max_wait_ms=max_wait_ms,
            max_partition_fetch_bytes=fetchsize,
            fetch_max_bytes=max(fetchsize, 52428800),
            allow_auto_create_topics=False,
        ) as consumer:
            consumer.assign([tp])
            if offset == EARLIEST:
                consumer.seek_to_beginning(tp)
            elif offset == LATEST:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, offset)
            while consumed < max_messages:
                records = consumer.poll(timeout_ms=max_wait_ms + 100, max_records=min(500, max_messages - consumed))
                if not records:
                    position = consumer.position(tp)
                    end = consumer.consumer.highwater(tp)
                    if no_wait_at_logend and end is not None and position >= end:
                        out.write(end_of_log_line(topic, partition, position))
                        break
                    continue
                for record in records:
                    position = record.offset + 1
                    try:
                        if print_offsets:
                            out.write(next_offset_line(record.offset))
                        if render is not None:
                            out.write(render.format_record(record))
                    except (ValueError, UnicodeError) as exc:
                        if not skip_message_on_error:
                            raise
                        click.echo(f"Error processing message, skipping this message: {exc}", err=True)
                    consumed += 1
                out.flush()
    except KeyboardInterrupt:
        pass
    except (KafkaError, OSError, ValueError, UnicodeError) as exc:
        out.flush()
        _fail(
            f"Error consuming topic, partition, replica ({topic}, {partition}, {replica}) with offset [{position}]: {exc}"
        )
