"""The GOGC analysis' one options object, and the parsers of its values.

Every way in (the CLI, ``lab.gogc``, jobs, the report) builds a
``GogcOptions`` with ``GogcOptions.parse`` from the words a user writes
(``2.5x``, ``2GiB``, ``10%``, ``off``), so the rules live here once:

- sizes: ``2GiB``, ``512MiB`` (powers of 1024), ``1.5G`` (powers of 1000),
  ``1e9`` or a number of bytes;
- a GOGC: a number, or ``off`` (also any negative number);
- a memory limit: a size, or ``off``/``none`` (so is GOMEMLIMIT's MaxInt64);
- the budget: a size, or ``Nx`` (N times the current setting's predicted
  peak memory); none given: the container's memory limit when known;
- headroom: ``10%``, ``0.1`` or a size kept free of the budget.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyproflab.errors import UsageError

NO_LIMIT = float(2**63 - 1)
DEFAULT_CANDIDATES: tuple[float | None, ...] = (25, 50, 100, 150, 200, 300, 400, 800, None)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([kmgtp]?)(i?)b?\s*$", re.I)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str | float | int) -> float:
    """Bytes from ``2GiB``, ``512MiB``, ``1.5G`` (SI), ``1e9`` or a number."""
    if isinstance(text, (int, float)):
        v = float(text)
    else:
        m = _SIZE.match(text)
        if not m:
            raise UsageError(f"bad size {text!r}: expected e.g. 2GiB, 512MiB, 1.5G or bytes")
        base = 1024.0 if m.group(3) else 1000.0
        v = float(m.group(1)) * base ** _POW[m.group(2).lower()]
    if not math.isfinite(v) or v < 0:
        raise UsageError(f"bad size {text!r}: must be a finite size of 0 or more")
    return v


def parse_gogc(text: str | float | int | None) -> float | None:
    """A GOGC: a number of 0 or more, or ``off`` (None; also any negative number)."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        if not math.isfinite(text):
            raise UsageError(f"bad GOGC {text!r}: expected a number or off")
        return None if text < 0 else float(text)
    t = text.strip().lower()
    if t == "off":
        return None
    try:
        return parse_gogc(float(t))
    except ValueError:
        raise UsageError(f"bad GOGC {text!r}: expected a number or off") from None


def parse_limit(text: str | float | int | None) -> float | None:
    """A memory limit: a size, or ``off``/``none`` (None; so is MaxInt64)."""
    if text is None:
        return None
    if isinstance(text, str) and text.strip().lower() in ("off", "none", ""):
        return None
    v = parse_size(text)
    if v <= 0:
        raise UsageError(f"bad memory limit {text!r}: must be positive")
    return None if v >= NO_LIMIT - 1024 else v


def parse_candidates(text: str | Iterable[Any]) -> list[float | None]:
    """GOGC candidates from ``25,50,off`` (or an iterable of numbers / ``off``)."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = [parse_gogc(x) for x in items if not (isinstance(x, str) and not x.strip())]
    if not out:
        raise UsageError("no GOGC candidates given")
    return list(dict.fromkeys(out))


def parse_limits(text: str | Iterable[Any] | None) -> list[float | None] | None:
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    return list(dict.fromkeys(parse_limit(x) for x in items))


def parse_fraction(text: str | float) -> float:
    """``10%`` or ``0.1`` -> 0.1 (0 <= f < 1)."""
    try:
        if isinstance(text, str):
            t = text.strip()
            v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
        else:
            v = float(text)
    except ValueError:
        raise UsageError(f"bad fraction {text!r}: expected e.g. 10% or 0.1") from None
    if not 0 <= v < 1:
        raise UsageError(f"fraction {text!r} out of range [0, 1)")
    return v


@dataclass(frozen=True)
class Budget:
    """A memory budget: ``bytes``, or ``times`` the current predicted peak."""

    bytes: float | None = None
    times: float | None = None

    @classmethod
    def parse(cls, text: str | float | None) -> Budget | None:
        if text is None:
            return None
        if isinstance(text, str) and text.strip().lower().endswith("x"):
            try:
                k = float(text.strip()[:-1])
            except ValueError:
                raise UsageError(f"bad budget {text!r}: expected e.g. 2GiB or 2.5x") from None
            if not (k > 0 and math.isfinite(k)):
                raise UsageError(f"bad budget {text!r}: the multiple must be positive")
            return cls(times=k)
        v = parse_size(text)
        if v <= 0:
            raise UsageError(f"bad budget {text!r}: must be positive")
        return cls(bytes=v)

    def resolve(self, current_peak: float) -> float:
        if self.bytes is not None:
            return self.bytes
        if not math.isfinite(current_peak):
            raise UsageError("a relative budget needs a finite current peak memory")
        return (self.times or 1.0) * current_peak

    def __str__(self) -> str:
        return (
            f"{self.times:g}x" if self.times is not None else f"{(self.bytes or 0) / 2**20:.0f}MiB"
        )


@dataclass(frozen=True)
class GogcOptions:
    """What to predict and under which budget; the current setting and the
    figures the GC data lack, when given.

    ``candidates``: GOGC values; ``memory_limits``: limits to predict (None:
    the current one); ``settings``: exactly these (GOGC, limit) pairs instead.
    ``budget``: None takes the container's memory limit when known.
    ``headroom``: a fraction of the budget, or ``headroom_bytes``.
    ``gogc``/``current_limit``: the current setting, when the data do not
    show it (``"auto"``: from the data). ``process_cpu`` (cores) and
    ``peak_rss`` (bytes): at the current setting. ``cpu_limit`` (cores),
    ``container_memory`` (bytes), ``cgroup`` (a directory or v1 name): the
    container's limits.
    """

    candidates: tuple[float | None, ...] = DEFAULT_CANDIDATES
    memory_limits: tuple[float | None, ...] | None = None
    settings: tuple[tuple[float | None, float | None], ...] | None = None
    budget: Budget | None = None
    headroom: float = 0.1
    headroom_bytes: float | None = None
    gogc: float | None | str = "auto"
    current_limit: float | None | str = "auto"
    process_cpu: float | None = None
    peak_rss: float | None = None
    cpu_limit: float | None = None
    container_memory: float | None = None
    cgroup: str | None = None

    @classmethod
    def parse(cls, **kw: Any) -> GogcOptions:
        """Options from user words (module rules); None values take the defaults."""
        kw = {k: v for k, v in kw.items() if v is not None}
        out: dict[str, Any] = {}
        if "candidates" in kw:
            out["candidates"] = tuple(parse_candidates(kw.pop("candidates")))
        if "memory_limits" in kw:
            out["memory_limits"] = tuple(parse_limits(kw.pop("memory_limits")) or ())
        if "budget" in kw:
            out["budget"] = Budget.parse(kw.pop("budget"))
        if "headroom" in kw:
            h = kw.pop("headroom")
            if isinstance(h, str) and not h.strip().endswith("%") and re.search(r"[a-zA-Z]", h):
                out["headroom_bytes"] = parse_size(h)
            else:
                out["headroom"] = parse_fraction(h)
        if "gogc" in kw:
            g = kw.pop("gogc")
            out["gogc"] = "auto" if g == "auto" else parse_gogc(g)
        if "current_limit" in kw:
            m = kw.pop("current_limit")
            out["current_limit"] = "auto" if m == "auto" else parse_limit(m)
        for k in ("peak_rss", "container_memory"):
            if k in kw:
                out[k] = parse_size(kw.pop(k))
        for k in ("process_cpu", "cpu_limit"):
            if k in kw:
                v = float(kw.pop(k))
                if not (v > 0 and math.isfinite(v)):
                    raise UsageError(f"{k.replace('_', ' ')} must be a positive number of cores")
                out[k] = v
        if "settings" in kw:
            out["settings"] = tuple(tuple(x) for x in kw.pop("settings"))
        if "cgroup" in kw:
            out["cgroup"] = str(kw.pop("cgroup"))
        if kw:
            raise UsageError(f"unknown GOGC option(s): {', '.join(sorted(kw))}")
        return cls(**out)

    def usable(self, budget: float) -> float:
        """The budget less the headroom; refused when nothing is left."""
        out = budget - self.headroom_bytes if self.headroom_bytes else budget * (1 - self.headroom)
        if out <= 0:
            raise UsageError("budget minus headroom is not positive")
        return out
