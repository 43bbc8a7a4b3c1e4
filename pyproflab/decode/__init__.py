"""Decode pprof files (gzipped or raw protobuf) into ``pyproflab.model.Profile``."""

from pyproflab.decode.limits import LimitError, Limits
from pyproflab.decode.pprof import (
    DEFAULT_MAX_BYTES,
    decode_bytes,
    decompress,
    read_profile,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "LimitError",
    "Limits",
    "decode_bytes",
    "decompress",
    "read_profile",
]
