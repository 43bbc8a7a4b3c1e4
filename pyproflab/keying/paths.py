"""Which files an ingest reads, and the metadata their paths and sidecars give.

Rules: a path template's ``{field}`` parts match one path component each, in
linear time (``str.find`` per literal); a file's sidecar ``FILE.json`` gives
metadata as an object of strings; ``expand_paths`` turns files, folders and
globs into files (sorted) and Parquet datasets, with one line per refusal.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyproflab.errors import UsageError

#: The file that marks a folder as an exported dataset (see ``store.parquet``).
DATASET_MARKER = "_pyproflab_dataset.json"
# Present in a folder an export is still writing (or was killed writing).
PARTIAL = ".pyproflab-export-partial"
# Why a path named outright that ``expand_paths``' ``skip`` names is no input.
OWN_FILE = "the store's own file; ingest does not read its own store"

_GLOB_CHARS = re.compile(r"[*?\[]")


def is_glob(path: str) -> bool:
    """Whether a named path is a pattern (``*``, ``?``, ``[``) rather than a name."""
    return bool(_GLOB_CHARS.search(path))


_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateMatch:
    """The fields of a path matched by a template (``groupdict`` as ``re`` has)."""

    def __init__(self, fields: dict[str, str]):
        self._fields = fields

    def groupdict(self) -> dict[str, str]:
        return dict(self._fields)


class PathTemplate:
    """A compiled path template: a linear-time matcher, no regex backtracking.

    The template's ``/``-separated parts match the LAST parts of a path, one
    to one. Within a part, literals match themselves; a field takes the
    shortest non-empty text up to the first place the next literal occurs
    (a part's last literal is anchored at the part's end), as the lazy regex
    this replaces did; a field followed directly by another takes one
    character. Taking the earliest occurrence is always safe: a later field
    can absorb any text but ``/``, so if some split matches, this one does.
    Each literal costs one ``str.find``, so matching is linear in the path for
    a fixed template (the regex took 68 s on one 251-byte name). A field used
    twice must match the same text in both places (compared after the split).
    """

    def __init__(self, template: str):
        self.template = template
        self.parts: list[list[tuple[bool, str]]] = []  # (is_field, name or literal)
        self.names: list[str] = []
        for part in template.split("/"):
            tokens: list[tuple[bool, str]] = []
            pos = 0
            for m in _FIELD.finditer(part):
                if m.start() > pos:
                    tokens.append((False, part[pos : m.start()]))
                tokens.append((True, m.group(1)))
                if m.group(1) not in self.names:
                    self.names.append(m.group(1))
                pos = m.end()
            if pos < len(part) or not tokens:
                tokens.append((False, part[pos:]))
            self.parts.append(tokens)

    def search(self, path: str) -> TemplateMatch | None:
        comps = path.split("/")
        if len(comps) < len(self.parts):
            return None
        found: dict[str, str] = {}
        for tokens, text in zip(self.parts, comps[len(comps) - len(self.parts) :], strict=True):
            if not _match_part(tokens, text, found):
                return None
        return TemplateMatch({n: found[n] for n in self.names})


def _match_part(tokens: list[tuple[bool, str]], text: str, found: dict[str, str]) -> bool:
    """Match one path part, adding its fields to ``found`` (see ``PathTemplate``)."""
    pos, n = 0, len(tokens)
    last_literal = max((i for i, (f, _) in enumerate(tokens) if not f), default=-1)
    for i, (is_field, value) in enumerate(tokens):
        if not is_field:
            if not text.startswith(value, pos):
                return False
            pos += len(value)
            continue
        if i == n - 1:
            end = len(text)
        elif tokens[i + 1][0]:
            end = pos + 1  # another field follows: take one character
        elif i + 1 == last_literal and i + 1 == n - 1:
            end = len(text) - len(tokens[i + 1][1])  # the suffix is anchored at the end
        else:
            end = text.find(tokens[i + 1][1], pos + 1)
            if end < 0:
                return False
        if end <= pos or end > len(text):
            return False
        got = text[pos:end]
        if found.setdefault(value, got) != got:
            return False
        pos = end
    return pos == len(text)


def compile_template(template: str) -> PathTemplate:
    """A path template as a matcher against the END of a file's path.

    ``{name}`` matches a non-empty part of one path component (no ``/``);
    everything else is literal. Fields ``service``, ``version``, ``instance``
    fill metadata; ``type`` is a hint for the profile type (it only decides
    between mutex and block, which Go writes identically); ``time`` is
    informational (matched, not stored); any other name becomes a metadata label.
    """
    return PathTemplate(template)


def template_meta(rx: PathTemplate, path: str) -> tuple[dict[str, Any], str | None] | None:
    m = rx.search(Path(path).as_posix())
    if m is None:
        return None
    meta: dict[str, Any] = {"labels": {}}
    hint = None
    for name, value in m.groupdict().items():
        if name in ("service", "version", "instance"):
            meta[name] = value
        elif name == "type":
            hint = value
        elif name != "time":
            meta["labels"][name] = value
    return meta, hint


def sidecar_meta(path: str) -> dict[str, Any] | None:
    """The metadata of ``path + '.json'``, if there is one (raises ValueError if bad)."""
    side = path + ".json"
    if not os.path.isfile(side):
        return None
    try:
        with open(side, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"sidecar {side}: {e}") from None
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise ValueError(f"sidecar {side}: not JSON we read (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ValueError(f"sidecar {side}: expected a JSON object")
    out: dict[str, Any] = {}
    for key in ("service", "version", "instance", "profile_type"):
        if data.get(key) is not None:
            out[key] = _text(side, key, data[key])
    labels = data.get("labels") or {}
    if not isinstance(labels, dict):
        raise ValueError(f"sidecar {side}: labels must be an object")
    out["labels"] = {k: _text(side, f"label {k!r}", v) for k, v in labels.items()}
    for key in ("window_start", "window_end"):
        if data.get(key):
            try:
                t = datetime.fromisoformat(str(data[key]).replace("Z", "+00:00"))
                # In UTC (as stored) it must still be a datetime: 9999-12-31T23:00-01:00 is not.
                out[key] = t.astimezone(UTC) if t.tzinfo else t
            except (ValueError, OverflowError):
                raise ValueError(f"sidecar {side}: bad {key} {data[key]!r}") from None
    return out


def _text(side: str, what: str, value: Any) -> str:
    """A sidecar's value as stored: a string or a finite number; anything else is
    refused (``str`` would store Python's spelling of it: ``None``, ``['x']``, and
    ``inf`` for JSON's 1e400)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"sidecar {side}: {what} must be a finite number, not {value}")
    if isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        return str(value)
    shown = json.dumps(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise ValueError(f"sidecar {side}: {what} must be a string or a number, not {shown}")


def glob_paths(pattern: str) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, sorted, less what ``**`` reached
    through a link to a folder: folders are walked without following links
    (``os.walk``'s rule), and ``**`` follows them, so a link back up repeated
    the tree until the system's limit of links (40 times)."""
    matches = sorted(glob.glob(pattern, recursive=True))
    if "**" not in pattern:
        return matches
    root = os.path.dirname(pattern.split("**", 1)[0] + "x")  # the fixed folder before **
    return [m for m in matches if not _through_link(m, root)]


def _through_link(path: str, root: str) -> bool:
    """Whether ``path``, or a folder between ``root`` and it, is a link to a folder."""
    if os.path.islink(path) and os.path.isdir(path):
        return True
    parent = os.path.dirname(path)
    while len(parent) > len(root) and parent != os.path.dirname(parent):
        if os.path.islink(parent):
            return True
        parent = os.path.dirname(parent)
    return False


def expand_paths(
    paths: Iterable[str | os.PathLike],
    defaults: Any = None,
    path_template: str | None = None,
    skip: Iterable[str] = (),
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(profile files, Parquet dataset folders, refused) from files, folders and globs.

    Folders are walked (sorted); hidden files and ``*.json`` (sidecars) are skipped
    there, and so are the files and folders ``skip`` names (the store being
    written and its side files: never an input, so not refused either) in a
    walk or a glob's matches; one named outright is refused (``OWN_FILE``).
    A folder holding ``_pyproflab_dataset.json`` is a Parquet dataset.
    Metadata for the files (``defaults``: a ``ProfileMeta``; a path template)
    where the paths name datasets alone is a ``UsageError`` (``unused_metadata``).
    """
    files: list[str] = []
    datasets: list[str] = []
    refused: list[tuple[str, str]] = []
    skipped = _skipper(skip)

    def add_dir(d: str) -> None:
        if os.path.isfile(os.path.join(d, DATASET_MARKER)):
            datasets.append(d)
            return
        for root, dirs, names in os.walk(d):
            dirs[:] = sorted(
                x for x in dirs if not x.startswith(".") and not skipped(os.path.join(root, x))
            )
            if os.path.isfile(os.path.join(root, PARTIAL)):
                refused.append((root, "an interrupted Parquet export, not profiles; skipped"))
                dirs[:] = []
                continue
            if os.path.isfile(os.path.join(root, DATASET_MARKER)):
                datasets.append(root)
                dirs[:] = []
                continue
            for n in sorted(names):
                path = os.path.join(root, n)
                if not n.startswith(".") and not n.endswith(".json") and not skipped(path):
                    files.append(path)

    for p in paths:
        s = os.fspath(p)
        if os.path.exists(s) and skipped(s):
            refused.append((s, OWN_FILE))
        elif os.path.isdir(s):
            add_dir(s)
        elif os.path.exists(s):
            files.append(s)
        elif is_glob(s):
            matches = glob_paths(s)
            if not matches:
                refused.append((s, "no files match"))
            for mpath in (m for m in matches if not skipped(m)):
                if os.path.isdir(mpath):
                    add_dir(mpath)
                elif not mpath.endswith(".json"):
                    files.append(mpath)
        else:
            refused.append((s, "no such file or folder"))
    seen: set[str] = set()
    unique = []
    for f in files:
        key = os.path.abspath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    if not unique and (why := unused_metadata(datasets, defaults, path_template)):
        raise UsageError(why)
    return unique, datasets, refused


def _skipper(skip: Iterable[str]) -> Callable[[str], bool]:
    """Whether a walked path is one that ``skip`` names, by real path (a folder
    reached through a link or ``..`` still finds them); only a path whose last
    part is one of theirs costs a ``realpath``."""
    given = [os.fspath(s) for s in skip]
    real = {os.path.realpath(s) for s in given}
    names = {os.path.basename(s) for s in given} | {os.path.basename(r) for r in real}
    return lambda path: os.path.basename(path) in names and os.path.realpath(path) in real


def unused_metadata(datasets: list[str], defaults: Any, path_template: str | None) -> str | None:
    """Why metadata given for a run naming only Parquet datasets is refused (None:
    none was given): a dataset's profiles keep what they were exported with, so
    the given service, version, instance, labels or template would change nothing."""
    names = [n for n in ("service", "version", "instance", "labels") if getattr(defaults, n, None)]
    names += ["path_template"] if path_template else []
    if not datasets or not names:
        return None
    return (
        f"{datasets[0]}: a Parquet dataset keeps the metadata its profiles were exported "
        f"with; the {', '.join(names)} given would apply to no file (drop them)"
    )


def held_nothing(paths: Iterable[str | os.PathLike]) -> str:
    """What the folders and globs named held when no input came of them: the
    store's own files, hidden files and .json sidecars (all skipped), or nothing
    ('empty folder' was said of a folder holding the store)."""
    named = [os.fspath(p) for p in paths]
    found = 0  # every file there, as a walk that skips nothing finds them
    for p in named:
        for m in glob_paths(p) if is_glob(p) else [p]:
            walk = os.walk(m) if os.path.isdir(m) else [("", [], [m])]
            found += sum(len(names) for _, _, names in walk)
    store = len(expand_paths(named)[0])  # the walk with the store's files not skipped
    held = ["the store itself"] if store else []
    held += ["hidden files or .json sidecars"] if found > store else []
    return f"only {' and '.join(held)}, which ingest skips" if held else "empty folder"
