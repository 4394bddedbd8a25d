#!/usr/bin/env bash
# Capture every gapscope scenario with CUDA activity on a GPU machine, report each one,
# diff the eager decodes against their CUDA-graph replay, and check that the diagnosis
# names each scenario's smell. 90 s on one H200 (2026-12-04), after the machine's start.
# The traces in sample_traces/gpu/ came from this script (see its README.md).
#
# Prepare once, on the machine that calls the device tool, in the repository root
# (the GPU image has torch, numpy and rich but not msgspec, which parsers/ needs):
#
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl msgspec==0.23.0 isal==1.9.1 platformdirs==4.14.9
#
# (nothing can be fetched on the GPU machine: torch is the image's own CUDA build, 2.11.0+cu130
# for driver 580 there; the project installs with --no-deps, or as the source tree of
# tools/check.py when it cannot be built)
#
# Run (device tool): command "bash bench/gpu_capture.sh", carry [".whl"], timeout_s 420.
# Locally (any machine with CUDA): OUT=bench/out/gpu bash bench/gpu_capture.sh
# Dry run of the pipeline on a CPU (move .whl aside when its wheels are for another Python):
#   ALLOW_CPU=1 TINY=1 PYTHON=.venv/bin/python bash bench/gpu_capture.sh
#
# First runs tests/test_capture_gpu.py (NO_PYTEST=1 skips it), then every scenario.
# Writes to $OUT (the device tool brings back at most 8 files of 16 MiB):
#   summary.txt          GPU, driver, CUDA, torch; per scenario: status, trace size,
#                        idle share, idle time by cause, dominant cause, OK / FINDING
#   gpu_capture.tar      traces/*.pt.trace.json.gz, reports/*.json, logs/*.log, summary.txt
#                        (split into gpu_capture.tar.partNN when over 15 MiB)
# Exit status: 0 when every scenario produced a trace and a report, 1 otherwise
# (a FINDING, a diagnosis that does not match the smell, does not fail the run).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench/out/gpu}
WORK=${WORK:-$(mktemp -d /tmp/gapscope-gpucap.XXXXXX)}
PY=${PYTHON:-python3}
SCENARIOS=${SCENARIOS:-"decode decode-graph decode-eager picket-fence host-island copy-on-path sync-cliff"}
mkdir -p "$OUT" "$WORK/traces" "$WORK/reports" "$WORK/logs"
export PYTHONUNBUFFERED=1

if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site || { echo "could not install the carried wheels" >&2; exit 1; }
fi
# the project itself, as the one import package gapscope.* (its folders map into it)
"$PY" -m pip install -q --no-deps --no-build-isolation --target /tmp/gapscope-site . 2>/dev/null \
    && SITE=/tmp/gapscope-site \
    || SITE=$("$PY" tools/check.py tree) \
    || { echo "could not install the project" >&2; exit 1; }  # the tree: source links, no compiled scanner
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
# the checkout's own gapscope/ folder must not shadow the installed package (it lacks the mapped
# sub-packages): no current folder on sys.path (python -m, -c, stdin), pytest appends its rootdir
export PYTHONSAFEPATH=1

SUMMARY="$WORK/summary.txt"
{
    echo "# gapscope GPU capture, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
    "$PY" -c "import torch, sys; print('python:', sys.version.split()[0]); print('torch:', torch.__version__, 'cuda:', torch.version.cuda, 'available:', torch.cuda.is_available())"
    "$PY" -c "import msgspec, numpy; print('msgspec:', msgspec.__version__, 'numpy:', numpy.__version__)" 2>&1 | tail -1
    "$PY" -c "import gapscope.parsers.chrome._xscan" 2>/dev/null && echo "scanner: compiled" || echo "scanner: pure Python"
    echo "site: $SITE"
} > "$SUMMARY"
cat "$SUMMARY"
if [ -z "${ALLOW_CPU:-}" ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "CUDA is not available here: this script is for a GPU machine" | tee -a "$SUMMARY" >&2
    cp "$SUMMARY" "$OUT/"
    exit 1
fi

failed=0
if [ -z "${NO_PYTEST:-}" ]; then  # the capture's own GPU checks (kernels, launches, graph replays, copies)
    if timeout 180 "$PY" -m pytest -q -p no:cacheprovider --import-mode=append tests/test_capture_gpu.py >"$WORK/logs/pytest_gpu.log" 2>&1; then
        echo "pytest tests/test_capture_gpu.py: $(tail -1 "$WORK/logs/pytest_gpu.log")" | tee -a "$SUMMARY"
    else
        echo "pytest tests/test_capture_gpu.py: FAILED: $(tail -1 "$WORK/logs/pytest_gpu.log")" | tee -a "$SUMMARY"
        failed=1
    fi
fi
for s in $SCENARIOS; do
    log="$WORK/logs/$s.log"
    start=$(date +%s)
    # stdout of --scenario is the trace path; messages go to the log
    path=$(timeout 150 "$PY" -m gapscope capture --scenario "$s" --out "$WORK/traces" ${TINY:+--tiny} 2>"$log" | tail -1)
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ -z "$path" ] || [ ! -f "$path" ]; then
        echo "$s: FAILED capture (rc=$rc, ${secs}s): $(tail -3 "$log" | tr '\n' ' ')" | tee -a "$SUMMARY"
        failed=1
        continue
    fi
    if ! timeout 90 "$PY" -m gapscope report --json "$path" >"$WORK/reports/$s.json" 2>>"$log"; then
        echo "$s: FAILED report (${secs}s capture): $(tail -3 "$log" | tr '\n' ' ')" | tee -a "$SUMMARY"
        failed=1
    fi
    timeout 90 "$PY" - "$s" "$path" "$secs" >>"$SUMMARY" 2>>"$log" <<'EOF' || { echo "$s: FAILED diagnosis check" | tee -a "$SUMMARY"; failed=1; }
import os, sys
from gapscope.parsers import load
from gapscope.analysis.diagnose import diagnose

# the smell each scenario reproduces, as cause classes the diagnosis should give its idle time
EXPECT = {"decode": {"host", "launch"}, "decode-graph": None, "decode-eager": {"launch"}, "picket-fence": {"launch"},
          "host-island": {"host"}, "copy-on-path": {"copy"}, "sync-cliff": {"sync"}}
name, path, secs = sys.argv[1], sys.argv[2], sys.argv[3]
d = diagnose(load(path))
totals = {k.label: int(v) for k, v in d.class_totals_ns().items()}
idle = sum(totals.values())
dev = d.devices[0] if d.devices else None
share = f"idle {dev.idle_ns / 1e3:.0f} us of {dev.window_ns / 1e3:.0f} us ({100 * dev.idle_ns / max(dev.window_ns, 1):.0f}%)" if dev else "no GPU ops"
by = ", ".join(f"{k} {100 * v / idle:.0f}%" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v) or "-"
top = max(totals, key=totals.get) if idle else "-"
g0 = d.groups[0].cause.label if d.groups else "-"  # the largest recurring position
want = EXPECT.get(name)
# a smell shows as the class of most idle (a picket fence spreads over many positions)
# or of the largest recurring position (a host island between per-token launches)
verdict = "info" if want is None else ("OK" if {top, g0} & want else f"FINDING (expected {'/'.join(sorted(want))})")
print(f"{name}: {verdict}; capture {secs}s, {os.path.getsize(path) / 1e6:.2f} MB, {len(d.trace)} events; "
      f"{share}; {len(d.gaps.start_ns)} gaps; by cause: {by}; dominant: {top}; largest group: {g0}"
      + ("; steps as the GPU ran them" if d.steps is not None and d.steps.on_gpu else ""))
# the step time the capture measured (perf_counter between step() calls) against the budget's
import gzip, json, statistics
with gzip.open(path, "rt") as f:
    meta = json.load(f).get("gapscope_steps") or {}
wall = meta.get("wall_ms") or []
b = d.budget
print(f"  {name} steps: measured {len(wall)} median {statistics.median(wall) if wall else float('nan'):.3f} ms "
      f"[{', '.join(f'{w:.3f}' for w in wall)}]; budget "
      + (f"{b.steps} steps ({b.source}) wall {b.wall_ns / 1e6:.3f} ms, busy {b.gpu_busy_ns / 1e6:.3f} ms, "
         f"idle {b.idle_ns / 1e6:.3f} ms ({100 * b.idle_share:.0f}%)" if b else "none"))
EOF
    tail -2 "$SUMMARY"
    echo "$s $path" >> "$WORK/paths.txt"
done

# the pairs: the same decode with its smells removed (a CUDA graph; the .item() and logging gone)
pair() {  # pair BEFORE AFTER
    local a b
    a=$(awk -v n="$1" '$1 == n {print $2}' "$WORK/paths.txt" 2>/dev/null)
    b=$(awk -v n="$2" '$1 == n {print $2}' "$WORK/paths.txt" 2>/dev/null)
    [ -n "$a" ] && [ -n "$b" ] || { echo "diff $1 -> $2: skipped (a capture failed)" | tee -a "$SUMMARY"; return; }
    timeout 90 "$PY" -m gapscope diff "$a" "$b" --json >"$WORK/reports/diff_$1_vs_$2.json" 2>>"$WORK/logs/diff.log" || failed=1
    { echo "diff $1 -> $2:"; timeout 90 "$PY" -m gapscope diff "$a" "$b" 2>&1 | head -40 | sed 's/^/  /'; } | tee -a "$SUMMARY"
}
pair decode decode-graph
pair decode-eager decode-graph

cp "$SUMMARY" "$OUT/summary.txt"
touch "$WORK/paths.txt"
tar -cf "$WORK/gpu_capture.tar" -C "$WORK" traces reports logs summary.txt paths.txt
size=$(stat -c %s "$WORK/gpu_capture.tar")
if [ "$size" -gt $((15 * 1024 * 1024)) ]; then
    split -b 15M -d "$WORK/gpu_capture.tar" "$OUT/gpu_capture.tar.part"
else
    cp "$WORK/gpu_capture.tar" "$OUT/"
fi
ls -la "$OUT"
exit $failed
