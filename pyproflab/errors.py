"""The errors pyproflab raises for problems a user can fix.

Every error a user can cause (a bad file, a bad flag, a busy or missing store)
is a ``ProflabError``. The CLI prints such an error as one line and exits with
its ``exit_code``; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class ProflabError(Exception):
    """Base of every error caused by input or usage; one line, exit code 2."""

    exit_code = 2


class UsageError(ProflabError):
    """A bad argument or option."""


class ProfileError(ProflabError):
    """A profile could not be read. ``source`` names the file (or ``<bytes>``)."""

    def __init__(self, source: str, problem: str):
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class NotAProfileError(ProfileError):
    """The input is not a pprof profile at all (text, JSON, random bytes, empty)."""


class LegacyFormatError(ProfileError):
    """A pre-proto pprof format (legacy text or binary) that pyproflab does not read."""


class CorruptProfileError(ProfileError):
    """The input looks like a profile but is truncated or does not parse."""


class TooLargeError(ProfileError):
    """Decompressing the input would exceed the size cap (a gzip bomb, or a huge profile)."""


class InvalidProfileError(ProfileError):
    """The profile parses but breaks a rule of the format (ids, references, strings)."""


class TraceError(ProfileError):
    """A Go execution trace could not be read (not a trace, an older format,
    truncated or damaged), in the helper's one line."""


class StoreError(ProflabError):
    """The store cannot be opened or used (missing, busy, wrong schema)."""


class StoreIOError(StoreError):
    """The store file failed a read or write: a checksum that does not match (a
    damaged file), an I/O error, a full disk. Never a note or a skipped
    section: every command stops with this one line, exit 2."""


class IdCollisionError(StoreError):
    """Two different contents got the same content id: the newcomer is refused,
    never merged into the row already stored (a forged or colliding id)."""


class MetricsError(ProflabError):
    """GC metrics could not be read (Prometheus text or API, gctrace logs).

    ``source`` names the file or URL; ``line`` is the 1-based line number when
    the problem is in one line of text (else ``None``).
    """

    def __init__(self, source: str, problem: str, *, line: int | None = None):
        self.source = source
        self.problem = problem
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
