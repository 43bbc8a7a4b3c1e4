"""The push protocols' parsers (sources/push.py, sources/multipart.py) on the
recorded SDK requests and on hand-made edge cases."""

from __future__ import annotations

import gzip

import pytest
from support.push_helpers import RECORDED, records

from pyproflab.errors import CorruptProfileError, ProfileError, TooLargeError
from pyproflab.sources.multipart import MultipartError, header_params, parse_multipart
from pyproflab.sources.push import (
    PushError,
    check_size,
    cut,
    parse_app_name,
    parse_datadog,
    parse_pyroscope,
    pprof_bytes,
    push_meta,
)

DD = records(RECORDED / "dd")
PYRO = records(RECORDED / "pyro")


def test_datadog_upload():
    _, rec, body = DD[0]
    push = parse_datadog(rec["header"]["Content-Type"][0], body)
    names = [a.name for a in push.attachments]
    assert {"cpu.pprof", "delta-heap.pprof", "goroutines.pprof", "metrics.json"} <= set(names)
    assert push.tags["service"] == "ddpush" and push.tags["env"] == "test"
    assert push.start_ns < push.end_ns
    meta = push_meta(push)
    assert (meta["service"], meta["version"], meta["instance"]) == ("ddpush", "v1.2.3", "dd-1")
    from pyproflab.decode import decode_bytes

    for a in push.profiles:
        profile = decode_bytes(pprof_bytes(a.data, source=a.name, max_bytes=1 << 26))
        assert profile.samples.num_rows > 0, a.name


def test_pyroscope_push():
    _, rec, body = PYRO[0]
    push = parse_pyroscope(rec["url"].split("?", 1)[1], rec["header"]["Content-Type"][0], body)
    assert [a.name for a in push.attachments] == ["profile"]
    assert push.details["app"] == "pyropush" and push.details["spyName"] == "gospy"
    meta = push_meta(push)
    assert (meta["service"], meta["version"], meta["instance"]) == ("pyropush", "v2.0.0", "pyro-1")


@pytest.mark.parametrize(
    ("name", "app", "tags"),
    [
        ("app", "app", {}),
        ("app{}", "app", {}),
        ("my.app{env=prod,region=eu-1}", "my.app", {"env": "prod", "region": "eu-1"}),
        ("a{k=v=w}", "a", {"k": "v=w"}),
    ],
)
def test_app_names(name, app, tags):
    assert parse_app_name(name) == (app, tags)


@pytest.mark.parametrize("name", ["app{k=v", "app{novalue}", "app{=v}"])
def test_bad_app_names(name):
    with pytest.raises(PushError):
        parse_app_name(name)


@pytest.mark.parametrize(
    ("value", "ns"),
    [
        ("1700000000", 1700000000 * 10**9),
        ("1700000000123", 1700000000123 * 10**6),
        ("1700000000123456789", 1700000000123456789),
    ],
)
def test_pyroscope_times_in_any_unit(value, ns):
    _, rec, body = PYRO[0]
    query = rec["url"].split("?", 1)[1].replace("from=", "x=") + f"&from={value}"
    push = parse_pyroscope(query, rec["header"]["Content-Type"][0], body)
    assert push.start_ns == ns


@pytest.mark.parametrize("value", ["1" + "0" * 40, "-5", "253402300800000000000"])
def test_pyroscope_times_past_what_a_store_keeps_are_refused(value):
    _, rec, body = PYRO[0]
    query = rec["url"].split("?", 1)[1].replace("from=", "x=") + f"&from={value}"
    with pytest.raises(PushError, match="from=.* outside the years 1970 to 9999"):
        parse_pyroscope(query, rec["header"]["Content-Type"][0], body)


def test_datadog_times_past_what_a_store_keeps_are_refused_and_the_last_one_is_kept():
    _, rec, body = DD[0]
    ct = rec["header"]["Content-Type"][0]
    start = b'"start":"9999-12-31T23:59:59.999999999Z"'
    push = parse_datadog(ct, _with_event_field(body, b'"start":', start))
    assert push_meta(push)["window_start"].year == 9999  # no float rounding into year 10000
    with pytest.raises(PushError, match="start .* outside the years 1970 to 9999"):
        parse_datadog(ct, _with_event_field(body, b'"start":', b'"start":"1969-12-31T23:59:59Z"'))


def _with_event_field(body: bytes, key: bytes, new: bytes) -> bytes:
    """The upload with the event's field ``key`` (and its string value) set to ``new``."""
    at = body.index(key)
    end = body.index(b'"', body.index(b'"', at + len(key)) + 1) + 1
    return body[:at] + new + body[end:]


def test_json_nested_too_deeply_is_a_push_error():
    _, rec, body = DD[0]
    ct = rec["header"]["Content-Type"][0]
    at = body.index(b"{", body.index(b'name="event"'))
    end = body.index(b"\r\n--", at)
    with pytest.raises(PushError, match="event part is not JSON"):
        parse_datadog(ct, body[:at] + b"[" * 100_000 + body[end:])


def test_too_many_tags_and_long_values():
    with pytest.raises(PushError) as e:
        parse_app_name("a{" + ",".join(f"k{i}=v" for i in range(200)) + "}")
    assert e.value.reason == "too_many_tags"
    assert cut("é" * 200, 11) == "é" * 5  # never half a character
    assert len(cut("x" * 1000, 256)) == 256


def test_multipart_edge_cases():
    ct = "multipart/form-data; boundary=XyZ"
    body = (
        b'--XyZ\r\nContent-Disposition: form-data; name="a\\"b"; filename="f"\r\n\r\n'
        b"hello\r\n--XyZ--\r\n"
    )
    (part,) = parse_multipart(body, ct)
    assert (part.name, part.filename, part.data) == ('a"b', "f", b"hello")
    for bad in (body[:-9], body + b"junk", b"--Other\r\n", body.replace(b"name=", b"nom=")):
        with pytest.raises(MultipartError):
            parse_multipart(bad, ct)
    with pytest.raises(MultipartError):
        parse_multipart(body, "application/json")
    many = b"".join(
        b'--XyZ\r\nContent-Disposition: form-data; name="p"\r\n\r\nx\r\n' for _ in range(70)
    )
    with pytest.raises(MultipartError, match="more than 64"):
        parse_multipart(many + b"--XyZ--", ct)
    assert header_params('form-data; name=plain; x="q"') == (
        "form-data",
        {"name": "plain", "x": "q"},
    )


def test_size_checks_stop_at_the_cap():
    from backports import zstd

    raw = b"\0" * (4 << 20)
    for data in (gzip.compress(raw), zstd.compress(raw), gzip.compress(raw) * 2):
        with pytest.raises(TooLargeError):
            check_size(data, source="x", max_bytes=1 << 20)
        check_size(data, source="x", max_bytes=16 << 20)
    with pytest.raises(TooLargeError):
        pprof_bytes(zstd.compress(raw), source="x", max_bytes=1 << 20)
    for broken in (gzip.compress(raw)[:100], zstd.compress(raw)[:10]):
        with pytest.raises(CorruptProfileError):
            check_size(broken, source="x", max_bytes=16 << 20)


def _profile_parts() -> list[tuple[str, bytes]]:
    from pyproflab.sources.multipart import parse_multipart as split

    parts = []
    for _, rec, body in DD + PYRO:
        for p in split(body, rec["header"]["Content-Type"][0]):
            if p.name.endswith(".pprof") or p.name == "profile":
                parts.append((p.name, p.data))
    return parts


def test_check_profile_inflates_each_part_once(monkeypatch):
    """The receive-time check inflates a pushed part once. Before, it inflated
    it twice, its size first (``check_size``) then the ingester's steps (about
    60 µs a profile): 2 inflations of each of the 40 recorded parts."""
    import pyproflab.decode.pprof as pprof
    import pyproflab.sources.push as push

    seen = []

    def counting(fn, test=lambda data: True):
        def wrapped(data, *a, **kw):
            if test(data):
                seen.append(fn.__name__)
            return fn(data, *a, **kw)

        return wrapped

    monkeypatch.setattr(push, "_zstd_chunks", counting(push._zstd_chunks))
    monkeypatch.setattr(push, "_gzip_chunks", counting(push._gzip_chunks))
    gz = bytes(pprof.GZIP_MAGIC)
    monkeypatch.setattr(pprof, "decompress", counting(pprof.decompress, lambda d: d[:2] == gz))
    parts = _profile_parts()
    assert len(parts) == 40 and {d[:2] for _, d in parts} >= {gz, push.ZSTD_MAGIC[:2]}
    for name, data in parts:
        seen.clear()
        push.check_profile(data, source=name, max_bytes=1 << 26)
        assert len(seen) == 1, (name, seen)


def test_a_pushed_plain_trace_is_named_as_one():
    """A plain Go execution trace pushed as a profile was answered 400 "a
    gzip-compressed Go execution trace ... (gunzip it first)"; a gzipped one
    keeps that answer."""
    from pathlib import Path

    from pyproflab.sources.push import check_profile

    trace = (Path(__file__).resolve().parents[1] / "testdata/traces/mutex.trace").read_bytes()
    with pytest.raises(ProfileError) as e:
        check_profile(trace, source="profile", max_bytes=1 << 26)
    assert "not a pprof profile (a Go execution trace" in str(e.value), e.value
    assert "gzip" not in str(e.value), e.value
    with pytest.raises(ProfileError, match="gzip-compressed Go execution trace"):
        check_profile(gzip.compress(trace), source="profile", max_bytes=1 << 26)


def test_check_profile_past_its_whole_check_is_only_size_checked():
    """A part inflating past ``whole`` is size-checked alone, as before; a bomb
    is still refused with the size check's message."""
    from pyproflab.sources.push import check_profile

    garbage = gzip.compress(b"not a profile" * 1000)
    check_profile(garbage, source="x", max_bytes=1 << 20, whole=1 << 10)
    with pytest.raises(ProfileError, match="not a pprof profile"):
        check_profile(garbage, source="x", max_bytes=1 << 20, whole=1 << 20)
    bomb = gzip.compress(bytes(4 << 20))
    with pytest.raises(TooLargeError, match="passes the cap of 1048576 bytes .a bomb"):
        check_profile(bomb, source="x", max_bytes=1 << 20, whole=1 << 10)
    with pytest.raises(TooLargeError, match="passes the cap of 1048576 bytes .a bomb"):
        check_profile(bomb, source="x", max_bytes=1 << 20, whole=8 << 20)
