# Type stub of the C extension pyproflab/keying/_blake.c (optional: without a C
# compiler ids.py hashes with hashlib, to the same ids). See _blake.c; ``rows``:
# only those rows are hashed, the rest of ``out`` is left as it is.
from typing import Any

def hash_segments(data: Any, bounds: Any, person: bytes, out: Any, rows: Any = ...) -> None: ...
def hash_functions(
    off0: Any,
    data0: Any,
    off1: Any,
    data1: Any,
    off2: Any,
    data2: Any,
    start_line: Any,
    out: Any,
    rows: Any = ...,
) -> None: ...
def hash_lists(values: Any, offsets: Any, person: bytes, out: Any, rows: Any = ...) -> None: ...
def same_segments(a: Any, a_starts: Any, b: Any, b_starts: Any, lengths: Any, out: Any) -> None: ...
