# Type stub of the C extension pyproflab/decode/_wire.c (optional: without a C
# compiler the decoder uses its numpy path). Its functions take and return
# buffers and arrays; see _wire.c for their contracts.
from typing import Any

def __getattr__(name: str) -> Any: ...
