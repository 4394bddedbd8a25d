"""CPU samples of Nsight Systems exports (``COMPOSITE_EVENTS`` + ``SAMPLING_CALLCHAINS``)
read into ``Trace.cpu_samples``, and the card naming the hottest frames of a gap from
them: on exports made by ``bench/gen_nsys.py`` with samples written in by hand (a
native program: the process renamed from ``python3``), and on the corpus export
``extrap/ex-gpu.s10.sqlite`` against an independent SQL count."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from bench import gen_nsys
from bench.gen_nsys import HOST_PID, LOADER_TID, MAIN_TID, generate
from gapscope.analysis import diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.card.facts import card_facts
from gapscope.analysis.card.host_rules import NSYS_SAMPLE_FLAG
from gapscope.analysis.card.samples import gap_samples
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.analysis.types import Cause
from gapscope.parsers import load
from gapscope.parsers.nsys import samples as nsys_samples
from gapscope.parsers.nsys.sql import Database, ro_uri
from gapscope.report.document import gap_entry
from gapscope.units import fmt_dur
from tests.conftest import CORPUS, require


def _gtid(pid: int, tid: int) -> int:
    """A ``globalTid`` as the generator writes them (its machine bits included)."""
    return gen_nsys._gtid(pid, tid)


_CHAIN_DDL = (
    "CREATE TABLE COMPOSITE_EVENTS (id INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL, cpu INTEGER, "
    "threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL)",
    "CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL REFERENCES COMPOSITE_EVENTS, symbol INTEGER NOT NULL, "
    "module INTEGER NOT NULL, kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, "
    "originalIP INTEGER, unwindMethod INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth))",
)


class _Writer:
    """Appends samples (each a callchain of (symbol, module, unresolved), leaf first)
    to an export, with their strings in ``StringIds``."""

    def __init__(self, path) -> None:
        self.con = sqlite3.connect(path)
        for ddl in _CHAIN_DDL:
            self.con.execute(ddl)
        self.next_sid = int(self.con.execute("SELECT max(id) FROM StringIds").fetchone()[0]) + 1
        self.sids: dict[str, int] = {}
        self.next_id = 1

    def sid(self, text: str) -> int:
        if text not in self.sids:
            self.con.execute("INSERT INTO StringIds VALUES (?, ?)", (self.next_sid, text))
            self.sids[text] = self.next_sid
            self.next_sid += 1
        return self.sids[text]

    def sample(self, start, gtid, chain, depths=None) -> None:
        i = self.next_id
        self.next_id += 1
        self.con.execute("INSERT INTO COMPOSITE_EVENTS VALUES (?, ?, 0, 1, ?, 1)", (i, start, gtid))
        for d, (sym, mod, unres) in zip(depths or range(len(chain)), chain):
            self.con.execute(
                "INSERT INTO SAMPLING_CALLCHAINS VALUES (?, ?, ?, NULL, NULL, ?, NULL, 0, 7, ?)",
                (i, self.sid(sym), self.sid(mod), 1 if unres else None, d),
            )

    def close(self) -> None:
        self.con.commit()
        self.con.close()


CHECKSUM = [("0x7f3a00001234", "/usr/lib/libm.so.6", True), ("compute_checksum", "/opt/app/libapp.so", False)]
CHECKSUM += [("main", "/opt/app/solver", False)]
PARSE = [("parse_config", "/opt/app/solver", False), ("main", "/opt/app/solver", False)]
#: ``compute_checksum`` called from ``solve_step`` (10 of its 14 samples) or from ``main``
IN_STEP = CHECKSUM[:2] + [("solve_step", "/opt/app/solver", False)] + CHECKSUM[2:]


def _native(path) -> None:
    """The generated run as a native program: no process or thread named ``python``."""
    con = sqlite3.connect(path)
    con.execute("UPDATE StringIds SET value = 'solver' WHERE value = 'python3'")
    con.execute("UPDATE PROCESSES SET name = 'solver'")
    con.commit()
    con.close()


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """(export without samples, export with samples, the gap index, its (start, end)):
    a native run without NVTX (host time is untraced), and the same with 14 samples in
    ``compute_checksum`` (its leaf unresolved, in libm) and 6 in ``parse_config`` on the
    launching thread inside its largest host gap, plus samples that must not count:
    before the gap, on the loader thread, on a thread with no events, and broken rows."""
    d = tmp_path_factory.mktemp("nsys_samples")
    plain = d / "plain.sqlite"
    generate(plain, 300, seed=3, launches_per_step=100, omit=["NVTX_EVENTS"])
    _native(plain)
    diag = diagnose(load(str(plain)))
    g = diag.gaps
    host = [i for i in np.argsort(-g.dur_ns) if card_for_gap(diag, int(i)).cause == Cause.HOST]
    i = int(host[0])
    lo, hi = int(g.start_ns[i]), int(g.end_ns[i])
    assert diag.trace.lanes[g.thread_of(i)].tid == str(MAIN_TID)
    sampled = d / "sampled.sqlite"
    sampled.write_bytes(plain.read_bytes())
    w = _Writer(sampled)
    main, loader = _gtid(HOST_PID, MAIN_TID), _gtid(HOST_PID, LOADER_TID)
    step = (hi - lo) // 21
    for k in range(20):
        w.sample(lo + step * (k + 1), main, IN_STEP if k % 10 < 5 else CHECKSUM if k % 10 < 7 else PARSE)
    for k in range(5):  # before the gap
        w.sample(lo - 1000 * (k + 1), main, [("before_gap", "/opt/app/solver", False)])
    for k in range(3):  # inside it, on another thread
        w.sample(lo + step * (k + 1) + 7, loader, [("load_batch", "/opt/app/solver", False)])
    w.sample(lo + 5, _gtid(HOST_PID, 99), [("idle_thread", "/opt/app/solver", False)])  # a thread with no events
    w.con.execute("INSERT INTO COMPOSITE_EVENTS VALUES (9999, -5, 0, 1, ?, 1)", (main,))  # no usable time
    w.sample(lo + step * 21 - 3, main, PARSE[:1] + PARSE, depths=[0, 2, 3])  # a hole after the leaf
    w.close()
    return plain, sampled, i, (lo, hi)


def test_samples_are_read_with_their_callchains(native):
    _, sampled, _, (lo, hi) = native
    t = load(str(sampled))
    cs = t.cpu_samples
    assert cs is not None
    lanes = {t.lanes[k].tid for k in np.unique(cs.lane)}
    assert lanes == {str(MAIN_TID), str(LOADER_TID)}  # the thread with no events has no lane
    assert len(cs) == 20 + 5 + 3 + 1
    assert t.source.ignored_counts[f"{nsys_samples.SAMPLES} samples of threads with no traced event"] == 1
    assert any("1 COMPOSITE_EVENTS row(s) with no id, time or thread" in w.message for w in t.warnings)
    assert any("missing or repeated stackDepth" in w.message for w in t.warnings)
    main = [ln.index for ln in t.lanes if ln.tid == str(MAIN_TID) and not ln.is_gpu][0]
    sl = cs.in_window(main, lo, hi)
    assert sl.stop - sl.start == 21  # 20 + the one with a hole, none of those before
    first = sl.start
    names = [cs.names[cs.frame_name[j]] for j in range(cs.frame_offsets[first], cs.frame_offsets[first + 1])]
    assert names == ["0x7f3a00001234", "compute_checksum", "solve_step", "main"]
    assert cs.frame_resolved[cs.frame_offsets[first]] == np.False_
    assert cs.names[cs.frame_module[cs.frame_offsets[first] + 1]] == "/opt/app/libapp.so"
    last = sl.stop - 1  # the chain with a hole keeps its leaf only
    assert cs.frame_offsets[last + 1] - cs.frame_offsets[last] == 1
    assert bool((np.diff(cs.start_ns[sl]) >= 0).all())
    with pytest.raises(ValueError):
        cs.start_ns[0] = 1  # read-only, like the trace's own columns


def test_deep_callchains_are_cut_with_a_warning(native, tmp_path, monkeypatch):
    _, sampled, _, (lo, _) = native
    p = tmp_path / "deep.sqlite"
    p.write_bytes(sampled.read_bytes())
    w = _Writer.__new__(_Writer)
    w.con = sqlite3.connect(p)
    w.next_sid = int(w.con.execute("SELECT max(id) FROM StringIds").fetchone()[0]) + 1
    w.sids, w.next_id = {}, 10_000
    w.sample(lo + 11, _gtid(HOST_PID, MAIN_TID), [(f"f{k}", "/opt/app/solver", False) for k in range(10)])
    w.close()
    monkeypatch.setattr(nsys_samples, "MAX_FRAMES", 4)
    t = load(str(p))
    cs = t.cpu_samples
    assert cs is not None and cs.max_frames == 4
    assert int(np.diff(cs.frame_offsets).max()) == 4
    deep = int(np.flatnonzero(cs.stack_depth == 5)[0])
    got = [cs.names[cs.frame_name[j]] for j in range(cs.frame_offsets[deep], cs.frame_offsets[deep + 1])]
    assert got == ["f0", "f1", "f2", "f3"]
    assert any("deeper than 4 frames" in w.message for w in t.warnings)


def _append(path, samples) -> None:
    """Add ``samples`` ((start, globalTid, chain, depths or None), ...) to the export."""
    w = _Writer.__new__(_Writer)
    w.con = sqlite3.connect(path)
    w.next_sid = int(w.con.execute("SELECT max(id) FROM StringIds").fetchone()[0]) + 1
    w.sids, w.next_id = {}, int(w.con.execute("SELECT max(id) FROM COMPOSITE_EVENTS").fetchone()[0]) + 1
    for start, gtid, chain, depths in samples:
        w.sample(start, gtid, chain, depths)
    w.close()


def test_callchain_rows_out_of_order_are_read_leaf_first(native, tmp_path):
    _, sampled, _, (lo, _) = native
    p = tmp_path / "reversed.sqlite"
    p.write_bytes(sampled.read_bytes())
    # written root first (rowid order is stackDepth 2, 1, 0)
    _append(p, [(lo + 13, _gtid(HOST_PID, MAIN_TID), CHECKSUM[::-1], [2, 1, 0])])
    cs = load(str(p)).cpu_samples
    assert cs is not None
    k = int(np.flatnonzero(cs.start_ns == lo + 13)[0])
    got = [cs.names[cs.frame_name[j]] for j in range(cs.frame_offsets[k], cs.frame_offsets[k + 1])]
    assert got == ["0x7f3a00001234", "compute_checksum", "main"]


def test_sample_count_is_capped_with_a_warning(native, monkeypatch):
    _, sampled, _, _ = native
    monkeypatch.setattr(nsys_samples, "MAX_SAMPLES", 10)
    t = load(str(sampled))
    assert t.cpu_samples is not None and len(t.cpu_samples) == 10
    # the earliest ten of the traced threads (the thread with no events has no lane)
    with sqlite3.connect(ro_uri(str(sampled)), uri=True) as con:
        want = con.execute(
            "SELECT start FROM COMPOSITE_EVENTS WHERE start >= 0 AND globalTid IN (?, ?) ORDER BY start LIMIT 10",
            (_gtid(HOST_PID, MAIN_TID), _gtid(HOST_PID, LOADER_TID)),
        ).fetchall()
    assert sorted(t.cpu_samples.start_ns.tolist()) == [r[0] for r in want]
    assert any("the earliest 10 are kept" in w.message for w in t.warnings)


def test_export_without_samples_has_none(native):
    plain, _, _, _ = native
    assert load(str(plain)).cpu_samples is None


def test_card_names_the_hottest_sampled_frame(native):
    _, sampled, i, _ = native
    diag = diagnose(load(str(sampled)))
    s = gap_samples(diag, np.array([i]))
    assert s is not None and s.samples == 21
    top = s.frames[0]
    # 14 of the 21: the unresolved libm leaf is told by the function that called it
    assert (top.name, top.module, top.samples) == ("compute_checksum", "/opt/app/libapp.so", 14)
    assert top.share == pytest.approx(14 / 21)
    assert (s.frames[1].name, s.frames[1].samples) == ("parse_config", 7)
    card = card_for_gap(diag, i)
    assert card.cpu_samples == s
    assert top.caller == "solve_step" and s.frames[1].caller == "main"  # 10 of 14 samples; 7 of 7
    assert "`compute_checksum` (in `libapp.so`, 14 samples, 67%, called from `solve_step`)" in card.why
    assert "`load_batch`" not in card.why and "`before_gap`" not in card.why
    assert "compute_checksum" in card.first_experiment and "14 of 21" in card.first_experiment
    every = " ".join((card.why, card.first_experiment, card.forbidden_step, card.proof))
    assert "--sample" not in every and "py-spy" not in every and "Python" not in card.first_experiment
    frame = {
        "name": "compute_checksum",
        "module": "/opt/app/libapp.so",
        "samples": 14,
        "share": pytest.approx(14 / 21),
        "caller": "solve_step",
    }
    cards = [g["card"] for g in diagnosis_to_json(diag)["top_gaps"] if g["gap"] == i]
    assert cards and cards[0]["cpu_samples"]["samples"] == 21
    assert cards[0]["cpu_samples"]["frames"][0] == frame
    report = gap_entry(diag.trace, diag, i, 0)["card"]["cpu_samples"]  # the report's --json
    assert report["samples"] == 21 and report["lane"] == s.lane and report["frames"][0] == frame


def test_gaps_without_samples_are_off_cpu_only_when_long_enough(native):
    """No sample in a gap several sampling intervals long: the thread was off the CPU;
    in a shorter one, nothing is said (it may fall between two samples)."""
    _, sampled, i, _ = native
    diag = diagnose(load(str(sampled)))
    g, cs = diag.gaps, diag.trace.cpu_samples
    lane = g.thread_of(i)
    sl = slice(int(cs.lane_offsets[lane]), int(cs.lane_offsets[lane + 1]))
    interval = int(np.median(np.diff(cs.start_ns[sl])))
    seen = {"long": 0, "short": 0}
    for r in range(len(g)):
        s = gap_samples(diag, np.array([r]))
        if r == i or g.thread_of(r) != lane or s is None or s.samples:
            continue
        assert s.interval_ns == interval
        why = card_for_gap(diag, r).why
        if g.dur_ns[r] >= 3 * interval:
            assert f"sampled every {fmt_dur(interval)} or so while it ran: it was off the CPU" in why
            seen["long"] += 1
        else:
            assert "No CPU sample" not in why and "off the CPU" not in why
            seen["short"] += 1
    assert seen["long"] and seen["short"], seen


def test_native_card_without_samples_asks_for_cpu_sampling(native):
    plain, _, i, _ = native
    diag = diagnose(load(str(plain)))
    card = card_for_gap(diag, i)
    assert card.cpu_samples is None
    f = card_facts(diag, np.array([i]), card.cause, list(card.evidence), "x")
    assert not f.program.python
    assert NSYS_SAMPLE_FLAG in card.first_experiment
    assert "torch" not in card.first_experiment
    assert "cpu_samples" not in gap_entry(diag.trace, diag, i, 0)["card"]  # no samples, no key


def _sql_rows(path, query: str) -> list[tuple]:
    con = sqlite3.connect(ro_uri(str(path)), uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


#: The frame of each CPU sample of the launching thread inside a window, in SQL alone:
#: the frame nearest the leaf whose symbol is resolved (not flagged unresolved and not a
#: bare address), else the leaf.
_HOT_SQL = """
WITH s AS (SELECT id FROM COMPOSITE_EVENTS WHERE globalTid = :tid AND start >= :lo AND start < :hi),
f AS (SELECT c.id, c.stackDepth AS d, v.value AS name FROM SAMPLING_CALLCHAINS c JOIN s ON s.id = c.id
      JOIN StringIds v ON v.id = c.symbol
      WHERE ifnull(c.unresolved, 0) = 0 AND v.value NOT GLOB '0x[0-9a-fA-F]*'),
pick AS (SELECT id, min(d) AS d FROM f GROUP BY id),
named AS (SELECT f.name FROM f JOIN pick ON pick.id = f.id AND pick.d = f.d
          UNION ALL
          SELECT v.value FROM s JOIN SAMPLING_CALLCHAINS c ON c.id = s.id AND c.stackDepth = 0
          JOIN StringIds v ON v.id = c.symbol WHERE s.id NOT IN (SELECT id FROM pick))
SELECT name, count(*) FROM named GROUP BY name ORDER BY count(*) DESC, name
"""


def test_corpus_export_hottest_frames_match_sql():
    path = require(CORPUS / "extrap" / "ex-gpu.s10.sqlite")
    t = load(str(path))
    cs = t.cpu_samples
    assert cs is not None and len(cs) == 609  # the 2 samples of the thread with no events have no lane
    diag = diagnose(t)
    g = diag.gaps
    con = sqlite3.connect(ro_uri(str(path)), uri=True)
    try:
        # every thread's samples, frame for frame up to the cut
        want = con.execute(
            "SELECT count(*) FROM SAMPLING_CALLCHAINS c JOIN COMPOSITE_EVENTS e ON e.id = c.id "
            "WHERE e.globalTid = 296052381794833 AND c.stackDepth < ?",
            (cs.max_frames,),
        ).fetchone()[0]
        assert int(cs.frame_offsets[-1]) == want
        # the whole capture as one window on the main thread: the hottest frames by SQL
        lane = int(cs.lane[0])
        lo, hi = 0, int(cs.start_ns.max()) + 1
        whole = con.execute(_HOT_SQL, {"tid": 296052381794833, "lo": lo, "hi": hi}).fetchall()
        checked = 0
        for i in range(len(g)):
            if g.thread_of(i) != lane:
                continue
            s = gap_samples(diag, np.array([i]))
            rows = con.execute(_HOT_SQL, {"tid": 296052381794833, "lo": int(g.start_ns[i]), "hi": int(g.end_ns[i])})
            rows = rows.fetchall()
            assert s is not None and s.samples == sum(n for _, n in rows)
            if rows:
                assert s.frames[0].samples == rows[0][1]
                assert s.frames[0].name in {name for name, n in rows if n == rows[0][1]}
                checked += 1
    finally:
        con.close()
    assert checked >= 1  # the 2.98 ms gap holds one sample, in cudaDeviceSynchronize
    assert whole[0][1] > 1
    biggest = int(np.argmax(g.dur_ns))
    card = card_for_gap(diag, biggest)
    assert card.cpu_samples is not None and card.cpu_samples.samples == 1
    assert card.cpu_samples.frames[0].name == "cudaDeviceSynchronize"
    assert "fell in `cudaDeviceSynchronize` (in `ex-gpu`, called from `main`)" in card.why
    # one sample where ~22 would fall at the thread's sampling interval: off the CPU
    starts = [r[0] for r in _sql_rows(path, "SELECT start FROM COMPOSITE_EVENTS WHERE globalTid = 296052381794833")]
    interval = int(np.median(np.diff(np.sort(np.array(starts)))))
    expected = int(g.dur_ns[biggest]) / interval
    assert card.cpu_samples.interval_ns == interval and expected > 20
    assert f"about {expected:,.0f} would fall in it at the {fmt_dur(interval)} between the thread's samples" in card.why
    assert "--sample" not in card.first_experiment
    # the slow cudaLaunchKernel is named, and the OS calls it waited in are said with it
    con = sqlite3.connect(ro_uri(str(path)), uri=True)
    try:
        n, ns = con.execute(
            "WITH c AS (SELECT r.start AS s, r.end AS e FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds v "
            "ON v.id = r.nameId WHERE v.value LIKE 'cudaLaunchKernel%' ORDER BY r.end - r.start DESC LIMIT 1) "
            "SELECT count(*), sum(o.end - o.start) FROM OSRT_API o, c JOIN StringIds v ON v.id = o.nameId "
            "WHERE v.value = 'ioctl' AND o.start >= c.s AND o.end <= c.e AND o.globalTid = 296052381794833"
        ).fetchone()
    finally:
        con.close()
    assert n == 9 and "one launch call `cudaLaunchKernel`" in card.why
    assert f"{fmt_dur(ns)} of it in {n} `ioctl` calls inside it" in card.why


def test_os_call_after_a_wait_is_named_in_the_sentence(tmp_path):
    """Issue 43: 1 ms of ``write()`` sat in the evidence list but not in the sentence.
    Here a ``read`` (OSRT_API) holds most of the host work after a blocking wait: the
    sync cliff names it with its time in the gap, as the evidence gives it."""
    p = tmp_path / "osrt.sqlite"
    generate(p, 300, seed=3, launches_per_step=100, omit=["NVTX_EVENTS"])
    diag = diagnose(load(str(p)))
    checked = 0
    for i in range(len(diag.gaps)):
        card = card_for_gap(diag, i)
        if card.cause != Cause.SYNC or "of host work after it" not in card.why:
            continue
        reads = sum(e.overlap_ns for e in card.evidence if e.name == "read" and e.cause == Cause.SYNC)
        sync_ns = int(diag.gaps.class_ns[i, int(Cause.SYNC)])
        if reads >= 0.5 * sync_ns:
            assert f"{fmt_dur(reads)} of it in `read`" in card.why
            checked += 1
    assert checked >= 1


def test_damaged_sample_tables_load_with_warnings(native, tmp_path):
    """Untyped SQLite values in the sample tables (text, NULL, a real, huge ids) and
    names that are markup: the export loads, the damaged rows are skipped or read as
    the integer SQLite casts them to, and names are kept verbatim."""
    _, sampled, i, (lo, _) = native
    p = tmp_path / "damaged.sqlite"
    p.write_bytes(sampled.read_bytes())
    main = _gtid(HOST_PID, MAIN_TID)
    con = sqlite3.connect(p)
    con.executescript(
        f"""
        INSERT INTO StringIds VALUES (900001, '[red]<b>x</b>`\x1b[31m');
        INSERT INTO COMPOSITE_EVENTS VALUES (50001, {lo + 17}, 0, 1, {main}, 1);
        INSERT INTO SAMPLING_CALLCHAINS VALUES (50001, 900001, 'libx', NULL, NULL, 'yes', NULL, 0, 7, 0);
        INSERT INTO SAMPLING_CALLCHAINS VALUES (50001, 'text', 1, NULL, NULL, NULL, NULL, 0, 7, 1);
        INSERT INTO COMPOSITE_EVENTS VALUES (50002, 'soon', 0, 1, {main}, 1);
        INSERT INTO COMPOSITE_EVENTS VALUES (50003, {lo + 19}.5, 0, 1, NULL, 1);
        INSERT INTO SAMPLING_CALLCHAINS VALUES (9223372036854775807, 1, 1, NULL, NULL, NULL, NULL, 0, 7, 0);
        INSERT INTO SAMPLING_CALLCHAINS VALUES (50001, 1, 1, NULL, NULL, NULL, NULL, 0, 7, 'deep');
        """
    )
    con.commit()
    con.close()
    t = load(str(p))
    cs = t.cpu_samples
    assert cs is not None
    k = int(np.flatnonzero(cs.start_ns == lo + 17)[0])
    assert cs.names[cs.frame_name[cs.frame_offsets[k]]] == "[red]<b>x</b>`\x1b[31m"
    diag = diagnose(t)
    assert card_for_gap(diag, i).cpu_samples is not None


def test_sparse_rowids_are_read_in_blocks_of_rows(tmp_path):
    """A table whose rowids are far apart (a sample id of 2**62 is its rowid in
    ``COMPOSITE_EVENTS``) is read in blocks of rows, not of the rowid span: the span
    made 2**62 / block ranges (a list of them: out of memory)."""
    p = tmp_path / "sparse.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
    rows = [(-(2**63), 1), (-5, 2), (0, 3), (7, 4), (2**40, 5), (2**62, 6), (2**63 - 1, 7)]
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    con.commit()
    con.close()
    db = Database(str(p))
    (v,), rowid, _ = db.int_columns("t", ["v"])
    assert v.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert rowid.tolist() == [r for r, _ in rows]
    blocks = [b[0].tolist() for b in db.int_column_blocks("t", ["v"], where="v != 4", block_rows=2)]
    assert blocks == [[1, 2], [3], [5, 6], [7]]
    db.close()


def test_a_huge_sample_id_is_read(native, tmp_path):
    """A sample whose id is 2**62 (``COMPOSITE_EVENTS.id`` is the rowid) loads with the
    others: the id is kept and its frames found (it was out of memory)."""
    _, sampled, _, (lo, _) = native
    p = tmp_path / "huge_id.sqlite"
    p.write_bytes(sampled.read_bytes())
    main = _gtid(HOST_PID, MAIN_TID)
    con = sqlite3.connect(p)
    sym = int(con.execute("SELECT id FROM StringIds WHERE value = 'parse_config'").fetchone()[0])
    con.execute(f"INSERT INTO COMPOSITE_EVENTS VALUES ({2**62}, {lo + 11}, 0, 1, {main}, 1)")
    con.execute(f"INSERT INTO SAMPLING_CALLCHAINS VALUES ({2**62}, {sym}, {sym}, NULL, NULL, NULL, NULL, 0, 7, 0)")
    con.commit()
    con.close()
    before = load(str(sampled)).cpu_samples
    cs = load(str(p)).cpu_samples
    assert cs.start_ns.shape[0] == before.start_ns.shape[0] + 1
    k = int(np.flatnonzero(cs.start_ns == lo + 11)[0])
    assert cs.frame_offsets[k + 1] - cs.frame_offsets[k] == 1
    assert cs.names[cs.frame_name[cs.frame_offsets[k]]] == "parse_config"


def test_string_ids_beyond_32_bits_are_not_another_name(native, tmp_path):
    """A frame's symbol id of 2**32 + n was packed into 32 bits and read as string n (a
    real name, silently wrong); an id that does not fit is read as unknown."""
    _, sampled, _, (lo, _) = native
    p = tmp_path / "wide_symbol.sqlite"
    p.write_bytes(sampled.read_bytes())
    main = _gtid(HOST_PID, MAIN_TID)
    con = sqlite3.connect(p)
    sym = int(con.execute("SELECT id FROM StringIds WHERE value = 'parse_config'").fetchone()[0])
    con.execute(f"INSERT INTO COMPOSITE_EVENTS VALUES (60001, {lo + 13}, 0, 1, {main}, 1)")
    con.execute(
        f"INSERT INTO SAMPLING_CALLCHAINS VALUES (60001, {2**32 + sym}, {2**32 + sym}, NULL, NULL, NULL, NULL, 0, 7, 0)"
    )
    con.commit()
    con.close()
    cs = load(str(p)).cpu_samples
    k = int(np.flatnonzero(cs.start_ns == lo + 13)[0])
    f = cs.frame_offsets[k]
    assert cs.frame_offsets[k + 1] - f == 1
    assert (cs.names[cs.frame_name[f]], cs.names[cs.frame_module[f]]) == ("(unknown)", "(unknown)")


def test_callchains_in_untyped_columns_are_read(native, tmp_path):
    """``SAMPLING_CALLCHAINS`` with no column types and its numbers stored as text
    ('0', '1'): the frames are read as SQLite casts them, as the sample rows are (the
    filter on ``stackDepth`` compared text with integers, so every frame was dropped
    without a word and each sample read with no callchain)."""
    _, sampled, _, _ = native
    p = tmp_path / "untyped.sqlite"
    p.write_bytes(sampled.read_bytes())
    con = sqlite3.connect(p)
    con.executescript(
        """
        ALTER TABLE SAMPLING_CALLCHAINS RENAME TO typed;
        CREATE TABLE SAMPLING_CALLCHAINS (id, symbol, module, unresolved, stackDepth);
        INSERT INTO SAMPLING_CALLCHAINS
            SELECT CAST(id AS TEXT), symbol, module, unresolved, CAST(stackDepth AS TEXT) FROM typed;
        DROP TABLE typed;
        """
    )
    con.commit()
    con.close()
    want, got = load(str(sampled)).cpu_samples, load(str(p)).cpu_samples
    assert got.frame_offsets.tolist() == want.frame_offsets.tolist()
    assert [got.names[i] for i in got.frame_name] == [want.names[i] for i in want.frame_name]
    # in the gap 10 x IN_STEP (4 frames), 4 x CHECKSUM (3), 6 x PARSE (2); 5 before it
    # and 3 on the loader (1 each); the chain with a hole read up to it (1)
    assert int(got.frame_offsets[-1]) == 10 * 4 + 4 * 3 + 6 * 2 + 5 + 3 + 1
