"""Parquet output layout shared by the pipeline jobs: which columns partition the files into directories.

``--partition-by`` names any of ``topic``, ``partition`` and ``date`` (the UTC day of the record timestamp, a
``date`` column added to the rows), in the order given: ``topic,partition`` writes
``<path>/topic=orders/partition=0/part-....parquet``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PARTITION_COLUMNS = ("topic", "partition", "date")
DEFAULT_PARTITION_BY = ("topic", "partition")
MICROS_PER_DAY = 86_400_000_000


def parse_partition_by(text: str) -> tuple[str, ...]:
    """``topic,partition,date`` -> the column names; an empty text or ``none`` partitions nothing."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if names in ((), ("none",)):
        return ()
    unknown = [name for name in names if name not in PARTITION_COLUMNS]
    if unknown:
        raise ValueError(f"cannot partition by {', '.join(unknown)}: choose from {', '.join(PARTITION_COLUMNS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a column is named twice in {text!r}")
    return names


def with_partition_columns(df: DataFrame, partition_by: tuple[str, ...]) -> DataFrame:
    """``df`` with the ``date`` column added when it partitions the output (independent of the session time zone)."""
    if "date" not in partition_by:
        return df
    from pyspark.sql import functions as F

    days = F.floor(F.unix_micros(F.col("timestamp")) / MICROS_PER_DAY).cast("int")
    return df.withColumn("date", F.date_from_unix_date(days))
