# Type stub of the C extension pyproflab/decode/_inflate.c (optional: built where
# libdeflate's headers are; decode/pprof.py streams with zlib-ng without it).

def whole(data: bytes | bytearray, size: int) -> bytes | None: ...
