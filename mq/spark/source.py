"""The Python data source ``mq``: ``spark.read/readStream.format("mq")`` and ``df.write/writeStream.format("mq")``.

Options are validated when a reader or writer is made, on the driver; see ``mq.spark.options``. The schema is
Spark's Kafka source's: key, value, topic, partition, offset, timestamp, timestampType, and headers with
``includeHeaders=true``.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mq.spark.options import include_headers, read_options, write_options
from mq.spark.reader import BatchReader, StreamReader
from mq.spark.writer import BatchWriter, StreamWriter, check_write_schema

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def record_schema(include_headers: bool) -> StructType:
    """The columns of a read, in Spark's Kafka source's order."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class MqDataSource(DataSource):
    """Reads topics as rows of records and writes rows as records, through mq's own clients."""

    @classmethod
    def name(cls) -> str:
        return "mq"

    def schema(self) -> StructType:
        return record_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(read_options(self.options, streaming=False), self._fixed(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(read_options(self.options, streaming=True), self._fixed(schema))

    def _fixed(self, schema: StructType) -> StructType:
        """Reads have the fixed schema of Spark's Kafka source; a schema given by the user is refused, as there."""
        expected = self.schema()
        if schema != expected:
            raise ValueError(f"the mq source has a fixed schema and cannot be read as {schema.simpleString()}")
        return expected

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = write_options(self.options)
        check_write_schema(schema, options)
        return BatchWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = write_options(self.options)
        check_write_schema(schema, options)
        return StreamWriter(options, schema)
