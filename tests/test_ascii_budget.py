"""One budget for what a lane-art file's picket fences expand into (issue 42, item 2).

Every fence's count is read from its notes and summed against one cap for the file
(``MAX_EXPANDED_EVENTS``) and against the trace-size limit at ``EXPANDED_EVENT_BYTES``
per event, before any fence is expanded. Assertions are on counts (events created,
the cap, the line named), never on time; one child process reports its own peak
memory for the attack case's shape.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gapscope.parsers import Kind, TraceFormatError
from gapscope.parsers.ascii import load_ascii
from gapscope.parsers.ascii.fence import EVENTS_PER_KERNEL, EXPANDED_EVENT_BYTES, MAX_EXPANDED_EVENTS

NOTE = "gaps of 8–20 µs between 3 µs kernels, repeating {n} times"


def fence_rows(counts: list[int], fences_per_row: int = 1) -> str:
    """Lane art: one GPU row per count, each with ``fences_per_row`` fences drawn
    apart and one note giving the count (every fence of the row takes it)."""
    out = []
    for r, n in enumerate(counts):
        out.append(f"GPU{r}: " + "      ".join(["k k k k"] * fences_per_row))
        out.append("      ^" + NOTE.format(n=n))
    out.append("CPU: python loop")
    return "\n".join(out) + "\n"


def kernels(trace) -> int:
    return int((trace.kind == int(Kind.KERNEL)).sum())


def test_the_cap_is_one_fence_at_its_largest():
    assert MAX_EXPANDED_EVENTS == 3 * 100_000 == EVENTS_PER_KERNEL * 100_000


def test_fences_sharing_one_note_count_each():
    # three fences on one row all take the row's count: 3 × 120 kernels × 3 events = 1,080
    text = fence_rows([120], fences_per_row=3)
    t = load_ascii(text, "three.txt", max_bytes=(1080 * EXPANDED_EVENT_BYTES, True))
    assert kernels(t) == 360 and len(t) <= 1080
    with pytest.raises(TraceFormatError, match=r"up to 1,080 events in all \(3 fence\(s\).*at most 1,079 events"):
        load_ascii(text, "three.txt", max_bytes=(1079 * EXPANDED_EVENT_BYTES, True))


def test_the_size_limit_applies_as_to_json(monkeypatch, tmp_path):
    # through parsers.load the limit a JSON trace gets (GAPSCOPE_MAX_TRACE_BYTES)
    from gapscope.parsers import load

    p = tmp_path / "fence.txt"
    p.write_text(fence_rows([2_000]), encoding="utf-8")
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", str(5_999 * EXPANDED_EVENT_BYTES))
    with pytest.raises(TraceFormatError) as err:
        load(p)
    assert err.value.line == 2
    assert "at most 5,999 events: the trace-size limit set by GAPSCOPE_MAX_TRACE_BYTES" in str(err.value)
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", str(6_000 * EXPANDED_EVENT_BYTES))
    assert kernels(load(p)) == 2_000


_CHILD = """
import json, resource, sys
from gapscope.parsers import TraceFormatError, load
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
out = dict(status="loaded", line=None, column=None, message="")
try:
    load(sys.argv[1])
except TraceFormatError as exc:
    out.update(status="refused", line=exc.line, column=exc.column, message=str(exc))
# VmHWM: this program's own peak (ru_maxrss keeps the forking pytest worker's peak
# across exec on Linux)
out["peak_kb"] = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps(out))
"""


def load_in_child(path) -> dict:
    """Load ``path`` in a child limited to 2 GiB of address space; what it reports
    (status, the error's line, column and message, its own peak RSS in KiB)."""
    got = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout)


@pytest.mark.parametrize("rows", [10, 40])
def test_rows_of_100000_are_refused_at_the_row_that_passes_the_cap(tmp_path, rows):
    # the attack's shape (B28): 10 fences × 100,000 kernels asked for up to 3,000,000
    # events (2.76 GB, 99 s), 40 for 8.5 GB. The first fence fills the cap exactly
    # (300,000 events); the second's note (line 4, column 7) passes it. Refused before
    # anything is expanded: the child's peak stays far under 500 MB.
    p = tmp_path / "fences.txt"
    p.write_text(fence_rows([100_000] * rows), encoding="utf-8")
    got = load_in_child(p)
    assert (got["status"], got["line"], got["column"]) == ("refused", 4, 7)
    assert f"up to {3 * 100_000 * rows:,} events in all ({rows} fence(s)" in got["message"]
    assert "at most 300,000 events per file" in got["message"]
    # alone the child peaks at 44-52 MB; once, in the whole suite on a loaded machine, at
    # 580 MB (not reproduced since): the bound is the order of magnitude, far under the
    # 2.76 GB the expansion took (and the child's 2 GiB address-space limit)
    assert got["peak_kb"] < 1024 * 1024


# ---------------------------------------------------------------- the family, fuzzed
_SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
_CAP = 3_000  # events: the limit the fuzz loads under, so every accepted file stays small


@settings(max_examples=60, **_SETTINGS)
@given(
    counts=st.lists(st.integers(1, 1_500) | st.sampled_from([10**5, 10**5 + 1, 10**12]), min_size=1, max_size=5),
    per_row=st.integers(1, 3),
    spelled=st.sampled_from(["repeating {n} times", "{n}×", "x{n}", "{n} times"]),
)
def test_fence_expansion_stays_within_one_budget(counts, per_row, spelled):
    # refused with the budget's message exactly when the fences ask for more than the
    # budget (or one fence for more than 100,000 kernels); otherwise every kernel asked
    # for is there and the trace holds at most the budget's events. Each row is drawn
    # past the previous one's columns, so no two fences share a stretch of the layout.
    rows = []
    for r, n in enumerate(counts):
        rows.append(f"GPU{r}: " + " " * (40 * r) + "      ".join(["k k k"] * per_row))
        rows.append("      ^3 µs kernels, gaps of 5 µs, " + spelled.format(n=n))
    text = "\n".join(rows) + "\nCPU: python loop\n"
    asked = sum(per_row * n for n in counts)
    one_too_big = any(n > 100_000 for n in counts)
    over = EVENTS_PER_KERNEL * asked > _CAP
    try:
        t = load_ascii(text, "fz.txt", max_bytes=(_CAP * EXPANDED_EVENT_BYTES, False))
    except TraceFormatError as exc:
        assert exc.line is not None and exc.line % 2 == 0, str(exc)  # at a note
        if one_too_big:
            assert "kernels: at most 100000" in str(exc) or "at most 3,000 events" in str(exc)
        else:
            assert over and "at most 3,000 events" in str(exc), str(exc)
        return
    assert not over and not one_too_big
    assert kernels(t) == asked and len(t) <= _CAP


def test_seeded_mutations_of_the_attack_file_never_pass_the_budget():
    # the attack's rows with counts, units and row counts mutated by a fixed seed
    rng = random.Random(42)
    for _ in range(40):
        counts = [rng.choice([1, 7, 250, 999, 100_000, 3 * 10**5, 10**9]) for _ in range(rng.randint(1, 12))]
        text = fence_rows(counts, fences_per_row=rng.randint(1, 3))
        try:
            t = load_ascii(text, "mut.txt", max_bytes=(_CAP * EXPANDED_EVENT_BYTES, True))
        except TraceFormatError as exc:
            assert exc.line is not None
            continue
        assert len(t) <= _CAP
