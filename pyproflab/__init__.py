"""pyproflab: a lab for pprof profiles from fleets of Go services.

Layers, each importing only those before it:
sources/decode -> store -> analyses -> reports -> cli, jobs, notebooks.
"""

from __future__ import annotations

from pyproflab.decode import decode_bytes, read_profile
from pyproflab.errors import ProflabError
from pyproflab.model import Profile, ValueType

__version__ = "0.1.0"

__all__ = [
    "Profile",
    "ProflabError",
    "ValueType",
    "decode_bytes",
    "read_profile",
]
