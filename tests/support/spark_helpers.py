"""The Spark session of the engine tests (tests/engines/), one per test module.

Spark needs Java and pyspark: `make system-deps` installs Debian's JDK when java
is missing, `make setup` installs the spark extra. Without either the tests skip
and say which is missing. The session is local[2], small (few shuffle
partitions, 1 GiB driver, no UI), and its Python workers run this interpreter.
"""

from __future__ import annotations

import os
import shutil

import pytest

SKIP_NO_JAVA = (
    "Java is not installed (`java` not on PATH; `make system-deps` installs Debian's JDK)"
)
SKIP_NO_PYSPARK = "pyspark is not installed (the spark extra: pip install -e '.[spark]')"


def spark_skip_reason() -> str | None:
    """Why Spark cannot run here, or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return SKIP_NO_JAVA
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return SKIP_NO_PYSPARK
    return None


@pytest.fixture(scope="module")
def spark():
    """One local[2] SparkSession per test module, stopped after it (so no idle JVM
    holds memory while the rest of the suite runs)."""
    reason = spark_skip_reason()
    if reason:
        pytest.skip(reason)
    from pyproflab.engines.spark_session import local_session

    session = local_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


__all__ = ["SKIP_NO_JAVA", "SKIP_NO_PYSPARK", "spark", "spark_skip_reason"]
