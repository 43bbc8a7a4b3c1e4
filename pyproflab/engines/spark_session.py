"""A SparkSession for pyproflab's Spark engine, when the caller has none.

Rules: an active session (``spark-submit``, a notebook's) is used as it is;
otherwise one is built with ``master`` (default: spark-submit's ``--master``,
else ``local[*]``) and ``conf``.
Its Python workers run this interpreter (``PYSPARK_PYTHON``, unless set), so
they import the same pyproflab, and its SQL time zone is UTC, the store's.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """The active SparkSession, or a new one (see the module docstring)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("pyproflab").config("spark.sql.session.timeZone", "UTC")
    if master:  # else spark-submit's --master, or Spark's default local[*]
        builder = builder.master(master)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
