"""ManualClock: timers fire in deadline order as a test advances time, and only then."""

from __future__ import annotations

from mq.server.clock import ManualClock


def test_timers_fire_in_deadline_order_at_their_own_time() -> None:
    clock = ManualClock(start_ms=1000)
    fired: list[tuple[str, int]] = []
    clock.call_later(30, lambda: fired.append(("c", clock.time_ms())))
    clock.call_later(10, lambda: fired.append(("a", clock.time_ms())))
    clock.call_later(10, lambda: fired.append(("b", clock.time_ms())))
    cancelled = clock.call_later(20, lambda: fired.append(("x", clock.time_ms())))
    cancelled.cancel()
    clock.advance(9)
    assert fired == [] and clock.time_ms() == 1009
    clock.advance(100)
    assert fired == [("a", 1010), ("b", 1010), ("c", 1030)] and clock.time_ms() == 1109


def test_a_timer_set_by_a_callback_fires_within_the_same_advance() -> None:
    clock = ManualClock(start_ms=0)
    fired: list[int] = []

    def tick() -> None:
        fired.append(clock.time_ms())
        if len(fired) < 5:
            clock.call_later(100, tick)

    clock.call_later(100, tick)
    clock.advance(350)
    assert fired == [100, 200, 300] and clock.pending == 1
    clock.advance(1000)
    assert fired == [100, 200, 300, 400, 500] and clock.pending == 0
