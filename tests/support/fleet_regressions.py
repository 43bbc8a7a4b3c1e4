"""`regressions` on the live demo fleet: the planted regression, and A/A splits.

Two notesd instances run v1 and two run v2 (v2 plants about +30% CPU in
``fleet_harness.PLANTED_FUNCTION``) under one steady load spread evenly over
them; CPU profiles are taken from all four at once, ``ROUNDS`` rounds. The
claims (checked by :func:`claims`):

1. v1 vs v2 ranks the planted function first and significant, and the planted
   size lies inside its (99%) interval of relative change in CPU cores. Ranking
   and significance use shares of each profile's total (``measure="share"``):
   on a shared machine the CPU each instance gets varies a lot between
   profiles, which makes rates noisy while shares stay stable; the planted size
   is a rate change, so its interval is the rate one. The plant is +30% CPU per
   search; per second it is that times the ratio of the searches each version
   served in its profile windows (read from the request counters).
2. A/A: v1's collection rounds (each round one unit, ``unit="window"``) split in
   two at random 20 times: at most one split has a significant regression.

A live run is sampled, so these claims can fail by chance: they are measured
live by ``make bench`` (section ``fleet-regressions``, :func:`section`), and
one run is recorded as test data for tests/analyses/test_regressions_fleet.py, which
checks them on it:

    python tests/support/fleet_regressions.py --record tests/testdata/fleet_regressions
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Profiles per instance. The A/A splits the rounds 8 + 8: with 5 + 5 there are
# only 252 splits, no permutation p-value can go below 2/252, and after the FDR
# correction over some 60 tests no lone function could be significant.
ROUNDS = 16
SECONDS = 5  # per profile
# Requests/s over the four instances: about 1.3 of the 2 cores (1100/s already
# uses 1.75). A saturated machine shares CPU between the processes, so v2 would
# serve fewer requests per second and show less than its extra 30%.
RATE = 800
# A 99% interval: the planted size is fixed, and at 95% one run in twenty
# would miss it by chance alone.
CONFIDENCE = 0.99
# scoreRoundsV2 / scoreRoundsV1 in tests/fleet/cmd/notesd/score.go.
PLANTED_FACTOR = 13 / 10
REQUESTS = "notesd_http_request_duration_seconds_count{"
SPECS = (("v1", "a"), ("v1", "b"), ("v2", "c"), ("v2", "d"))


@dataclass
class Recording:
    """One live run: (round, version, instance, profile bytes) and the searches
    per second v2 served over v1's in the profile windows."""

    profiles: list[tuple[int, str, str, bytes]]
    served_ratio: float

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.pb.gz"):
            old.unlink()
        names = []
        for rnd, version, instance, data in sorted(self.profiles):
            name = f"r{rnd:02d}-{version}-{instance}.pb.gz"
            (out / name).write_bytes(data)
            names.append({"file": name, "round": rnd, "version": version, "instance": instance})
        meta = {"served_ratio": self.served_ratio, "profiles": names}
        (out / "recording.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path) -> Recording:
        meta = json.loads((path / "recording.json").read_text())
        profiles = [
            (p["round"], p["version"], p["instance"], (path / p["file"]).read_bytes())
            for p in meta["profiles"]
        ]
        return cls(profiles, meta["served_ratio"])


def searches_served(inst) -> float:
    """Searches the instance has answered so far, by its request counter."""
    from support.fleet_harness import parse_samples

    samples = parse_samples(inst.metrics())
    return sum(
        v for k, v in samples.items() if k.startswith(REQUESTS) and 'route="/notes/search"' in k
    )


def record() -> Recording:
    """Run the fleet under load and take ``ROUNDS`` CPU profiles from each instance."""
    from support import fleet_harness

    bins = fleet_harness.build_fleet()
    specs = [{"version": v, "instance": i} for v, i in SPECS]
    got: list[tuple[int, str, str, bytes]] = []
    served = {"v1": [0.0, 0.0], "v2": [0.0, 0.0]}  # searches, seconds
    lock = threading.Lock()
    with fleet_harness.start_fleet(specs, binaries=bins, max_lifetime=300) as fleet:
        with fleet_harness.start_load(
            list(fleet),
            duration=ROUNDS * (SECONDS + 0.5) + 4,
            rate_start=RATE,
            max_requests=1_000_000,
            concurrency=32,
            loadgen=bins.loadgen,
        ) as run:
            time.sleep(1.5)  # warm up: caches, the index

            def grab(inst) -> None:
                for rnd in range(ROUNDS):
                    before, start = searches_served(inst), time.monotonic()
                    data = inst.cpu_profile(seconds=SECONDS)
                    after, end = searches_served(inst), time.monotonic()
                    with lock:
                        got.append((rnd, inst.version, inst.instance, data))
                        served[inst.version][0] += after - before
                        served[inst.version][1] += end - start

            threads = [threading.Thread(target=grab, args=(inst,)) for inst in fleet]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if run.proc.poll() is not None:
                raise RuntimeError("loadgen stopped early (see its summary)")
            run.stop()
    per_second = {v: n / s for v, (n, s) in served.items()}
    if not (per_second["v1"] > 0 and per_second["v2"] > 0):
        raise RuntimeError(f"no searches served: {served}")
    return Recording(got, per_second["v2"] / per_second["v1"])


def ingest(rec: Recording, db: Path):
    """A store at ``db`` holding the recording's profiles, time-ordered per instance."""
    from pyproflab.decode import decode_bytes
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest

    store = Store.open(db)
    meta = [
        (
            decode_bytes(d),
            ProfileMeta(service="notesd", version=v, instance=i, profile_type="cpu"),
        )
        for _, v, i, d in sorted(rec.profiles)
    ]
    ingest(store, meta)
    return store


@dataclass
class PlantedClaim:
    top_name: str
    top_significant: bool
    top_q: float
    rate_rank: int
    rel: float
    rel_lo: float
    rel_hi: float
    planted_per_second: float

    @property
    def contained(self) -> bool:
        return self.rel_lo <= self.planted_per_second <= self.rel_hi


def planted_claim(store, planted: str, served_ratio: float) -> PlantedClaim:
    """Claim 1 measured on ``store``."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    v1, v2 = Selection(version="v1"), Selection(version="v2")
    shares = regressions(store, v1, v2, measure="share")
    top = shares.rows.slice(0, 1).to_pylist()[0]
    rates = regressions(store, v1, v2, confidence=CONFIDENCE)
    row = next(r for r in rates.rows.to_pylist() if r["name"] == planted)
    return PlantedClaim(
        top_name=top["name"],
        top_significant=bool(top["flat_significant"]),
        top_q=top["flat_q"],
        rate_rank=row["rank"],
        rel=row["flat_rel"],
        rel_lo=row["flat_rel_lo"],
        rel_hi=row["flat_rel_hi"],
        planted_per_second=PLANTED_FACTOR * served_ratio - 1,
    )


def v1_rounds(store) -> list[tuple[int, ...]]:
    """v1's profile ids by round: round k is each instance's k-th profile in time."""
    rows = store.sql(
        "SELECT profile_id, instance FROM profiles WHERE version = 'v1' "
        "ORDER BY instance, time_nanos"
    ).to_pylist()
    per_instance: dict[str, list[int]] = {}
    for r in rows:
        per_instance.setdefault(r["instance"], []).append(r["profile_id"])
    return list(zip(*per_instance.values(), strict=True))


def aa_noisy_splits(store, splits: int = 20) -> list[int]:
    """Claim 2: the A/A splits (by round; a round is one unit, as its profiles share
    a time window, its load and its GC cycles) with a significant regression."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    rounds = v1_rounds(store)
    rng = np.random.default_rng(4)
    noisy = []
    for k in range(splits):
        order = rng.permutation(len(rounds))
        half = len(rounds) // 2
        r = regressions(
            store,
            Selection(profile_ids=[p for i in order[:half] for p in rounds[i]]),
            Selection(profile_ids=[p for i in order[half:] for p in rounds[i]]),
            unit="window",
            resamples=500,
            seed=k,
            test="permutation",
        )
        if (r.n_units_base, r.n_units_new) != (half, len(rounds) - half):
            raise AssertionError(r.notes)
        # A lone function can be significant: the A/A can fail.
        if r.test != "permutation" or r.permutations < 10_000:
            raise AssertionError(r.notes)
        d = r.to_pandas()
        if (d.flat_significant & (d.flat_change > 0)).any() or (
            d.cum_significant & (d.cum_change > 0)
        ).any():
            noisy.append(k)
    return noisy


def section(work: Path, runs: int) -> list[str]:
    """`make bench` section: one live run, its claims measured and reported."""
    from support.fleet_harness import PLANTED_FUNCTION

    rec = record()
    store = ingest(rec, work / "fleet-regressions.duckdb")
    try:
        c = planted_claim(store, PLANTED_FUNCTION, rec.served_ratio)
        noisy = aa_noisy_splits(store)
    finally:
        store.close()
    return [
        f"fleet regressions: share rank 1 = {c.top_name} (planted {PLANTED_FUNCTION}), "
        f"q {c.top_q:.2g}, significant {c.top_significant}",
        f"fleet regressions: planted {c.planted_per_second:+.1%}/s, interval "
        f"[{c.rel_lo:+.1%}, {c.rel_hi:+.1%}] ({'contains' if c.contained else 'MISSES'} it), "
        f"rate rank {c.rate_rank}",
        f"fleet regressions: A/A {20 - len(noisy)} of 20 splits without a significant "
        "regression (claim: at least 19)",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", type=Path, required=True, help="folder for the recording")
    args = ap.parse_args(argv)
    rec = record()
    rec.save(args.record)
    print(f"recorded {len(rec.profiles)} profiles to {args.record}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    # Run as a file: tests/ on sys.path, for the support.* imports.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
