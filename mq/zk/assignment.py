"""Kafka's automatic replica assignment: round-robin leaders with shifting followers, optionally rack-aware.

For brokers b[0..n) (sorted by id), partition p's first replica is ``b[(p + start) % n]`` and its j-th follower is
``b[(first + 1 + (shift + j) % (n - 1)) % n]``, where ``shift`` grows by one each time p wraps past a multiple of n.
Rack-aware assignment runs the same walk over a rack-alternated broker list, skipping brokers whose rack (or who
themselves) already hold a replica while another rack (broker) holds none.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence


class AssignmentError(ValueError):
    """The requested partitions and replication factor cannot be placed on these brokers."""


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    racks: Mapping[int, str] | None = None,
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for partitions ``start_partition .. start_partition + partitions - 1``.

    ``start_index`` -1 draws the start and the shift at random; a fixed value uses it for both, as Kafka does.
    ``racks`` with an entry for every broker makes the assignment rack-aware; for only some it is an error.
    """
    if partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    rng = rng or random.Random()
    ordered = sorted(brokers)
    if racks:
        if any(b not in racks for b in ordered):
            raise AssignmentError(
                "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
                "assignment without rack information."
            )
        return _rack_aware(ordered, racks, partitions, replication_factor, start_index, start_partition, rng)
    n = len(ordered)
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    result: dict[int, list[int]] = {}
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        replicas.extend(ordered[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1))
        result[p] = replicas
    return result


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(brokers: Sequence[int], racks: Mapping[int, str]) -> list[int]:
    """One broker from each rack in turn: racks by name, brokers within a rack by id."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    result: list[int] = []
    for i in range(max(len(c) for c in columns)):
        result.extend(c[i] for c in columns if i < len(c))
    return result


def _rack_aware(
    brokers: Sequence[int],
    racks: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    start_index: int,
    start_partition: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    ordered = rack_alternated(brokers, racks)
    n = len(ordered)
    rack_count = len(set(racks[b] for b in brokers))
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    result: dict[int, list[int]] = {}
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = ordered[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = ordered[_follower_index(first, shift * rack_count, k, n)]
                k += 1
                rack = racks[broker]
                rack_taken = rack in racks_used and len(racks_used) < rack_count
                broker_taken = broker in replicas and len(replicas) < n
                if not rack_taken and not broker_taken:
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        result[p] = replicas
    return result
