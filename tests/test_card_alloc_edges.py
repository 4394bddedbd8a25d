"""Cards checked against raw events (issue 43, audit 3): a wait counts for a gap only
by its overlap with the GPU idle; allocator calls are host allocation work, not sync
evidence, and lead the card when they hold most of the gap; copies at the trace's
edges (the initial upload, the final read) are told as such and left out of findings;
a program that is not PyTorch gets no torch vocabulary. Each on a hand-made trace and,
where the corpus is present, on the audited Nsight exports."""

from __future__ import annotations

import sqlite3

import numpy as np

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.card.facts import alloc_calls, card_facts
from gapscope.analysis.card.rules import RULES
from gapscope.analysis.findings import findings
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import CopyKind, Kind

from .conftest import CORPUS, require

US = 1_000


def _lanes(b: TraceBuilder) -> tuple[int, int]:
    cpu = b.lane("1", "1", process_name="bench.exe", thread_name="main")
    return cpu, b.lane("0", "7", is_gpu=True, device=0, stream=7)


def _alloc_between_phases() -> TraceBuilder:
    """A native program (Nsight export): kernel k1 [6, 106) µs, a cliff
    ``cudaStreamSynchronize`` [10, 110), then ``cudaHostAlloc`` [120, 720) and
    ``cudaMalloc`` [720, 820), the launch of k2 at 830 (k2 runs [900, 1000)), and a
    ``cudaEventSynchronize`` [880, 1000) that began after that launch: the gap is
    [106, 900) = 794 µs, allocation 700 µs of it (88%), and the event wait overlaps it
    by 20 µs of its 120."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 6 * US, 100 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaStreamSynchronize", 10 * US, 100 * US, Kind.SYNC_CALL)
    b.event(cpu, "cudaHostAlloc", 120 * US, 600 * US, Kind.RUNTIME)
    b.event(cpu, "cudaMalloc", 720 * US, 100 * US, Kind.RUNTIME)
    b.event(cpu, "cudaLaunchKernel", 830 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 900 * US, 100 * US, Kind.KERNEL, correlation=2)
    b.event(cpu, "cudaEventSynchronize", 880 * US, 120 * US, Kind.SYNC_CALL)
    return b


def test_a_wait_counts_by_its_overlap_and_allocation_churn_leads():
    d = diagnose(_alloc_between_phases().build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert (int(d.gaps.start_ns[i]), int(d.gaps.end_ns[i])) == (106 * US, 900 * US)
    c = card_for_gap(d, i)
    assert c.cause == Cause.SYNC
    # the event wait began after the next launch: 20 µs of it lie in the gap, not 120
    assert "`cudaEventSynchronize` (20.0 µs)" in c.why and "120.0 µs" not in c.why
    assert "`cudaStreamSynchronize` (4.0 µs)" in c.why
    # allocation: 600 + 100 = 700 µs of the 794 µs gap
    assert [(n, k, ns) for n, k, ns in alloc_calls(d, np.array([i]))] == [
        ("cudaHostAlloc", 1, 600 * US),
        ("cudaMalloc", 1, 100 * US),
    ]
    assert c.smell == "allocation churn"
    assert c.first_experiment.startswith("Allocate the pinned and device buffers once and reuse them")
    assert "0.700 ms of the 0.794 ms gap" in c.first_experiment
    assert "drop each" not in c.first_experiment and "torch" not in c.first_experiment
    # allocator calls are host work in the evidence, never sync
    assert {e.name: e.cause for e in c.evidence if e.name in ("cudaHostAlloc", "cudaMalloc")} == {
        "cudaHostAlloc": Cause.HOST,
        "cudaMalloc": Cause.HOST,
    }


def test_a_pytorch_programs_allocation_churn_gets_the_caching_allocator_advice():
    b = _alloc_between_phases()
    cpu = b.lane("1", "1", process_name="bench.exe", thread_name="main")
    b.event(cpu, "aten::empty", 1100 * US, 2 * US, Kind.CPU_OP)  # marks the program as PyTorch
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    c = card_for_gap(d, i)
    assert c.smell == "allocation churn"
    assert "caching allocator" in c.first_experiment and "expandable_segments" in c.first_experiment


def _p16_runtime(sql: str, *args) -> list:
    with sqlite3.connect(require(CORPUS / "extrap/profile16.sqlite")) as db:
        return db.execute(sql, args).fetchall()


def test_profile16_gap5_is_allocation_churn_and_the_event_wait_counts_by_overlap():
    """extrap/profile16 gap #5 [687293683, 982350498) ns: allocator calls take
    206.024 ms of its 295.057 ms (cudaHostAlloc 115.939, cudaFreeHost 59.983,
    cudaMalloc 22.493, cudaFree 7.610); the 139.013 ms ``cudaEventSynchronize`` began
    after the next launch and overlaps it by 0.360 ms (SQL on the raw runtime rows)."""
    d = diagnose(load(require(CORPUS / "extrap/profile16.sqlite")))
    a, b = int(d.gaps.start_ns[5]), int(d.gaps.end_ns[5])
    assert (a, b) == (687_293_683, 982_350_498)
    raw = dict(
        _p16_runtime(
            "SELECT s.value, SUM(MIN(r.end, ?2) - MAX(r.start, ?1)) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON s.id = r.nameId WHERE r.start < ?2 AND r.end > ?1 GROUP BY s.value",
            a,
            b,
        )
    )
    alloc = {n: ns for n, _k, ns in alloc_calls(d, np.array([5]))}
    assert alloc == {n: raw[n + "_v3020"] for n in ("cudaHostAlloc", "cudaFreeHost", "cudaMalloc", "cudaFree")}
    assert sum(alloc.values()) == 206_024_263
    c = card_for_gap(d, 5)
    assert raw["cudaEventSynchronize_v3020"] == 360_120
    assert "`cudaEventSynchronize` in `main->process->phase3` (0.360 ms)" in c.why
    assert "139.013 ms" not in c.why + c.first_experiment
    assert c.smell == "allocation churn"
    assert c.first_experiment.startswith("Allocate the pinned and device buffers once and reuse them")
    assert "206.024 ms of the 295.057 ms gap" in c.first_experiment
    assert all(e.cause == Cause.HOST for e in c.evidence if e.name.startswith(("cudaHostAlloc", "cudaFreeHost")))
    # the finding holding the gap takes the card's fix, not "remove the blocking read"
    (f1,) = [f for f in findings(d).ranked if f.cause == Cause.SYNC]
    assert list(f1.positions) == [5]
    assert f1.fix == "allocate the buffers once and reuse them"


def _upload_compute_read() -> TraceBuilder:
    """A native program with no steps: an initial upload ``Memcpy HtoD`` [0, 500) µs
    (64 MiB, pinned), kernels k1 [510, 610) and k2 [700, 800) with host work between
    them, and the final read ``Memcpy DtoH`` [810, 1300) µs with nothing after it."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)
    mib64 = 64 << 20
    b.event(cpu, "cudaMemcpyAsync", 0, 5 * US, Kind.MEMCPY_CALL, correlation=1)
    b.event(gpu, "Memcpy HtoD (Pinned -> Device)", 0, 500 * US, Kind.MEMCPY, correlation=1, bytes=mib64,
            copy_kind=CopyKind.H2D)  # fmt: skip
    b.event(cpu, "cudaLaunchKernel", 10 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k1", 510 * US, 100 * US, Kind.KERNEL, correlation=2)
    b.event(cpu, "prepare", 20 * US, 670 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 692 * US, 5 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k2", 700 * US, 100 * US, Kind.KERNEL, correlation=3)
    b.event(cpu, "cudaMemcpyAsync", 698 * US, 5 * US, Kind.MEMCPY_CALL, correlation=4)
    b.event(gpu, "Memcpy DtoH (Device -> Pinned)", 810 * US, 490 * US, Kind.MEMCPY, correlation=4, bytes=mib64,
            copy_kind=CopyKind.D2H)  # fmt: skip
    b.event(cpu, "cudaStreamSynchronize", 705 * US, 600 * US, Kind.SYNC_CALL)
    return b


def test_edge_copies_are_the_initial_upload_and_the_final_read_and_no_finding():
    d = diagnose(_upload_compute_read().build())
    g = d.gaps
    spans = [(int(a), int(b)) for a, b in zip(g.start_ns, g.end_ns)]
    lead, trail = spans.index((0, 510 * US)), spans.index((800 * US, 1300 * US))
    assert g.cause[lead] == Cause.COPY and g.cause[trail] == Cause.COPY
    first = card_for_gap(d, lead)
    assert first.first_experiment.startswith("Nothing to overlap here: `Memcpy HtoD (Pinned -> Device)` (64.0 MiB)")
    assert "initial upload" in first.first_experiment and "cudaMemcpyAsync on a stream" not in first.first_experiment
    last = card_for_gap(d, trail)
    assert last.first_experiment.startswith("Nothing to remove here: `Memcpy DtoH (Device -> Pinned)` (64.0 MiB)")
    assert "final read" in last.first_experiment and "Keep the data on the device" not in last.first_experiment
    # the edges are apart: no recurring finding counts them
    fs = findings(d)
    assert fs.edge.tolist() == [k in (lead, trail) for k in range(len(g))]
    assert all(not (set(f.positions) & {lead, trail}) for f in fs.ranked)


def test_profile16_edge_copies_are_the_initial_upload_and_the_final_read():
    """extrap/profile16: gap #0 [632217850, 638333188) ns precedes the first kernel
    (638333188 ns, SQL) with the 61 MiB initial upload; gap #6 [1402212162,
    1409016358) follows the last kernel's end and holds the 61 MiB final read, the
    trace's last GPU op."""
    d = diagnose(load(require(CORPUS / "extrap/profile16.sqlite")))
    g = d.gaps
    ((k0, k1),) = _p16_runtime("SELECT MIN(start), MAX(end) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    ((c_end,),) = _p16_runtime("SELECT MAX(end) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    assert int(g.end_ns[0]) == k0 and int(g.start_ns[6]) == k1 and int(g.end_ns[6]) == c_end
    assert card_for_gap(d, 0).first_experiment.startswith(
        "Nothing to overlap here: `Memcpy HtoD (Pinned -> Device)` (61.0 MiB)"
    )
    assert card_for_gap(d, 6).first_experiment.startswith(
        "Nothing to remove here: `Memcpy DtoH (Device -> Pinned)` (61.0 MiB)"
    )
    fs = findings(d)
    assert bool(fs.edge[0]) and bool(fs.edge[6]) and not fs.edge[1:6].any()
    # no steps, no loop: the edges are the program's start and end
    assert sorted(f.title for f in fs.apart) == [
        "edge: 6.115 ms idle before the first kernel (the program's start)",
        "edge: 6.804 ms idle after the last kernel (the program's end)",
    ]
    assert all(not (set(f.positions) & {0, 6}) for f in fs.ranked)


def _sync_after_each_kernel(n: int = 6) -> TraceBuilder:
    """A native program: ``n`` kernels of 5 µs, each launched at t (5 µs call), run
    [t + 6, t + 11) µs and waited for with ``cudaDeviceSynchronize`` [t + 6, t + 12);
    the next launch at t + 13 (ex-gpu.s10's pattern). Each gap [t + 11, t + 19) µs:
    2 µs after the wait (sync), 6 µs of launch."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)
    t = 0
    for k in range(n):
        b.event(cpu, "cudaLaunchKernel", t * US, 5 * US, Kind.LAUNCH, correlation=k + 1)
        b.event(gpu, f"k{k}", (t + 6) * US, 5 * US, Kind.KERNEL, correlation=k + 1)
        b.event(cpu, "cudaDeviceSynchronize", (t + 6) * US, 6 * US, Kind.SYNC_CALL)
        t += 13
    return b


def test_a_synchronize_after_each_kernel_is_dropped_before_any_graph():
    d = diagnose(_sync_after_each_kernel().build())
    g = d.gaps
    assert g.dur_ns.tolist() == [8 * US] * 5
    for i in range(5):
        c = card_for_gap(d, i)
        assert c.cause == Cause.LAUNCH and c.smell == "launch after a synchronize"
        assert c.first_experiment.startswith("Drop the `cudaDeviceSynchronize` between kernels")
        assert "torch" not in c.first_experiment
        assert c.first_experiment.index("cudaDeviceSynchronize") < c.first_experiment.index("CUDA graph")


def test_a_single_wait_with_no_steps_names_no_loop():
    """k [6, 106) µs, ``cudaStreamSynchronize`` [10, 110), the next launch at 300: a
    sync gap of a native program with no steps: no loop to take the wait out of."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 6 * US, 100 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaStreamSynchronize", 10 * US, 100 * US, Kind.SYNC_CALL)
    b.event(cpu, "cudaLaunchKernel", 300 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 306 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    c = card_for_gap(d, 0)
    assert c.cause == Cause.SYNC
    assert c.first_experiment.startswith("Remove the blocking wait `cudaStreamSynchronize`: keep the decision")
    assert "read them once at the end" in c.first_experiment
    assert "loop" not in c.first_experiment and "torch" not in c.first_experiment


def test_profile16_and_ex_gpu_speak_the_native_programs_words():
    d = diagnose(load(require(CORPUS / "extrap/profile16.sqlite")))
    dep = card_for_gap(d, 2)
    assert dep.cause == Cause.DEPENDENCY
    assert "torch" not in dep.first_experiment and "wait_stream" not in dep.first_experiment
    # gap 2's card is told by the memset recorded too short before it (audit 4); the
    # dependency rule's own words for this native program are still the runtime's
    assert dep.smell == "device op still running (recorded too short)"
    facts = card_facts(d, np.array([2]), dep.cause, list(dep.evidence), "x")
    told = next(r for r in RULES if r.name == "dependency").advise(facts)
    assert "cudaStreamWaitEvent" in told.first and "wait_stream" not in told.first, told.first
    fs = findings(d)
    assert "torch.profiler" not in fs.verdict and "prof.step()" not in fs.verdict
    assert all("from the loop" not in f.fix for f in fs.ranked)
    e = diagnose(load(require(CORPUS / "extrap/ex-gpu.s10.sqlite")))
    # gaps 0-3: a cudaDeviceSynchronize ends between each kernel's end and the next
    # kernel's launch (SQL; the rows without the _v3020 suffix are backtrace copies)
    with sqlite3.connect(require(CORPUS / "extrap/ex-gpu.s10.sqlite")) as db:
        kernels = db.execute(
            "SELECT DISTINCT k.end, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = k.correlationId JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value LIKE 'cudaLaunchKernel%v%' ORDER BY k.start"
        ).fetchall()
        syncs = [
            end
            for (end,) in db.execute(
                "SELECT r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                "WHERE s.value = 'cudaDeviceSynchronize_v3020'"
            )
        ]
    assert len(kernels) == 6
    between = [
        sum(k_end <= x <= nxt_launch for x in syncs) for (k_end, _), (_, nxt_launch) in zip(kernels, kernels[1:])
    ]
    assert between[:4] == [1, 1, 1, 1]
    for i in range(4):
        c = card_for_gap(e, i)
        assert c.first_experiment.startswith("Drop the `cudaDeviceSynchronize` between kernels"), i
    top = findings(e).ranked[0]
    assert top.cause == Cause.LAUNCH and top.fix.startswith("drop the `cudaDeviceSynchronize` between kernels")
