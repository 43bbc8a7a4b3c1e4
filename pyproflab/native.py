"""Optional C extensions: each has a pure Python path giving the same results.

``optional_extension(name, env)`` imports ``name`` or returns None when it was
not built (no compiler at install) or when the environment variable ``env`` is
set to anything but 0, which forces the pure path (for tests that compare the
two and for debugging).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def optional_extension(name: str, env: str) -> ModuleType | None:
    """The extension module ``name``, or None (see the module rules)."""
    if os.environ.get(env, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
