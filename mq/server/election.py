"""Leader selection rules of the controller, as pure functions of a partition's replicas, ISR and live brokers.

Each returns the new leader and ISR, or None when no eligible replica exists (the partition keeps its state).
Assignment order decides among candidates, so the preferred replica (the first) wins whenever it is eligible.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def offline_leader(
    replicas: Sequence[int], isr: Sequence[int], live: Collection[int], *, unclean: bool
) -> tuple[int, list[int]] | None:
    """The leader died (or never was): the first live replica in the ISR; with ``unclean``, any live replica
    (which then forms the ISR alone)."""
    live_isr = [b for b in isr if b in live]
    candidates = [b for b in replicas if b in live_isr]
    if candidates:
        return candidates[0], live_isr
    if unclean:
        alive = [b for b in replicas if b in live]
        if alive:
            return alive[0], [alive[0]]
    return None


def preferred_leader(
    replicas: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> tuple[int, list[int]] | None:
    """The first assigned replica, when it is alive and in the ISR."""
    if replicas and replicas[0] in live and replicas[0] in isr:
        return replicas[0], list(isr)
    return None


def reassigned_leader(
    target: Sequence[int], leader: int, isr: Sequence[int], live: Collection[int]
) -> tuple[int, list[int]] | None:
    """End of a reassignment: the ISR keeps only target replicas; the leader stays if it is a live target, else the
    first live target replica in the ISR leads."""
    new_isr = [b for b in isr if b in target]
    if leader in target and leader in live and leader in new_isr:
        return leader, new_isr
    candidates = [b for b in target if b in new_isr and b in live]
    return (candidates[0], new_isr) if candidates else None


def controlled_shutdown_leader(
    replicas: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> tuple[int, list[int]] | None:
    """Leadership leaves brokers that are shutting down: the first live ISR member not shutting down leads, and the
    ISR loses the brokers that are shutting down."""
    new_isr = [b for b in isr if b not in shutting_down]
    candidates = [b for b in replicas if b in new_isr and b in live]
    return (candidates[0], new_isr) if candidates else None


def imbalanced_partitions(
    preferred: dict[object, int], leaders: dict[object, int], threshold_percent: int
) -> dict[int, list[object]]:
    """Per broker whose leader imbalance exceeds ``threshold_percent``, the partitions it should lead but does not.

    Imbalance of broker B = partitions whose preferred replica is B but whose leader is not B, divided by the
    partitions whose preferred replica is B."""
    owned: dict[int, list[object]] = {}
    for key, broker in preferred.items():
        owned.setdefault(broker, []).append(key)
    result: dict[int, list[object]] = {}
    for broker, keys in owned.items():
        not_led = [k for k in keys if leaders.get(k) != broker]
        if not_led and len(not_led) * 100 > threshold_percent * len(keys):
            result[broker] = not_led
    return result
