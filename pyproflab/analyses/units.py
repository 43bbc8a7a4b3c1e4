"""Units of sample values, as pprof's ``measurement`` package treats them.

Rules (re-expressed from pprof):

- Three families of units are known: bytes (B kB MB GB TB PB, powers of 1024),
  time (ns us ms s hrs) and GCU (n*GCU … P*GCU, powers of 1000). A unit string
  is recognised case-insensitively, with a trailing ``s`` dropped when it is
  longer than two characters (``nanoseconds`` -> ``nanosecond``).
- ``scale(v, from, to)`` converts within a family; ``to`` = ``auto``/``minimum``
  picks the largest unit in which the value is >= 1. Unknown units pass through.
- ``scaled_label`` prints ``%.2f`` without a trailing ``.00``; zero is ``0``.
- ``percentage`` prints like pprof's top columns (``  100%``, ``12.34%``, `` 0.5%``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class _Unit:
    name: str
    aliases: tuple[str, ...]
    factor: float


@dataclass(frozen=True)
class _Family:
    default: _Unit
    units: tuple[_Unit, ...]

    def sniff(self, unit: str) -> _Unit | None:
        unit = unit.lower()
        if len(unit) > 2 and unit.endswith("s"):
            unit = unit[:-1]
        for u in self.units:
            if unit in u.aliases:
                return u
        return None

    def auto_scale(self, value: float) -> tuple[float, str] | None:
        best, name = 0.0, ""
        for u in self.units:
            if u.factor >= best and value / u.factor >= 1.0:
                best, name = u.factor, u.name
        if best == 0:
            return None
        return value / best, name

    def convert(self, value: int, from_unit: str, to_unit: str) -> tuple[float, str] | None:
        src = self.sniff(from_unit)
        if src is None:
            return None
        v = float(value) * src.factor
        if to_unit in ("minimum", "auto"):
            scaled = self.auto_scale(v)
            if scaled is not None:
                return scaled
            return v / self.default.factor, self.default.name
        dst = self.sniff(to_unit)
        if dst is None:
            return v / self.default.factor, self.default.name
        return v / dst.factor, dst.name


_BYTE = _Unit("B", ("b", "byte"), 1.0)
FAMILIES: tuple[_Family, ...] = (
    _Family(
        _BYTE,
        (
            _BYTE,
            _Unit("kB", ("kb", "kbyte", "kilobyte"), float(1 << 10)),
            _Unit("MB", ("mb", "mbyte", "megabyte"), float(1 << 20)),
            _Unit("GB", ("gb", "gbyte", "gigabyte"), float(1 << 30)),
            _Unit("TB", ("tb", "tbyte", "terabyte"), float(1 << 40)),
            _Unit("PB", ("pb", "pbyte", "petabyte"), float(1 << 50)),
        ),
    ),
    _Family(
        _Unit("s", (), 1e9),
        (
            _Unit("ns", ("ns", "nanosecond"), 1.0),
            _Unit("us", ("μs", "us", "microsecond"), 1e3),
            _Unit("ms", ("ms", "millisecond"), 1e6),
            _Unit("s", ("s", "sec", "second"), 1e9),
            _Unit("hrs", ("hour", "hr"), 3600e9),
        ),
    ),
    _Family(
        _Unit("GCU", (), 1.0),
        (
            _Unit("n*GCU", ("nanogcu",), 1e-9),
            _Unit("u*GCU", ("microgcu",), 1e-6),
            _Unit("m*GCU", ("milligcu",), 1e-3),
            _Unit("GCU", ("gcu",), 1.0),
            _Unit("k*GCU", ("kilogcu",), 1e3),
            _Unit("M*GCU", ("megagcu",), 1e6),
            _Unit("G*GCU", ("gigagcu",), 1e9),
            _Unit("T*GCU", ("teragcu",), 1e12),
            _Unit("P*GCU", ("petagcu",), 1e15),
        ),
    ),
)


def scale(value: int, from_unit: str, to_unit: str) -> tuple[float, str]:
    """``value`` in ``from_unit`` expressed in ``to_unit`` (or auto-picked): (number, unit)."""
    if value < 0:
        v, u = scale(-value, from_unit, to_unit)
        return -v, u
    for fam in FAMILIES:
        got = fam.convert(value, from_unit, to_unit)
        if got is not None:
            return got
    if to_unit in ("count", "sample", "unit", "minimum", "auto"):
        return float(value), ""
    return float(value), to_unit


def scaled_label(value: int, from_unit: str, to_unit: str) -> str:
    """pprof's printed value: two decimals, ``.00`` dropped, unit appended."""
    v, u = scale(value, from_unit, to_unit)
    text = f"{v:.2f}"
    if text.endswith(".00"):
        text = text[:-3]
    if text in ("0", "-0"):
        return "0"
    return text + u


def label(value: int, unit: str) -> str:
    """Auto-scaled label (``1.50s``, ``12MB``)."""
    return scaled_label(value, unit, "auto")


def percentage(value: int, total: int) -> str:
    """pprof's percentage column text (absolute ratio; width 5 before ``%``)."""
    ratio = abs(value / total) * 100 if total != 0 else 0.0
    if 99.95 <= ratio <= 100.05:
        return "  100%"
    if ratio >= 1.0:
        return f"{ratio:5.2f}%"
    return f"{ratio:5.2g}%"


def ratio_pct(value: int, total: int) -> float:
    """The percentage pprof prints, as a number (absolute; 0 when total is 0)."""
    return abs(value / total) * 100 if total != 0 else 0.0


def compatible_units(a: str, b: str) -> bool:
    """Whether two units are equal or belong to one known family."""
    if a == b:
        return True
    return any(f.sniff(a) is not None and f.sniff(b) is not None for f in FAMILIES)


def pick_output_unit(min_value: int, max_value: int, sample_unit: str) -> str:
    """pprof's "minimum" output unit: the unit of the smallest non-zero value, or a
    larger one when that value is 100x smaller than the total (``selectOutputUnit``)."""
    if min_value == 0:
        min_value = max_value
    _, min_unit = scale(min_value, sample_unit, "minimum")
    _, max_unit = scale(max_value, sample_unit, "minimum")
    unit = min_unit
    if min_unit != max_unit and min_value * 100 < max_value:
        _, unit = scale(100 * min_value, sample_unit, "minimum")
    return unit or sample_unit


# --- quantities for people (not pprof's columns) ------------------------------------

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SI = ("", "k", "M", "G", "T", "P")
_TIME = ((1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s"))


def _sig(v: float, digits: int) -> str:
    """``v`` with ``digits`` significant digits, plain notation (never ``e+07``)."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def quantity(value: float | None, unit: str, *, signed: bool = False, digits: int = 3) -> str:
    """``value`` in ``unit`` for people: scaled into the unit's family, ``digits``
    significant digits, trailing zeros dropped, never scientific notation
    (``+33.4 MiB/s``, ``+1.2 ms``, ``0.018 cores``). Units: ``B`` (powers of 1024,
    IEC names), ``s`` (ns to s), anything else with SI prefixes before it
    (``12.3k/s``); a ``/s`` suffix is kept after the scaled unit; ``share``
    in percent (``1.5%``), signed in percentage points (``+0.4 pp``). None or
    NaN prints ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    sign = ("+" if value >= 0 else "-") if signed else ("-" if value < 0 else "")
    v = abs(float(value))
    base, per = (unit[:-2], "/s") if unit.endswith("/s") and unit != "s/s" else (unit, "")
    if base == "share":
        # A share prints in percent, its change in percentage points: "+0.44 pp"
        # cannot be read as the relative change the next column shows.
        return f"{sign}{_sig(v * 100, digits)}{' pp' if signed else '%'}"
    if base == "B":
        i = 0
        while v >= 1024 and i < len(_BINARY) - 1:
            v, i = v / 1024, i + 1
        text, name = _sig(v, digits), f" {_BINARY[i]}"
    elif base == "s":
        factor, name = next(((f, n) for f, n in reversed(_TIME) if v >= f), _TIME[0])
        text, name = _sig(v / factor, digits), f" {name}"
    elif base in ("", "count") or v >= 1000:
        i = 0
        while v >= 1000 and i < len(_SI) - 1:
            v, i = v / 1000, i + 1
        text, name = _sig(v, digits), _SI[i] + (f" {base}" if base not in ("", "count") else "")
    else:
        text, name = _sig(v, digits), f" {base}"
    return f"{sign}{text}{name}{per}"
