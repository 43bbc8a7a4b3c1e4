"""Profiles to content-keyed rows, without a database: what the store writes.

``keys.key_profile`` turns a profile into rows keyed by content (``ids``: the
ids, blake2b of each row's content, hashed in ``_blake.c`` when built;
``digests``: the ids of content the process hashed before; ``quick_hash``:
cheap hashes that find repeats); ``profile_types`` says what kind of profile
it is. ``paths`` says which files a path names and what their templates and
sidecars add; ``prepare`` reads and keys files in worker processes, each
leaving out the rows it has already sent with the same bytes (``sent``).
Nothing here opens a store: the store (``store/ingest.py``) writes what comes
out, and other engines (Spark's ingest) can key the same way.
"""
