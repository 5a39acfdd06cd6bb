"""``mq jmx-tool``: Kafka's JmxTool (kafka-run-class.sh kafka.tools.JmxTool) reading a broker's metrics endpoint."""

from __future__ import annotations

import time

import click

from mq.cli.common import EXIT_USAGE, ToolError, handle_errors
from mq.tools.jmx_names import ObjectNamePattern
from mq.tools.jmx_tool import (
    REPORT_FORMATS,
    JmxToolError,
    compile_date_format,
    header_line,
    metrics_url,
    read_mbeans,
    report_lines,
    select,
    time_field,
    wait_for_mbeans,
)


@click.command("jmx-tool", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--jmx-url",
    metavar="URL",
    required=True,
    help="The broker's metrics endpoint: http://HOST:PORT (its metrics.listener) or http://HOST:PORT/metrics.",
)
@click.option(
    "--object-name",
    "object_names",
    multiple=True,
    metavar="NAME",
    help="A JMX object name query, * and ? as wildcards (kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,"
    "topic=*); repeatable. Without it every MBean is reported.",
)
@click.option("--attributes", metavar="A,B", help="Comma-separated attributes to report (default: all exported).")
@click.option(
    "--reporting-interval",
    type=int,
    default=2000,
    show_default=True,
    metavar="MS",
    help="Interval between polls; -1 polls once.",
)
@click.option(
    "--one-time",
    type=click.BOOL,
    is_flag=False,
    flag_value=True,
    default=None,
    metavar="[true|false]",
    help="Poll once and exit (also as --one-time true; --one-time false polls every interval).",
)
@click.option("--date-format", metavar="FORMAT", help="A java.text.SimpleDateFormat pattern for the time column.")
@click.option(
    "--report-format",
    type=click.Choice(REPORT_FORMATS, case_sensitive=False),
    default="original",
    show_default=True,
    help='original (a CSV header, then a row per poll), properties (key=value), csv (key,"value"), tsv.',
)
@click.option("--wait", is_flag=True, help="Wait up to 10 s for every --object-name to match an MBean.")
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def jmx_tool(
    jmx_url: str,
    object_names: tuple[str, ...],
    attributes: str | None,
    reporting_interval: int,
    one_time: bool | None,
    date_format: str | None,
    report_format: str,
    wait: bool,
    verbose: bool,
) -> None:
    """Dump the broker's JMX metric values to standard output, as Kafka's JmxTool does, from the samples its
    Prometheus endpoint exports under Strimzi's names (a meter's Count, a gauge's Value, a histogram's Count and
    percentiles; rates such as OneMinuteRate are Prometheus's to compute and are not exported).

    Exit codes: 0 success (or interrupted), 1 the endpoint cannot be read or an object name matches nothing,
    2 bad usage.
    """
    explicit_interval = click.get_current_context().get_parameter_source("reporting_interval")
    if one_time and explicit_interval == click.core.ParameterSource.COMMANDLINE and reporting_interval != -1:
        raise ToolError(f"--one-time=true is incompatible with --reporting-interval={reporting_interval}", EXIT_USAGE)
    once = bool(one_time) or reporting_interval < 0
    try:
        queries = [ObjectNamePattern.parse(name) for name in object_names]
    except ValueError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    wanted = [a for a in attributes.split(",") if a] if attributes is not None else None
    try:
        formatter = compile_date_format(date_format) if date_format is not None else None
        url = metrics_url(jmx_url)
        mbeans = wait_for_mbeans(
            url,
            queries,
            wait,
            lambda: time.monotonic() * 1000,
            time.sleep,
            lambda: click.echo("Could not find all object names, retrying", err=True),
        )
        selection = select(queries, mbeans, wanted)
        if report_format.lower() == "original":
            click.echo(header_line(selection.keys))
        while True:
            started = time.monotonic()
            values = selection.values(mbeans)
            if values is not None:
                for line in report_lines(
                    report_format.lower(), selection.keys, time_field(formatter, time.time()), values
                ):
                    click.echo(line)
            if once:
                return
            time.sleep(max(0.0, reporting_interval / 1000 - (time.monotonic() - started)))
            mbeans = read_mbeans(url)
    except JmxToolError as exc:
        raise ToolError(str(exc), EXIT_USAGE if exc.usage else 1) from None
    except KeyboardInterrupt:
        return
