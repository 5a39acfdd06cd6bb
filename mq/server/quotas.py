"""Client quotas as Kafka's (KIP-13 byte rates, KIP-55 user quotas, KIP-124 request rate, KIP-219 throttling).

Configs: ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes per second) and ``request_percentage`` (per cent of
one core's time spent handling the client's requests), stored as Kafka's ZooKeeper mode stores them:
``/config/users/<user>[/clients/<client-id>]`` and ``/config/clients/<client-id>``, ``<default>`` naming the defaults,
user and client id sanitized as Kafka's ``Sanitizer`` does (URL encoding; ``*`` and space percent-encoded). An entity
is a pair of path components ``(user, client)``, each a sanitized name, ``DEFAULT`` or None (absent).

Resolution (per quota key, independently): the first of Kafka's eight levels that sets the key wins —
``(u, c)``, ``(u, <default>)``, ``(u, -)``, ``(<default>, c)``, ``(<default>, <default>)``, ``(<default>, -)``,
``(-, c)``, ``(-, <default>)``. The rate is measured by one sensor per metric tag pair, as Kafka: the level's
components that are present take the request's actual user / client id, so ``/config/clients/<default>`` limits
each client id on its own while ``/config/users/<u>`` limits all clients of ``u`` together.

A sensor is Kafka's ``Rate`` over ``SampledStat``: ``window_num`` samples, each ``window_ms`` long from the record
that opened it; samples older than the whole window are reset. The rate is the retained total over the elapsed
time since the oldest sample began, counted as at least ``window_num - 1`` whole samples (so a fresh sensor admits
about ``(window_num - 1) * window_size * quota`` at once). A record that takes the rate over the bound gets the
throttle time ``round((rate - bound) / bound * window)`` ms, ``window`` being that same elapsed time; for
``request_percentage`` at most one sample's length, as Kafka bounds request-time throttles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mq.zk import paths
from mq.zk.codecs import decode_entity_config
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import NoNodeError

log = logging.getLogger(__name__)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)

DEFAULT = "<default>"
"""The path component of a default entity (a user or client id named ``<default>`` is stored sanitized)."""

USER = "user"
CLIENT_ID = "client-id"
"""Entity types of the DescribeClientQuotas / AlterClientQuotas APIs."""

ANONYMOUS = "ANONYMOUS"
"""The user name of every connection until authentication exists (principal ``User:ANONYMOUS``)."""

INT32_MAX = 2**31 - 1

SENSORS_KEPT = 100_000
"""Sensors kept at most; beyond that those idle longest (a whole window and more) are dropped first."""

Entity = tuple[str | None, str | None]
"""(user, client) path components: sanitized name, ``DEFAULT``, or None for a component the entity lacks."""

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: UTF-8 bytes outside ``[A-Za-z0-9._-]`` as ``%XX`` (upper-case hex)."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def desanitize(name: str) -> str:
    """The inverse of ``sanitize`` (Kafka's ``Sanitizer.desanitize``)."""
    out = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "%" and _is_hex(name[i + 1 : i + 3]):
            out.append(int(name[i + 1 : i + 3], 16))
            i += 3
        else:
            out += name[i].encode("utf-8")
            i += 1
    return out.decode("utf-8", errors="replace")


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def entity_path(entity: Entity) -> str:
    """The path under ``/config`` (and the change notification's entity path): ``users/u/clients/c``, ``users/u``
    or ``clients/c``."""
    user, client = entity
    if user is None:
        assert client is not None
        return f"clients/{client}"
    return f"users/{user}" if client is None else f"users/{user}/clients/{client}"


def parse_entity_path(path: str) -> Entity | None:
    """The entity of a ``/config`` path below ``/config`` (``users/u/clients/c`` ...), None for other entity types."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "clients":
        return (None, parts[1])
    if len(parts) == 2 and parts[0] == "users":
        return (parts[1], None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return (parts[1], parts[3])
    return None


def levels(user: str, client: str) -> tuple[Entity, ...]:
    """Kafka's eight entities, in precedence order, that may hold a quota for (sanitized) ``user`` and ``client``."""
    return (
        (user, client),
        (user, DEFAULT),
        (user, None),
        (DEFAULT, client),
        (DEFAULT, DEFAULT),
        (DEFAULT, None),
        (None, client),
        (None, DEFAULT),
    )


def read_quota_config(zk: KafkaZkClient, entity: Entity) -> dict[str, str]:
    """The quota keys stored for ``entity`` (other keys of a user, e.g. SCRAM credentials, are left out; a parent
    znode created without data holds none)."""
    data = zk.store.get_or_none(f"{paths.CONFIG}/{entity_path(entity)}")
    stored = decode_entity_config(data) if data else {}
    return {k: v for k, v in stored.items() if k in QUOTA_KEYS}


def write_quota_config(zk: KafkaZkClient, entity: Entity, quotas: Mapping[str, str]) -> None:
    """Replace the quota keys of ``entity`` (keeping its other keys) and notify every broker through
    ``/config/changes``."""
    entity_type, _, name = entity_path(entity).partition("/")
    data = zk.store.get_or_none(f"{paths.CONFIG}/{entity_path(entity)}")
    kept = {k: v for k, v in (decode_entity_config(data) if data else {}).items() if k not in QUOTA_KEYS}
    zk.set_entity_config(entity_type, name, {**kept, **quotas})


def read_all_quota_configs(zk: KafkaZkClient) -> dict[Entity, dict[str, str]]:
    """Every entity under ``/config/users`` and ``/config/clients`` that holds a quota key, with its quota keys."""
    entities: list[Entity] = [(None, c) for c in _children(zk, paths.CONFIG_CLIENTS)]
    for user in _children(zk, paths.CONFIG_USERS):
        entities.append((user, None))
        entities.extend((user, c) for c in _children(zk, f"{paths.CONFIG_USERS}/{user}/clients"))
    found = {}
    for entity in entities:
        config = read_quota_config(zk, entity)
        if config:
            found[entity] = config
    return found


def _children(zk: KafkaZkClient, path: str) -> list[str]:
    try:
        return sorted(zk.store.get_children(path))
    except NoNodeError:
        return []


class Rate:
    """Kafka's sampled rate (per second) of the values recorded; times are milliseconds."""

    __slots__ = ("_current", "_starts", "_totals", "last_record_ms", "window_ms", "window_num")

    def __init__(self, window_num: int, window_ms: int) -> None:
        if window_num < 1 or window_ms <= 0:
            raise ValueError("a quota window needs at least one sample of positive length")
        self.window_num = window_num
        self.window_ms = window_ms
        self._starts: list[int] = []
        self._totals: list[float] = []
        self._current = 0
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` to the current sample, opening the next one when the current is a whole sample old."""
        self.last_record_ms = now_ms
        starts = self._starts
        if not starts:
            starts.append(now_ms)
            self._totals.append(0.0)
        elif now_ms - starts[self._current] >= self.window_ms:
            self._current = (self._current + 1) % self.window_num
            if self._current >= len(starts):
                starts.append(now_ms)
                self._totals.append(0.0)
            else:
                starts[self._current] = now_ms
                self._totals[self._current] = 0.0
        self._totals[self._current] += value

    def _purge(self, now_ms: int) -> None:
        """Reset the samples that began a whole window ago or earlier."""
        expire = self.window_num * self.window_ms
        starts = self._starts
        for i, start in enumerate(starts):
            if now_ms - start >= expire:
                starts[i] = now_ms
                self._totals[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: since the oldest sample began, at least ``window_num - 1`` samples."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts, default=now_ms)
        full = elapsed // self.window_ms
        if full < self.window_num - 1:
            elapsed += (self.window_num - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Values per second over ``window_size_ms``."""
        window = self.window_size_ms(now_ms)
        total = sum(self._totals)
        if window <= 0:
            return 0.0 if total == 0 else float("inf")
        return total * 1000.0 / window


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """Kafka's throttle time for a measured ``rate`` over ``bound``: as long as the measure window must grow, at the
    bound, for the excess to be absorbed (at most what the int32 field holds)."""
    if rate <= bound:
        return 0
    return min(round((rate - bound) / bound * window_ms), INT32_MAX)


@dataclass(frozen=True, slots=True)
class _Resolved:
    """The quota that applies to one (user, client id): its bound and the sensor's tags, or no quota."""

    bound: float
    tags: tuple[str, str]


class ClientQuotaManager:
    """One quota type (produce bytes, fetch bytes or request time): the overrides of that key and a sensor per
    metric tag pair."""

    def __init__(self, key: str, window_num: int, window_ms: int, max_throttle_ms: int = INT32_MAX) -> None:
        self.key = key
        self.window_num = window_num
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self.throttle_time_ms_total = 0
        """Throttle time handed out since start (read by the metrics collector)."""
        self.overrides: dict[Entity, float] = {}
        self._sensors: dict[tuple[str, str], Rate] = {}
        self._resolved: dict[tuple[str, str], _Resolved | None] = {}

    def update(self, entity: Entity, bound: float | None) -> None:
        """Set (or, for None, remove) the quota of ``entity``."""
        if bound is None:
            self.overrides.pop(entity, None)
        else:
            self.overrides[entity] = bound
        self._resolved.clear()

    def resolve(self, user: str, client: str) -> _Resolved | None:
        """The quota of sanitized ``user`` with ``client``, by Kafka's precedence; None when no level sets one."""
        key = (user, client)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        found: _Resolved | None = None
        overrides = self.overrides
        for entity in levels(user, client):
            bound = overrides.get(entity)
            if bound is not None:
                found = _Resolved(
                    bound, (user if entity[0] is not None else "", client if entity[1] is not None else "")
                )
                break
        if len(self._resolved) >= SENSORS_KEPT:
            self._resolved.clear()
        self._resolved[key] = found
        return found

    def record(self, user: str, client: str, value: float, now_ms: int) -> int:
        """Record ``value`` for sanitized ``user`` and ``client``; the throttle time in ms (0: within the quota)."""
        quota = self.resolve(user, client)
        if quota is None:
            return 0
        sensor = self._sensors.get(quota.tags)
        if sensor is None:
            if len(self._sensors) >= SENSORS_KEPT:
                self._drop_idle(now_ms)
            sensor = self._sensors[quota.tags] = Rate(self.window_num, self.window_ms)
        sensor.record(value, now_ms)
        window = sensor.window_size_ms(now_ms)
        throttle_ms = min(throttle_time_ms(sensor.measure(now_ms), quota.bound, window), self.max_throttle_ms)
        self.throttle_time_ms_total += throttle_ms
        return throttle_ms

    def _drop_idle(self, now_ms: int) -> None:
        idle = now_ms - self.window_num * self.window_ms
        for tags in [t for t, s in self._sensors.items() if s.last_record_ms <= idle]:
            del self._sensors[tags]
        if len(self._sensors) >= SENSORS_KEPT:
            self._sensors.clear()


class ClientQuotas:
    """The broker's three client quota managers; ``enabled`` once any quota is set anywhere. Request time is
    recorded in per cent of a core times seconds (nanoseconds / 10^7), so its rate is a percentage."""

    def __init__(self, window_num: int, window_size_seconds: int, time_ms: Callable[[], int]) -> None:
        window_ms = window_size_seconds * 1000
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window_num, window_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window_num, window_ms)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window_num, window_ms, max_throttle_ms=window_ms)
        self.time_ms = time_ms
        self._sanitized: dict[str | None, str] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.produce.overrides or self.fetch.overrides or self.request.overrides)

    def update(self, entity: Entity, config: Mapping[str, str]) -> None:
        """Apply the stored config of ``entity`` (keys it lacks are removed; an unreadable value is logged and
        treated as unset)."""
        for manager in (self.produce, self.fetch, self.request):
            text = config.get(manager.key)
            bound: float | None = None
            if text is not None:
                try:
                    bound = float(text)
                except ValueError:
                    log.warning("ignoring quota %s=%r of %s: not a number", manager.key, text, entity_path(entity))
                else:
                    if bound <= 0:
                        log.warning("ignoring quota %s=%r of %s: not positive", manager.key, text, entity_path(entity))
                        bound = None
            manager.update(entity, bound)

    def sanitized(self, name: str | None) -> str:
        """``sanitize(name)`` of a user or client id (a null client id counts as the empty one), cached."""
        found = self._sanitized.get(name)
        if found is None:
            if len(self._sanitized) >= SENSORS_KEPT:
                self._sanitized.clear()
            found = self._sanitized[name] = sanitize(name or "")
        return found
