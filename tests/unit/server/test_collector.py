"""The broker's collector thresholds."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from mq.server.collector import MIDDLE, OLD, YOUNG, tune_collector


@pytest.fixture
def thresholds_restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_the_young_generation_is_collected_less_often(thresholds_restored: None) -> None:
    gc.set_threshold(700, 10, 10)
    tune_collector()
    assert gc.get_threshold() == (YOUNG, MIDDLE, OLD)
    assert YOUNG > 700
