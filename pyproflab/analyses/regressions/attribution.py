"""Stage 5 of ``regressions``: order, grouping and cost shifts (rules 6-8 of
``pyproflab.analyses.regressions``)."""

from __future__ import annotations

import numpy as np

METRICS = ("flat", "cum")


def directions(cols: dict[str, np.ndarray]) -> np.ndarray:
    """increase / decrease / none per row: a significant change of flat or cum
    (an increase wins when one metric rose and the other fell)."""
    up = np.zeros(len(cols["flat_change"]), bool)
    down = up.copy()
    for m in METRICS:
        sig = cols[f"{m}_significant"]
        up |= sig & (cols[f"{m}_change"] > 0)
        down |= sig & (cols[f"{m}_change"] < 0)
    return np.where(up, "increase", np.where(down, "decrease", "none"))


def evidence(cols: dict[str, np.ndarray], direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(evidence, metric) per row: the conservative end of the change's interval,
    the larger over the tested metrics of flat and cum (lower end for increases
    and unchanged rows, minus the upper end for decreases); NaN when neither is
    tested. Without statistics (no intervals at all), the change itself."""
    stat = any(np.any(cols[f"{m}_tested"]) for m in METRICS)
    ev = []
    for m in METRICS:
        lo, hi, ch = cols[f"{m}_change_lo"], cols[f"{m}_change_hi"], cols[f"{m}_change"]
        dec = direction == "decrease"
        if stat:
            e = np.where(cols[f"{m}_tested"], np.where(dec, -hi, lo), np.nan)
        else:
            e = np.where(dec, -ch, ch)
        ev.append(e)
    stack = np.vstack(ev)
    filled = np.where(np.isnan(stack), -np.inf, stack)
    which = np.argmax(filled, axis=0)
    best = stack[which, np.arange(stack.shape[1])]
    return best, np.array(METRICS)[which]


def _key(x: np.ndarray) -> list[float]:
    """Sort keys rounded to 12 digits: equal changes computed along different
    float paths (counts times the value of one sample) tie, then go by label."""
    return [float(f"{v:.12g}") if np.isfinite(v) else -np.inf for v in x.tolist()]


def order(labels: list[str], cols: dict[str, np.ndarray], rank_by: str) -> np.ndarray:
    """Row order: by evidence, increases first and decreases last; or, with
    ``rank_by`` flat or cum, by |change| of that metric; ties by label."""
    if rank_by in METRICS:
        key = _key(np.abs(cols[f"{rank_by}_change"]))
        return np.array(sorted(range(len(labels)), key=lambda i: (-key[i], labels[i])), np.int64)
    group = {"increase": 0, "none": 1, "decrease": 2}
    d: list[str] = cols["direction"].tolist()
    ev = _key(cols["evidence"])
    return np.array(
        sorted(range(len(labels)), key=lambda i: (group[d[i]], -ev[i], labels[i])), np.int64
    )


def ancestors(paths: list[list[int]], nodes: set[int]) -> dict[int, set[int]]:
    """For each of ``nodes``, every node above it on some stack."""
    out: dict[int, set[int]] = {n: set() for n in nodes}
    for path in paths:
        for k, n in enumerate(path):
            if n in out:
                out[n].update(path[:k])
    return out


def _interval(cols, i: int) -> tuple[float, float, float]:
    m = cols["evidence_metric"][i]
    return cols[f"{m}_change"][i], cols[f"{m}_change_lo"][i], cols[f"{m}_change_hi"][i]


def dominators(paths: list[list[int]], nodes: set[int]) -> dict[int, set[int]]:
    """For each of ``nodes``, the nodes above it on every stack that holds it."""
    out: dict[int, set[int] | None] = {n: None for n in nodes}
    for path in paths:
        for k, n in enumerate(path):
            if n in out:
                above = set(path[:k])
                cur = out[n]
                out[n] = above if cur is None else cur & above
    return {n: (v or set()) for n, v in out.items()}


def explained(order_idx: np.ndarray, node_of: np.ndarray, paths, cols, labels) -> list:
    """``explained_by`` per row: the label of the finding of the same direction
    on the same stacks (an ancestor or a descendant) whose change lies inside
    this row's interval: a leaf's increase shows in every caller's cum, and a
    caller's in its callees' flat. Findings are taken most credible first;
    a later row takes over as the group's finding when it is deeper, its
    change accounts for the earlier one's, and every stack through it
    passes through the earlier one (so a shared helper called from elsewhere
    too does not take over from the caller that made it busier)."""
    out: list[str | None] = [None] * len(labels)
    d = cols["direction"]
    sig = [i for i in order_idx.tolist() if d[i] != "none"]
    nodes = {int(node_of[i]) for i in sig}
    anc, dom = ancestors(paths, nodes), dominators(paths, nodes)
    heads: list[int] = []
    head_of: dict[int, int] = {}
    for i in sig:
        ci, lo, hi = _interval(cols, i)
        for k, h in enumerate(heads):
            ch, hlo, hhi = _interval(cols, h)
            a, b = int(node_of[h]), int(node_of[i])
            if d[h] != d[i] or not (a in anc[b] or b in anc[a]) or not lo <= ch <= hi:
                continue
            deeper = a in dom[b] and hlo <= ci <= hhi
            if deeper:
                heads[k] = i
                for r, hh in head_of.items():
                    if hh == h:
                        head_of[r] = i
                head_of[h] = i
            else:
                head_of[i] = h
            break
        else:
            heads.append(i)
    for r, h in head_of.items():
        out[r] = labels[h]
    return out


def grouped_order(order_idx: np.ndarray, cols, labels) -> np.ndarray:
    """``order_idx`` with each group's finding first and the rows it explains
    right after it (a group ranks by its best evidence)."""
    pos = {lab: i for i, lab in enumerate(labels)}
    head = [pos[e] if e is not None else i for i, e in enumerate(cols["explained_by"])]
    rank = {int(i): k for k, i in enumerate(order_idx.tolist())}
    first: dict[int, int] = {}
    for i in order_idx.tolist():
        first.setdefault(head[i], rank[i])
    return np.array(
        sorted(order_idx.tolist(), key=lambda i: (first[head[i]], head[i] != i, rank[i])),
        np.int64,
    )


def shifts(order_idx: np.ndarray, node_of: np.ndarray, paths, cols, labels) -> list:
    """``shift_with`` per row: an increase and a decrease (neither explained by
    another row) that share an ancestor whose cum did not change significantly,
    with changes that sum to zero within their intervals, are one cost shift."""
    out: list[str | None] = [None] * len(labels)
    d, expl = cols["direction"], cols["explained_by"]
    ups = [i for i in order_idx.tolist() if d[i] == "increase" and expl[i] is None]
    downs = [i for i in order_idx.tolist() if d[i] == "decrease" and expl[i] is None]
    if not ups or not downs:
        return out
    row_of = {int(node_of[i]): i for i in range(len(labels))}
    anc = ancestors(paths, {int(node_of[i]) for i in ups + downs})
    for u in ups:
        cu, lu, hu = _interval(cols, u)
        for v in downs:
            if out[v] is not None:
                continue
            cv, lv, hv = _interval(cols, v)
            common = anc[int(node_of[u])] & anc[int(node_of[v])]
            steady = any(n in row_of and not cols["cum_significant"][row_of[n]] for n in common)
            half = np.hypot((hu - lu) / 2, (hv - lv) / 2)
            if steady and abs(cu + cv) <= half:
                out[u], out[v] = labels[v], labels[u]
                break
    return out
