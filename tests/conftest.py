"""pytest's entry point for tests/: the fixtures and shared helpers live in
tests/support (``support/testenv.py`` and the modules it lists); test modules
import helpers from ``support`` only, never from each other."""

import pytest

# Helpers get pytest's assert messages too (they are imported, not collected).
pytest.register_assert_rewrite("support")

pytest_plugins = [
    "support.testenv",
    "support.gc_categories_helpers",
    "support.spark_helpers",
    "support.push_helpers",
    "support.trace_helpers",
]
