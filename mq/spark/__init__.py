"""mq for PySpark: the Python data source ``mq`` and a local session that has it registered.

``session()`` builds a SparkSession bound to loopback with quiet logs and the data source registered; on an
existing session call ``register(spark)``. Then ``spark.read.format("mq")``, ``spark.readStream.format("mq")``,
``df.write.format("mq")`` and ``df.writeStream.format("mq")`` take the options of Spark's Kafka source. pyspark is
imported only when these functions run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_SETTINGS: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
}
"""Settings of ``session()``: no UI, no progress bars, loopback only, errors-only logs (the driver JVM also logs
with the ``log4j2.properties`` beside this file unless ``config`` sets ``spark.driver.extraJavaOptions``)."""


def register(spark: SparkSession) -> None:
    """Make ``format("mq")`` available in ``spark``."""
    from mq.spark.source import MqDataSource

    spark.dataSource.register(MqDataSource)


def session(master: str = "local[2]", app_name: str = "mq", config: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession (the active one, if any) on ``master`` with the ``mq`` data source registered.

    Workers run this Python (``PYSPARK_PYTHON``) and Spark binds to 127.0.0.1 (``SPARK_LOCAL_IP``) unless the
    environment already says otherwise; ``config`` adds or overrides Spark settings."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    logging_options = f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties').as_uri()}"
    settings = {**LOCAL_SETTINGS, "spark.driver.extraJavaOptions": logging_options, **(config or {})}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
