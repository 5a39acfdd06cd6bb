"""``mq monitor``: evaluate alarm rules against a cluster every --interval seconds and notify webhooks/commands."""

from __future__ import annotations

import sys
import time

import click

from mq.cli.common import EXIT_FAILED, EXIT_USAGE, ToolError, admin_options, admin_settings, handle_errors
from mq.errors import KafkaError
from mq.tools.monitor_rules import RulesError, load_rules


@click.command("monitor", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (required).")
@click.option("--rules", "rules_file", metavar="FILE", help="The rules, TOML (*.toml) or JSON (required).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between evaluations.",
)
@click.option("--once", is_flag=True, help="Evaluate once and exit: 0 nothing fires, 1 something fires.")
@admin_options()
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def monitor(
    bootstrap_server: str | None,
    rules_file: str | None,
    interval: float,
    once: bool,
    command_config: str | None,
    timeout: float | None,
    verbose: bool,
) -> None:
    """Evaluate the alarm rules of --rules FILE every --interval seconds (Burrow-style) and notify each alarm that
    fires or resolves: a JSON document (rule, state firing/resolved, metric, value, operator, threshold, labels,
    time) is POSTed to the rule's webhook and/or given on standard input to its command (run by the shell, with
    MQ_ALARM_RULE, MQ_ALARM_STATE, MQ_ALARM_VALUE, MQ_ALARM_THRESHOLD and MQ_ALARM_LABELS set). Each notification
    is also printed as one line.

    \b
    The rules file (TOML shown; JSON has the same keys):
      webhook = "http://alerts.example/hook"   # defaults for every rule (optional)
      command = "logger -t mq"
      repeat_interval = 300    # a still-firing alarm re-notifies after this many seconds (0: never)
      [[rules]]
      name = "orders-lag"
      metric = "group_lag_seconds"
      operator = ">"           # > >= < <= == != (default: >, group_status: >=)
      threshold = 60           # group_status: OK, WARN, STALL, STOP or ERR
      group = "orders-.*"      # scope: full-match regexes (default: all)
      topic = ".*"
      for = 30                 # seconds the condition holds before it fires (default 0)

    \b
    Metrics (each alarm is one rule and one set of labels):
      group_lag_seconds        age of the oldest unconsumed record, per group and topic (max over partitions)
      group_lag_records        records left to consume, per group and topic (sum over partitions)
      group_status             worst partition status per group and topic (OK < WARN < STALL < STOP < ERR, rated
                               over the last 3 evaluations as consumer-groups --status rates its samples)
      under_replicated_partitions  partitions whose ISR is smaller than their replicas, per topic
      offline_partitions       partitions without a leader, per topic
      log_dir_bytes            bytes of the replicas in a log directory, per broker and directory
      log_dir_used_percent     used space of a log directory's file system (directories on this host only)

    --once ignores "for" and rates group_status from one sample. Exit codes: 0 (--once: nothing fires), 1 something
    fires or (--once) the brokers did not answer, 2 bad usage or an unusable rules file.
    """
    if bootstrap_server is None:
        raise ToolError('Missing required argument "[bootstrap-server]"', EXIT_USAGE)
    if rules_file is None:
        raise ToolError('Missing required argument "[rules]"', EXIT_USAGE)
    try:
        rules = load_rules(rules_file)
    except RulesError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    from mq.client.sync import SyncAdmin
    from mq.tools.monitor import Monitor, deliver, notification_line

    try:
        admin = SyncAdmin(bootstrap_server, **admin_settings(command_config, timeout))
    except ValueError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None

    def report(message: str) -> None:
        click.echo(f"Warning: {message}", err=True)

    with admin:
        state = Monitor(rules, admin)
        while True:
            try:
                notes = state.evaluate(time.time(), once=once)
            except (KafkaError, OSError) as exc:
                if once:
                    raise
                report(f"evaluation failed: {exc}")
                notes = []
            for note in notes:
                click.echo(notification_line(note))
                deliver(note, report)
            if once:
                if state.alarms.firing():
                    sys.exit(EXIT_FAILED)
                return
            time.sleep(interval)
