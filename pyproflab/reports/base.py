"""The shape every reporter shares."""

from __future__ import annotations

import io
from typing import IO


class Reporter:
    """Renders one result; subclasses implement ``render(out)``."""

    def __init__(self, result) -> None:
        self.result = result

    def render(self, out: IO[str]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def render_to_string(self) -> str:
        buf = io.StringIO()
        self.render(buf)
        return buf.getvalue()
