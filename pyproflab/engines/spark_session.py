"""A SparkSession for pyproflab's Spark engine, when the caller has none.

Rules: an active session (``spark-submit``, a notebook's) is used as it is;
otherwise one is built with ``master`` (default: spark-submit's ``--master``,
else ``local[*]``) and ``conf``.
Its Python workers run this interpreter (``PYSPARK_PYTHON``, unless set), so
they import the same pyproflab, and its SQL time zone is UTC, the store's.
``quiet`` (the CLI's sessions): no console progress bars and Spark's own log at
ERROR (``spark-log4j2.properties``, given to the driver JVM at its start, so its
start-up WARN lines go too), unless ``conf`` sets those keys; and pyspark's
warning that it does not fully support the installed pandas is not shown (the
engine hands Arrow tables over, not pandas frames). A command's stderr is then
its own lines, bar what the JVM launcher itself prints.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

LOG4J2 = Path(__file__).with_name("spark-log4j2.properties")


def local_session(
    master: str | None = None, conf: dict[str, str] | None = None, *, quiet: bool = False
) -> Any:
    """The active SparkSession, or a new one (see the module docstring)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("pyproflab").config("spark.sql.session.timeZone", "UTC")
    if master:  # else spark-submit's --master, or Spark's default local[*]
        builder = builder.master(master)
    for key, value in {**(quiet_conf() if quiet else {}), **(conf or {})}.items():
        builder = builder.config(key, value)
    if not quiet:
        return builder.getOrCreate()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def quiet_conf() -> dict[str, str]:
    """The conf of a quiet session (module rules)."""
    return {
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}",
    }
