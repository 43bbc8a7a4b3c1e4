"""Which version is newer (``workflows.versions``), and so which way a report or
a job compares them, when the store cannot tell by time or by ingest.

A collection round over instances of two versions (the demo's v1 and v2, a
canary beside the fleet) takes their first profiles within milliseconds, in
the order the requests finished. The report compared the newest by that
order: on one `make demo` store, v2's first profile was 0.9 ms earlier than
v1's, and the report's regressions section showed the planted +18 % of
main.scoreNote as -4.3 points (base v2, new v1).
"""

from __future__ import annotations

import pytest
from support.store_helpers import make_profile

from pyproflab import workflows
from pyproflab.store import Store
from pyproflab.store.ingest import ProfileMeta, ingest
from pyproflab.store.select import Selection

T0 = 1_800_000_000 * 10**9  # ns
HOUR = 3600 * 10**9


def _store(store: Store, batches: list[list[tuple[str, int, int]]]) -> None:
    """One ingest per batch, each profile (version, taken at ns, duration ns)."""
    for batch in batches:
        profiles = []
        for i, (version, taken, duration) in enumerate(batch):
            p = make_profile(
                [([f"main.f{version}", "main.main"], [i + 1, 10 * (i + 1)])],
                time_nanos=taken,
                duration_nanos=duration,
            )
            profiles.append((p, ProfileMeta(service="api", version=version)))
        ingest(store, profiles)


def _ordering(batches, order="time") -> workflows.Ordering:
    with Store.open(":memory:") as store:
        _store(store, batches)
        return workflows.versions(store, Selection(), "cpu", order)["api"]


def test_versions_profiled_together_are_ordered_by_name_and_said():
    # v2's first 10 s profile started 1 ms before v1's: together, not older.
    o = _ordering([[("v2", T0, 10**10), ("v1", T0 + 10**6, 10**10)]])
    assert o.names == ["v1", "v2"] and o.together == [["v1", "v2"]]
    pair = workflows.comparison(o)
    assert (pair.base, pair.new) == ("v1", "v2")
    assert "v1 and v2 started together (their first profiles overlap in time)" in pair.note
    assert "--base version=v2 --new version=v1" in pair.note


def test_time_apart_keeps_time_order_even_against_the_names():
    # A rollback: 2.0 first, then 1.4 an hour later. Time decides, no note.
    o = _ordering([[("2.0", T0, 10**10)], [("1.4", T0 + HOUR, 10**10)]])
    assert o.names == ["2.0", "1.4"] and o.together == []
    assert workflows.comparison(o).note is None


def test_names_compare_their_numbers_as_numbers():
    o = _ordering([[("v10", T0, 0), ("v9", T0 + 5 * 10**8, 0), ("1.10", T0, 0), ("1.9", T0, 0)]])
    # Heap snapshots (no duration) half a second apart count as one round.
    assert o.names == ["1.9", "1.10", "v9", "v10"]


def test_a_pre_release_is_older_than_its_release():
    # A release and its release candidate profiled together (the rc's canary beside the
    # rollout) were ordered v1.10.0 then v1.10.0-rc.1, the text "" before "-rc.": the
    # report and a job compared the release (base) with its own candidate (new).
    o = _ordering(
        [[("v1.10.0", T0, 0), ("v1.10.0-rc.1", T0, 0), ("v1.10.0-rc.10", T0, 0), ("v1.9.1", T0, 0)]]
    )
    assert o.names == ["v1.9.1", "v1.10.0-rc.1", "v1.10.0-rc.10", "v1.10.0"]
    pair = workflows.comparison(o)
    assert (pair.base, pair.new) == ("v1.10.0-rc.10", "v1.10.0")
    # Not a version's dash: a name's words still sort as text, numbers as numbers.
    assert _ordering([[("api-2", T0, 0), ("api-10", T0, 0), ("api", T0, 0)]]).names == [
        "api",
        "api-2",
        "api-10",
    ]


@pytest.mark.parametrize(
    ("gap_s", "names"), [(0.5, ["v1", "v2"]), (15.0, ["v1", "v2"]), (25.0, ["v2", "v1"])]
)
def test_a_first_profile_covers_its_duration(gap_s, names):
    # v2 taken first, a 20 s profile: v1 started inside it is together with it.
    o = _ordering([[("v2", T0, 20 * 10**9), ("v1", T0 + int(gap_s * 1e9), 20 * 10**9)]])
    assert o.names == names


def test_ingest_order_orders_one_ingest_by_time():
    # One ingest stores files in path order: v2's file first, taken an hour later.
    one = _ordering([[("v2", T0 + HOUR, 10**10), ("v1", T0, 10**10)]], order="ingest")
    assert one.names == ["v1", "v2"] and one.together == []
    assert workflows.comparison(one).note is None
    # In one ingest and together in time: by name, said.
    tied = _ordering([[("v2", T0, 10**10), ("v1", T0, 10**10)]], order="ingest")
    assert tied.names == ["v1", "v2"] and tied.together == [["v1", "v2"]]
    assert "started together" in workflows.comparison(tied).note
    # Two ingests: the first ingested is the older, whatever the times say.
    two = _ordering([[("v2", T0 + HOUR, 10**10)], [("v1", T0, 10**10)]], order="ingest")
    assert two.names == ["v2", "v1"] and two.together == []
