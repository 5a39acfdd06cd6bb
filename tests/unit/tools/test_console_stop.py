"""The console consumer's print loop on ^C or SIGTERM: the records in hand are printed and counted, then it ends."""

from __future__ import annotations

import os
import signal

import pytest

from mq.cli.console import _Printer
from mq.client.consumer import ConsumerRecord
from mq.tools.console import Formatter


class SignalledConsumer:
    """Receives ``signum`` while a poll is under way; that poll then returns two records, later polls none."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.polls = 0

    def poll(self, timeout_ms: int, max_records: int) -> list[ConsumerRecord]:
        self.polls += 1
        if self.polls > 1:
            return []
        os.kill(os.getpid(), self.signum)
        return [ConsumerRecord("t", 0, offset, 0, 0, None, f"v{offset}".encode()) for offset in (0, 1)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_the_loop_after_printing_the_records_in_hand(
    signum: int, capsys: pytest.CaptureFixture[str]
) -> None:
    before = signal.getsignal(signum)
    consumer = SignalledConsumer(signum)
    printer = _Printer(Formatter(), None, None)
    printer.run(consumer)
    assert capsys.readouterr().out == "v0\nv1\n"
    assert (printer.processed, consumer.polls) == (2, 1)
    assert signal.getsignal(signum) is before
