"""Viewer benchmark: time to first paint and key → repaint latency (Pilot driven).

    python bench/tui.py [--events 1000000] [--size 200x50] [--repeats 40] [--trace PATH]

Uses the generated Kineto-shaped trace of ``bench/load.py`` (``bench/out/``, made on
first use by ``bench/gen_kineto.generate``), then runs the app built by ``gapscope.tui.factory.make_app``
headless at the given size:

- load time (inside the load worker) and diagnosis time (inside the trace screen's
  worker, which starts with the trace screen and runs beside its first paint);
- first paint: from the end of the load to the end of the first ``render_lines`` of
  the swimlane widget (the lanes, before their gaps and causes), and causes drawn: from
  the end of the diagnosis to the first ``render_lines`` of the lanes holding it (the
  findings follow it: ``tui.messages.FindingsReady``) (``--command``: from
  the command to those, and to the first lanes drawn with gaps, the early ones before
  their causes: ``tui.factory.default_early_gaps``);
- key → repaint for next gap (``n``), zoom (``+``/``-`` alternating) and pan
  (``l``/``h`` alternating): from posting the key to the end of the swimlane widget's
  first ``render_lines`` after it (the lanes repainted), and to the last render of any
  widget (everything settled: header, detail line, the card panel, which follows one
  frame later); median and 95th percentile (target p95 < 50 ms).

``--command`` runs the floor of ``bench/load.py`` (the typed decode of the whole text)
once in every round as well, and prints each time also as a ratio to its median: the
machine's speed that hour, not another day's. Its rounds let the children write the
modules' bytecode (as an installed package has it) and leave round 0 out (a warm-up).

The swimlane widget's ``render_lines`` is wrapped to take the timestamps; rendering
into the headless driver includes Textual's compositor but not a real terminal's
output time.

``--command 8 --compare-late`` (load average 0.8, 1M events, 200x50; the load begun
before Textual is imported, as ``gapscope TRACE`` does, against the viewer beginning it
after its imports): first swimlanes 1.65 s vs 1.85 s, causes 2.01 s vs 2.15 s; from the
cache 0.62 s vs 0.63 s, causes 0.99 s vs 1.08 s (medians of 8).

Before the C scanner (2-core shared machine, load average 0.7-1.0; 1M ``traceEvents`` entries
= 666,036 events, 21,670 gaps; 200x50), since the lanes are drawn before the diagnosis
ends: load 1.79 s, diagnosis 0.42 s (its thread runs beside the first paint), lanes
first painted 151 ms after the load, causes drawn 15 ms after the diagnosis; key →
lanes repainted median / p95: next gap 9.6 / 12.9 ms, zoom 9.2 / 12.6 ms, pan 10.0 /
13.1 ms; settled next gap 45.4 / 50.1 ms. ``--command 3``: see docs/speed.md.

Issue 45's viewer speed (2-core machine shared by seven jobs, load average 3-10, so
the figures move by tens of percent between runs; main and this build alternating, 1M
``traceEvents`` entries = 666,036 events, 21,670 gaps, 200x50, 40 repeats). Key → lanes
repainted p95, main vs this build: zoom 24.3/15.6/23.2/28.4 vs 13.7/13.4/17.4/19.0 ms,
pan 22.5/15.4/24.8/28.8 vs 14.1/13.2/17.5/18.5 ms, next gap 28.6/18.9/27.5/26.1 vs
15.2/15.0/20.2/18.2 ms; settled next gap (the card) p95 79.5/55.8/76.2/82.0 vs
56.1/56.1/64.7/61.2 ms. Causes drawn after the diagnosis 2.7-4.7 s vs 1.0-1.9 s (the
findings, computed before the causes are drawn). Half the zoom and pan samples revisit a
view (``+`` then ``-``, ``l`` then ``h``): their strips come from the cache (its key is
the view, no longer a counter bumped on every move); the others draw a new view. First
paint after the load, medians of 6 alternating single runs: 274 ms vs 290 ms (load 6-8;
with the analysis threads held back, the viewer alone: 327 vs 299 ms). ``--command 2`` at
5M events, command → causes drawn, median (and its ratio to that run's floor), main vs
this build, three alternating sets: first load 37.1 s (2.72x) / 31.5 s (4.43x) / 57.2 s
(7.29x) vs 26.5 s (2.95x) / 21.5 s (3.87x) / 29.8 s (3.01x); cached 25.3 s (1.85x) /
30.1 s (4.23x) / 45.7 s (5.83x) vs 4.33 s (0.48x) / 3.10 s (0.56x) / 4.00 s (0.40x): the
diagnosis and findings come from the diagnosis cache (0.2 s to read at 5M events).

The causes drawn before the findings (``Diagnosed``, then ``FindingsReady``): ``--command
3`` at 5M events, command -> causes drawn, first open, median of 3, main vs this build,
three alternating sets (load average 7.9 / 3.6 / 1.3-2.6): 16.12 / 14.76 / 11.51 s vs
12.54 / 9.65 / 8.33 s; cached 2.19 / 2.04 / 1.50 s vs 2.22 / 1.65 / 1.68 s. In-process at
load 1.8, this build: load 5.4 s, diagnosis 1.8 s, findings 2.4 s (main 2.7 s; after the
causes now). The first open's causes wait for the load and the diagnosis: the floor, the
decode of the whole text alone, is 4.1 s.

Earlier figures (before the causal classes changed the trace's gap count and before
the lanes were drawn ahead of the diagnosis), kept for the history of the key latencies:

2-core shared machine, load average 2-5 from other jobs, so figures
move by ±10 ms between runs; 1,000,000 ``traceEvents`` entries = 673,373 events, 37,220
gaps, 200x50, two runs each of the viewer before and after next gap learned to zoom a
sub-cell gap into view (and the panel to build one card per gap, strips per drawn line):
before: load 3.1-4.7 s, first paint 130-242 ms after load+diagnosis; key → lanes
repainted median / p95: next gap 17-21 / 26-27 ms, zoom 17-20 / 24-25 ms, pan 17-21 /
25 ms; settled (card panel one frame later): next gap 55-62 / 92-106 ms.
after (three runs, zoom levels of big lanes built by a thread worker after the first
paint): load 3.4-4.3 s, first paint 165-211 ms; next gap 11-15 / 16-17 ms, zoom 10-14 /
16-22 ms, pan 11-15 / 15-21 ms; settled next gap 50-55 / 65-112 ms. Before that worker,
next gap's p95 came from the first visit of a deep zoom level: building it costs 4-13 ms
per big lane (40 ms over the four big lanes of this trace).
(An earlier, busier
run had measured next gap 26 / 67 ms.) The settled next-gap time is the card: about
6 ms to build it in ``analysis``, 8 ms to wrap it and 12 ms to style the visible lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it), except in ``--command``'s runs with
#: the cache on (``GAPSCOPE_BENCH_CACHED``: a cached open, or a first open into an empty
#: cache, as a user's first open of a large trace is).
if os.environ.get("GAPSCOPE_BENCH_CACHED") != "1":
    os.environ["GAPSCOPE_NO_CACHE"] = "1"
#: As the ``gapscope`` command sets it before numpy is imported (``gapscope.cli.OPENBLAS_THREADS_VAR``).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
_STARTED_WALL = float(os.environ.get("GAPSCOPE_BENCH_SPAWNED", "0")) or None

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))
    return xs[k]


def _early_options(early):
    """As ``gapscope.tui.cmd``: the viewer's options for the load begun early
    (``tui.factory.early_options``: the diagnosis begun by the load's thread); None
    without ``early``, or for a build that has none (run by another checkout's
    interpreter)."""
    try:
        from gapscope.tui.factory import early_options
    except ImportError:
        return None
    return early_options(early) if early is not None else None


def _timed_ready(marks: dict, options=None):
    """The viewer's default ``ready_diagnosis`` (the diagnosis cache's entry, asked
    first; ``options.ready_diagnosis`` when ``_early_options`` gave them), marking when
    it gave one as the diagnosis's end; None for a build from before 2026-12-07, which
    has none (run by another checkout's interpreter)."""
    try:
        from gapscope.tui.factory import default_ready_diagnosis
    except ImportError:
        return None
    asked = options.ready_diagnosis if options is not None else default_ready_diagnosis

    def ready(tr):
        d = asked(tr)
        if d is not None:
            marks["diagnosed_at"] = time.perf_counter()
            marks["diagnose_s"] = 0.0
            marks["gaps"] = len(d.gaps)
        return d

    return ready


async def _key_latencies(pilot, repeats: int, renders: list, any_renders: list, lat: dict, settle: dict) -> None:
    """Press next gap, zoom and pan ``repeats`` times each; append to ``lat`` the time
    from each key to the lanes' first render after it, to ``settle`` to the last
    render of any widget (s)."""
    plan = {"next gap": ["n"], "zoom": ["plus", "minus"], "pan": ["l", "h"]}
    for _ in range(repeats):
        for what, keys in plan.items():
            for key in keys:
                await pilot.pause()
                n0 = len(renders)
                t0 = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                if len(renders) > n0:
                    lat[what].append(renders[n0] - t0)
                    settle[what].append(any_renders[-1] - t0)


async def _run(path: Path, size: tuple[int, int], repeats: int, early=None) -> dict:
    """``early``: a load begun before the imports (``parsers.preview.EarlyLoad``), as the
    view command begins it; None: the viewer calls ``load`` itself."""
    from textual.widget import Widget

    import gapscope.report.cmd  # noqa: F401 - as gapscope.tui.cmd imports it, after the load begins
    from gapscope.parsers import load
    from gapscope.tui.factory import default_diagnose, default_early_gaps, make_app
    from gapscope.tui.screen import TraceScreen
    from gapscope.tui.session import ViewOptions
    from gapscope.tui.swimlanes import Swimlanes

    marks: dict[str, float] = {}
    renders: list[float] = []
    any_renders: list[float] = []
    orig = Swimlanes.render_lines
    orig_any = Widget.render_lines

    gap_renders: list[float] = []
    cause_renders: list[float] = []  # the lanes drawn with the diagnosis's gaps and causes

    def render_lines(self, crop):
        out = orig(self, crop)
        renders.append(time.perf_counter())
        if self.gaps is not None:
            gap_renders.append(renders[-1])
        if getattr(self, "diagnosis", None) is not None and not getattr(self, "pending", False):
            cause_renders.append(renders[-1])
        return out

    def any_render_lines(self, crop):
        out = orig_any(self, crop)
        any_renders.append(time.perf_counter())
        return out

    Swimlanes.render_lines = render_lines
    Widget.render_lines = any_render_lines

    def loader(p):
        t = time.perf_counter()
        tr = early(p) if early is not None else load(p)
        marks["loaded_at"] = time.perf_counter()
        marks["load_s"] = marks["loaded_at"] - t
        marks["events"] = len(tr)
        return tr

    early_opts = _early_options(early)

    def diagnose(tr):
        t = time.perf_counter()
        d = early_opts.diagnose(tr) if early_opts is not None else default_diagnose(tr)
        marks["diagnosed_at"] = time.perf_counter()
        marks["diagnose_s"] = marks["diagnosed_at"] - t
        marks["gaps"] = len(d.gaps) if d is not None else 0
        return d

    ready = _timed_ready(marks, early_opts)

    def preview(callback):  # as gapscope.tui.cmd: the device preview drawn first
        def got(trace):
            marks.setdefault("preview_at", time.perf_counter())
            callback(trace)

        early.on_preview(got)

    app = make_app(
        path,
        ViewOptions(
            loader=loader,
            diagnose=diagnose,
            **({"ready_diagnosis": ready} if ready is not None else {}),
            preview=preview if early is not None else None,
            early_gaps=default_early_gaps,  # as the viewer's default diagnosis
            preview_drawn=(early_opts.preview_drawn if early_opts is not None else early.preview_drawn)
            if early is not None
            else None,
        ),
    )
    lat: dict[str, list[float]] = {"next gap": [], "zoom": [], "pan": []}
    settle: dict[str, list[float]] = {"next gap": [], "zoom": [], "pan": []}
    try:
        async with app.run_test(size=size) as pilot:
            while not isinstance(app.screen, TraceScreen):
                try:
                    await app.workers.wait_for_complete()
                except Exception:  # noqa: BLE001 - a failed load is reported by app.error below
                    pass
                await pilot.pause()
                if app.error:
                    raise SystemExit(app.error)
            shown_at = lambda: min(marks.get("preview_at", 1e300), marks.get("loaded_at", 1e300))  # noqa: E731
            while not renders or renders[-1] < shown_at():
                await pilot.pause()
            first = [r for r in renders if r >= shown_at()][0]
            marks["first_paint_s"] = first - shown_at()
            marks["previewed"] = "preview_at" in marks
            marks["first_paint_wall"] = time.time() - (time.perf_counter() - first)
            while (
                "diagnosed_at" not in marks
                or app.screen.diagnosing
                or not renders
                or renders[-1] < marks["diagnosed_at"]
            ):
                try:
                    await app.workers.wait_for_complete()
                except Exception:  # noqa: BLE001 - a failed diagnosis shows no gaps; timed all the same
                    pass
                await pilot.pause()
            while not cause_renders and marks["gaps"]:
                await pilot.pause()
            marks["gaps_paint_wall"] = time.time() - (time.perf_counter() - gap_renders[0])
            causes = cause_renders[0] if cause_renders else [r for r in renders if r >= marks["diagnosed_at"]][0]
            marks["causes_paint_s"] = causes - marks["diagnosed_at"]
            marks["causes_paint_wall"] = time.time() - (time.perf_counter() - causes)
            await _key_latencies(pilot, repeats, renders, any_renders, lat, settle)
    finally:
        Swimlanes.render_lines = orig
        Widget.render_lines = orig_any
    for what, xs in lat.items():
        marks[f"{what} median_ms"] = 1000 * statistics.median(xs) if xs else float("nan")
        marks[f"{what} p95_ms"] = 1000 * _pct(xs, 0.95) if xs else float("nan")
        marks[f"{what} samples"] = len(xs)
        ys = settle[what]
        marks[f"{what} settle_median_ms"] = 1000 * statistics.median(ys) if ys else float("nan")
        marks[f"{what} settle_p95_ms"] = 1000 * _pct(ys, 0.95) if ys else float("nan")
    return marks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--size", default="200x50")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--trace", help="use this trace instead of a generated one")
    ap.add_argument(
        "--command",
        type=int,
        metavar="N",
        default=0,
        help="instead: N alternating rounds of a fresh process each, first load then cached load, "
        "timed from the spawn to the first swimlanes, and to the causes drawn on them",
    )
    ap.add_argument(
        "--compare-late",
        action="store_true",
        help="with --command: also time the viewer beginning the load itself, after its imports",
    )
    ap.add_argument(
        "--compare-no-cache",
        action="store_true",
        help="with --command: also time a first load with the caches off (GAPSCOPE_NO_CACHE)",
    )
    ap.add_argument(
        "--compare-no-preview",
        action="store_true",
        help="with --command: also time a first load without the device preview drawn first",
    )
    a = ap.parse_args(argv)
    w, h = (int(x) for x in a.size.lower().split("x"))
    if a.trace:
        path = Path(a.trace)
    else:
        from bench.load import trace_path  # the generated traces bench/load.py measures

        path = trace_path(a.events)
    if a.command:
        return _command_rounds(path, a.size, a.command, a.compare_late, a.compare_no_preview, a.compare_no_cache)
    early = None
    if _STARTED_WALL is not None and os.environ.get("GAPSCOPE_BENCH_LATE") != "1":
        from gapscope.parsers.preview import EarlyLoad  # as gapscope.tui.cmd: before Textual is imported

        early = EarlyLoad(path, preview=os.environ.get("GAPSCOPE_BENCH_NO_PREVIEW") != "1")
    r = asyncio.run(_run(path, (w, h), a.repeats, early))
    if _STARTED_WALL is not None:
        print(f"COMMAND_TO_PAINT_S {r['first_paint_wall'] - _STARTED_WALL:.3f}")
        print(f"PREVIEWED {int(r['previewed'])}")
        print(f"COMMAND_TO_GAPS_S {r['gaps_paint_wall'] - _STARTED_WALL:.3f}")
        print(f"COMMAND_TO_CAUSES_S {r['causes_paint_wall'] - _STARTED_WALL:.3f}")
        return 0
    print(f"trace: {path} ({r['events']} events, {r['gaps']} gaps), terminal {w}x{h}")
    print(
        f"load {r['load_s']:.2f} s, diagnose {r['diagnose_s']:.2f} s, first paint {1000 * r['first_paint_s']:.0f} ms after the load,"
        f" causes drawn {1000 * r['causes_paint_s']:.0f} ms after the diagnosis"
    )
    for what in ("next gap", "zoom", "pan"):
        print(
            f"{what:>9}: key→lanes repainted median {r[what + ' median_ms']:.1f} ms, p95 {r[what + ' p95_ms']:.1f} ms;"
            f" all widgets settled median {r[what + ' settle_median_ms']:.1f} ms, p95 {r[what + ' settle_p95_ms']:.1f} ms ({r[what + ' samples']} samples)"
        )
    return 0


def _command_rounds(
    path: Path,
    size: str,
    rounds: int,
    compare_late: bool = False,
    compare_no_preview: bool = False,
    compare_no_cache: bool = False,
) -> int:
    """Spawn the viewer benchmark ``rounds`` times per mode (first load: the caches on,
    in an empty directory each time, as a user's first open; a cached load: a warm
    cache directory of its own), alternating, and print the medians of the time from
    the spawn to the first swimlanes, and to their causes drawn. The load begins before
    Textual is imported, as in ``gapscope TRACE``; ``compare_late`` alternates the same
    two modes with the load begun by the viewer, after the imports;
    ``compare_no_preview`` adds a first load without the device preview,
    ``compare_no_cache`` one with the caches off (what "first load" measured before
    2026-12-07: it missed the findings the diagnosis cache computed before the causes)."""
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-cache-") as cache_dir:  # removed after
        modes: tuple[str, ...] = ("first load", "cached")
        if compare_late:
            modes += ("first load, load after imports", "cached, load after imports")
        if compare_no_preview:
            modes += ("first load, no preview",)
        if compare_no_cache:
            modes += ("first load, no cache",)
        return _rounds_in(cache_dir, path, size, rounds, modes)


def _rounds_in(cache_dir: str, path: Path, size: str, rounds: int, modes: tuple[str, ...]) -> int:
    """``_command_rounds`` with the warm trace cache in ``cache_dir`` (the first loads'
    empty ones beside it, removed after each)."""
    import shutil
    import subprocess

    marks = {
        "COMMAND_TO_PAINT_S": "first swimlanes",
        "COMMAND_TO_GAPS_S": "gaps drawn",
        "COMMAND_TO_CAUSES_S": "causes drawn",
    }
    times: dict[tuple[str, str], list[float]] = {(m, k): [] for m in modes for k in marks}
    floor_s: list[float] = []
    from bench.load import run_one  # the floor: bench/load.py's typed msgspec decode of the whole text

    for i in range(rounds + 1):
        for mode in modes:
            first_dir = tempfile.mkdtemp(prefix="first-", dir=cache_dir)
            env = dict(os.environ, GAPSCOPE_CACHE_DIR=cache_dir if mode.startswith("cached") else first_dir)
            # the modules' bytecode as an installed package has it (pip compiles it at
            # install; an editable checkout writes it on first use): a shell that turns
            # that off put 0.2-0.3 s of compiling on every first paint
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if not mode.endswith("no cache"):  # a cached open, or a first one into an empty cache
                env["GAPSCOPE_BENCH_CACHED"] = "1"
                env.pop("GAPSCOPE_NO_CACHE", None)
            if mode.endswith("after imports"):
                env["GAPSCOPE_BENCH_LATE"] = "1"
            if mode.endswith("no preview"):
                env["GAPSCOPE_BENCH_NO_PREVIEW"] = "1"
            env["GAPSCOPE_BENCH_SPAWNED"] = repr(time.time())
            cp = subprocess.run(
                [sys.executable, __file__, "--trace", str(path), "--size", size, "--repeats", "1"],
                capture_output=True,
                text=True,
                env=env,
            )
            shutil.rmtree(first_dir, ignore_errors=True)
            got = dict(ln.split()[:2] for ln in cp.stdout.splitlines() if ln.split()[:1] and ln.split()[0] in marks)
            if set(got) != set(marks):
                print(f"{mode}: failed: {(cp.stderr or cp.stdout).strip()[-300:]}")
                return 1
            if i:  # round 0 warms up: the cache filled, the bytecode written, the file's pages read
                for k in marks:
                    times[(mode, k)].append(float(got[k]))
        if i:  # the floor in the same round: the machine's speed now, for the ratios
            res = run_one("floor", path, sys.executable, 600.0)
            if "error" in res:
                print(f"floor: failed: {res['error']}")
                return 1
            floor_s.append(float(res["time_s"]))
    print(f"trace: {path}, terminal {size}, {rounds} alternating rounds, load average {os.getloadavg()[0]:.1f}")
    floor = statistics.median(floor_s)
    print(f"floor (bench/load.py's decode of the whole text, in-process wall): median {floor:.2f} s")
    for (mode, k), xs in times.items():
        print(
            f"command -> {marks[k]}, {mode}: median {statistics.median(xs):.2f} s (min {min(xs):.2f}, max {max(xs):.2f}),"
            f" {statistics.median(xs) / floor:.2f}x the floor"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
