"""Launch and copy links of ASCII timelines (both shapes): which CPU call launched which
GPU kernel, which copy call enqueued which GPU copy (``docs/ascii-timelines.md``,
"Launch links" and "Copy links"). A link gives both events one ``correlation`` id, so
``Trace.flow_src``/``flow_dst`` pair them as in a Kineto trace.

- Launch calls, in time order (then text, then row), take the first GPU kernel at or
  after their start that is not linked yet and whose name words are all among the words
  of the launch target, or the other way round (``launch fused decode graph`` →
  ``graph``, ``launch matmul`` → ``matmul``). Launches that match no kernel by name then
  take the first later kernel not linked yet, with a warning ("linked by order"), or
  stay unlinked, with a warning.
- Copy calls take the first unlinked GPU copy of their direction (any direction when
  either side is unknown) that starts while the call runs.

``link_calls`` takes the rows as dicts (lane art); ``link_columns`` as numpy columns
(event lists). Launches whose target matches one group of kernel names at most, the
common case, are matched for all groups at once with numpy (each takes
``max(previous + 1, first kernel at or after it)`` in its group: a running maximum);
the others, and copy calls, one by one with ``_Pool``.
"""

from __future__ import annotations

import bisect
import itertools
import re
import typing

import numpy as np

from gapscope.parsers.ascii.common import clip
from gapscope.parsers.ascii.names import launch_target
from gapscope.parsers.model import CopyKind, Kind

__all__ = ["link_calls", "link_columns", "LinkRows", "Calls"]


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^0-9a-z_]+", text.lower()) if w}


def link_calls(b, rows, gpu_spans, calls) -> dict[int, int]:
    """Correlation ids: row index → id, shared by each linked call and GPU span.

    ``rows``: dicts with ``kind``, ``ck`` (CopyKind), ``dur``, ``line``, ``name``;
    ``gpu_spans``: (start_ns, name, row, line) of GPU work; ``calls``: (start_ns, text,
    row, kind, copy direction) of launch and copy calls. Warnings go to builder ``b``.

    Launch calls in time order (then text, then row) take the first later unlinked GPU
    kernel whose name matches (word sets, see module docstring); then unmatched launches
    take the first later unlinked kernel. Copy calls take the first unlinked GPU copy
    of their direction that starts inside the call.
    """
    i64 = np.int64
    names: dict[str, int] = {}
    corr = link_columns(
        b,
        LinkRows(
            np.array([r["kind"] for r in rows], dtype=np.int8),
            np.array([r["ck"] for r in rows], dtype=np.int8),
            np.array([r["dur"] for r in rows], dtype=i64),
            np.array([r["line"] for r in rows], dtype=i64),
            np.array([names.setdefault(r["name"], len(names)) for r in rows], dtype=i64),
        ),
        np.array([g[0] for g in gpu_spans], dtype=i64),
        np.array([g[2] for g in gpu_spans], dtype=i64),
        Calls(
            np.array([c[0] for c in calls], dtype=i64),
            np.array([c[2] for c in calls], dtype=i64),
            np.array([c[3] for c in calls], dtype=np.int8),
            np.array([c[4] for c in calls], dtype=np.int8),
            np.array([names.setdefault(c[1], len(names)) for c in calls], dtype=i64),
        ),
        list(names),
    )
    return {int(k): int(corr[k]) for k in np.flatnonzero(corr >= 0).tolist()}


class LinkRows(typing.NamedTuple):
    """Per row (one element each): ``kind``, ``ck`` (copy direction), ``dur`` (ns),
    ``line`` (1-based) and ``name`` (index into a list of names)."""

    kind: np.ndarray
    ck: np.ndarray
    dur: np.ndarray
    line: np.ndarray
    name: np.ndarray


class Calls(typing.NamedTuple):
    """Launch and copy calls (one element each): ``start`` (ns), ``row``, ``kind``, ``ck``
    (copy direction) and ``text`` (index into the list of names)."""

    start: np.ndarray
    row: np.ndarray
    kind: np.ndarray
    ck: np.ndarray
    text: np.ndarray


def link_columns(
    b, rows: LinkRows, span_start: np.ndarray, span_row: np.ndarray, calls: Calls, names: list[str]
) -> np.ndarray:
    """``link_calls`` on columns: ``rows`` (one element per event), GPU spans (start ns,
    row; int64), ``calls``, and ``names`` the names the rows' and calls' indices point
    into. Returns the correlation id of each row (int64, -1 = not linked), ids counted
    from 1 in the order the links are made; warnings go to builder ``b``."""
    kind, line = rows.kind, rows.line
    corr = np.full(kind.shape[0], -1, dtype=np.int64)
    o = np.lexsort((span_row, span_start))
    s_start, s_row = span_start[o], span_row[o]
    is_kernel = kind[s_row] == Kind.KERNEL
    k_start, k_row = s_start[is_kernel], s_row[is_kernel]
    next_id = 1

    lm = np.flatnonzero(calls.kind == Kind.LAUNCH)
    if lm.size:
        text = calls.text[lm]
        used = np.unique(text)
        rank = np.zeros(len(names), dtype=np.int64)  # order of the texts as strings
        rank[used[np.argsort(np.array([names[k] for k in used.tolist()], dtype=object), kind="stable")]] = np.arange(
            used.shape[0]
        )
        lo = np.lexsort((calls.row[lm], rank[text], calls.start[lm]))
        l_start, l_row, l_text = calls.start[lm][lo], calls.row[lm][lo], text[lo]
        hit = _match_by_name(k_start, k_row, rows.name, l_start, l_text, names)
        linked = hit >= 0
        ids = next_id + np.cumsum(linked) - 1
        corr[l_row[linked]] = ids[linked]
        corr[hit[linked]] = ids[linked]
        next_id += int(linked.sum())
        miss = np.flatnonzero(~linked)
        if miss.size:  # by order: the first later kernel not linked yet
            free = corr[k_row] < 0
            fk_row = k_row[free]
            a = _first_free(k_start[free], l_start[miss])
            for m, ak in zip(miss.tolist(), a.tolist()):
                t = names[int(l_text[m])]
                row = int(l_row[m])
                if ak >= fk_row.shape[0]:
                    b.warn(int(line[row]), "text", f"{clip(t)!r}: no later GPU span to link to")
                    continue
                g = int(fk_row[ak])
                b.warn(
                    int(line[row]),
                    "text",
                    f"{clip(t)!r} names no later GPU span: linked by order to "
                    f"{clip(names[int(rows.name[g])])!r} (line {int(line[g])})",
                )
                corr[row] = corr[g] = next_id
                next_id += 1

    cm = np.flatnonzero(calls.kind == Kind.MEMCPY_CALL)
    if cm.size:
        is_copy = kind[s_row] == Kind.MEMCPY
        copies = list(zip(s_start[is_copy].tolist(), s_row[is_copy].tolist()))
        held: set[int] = set()
        by_ck: dict[int, list[tuple[int, int]]] = {int(c): [] for c in CopyKind}
        for item, c in zip(copies, rows.ck[s_row[is_copy]].tolist()):
            by_ck[c].append(item)
        pools = {c: _Pool(by_ck[int(c)], held) for c in CopyKind}
        any_copy = _Pool(copies, held)
        copy_text = [names[k] for k in calls.text[cm].tolist()]
        order = sorted(zip(calls.start[cm].tolist(), copy_text, calls.row[cm].tolist(), calls.ck[cm].tolist()))
        dur = rows.dur
        for start, _text, row, c in order:
            options = [any_copy] if c in (CopyKind.NONE, CopyKind.UNKNOWN) else [pools[c], pools[CopyKind.UNKNOWN]]
            got = min(filter(None, (p.first(start) for p in options)), default=None)
            if got is not None and got[0] <= start + int(dur[row]):
                corr[row] = corr[got[1]] = next_id
                held.add(got[1])
                next_id += 1
    return corr


def _first_free(starts: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For queries in order with non-decreasing times, each taking the first item (of
    ``starts``, sorted) at or after its time not taken by an earlier query: the index
    each takes (``len(starts)`` or more: none left). The taken index goes up by at least
    one per query: a_i = max(a_{i-1} + 1, lower bound of query i)."""
    j = np.arange(queries.shape[0], dtype=np.int64)
    lb = np.searchsorted(starts, queries, side="left").astype(np.int64)
    return np.maximum.accumulate(lb - j) + j if j.size else j


def _match_by_name(k_start, k_row, row_name, l_start, l_text, names) -> np.ndarray:
    """The kernel row each launch call (in order) takes by name, -1 for none: the first
    later kernel not linked yet among the word groups that match the call's target
    (``link_calls``). ``k_start``/``k_row``: kernels by (start, row); ``row_name``:
    name index of each row; ``l_start``/``l_text``: launches in order, text index.
    Launches whose target matches one group at most are matched for all groups at once
    (``_first_free`` per group); otherwise one by one."""
    k_name = row_name[k_row]
    used, inv = np.unique(k_name, return_inverse=True)
    gid_of: dict[frozenset, int] = {}
    gid_of_used = np.array(
        [gid_of.setdefault(frozenset(_words(names[k])), len(gid_of)) for k in used.tolist()], dtype=np.int64
    )
    k_gid = gid_of_used[inv.ravel()] if used.size else np.zeros(0, dtype=np.int64)
    groups = _Groups(gid_of)
    target_of: dict[frozenset, list[int]] = {}
    cands: dict[int, list[int]] = {}
    for t in np.unique(l_text).tolist():
        target = frozenset(_words(launch_target(names[t])))
        if target not in target_of:
            target_of[target] = groups.matching(target)
        cands[t] = target_of[target]
    if any(len(c) > 1 for c in cands.values()):
        return _match_one_by_one(k_start, k_row, k_gid, l_start, l_text, cands)
    hit = np.full(l_text.shape[0], -1, dtype=np.int64)
    cand_of = np.full(len(names), -1, dtype=np.int64)
    for t, c in cands.items():
        if c:
            cand_of[t] = c[0]
    cand = cand_of[l_text]
    q = np.flatnonzero(cand >= 0)
    if not q.size:
        return hit
    # every group at once: kernels sorted by (group, start, row), launches by (group, order)
    ko = np.argsort(k_gid, kind="stable")
    g_sorted = k_gid[ko]
    seg_start = np.searchsorted(g_sorted, np.arange(len(gid_of) + 1), side="left")
    qg = cand[q]
    qo = np.argsort(qg, kind="stable")
    q, qg = q[qo], qg[qo]
    # lower bound of each launch's time among its group's kernel starts (on ranks of times)
    rank = np.unique(np.concatenate((k_start, l_start[q])), return_inverse=True)[1].ravel()
    width = np.int64(rank.max() + 2)
    k_key = g_sorted * width + rank[: k_start.shape[0]][ko]
    q_key = qg * width + rank[k_start.shape[0] :]
    lb = np.searchsorted(k_key, q_key, side="left") - seg_start[qg]
    # a_i = max(a_{i-1} + 1, lb_i) within each group: a running maximum of lb_i - i,
    # kept apart per group by an offset larger than any value's range
    j = np.arange(q.shape[0], dtype=np.int64) - np.searchsorted(qg, qg, side="left")
    off = np.int64(2 * (k_start.shape[0] + q.shape[0] + 2))
    a = np.maximum.accumulate(lb - j + qg * off) - qg * off + j
    ok = a < seg_start[qg + 1] - seg_start[qg]
    hit[q[ok]] = k_row[ko[seg_start[qg[ok]] + a[ok]]]
    return hit


class _Groups:
    """Kernel names grouped by their word sets (non-empty ones), with an index from each
    word to the groups holding it."""

    def __init__(self, gid_of: dict[frozenset, int]) -> None:
        self.gid_of = {w: g for w, g in gid_of.items() if w}
        self.by_word: dict[str, list[int]] = {}
        self.words: dict[int, frozenset] = {}
        for w, g in self.gid_of.items():
            self.words[g] = w
            for word in w:
                self.by_word.setdefault(word, []).append(g)

    def matching(self, target: frozenset) -> list[int]:
        """Sorted ids of the groups ``w`` with ``w <= target`` or ``target <= w`` (none
        for an empty target), without trying every group: the subsets of a short target
        are looked up, else the groups sharing a word are counted; the supersets are
        among the groups of the target's rarest word."""
        if not target:
            return []
        found: set[int] = set()
        if len(target) <= 10:
            words = sorted(target)
            for size in range(1, len(words) + 1):
                for combo in itertools.combinations(words, size):
                    g = self.gid_of.get(frozenset(combo))
                    if g is not None:
                        found.add(g)
        else:
            shared: dict[int, int] = {}
            for word in target:
                for g in self.by_word.get(word, ()):
                    shared[g] = shared.get(g, 0) + 1
            found.update(g for g, c in shared.items() if c == len(self.words[g]))
        rarest = min((self.by_word.get(word, []) for word in target), key=len)
        found.update(g for g in rarest if target <= self.words[g])
        return sorted(found)


def _match_one_by_one(k_start, k_row, k_gid, l_start, l_text, cands) -> np.ndarray:
    """``_match_by_name`` for launches whose target matches several groups: each takes the
    earliest first-free kernel among its groups, in order (one pool per distinct set of
    groups, holding their kernels: its first free kernel is the earliest among them)."""
    taken: set[int] = set()
    items: dict[int, list[tuple[int, int]]] = {}
    for t, r, g in zip(k_start.tolist(), k_row.tolist(), k_gid.tolist()):
        items.setdefault(g, []).append((t, r))
    pools: dict[tuple[int, ...], _Pool] = {}
    pool_of: dict[int, _Pool | None] = {}
    for t, c in cands.items():
        key = tuple(c)
        if key and key not in pools:
            pools[key] = _Pool(sorted(itertools.chain.from_iterable(items[g] for g in key)), taken)
        pool_of[t] = pools[key] if key else None
    hit = np.full(l_text.shape[0], -1, dtype=np.int64)
    for k, (start, t) in enumerate(zip(l_start.tolist(), l_text.tolist())):
        pool = pool_of[t]
        got = pool.first(start) if pool is not None else None
        if got is not None:
            hit[k] = got[1]
            taken.add(got[1])
    return hit


class _Pool:
    """(start_ns, row) pairs sorted by start; ``first(t)``: the earliest pair at or after
    ``t`` whose row is not in the shared ``taken`` set, in amortised O(log n)."""

    def __init__(self, items: list[tuple[int, int]], taken: set[int]) -> None:
        self.items = items
        self.starts = [t for t, _ in items]
        self.skip = list(range(len(items) + 1))  # union-find: next index not known taken
        self.taken = taken

    def _find(self, i: int) -> int:
        root = i
        while self.skip[root] != root:
            root = self.skip[root]
        while self.skip[i] != root:
            self.skip[i], i = root, self.skip[i]
        return root

    def first(self, t: int) -> tuple[int, int] | None:
        i = self._find(bisect.bisect_left(self.starts, t))
        while i < len(self.items) and self.items[i][1] in self.taken:
            self.skip[i] = i + 1
            i = self._find(i + 1)
        return self.items[i] if i < len(self.items) else None
