# Type stub of the C extension pyproflab/store/_blake.c (optional: without a C
# compiler ids.py hashes with hashlib, to the same ids). See _blake.c.
from typing import Any

def hash_segments(data: Any, bounds: Any, person: bytes, out: Any) -> None: ...
def hash_functions(
    off0: Any, data0: Any, off1: Any, data1: Any, off2: Any, data2: Any, start_line: Any, out: Any
) -> None: ...
