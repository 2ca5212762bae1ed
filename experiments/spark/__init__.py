"""Spark jobs over experiment workloads and logs: `replay` (workload → overlay) and `aggregate`.

Both run in local mode (`local[*]`) by default and on a cluster with `--master spark://host:7077`.
`session` builds the quiet, quick-starting SparkSession they share.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def session(
    app: str, master: str | None = None, *, shuffle_partitions: int = 4, driver_memory: str = "512m"
) -> "SparkSession":
    """A SparkSession for small jobs: no UI, few shuffle partitions, WARN logging, small driver.

    In local mode the Python workers are this interpreter (so they see the same packages) and
    the driver binds to 127.0.0.1 (no host-name lookup, no warning about it); note that in local
    mode the tasks run inside the driver JVM, so `driver_memory` is also their heap. On a cluster
    the executors' Python must have `eventcloud` installed (or pass it with --py-files).
    """
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    builder = (
        SparkSession.builder.appName(app)
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        # PySpark starts its Python workers with $PYSPARK_PYTHON (default: whatever `python3` is
        # on PATH, which may lack pyoxigraph); make it this interpreter unless the user chose.
        if not os.environ.get("PYSPARK_PYTHON"):
            os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


__all__ = ["DEFAULT_MASTER", "session"]
