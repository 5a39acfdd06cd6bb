"""Kafka's JmxTool over mq's Prometheus endpoint: scrape ``/metrics``, read the samples back as the MBean
attributes they stand for (``mq.tools.jmx_names``), select them with JMX object name queries and render JmxTool's
lines.

Output (``--report-format``): ``original`` prints a header ``"time","<object name>:<attribute>",...`` once, keys
sorted after ``time``, then one comma-separated row of values per interval; ``properties`` prints ``key=value``,
``csv`` ``key,"value"`` and ``tsv`` ``key<TAB>value`` lines, time first, per interval. Values print as Java prints
them (a long ``Count``, a double ``0.0`` / ``1.5E7`` percentile). A row is printed only when every selected
attribute is still exported, as JmxTool skips an incomplete poll.
"""

from __future__ import annotations

import datetime as dt
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from prometheus_client.parser import text_string_to_metric_families

from mq.tools.jmx_names import INTEGRAL_ATTRIBUTES, Labels, ObjectName, ObjectNamePattern, exported_mbeans

REPORT_FORMATS = ("original", "properties", "csv", "tsv")
WAIT_TIMEOUT_MS = 10000
"""How long ``--wait`` waits for every query to select an MBean (JmxTool's 10 s)."""


class JmxToolError(Exception):
    """A failure reported in one line; ``usage`` marks bad arguments."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def metrics_url(jmx_url: str) -> str:
    """The scrape URL: ``http(s)://HOST:PORT`` gets ``/metrics``; a JMX service URL is bad usage."""
    parsed = urllib.parse.urlsplit(jmx_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise JmxToolError(
            f"--jmx-url {jmx_url}: mq exports its metrics over HTTP, give the broker's metrics.listener "
            "(http://HOST:PORT or http://HOST:PORT/metrics)",
            usage=True,
        )
    if parsed.path in ("", "/"):
        return urllib.parse.urlunsplit(parsed._replace(path="/metrics"))
    return jmx_url


def scrape(url: str, timeout_s: float = 10.0) -> dict[tuple[str, Labels], float]:
    """The samples of one scrape, by sample name and labels."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        raise JmxToolError(f"Could not read metrics from {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise JmxToolError(f"Could not connect to {url}: {reason}") from None
    except UnicodeDecodeError:
        raise JmxToolError(f"{url} is not a Prometheus metrics endpoint (the body is not UTF-8 text)") from None
    samples: dict[tuple[str, Labels], float] = {}
    try:
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    except ValueError as exc:
        raise JmxToolError(f"{url} is not a Prometheus metrics endpoint: {exc}") from None
    return samples


def read_mbeans(url: str) -> dict[ObjectName, dict[str, float]]:
    """Every MBean attribute one scrape of ``url`` exports."""
    return exported_mbeans(scrape(url))


@dataclass(frozen=True)
class Selection:
    """The attributes a run reports: ``keys`` (``<object name>:<attribute>``, sorted) and where each is read."""

    keys: tuple[str, ...]
    sources: tuple[tuple[ObjectName, str], ...]

    def values(self, mbeans: Mapping[ObjectName, Mapping[str, float]]) -> list[str] | None:
        """This poll's values in key order, None when one is no longer exported."""
        out = []
        for name, attribute in self.sources:
            value = mbeans.get(name, {}).get(attribute)
            if value is None:
                return None
            out.append(java_value(attribute, value))
        return out


def unmatched(queries: Sequence[ObjectNamePattern], mbeans: Iterable[ObjectName]) -> list[ObjectNamePattern]:
    """The queries no MBean matches."""
    names = list(mbeans)
    return [query for query in queries if not any(query.matches(name) for name in names)]


def select(
    queries: Sequence[ObjectNamePattern],
    mbeans: Mapping[ObjectName, Mapping[str, float]],
    attributes: Sequence[str] | None,
) -> Selection:
    """The attributes of the MBeans any query matches (every MBean without queries), limited to ``attributes``."""
    chosen: dict[str, tuple[ObjectName, str]] = {}
    for name, values in mbeans.items():
        if queries and not any(query.matches(name) for query in queries):
            continue
        for attribute in values:
            if attributes is None or attribute in attributes:
                chosen[f"{name}:{attribute}"] = (name, attribute)
    keys = tuple(sorted(chosen))
    if not keys:
        described = ",".join(str(query) for query in queries) or "*:*"
        exported = {attribute for values in mbeans.values() for attribute in values}
        absent = [attribute for attribute in attributes or () if attribute not in exported]
        hint = f" Not exported by the metrics endpoint: {','.join(absent)}." if absent else ""
        raise JmxToolError(f"No matched attributes for the queried objects {described}.{hint}", usage=True)
    return Selection(keys, tuple(chosen[key] for key in keys))


def wait_for_mbeans(
    url: str,
    queries: Sequence[ObjectNamePattern],
    wait: bool,
    monotonic_ms: Callable[[], float],
    sleep: Callable[[float], None],
    on_retry: Callable[[], None],
) -> dict[ObjectName, dict[str, float]]:
    """Scrape until every query selects an MBean (retrying for 10 s with ``wait``), else fail naming the others."""
    start = monotonic_ms()
    while True:
        mbeans = read_mbeans(url)
        missing = unmatched(queries, mbeans)
        if not missing:
            return mbeans
        if not wait or monotonic_ms() - start >= WAIT_TIMEOUT_MS:
            after = f" after {WAIT_TIMEOUT_MS} ms" if wait else ""
            names = ", ".join(str(query) for query in missing)
            raise JmxToolError(f"Could not find any objects names matching {names}{after}.")
        on_retry()
        sleep(0.1)


def header_line(keys: Sequence[str]) -> str:
    """The ``original`` format's header: every key quoted, ``time`` first."""
    return ",".join(f'"{key}"' for key in ("time", *keys))


def report_lines(report_format: str, keys: Sequence[str], time: str, values: Sequence[str]) -> list[str]:
    """One poll in ``report_format``."""
    pairs = list(zip(("time", *keys), (time, *values), strict=True))
    if report_format == "original":
        return [",".join(value for _, value in pairs)]
    if report_format == "properties":
        return [f"{key}={value}" for key, value in pairs]
    if report_format == "csv":
        return [f'{key},"{value}"' for key, value in pairs]
    return [f"{key}\t{value}" for key, value in pairs]


def java_double(value: float) -> str:
    """``Double.toString``: plain notation for 1e-3 <= |x| < 1e7 (at least one fractional digit), else
    ``d.dddE±n``; shortest digits that read back to the same double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    point = len(digit_tuple) + exponent  # position of the decimal point after the first `point` digits
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole = digits[:point].ljust(point, "0")
        return f"{sign}{whole}.{digits[point:] or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def java_value(attribute: str, value: float) -> str:
    """An attribute value as JmxTool prints it: ``Count`` a long; a gauge's whole number as an integer; the rest as
    doubles."""
    if (attribute in INTEGRAL_ATTRIBUTES or attribute == "Value") and value.is_integer():
        return str(int(value))
    return java_double(value)


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _offset(moment: dt.datetime, colon: bool, minutes: bool = True) -> str:
    seconds = int((moment.utcoffset() or dt.timedelta()).total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds) // 60, 60)
    if not minutes:
        return f"{sign}{hours:02d}"
    return f"{sign}{hours:02d}{':' if colon else ''}{rest:02d}"


def _field(letter: str, count: int, moment: dt.datetime) -> str:
    """One SimpleDateFormat field: ``letter`` repeated ``count`` times."""

    def number(value: int) -> str:
        return str(value).zfill(count)

    hour12 = moment.hour % 12
    fields: dict[str, Callable[[], str]] = {
        "G": lambda: "AD",
        "y": lambda: f"{moment.year % 100:02d}" if count == 2 else number(moment.year),
        "Y": lambda: f"{moment.isocalendar()[0] % 100:02d}" if count == 2 else number(moment.isocalendar()[0]),
        "M": lambda: (
            _MONTHS[moment.month - 1][:3]
            if count == 3
            else _MONTHS[moment.month - 1]
            if count > 3
            else number(moment.month)
        ),
        "d": lambda: number(moment.day),
        "D": lambda: number(moment.timetuple().tm_yday),
        "E": lambda: _DAYS[moment.weekday()] if count > 3 else _DAYS[moment.weekday()][:3],
        "u": lambda: number(moment.isoweekday()),
        "w": lambda: number(moment.isocalendar()[1]),
        "a": lambda: "AM" if moment.hour < 12 else "PM",
        "H": lambda: number(moment.hour),
        "k": lambda: number(moment.hour or 24),
        "K": lambda: number(hour12),
        "h": lambda: number(hour12 or 12),
        "m": lambda: number(moment.minute),
        "s": lambda: number(moment.second),
        "S": lambda: number(moment.microsecond // 1000),
        "z": lambda: moment.tzname() or "UTC",
        "Z": lambda: _offset(moment, colon=False),
        "X": lambda: "Z" if not moment.utcoffset() else _offset(moment, colon=count >= 3, minutes=count >= 2),
    }
    render = fields.get(letter)
    if render is None:
        raise JmxToolError(f"--date-format: Illegal pattern character '{letter}'", usage=True)
    return render()


def compile_date_format(pattern: str) -> Callable[[dt.datetime], str]:
    """A Java ``SimpleDateFormat`` pattern as a formatter: runs of a letter are fields, ``'text'`` is literal
    (``''`` a quote), other characters print as they are. Fails at once on a letter Java does not know."""
    tokens: list[tuple[str, int] | str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'" and pattern.startswith("''", i):
            tokens.append("'")
            i += 2
        elif char == "'":
            literal = []
            i += 1
            while not pattern.startswith("'", i) or pattern.startswith("''", i):
                if i >= len(pattern):
                    raise JmxToolError(f"--date-format {pattern}: Unterminated quote", usage=True)
                literal.append(pattern[i])
                i += 2 if pattern.startswith("''", i) else 1
            tokens.append("".join(literal))
            i += 1
        elif char.isascii() and char.isalpha():
            run = len(pattern) - i - len(pattern[i:].lstrip(char))
            tokens.append((char, run))
            i += run
        else:
            tokens.append(char)
            i += 1
    probe = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    for token in tokens:
        if isinstance(token, tuple):
            _field(token[0], token[1], probe)

    def render(moment: dt.datetime) -> str:
        return "".join(token if isinstance(token, str) else _field(token[0], token[1], moment) for token in tokens)

    return render


def time_field(date_format: Callable[[dt.datetime], str] | None, now_s: float) -> str:
    """The ``time`` column: epoch milliseconds, or the local time through ``--date-format``."""
    if date_format is None:
        return str(int(now_s * 1000))
    return date_format(dt.datetime.fromtimestamp(now_s).astimezone())
