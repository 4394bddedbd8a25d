"""``gapscope.units``: the one text of a duration or a time, with values computed by
hand at every boundary of the rule, and one gap of the bundled trace read on each
surface of the viewer (lane label, status line, card), the report and the exercise
feedback, which must agree."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from gapscope.analysis.card import card_for_gap
from gapscope.units import (
    MS,
    NS,
    S_AT,
    US,
    S,
    column_unit,
    fmt_delta,
    fmt_dur,
    fmt_dur_pair,
    fmt_in,
    fmt_offset,
    fmt_tick,
    offset_column_unit,
    tick_unit,
)


# ------------------------------------------------------------------ durations
@pytest.mark.parametrize(
    "ns, text",
    [
        (0, "0 ns"),
        (1, "1 ns"),
        (999, "999 ns"),  # the last whole-ns value
        (1_000, "1.0 µs"),  # 1 µs: µs with one decimal
        (46_000, "46.0 µs"),
        (99_900, "99.9 µs"),
        (99_949, "99.9 µs"),  # 999.49 tenths of a µs round down
        (99_950, "0.100 ms"),  # 999.5 tenths round up to 1000: 100.0 µs is ms
        (100_000, "0.100 ms"),  # 0.1 ms: ms with three decimals
        (312_000, "0.312 ms"),
        (460_000, "0.460 ms"),
        (1_050_000, "1.050 ms"),
        (12_345_678, "12.346 ms"),
        (999_900_000, "999.900 ms"),
        (999_999_499, "999.999 ms"),
        (999_999_500, "1.000 s"),  # 999999.5 µs round up to 1 s
        (1_000_000_000, "1.000 s"),  # 1 s: seconds with three decimals
        (2_543_932_123, "2.544 s"),
        (59_000_000_000, "59.000 s"),
        (61_500_000_000, "61.500 s"),  # no minutes
        (3_600_000_000_000, "3600.000 s"),  # nor hours
    ],
)
def test_fmt_dur_boundaries(ns, text):
    assert fmt_dur(ns) == text


@pytest.mark.parametrize(
    "ns, text",
    [
        # exact halves of the last digit round up (away from zero)
        (1_250, "1.3 µs"),  # 12.5 tenths -> 13
        (1_350, "1.4 µs"),  # 13.5 tenths -> 14
        (1_249, "1.2 µs"),  # just below the half
        (194_500, "0.195 ms"),  # 194.5 µs -> 195 (a group median of the HTA step trace)
        (460_500, "0.461 ms"),
        (2_500_500_000, "2.501 s"),  # 2500.5 ms -> 2501
        (0.5, "1 ns"),
        (2.5, "3 ns"),
        (2.4999, "2 ns"),
        # negative values: the magnitude's text after "-", halves away from zero too
        (-1, "-1 ns"),
        (-999, "-999 ns"),
        (-1_250, "-1.3 µs"),
        (-1_249, "-1.2 µs"),
        (-460_000, "-0.460 ms"),
        (-99_950, "-0.100 ms"),
        (-2_000_000_000, "-2.000 s"),
        (-0.4, "0 ns"),  # rounds to zero: no sign
    ],
)
def test_fmt_dur_rounds_half_away_from_zero_and_signs_once(ns, text):
    assert fmt_dur(ns) == text


def test_fmt_dur_takes_numpy_scalars_and_floats_exactly():
    assert fmt_dur(np.int64(460_000)) == fmt_dur(460_000.0) == fmt_dur(np.float64(460_000)) == "0.460 ms"
    assert fmt_dur(np.int32(999)) == "999 ns"
    # a float is rounded by its exact value: 0.1 + 0.2 is above 0.3
    assert fmt_dur((0.1 + 0.2) * 1e6) == "0.300 ms"
    assert fmt_dur(1_000 * 10**18) == "1000000000000.000 s"  # beyond float precision: exact


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf, np.float64("nan")])
def test_no_value_reads_as_a_dash(bad):
    assert fmt_dur(bad) == fmt_offset(bad) == fmt_delta(bad) == fmt_in(bad, MS) == "-"
    assert fmt_tick(bad, 1_000) == "-"


# ------------------------------------------------------------------ positions
@pytest.mark.parametrize(
    "ns, text",
    [
        (0, "0 ns"),
        (590_000, "0.590 ms"),  # below 1 s as a duration
        (52_067_000, "52.067 ms"),
        (-43_000, "-43.0 µs"),  # one sign
        (-1_500_000, "-1.500 ms"),
        (999_999_499, "999.999 ms"),
        (1_000_000_000, "1.000000 s"),  # from 1 s: to the µs
        (5_937_269_000, "5.937269 s"),
        (3_545_555_123, "3.545555 s"),
        (3_545_555_500, "3.545556 s"),  # 3545555.5 µs -> 3545556
        (3_545_555_499, "3.545555 s"),
    ],
)
def test_fmt_offset(ns, text):
    assert fmt_offset(ns) == text


@pytest.mark.parametrize(
    "ns, text",
    [
        (12_000, "+12.0 µs"),
        (-460_000, "−0.460 ms"),  # U+2212, as the diff writes a shorter step
        (0, "±0 ns"),
        (0.4, "±0 ns"),
        (-0.4, "±0 ns"),
        (-1_250, "−1.3 µs"),
        (1_500_000_000, "+1.500 s"),
    ],
)
def test_fmt_delta(ns, text):
    assert fmt_delta(ns) == text


# ------------------------------------------------------------- one unit per column
def test_column_unit_is_the_unit_of_the_largest_value():
    assert column_unit(0) is NS and column_unit(999) is NS
    assert column_unit(1_000) is US and column_unit(-20_000) is US
    assert column_unit(99_950) is MS  # after rounding, as fmt_dur
    assert column_unit(999_999_499) is MS
    assert column_unit(999_999_500) is None and column_unit(2_316_708_000) is None
    u = column_unit(1_050_000)  # a 1.05 ms window: every figure in ms
    assert [fmt_in(x, u) for x in (312_000, 738_000, 20_000, 0)] == ["0.312 ms", "0.738 ms", "0.020 ms", "0.000 ms"]
    assert fmt_in(-20_000, column_unit(20_000)) == "-20.0 µs"
    assert fmt_in(312_000, MS, symbol=False) == "0.312"
    assert fmt_in(460_500, MS) == "0.461 ms" and fmt_in(-1_250, US) == "-1.3 µs"  # halves away from zero
    with pytest.raises(ValueError):
        column_unit(math.nan)


def test_a_seconds_column_writes_each_value_in_its_own_unit():
    """The 1M-event bench trace (9 s): in seconds its cause table would read
    ``sync 0.013 s``; each value keeps the digits ``fmt_dur`` gives it."""
    u = column_unit(2_316_708_000)  # the total of the column
    assert [
        fmt_in(x, u) for x in (13_151_000, 597_473_000, 136_194_000, 1_546_856_000, 23_033_000, 2_316_708_000, 0)
    ] == ["13.151 ms", "597.473 ms", "136.194 ms", "1.547 s", "23.033 ms", "2.317 s", "0 ns"]


def test_positions_share_a_unit_to_the_microsecond():
    """A gap at 5.937269 s into a 9 s trace is found by its position: µs resolution."""
    u = offset_column_unit(5_937_269_000)
    assert u is S_AT
    assert [fmt_in(x, u) for x in (5_937_269_000, 774_792_000)] == ["5.937269 s", "0.774792 s"]
    assert offset_column_unit(1_050_000) is MS and offset_column_unit(46_000) is US


def test_fmt_dur_pair():
    assert fmt_dur_pair(312_000, 328_000) == "0.312 → 0.328 ms"
    assert fmt_dur_pair(20_000, 1_050_000) == "0.020 → 1.050 ms"  # the unit of the larger
    assert fmt_dur_pair(46_000, 8_000) == "46.0 → 8.0 µs"
    assert fmt_dur_pair(1_200_000_000, 600_000) == "1.200 s → 0.600 ms"  # from 1 s: each its own
    assert fmt_dur_pair(0, 0) == "0 → 0 ns"
    assert fmt_dur_pair(312_000, 328_000, sep=" to ") == "0.312 to 0.328 ms"


# ------------------------------------------------------------------ ruler ticks
def test_tick_labels_are_compact_and_resolve_the_step():
    assert fmt_tick(1_500_000, 500_000) == "1.5ms"  # 500 µs steps read as 0.5 ms
    assert fmt_tick(250_000, 50_000) == "250µs"
    assert fmt_tick(120, 20) == "120ns"
    assert fmt_tick(2_000_000_000, 1_000_000_000) == "2s"
    assert fmt_tick(13_400_000, 10_000, MS) == "13.40ms"
    assert fmt_tick(np.int64(13_405_000), 5_000, MS) == "13.405ms"
    assert tick_unit(20) is NS and tick_unit(5_000) is US and tick_unit(500_000) is MS
    assert tick_unit(100_000_000) is S  # a 0.1 s step
    # deep inside a long trace: the unit of the offsets once the step's needs 4 digits
    assert tick_unit(5_000, far_ns=999_999) is US
    assert tick_unit(5_000, far_ns=13_400_000) is MS
    assert tick_unit(1_000, far_ns=5_937_269_000) is S


# ------------------------------------------------- one gap, every surface, one text
def test_one_gap_reads_the_same_on_the_lane_the_status_line_the_card_and_the_report():
    """The largest gap of the bundled decode step ([0.590, 1.050) ms, host): at 80x24,
    the lane label, the status line and the card beside them, the card's why, the
    report's table and the exercise feedback all write its length ``0.460 ms``."""
    from gapscope import sample_traces
    from gapscope.analysis import diagnose
    from gapscope.exercise.facts import TraceFacts
    from gapscope.parsers import load
    from gapscope.report import cmd as report_cmd
    from gapscope.tui.factory import make_app
    from gapscope.tui.panel import card_text, compact_card_text
    from tests.test_tui_app import wait_ready

    trace = load(sample_traces.path())
    diag = diagnose(trace)
    gap = int(diag.order_by_size()[0])
    assert int(diag.gaps.start_ns[gap] - trace.extent_ns[0]) == 590_000
    assert int(diag.gaps.dur_ns[gap]) == 460_000
    length = "0.460 ms"

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("s", "n")  # largest first, then the next: the largest gap
            await pilot.pause()
            lanes = screen.lanes
            assert lanes.selected_gap == gap
            row = next(i for i, r in enumerate(lanes.rows) if r.kind == "idle")
            lane = lanes.render_line(row + 1 - lanes.top_row).text
            hint = screen.detail_text().plain
            # the first jump says where it went (the top finding's largest gap); the next
            # key clears that message, and the gap's summary reads in its place
            assert hint.startswith(f"@0.590 ms gap #{gap} │ the top finding's largest gap")
            screen.message = ""
            status = screen.detail_text().plain
            return lane, status, screen.diagnosis

    lane, status, shown = asyncio.run(run())
    assert f"host {length}" in lane
    assert status.startswith(f"@0.590 ms gap #{gap} GPU 0 {length} host")  # the cursor at its start
    head = compact_card_text(shown, gap)[0].plain
    assert head.startswith(f"Gap #{gap} GPU 0: {length} at 0.590 ms")
    second = next(i for i in range(len(shown.gaps)) if card_for_gap(shown, i).secondary is not None)
    c = card_for_gap(shown, second)  # the compact head gives both shares, as the full card does
    assert (
        f", then {c.secondary.label} ({int(round(c.secondary_share * 100))}%)"
        in compact_card_text(shown, second)[0].plain
    )
    full = card_text(shown, gap).plain
    assert f"{length} at 0.590 ms" in full
    assert f"For {length} the GPU had no kernel" in card_for_gap(diag, gap).why
    assert TraceFacts(trace, diag).gap_text(gap) == f"0.590-1.050 ms ({length})"

    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert report_cmd.main([str(sample_traces.path()), "--width", "100"]) == 0
    row = next(ln for ln in out.getvalue().splitlines() if ln.startswith(f"#{gap} "))
    assert f"0.590 ms  {length}" in row


def test_the_compact_card_shortens_long_cpp_names_and_keeps_short_ones():
    """At 80x24 a 300-character kernel name filled the compact card (mi300 #6): its
    template and parameter lists are elided there, brackets matched by kind; short
    names, and the full card, stay literal."""
    from gapscope.tui.panel import short_name, short_names

    long = (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<2>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, float)"
    )
    assert short_name(long) == "void at::native::(…)::multi_tensor_apply_kernel<…>(…)"
    assert short_name("Memcpy DtoD (Device -> Device) copied by a kernel with a long name") == (
        "Memcpy DtoD (…) copied by a kernel with a long name"
    )
    assert short_name("x" * 100) == "x" * 51 + "…" + "x" * 12
    # a kernel whose identity is its template argument keeps it (cut in the middle)
    cutlass = "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align1>(cutlass_80_tensorop::Params)"
    assert short_name(cutlass) == "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x1…t_align1>(…)"
    text = f"the next op `{long}` was queued after `aten::mm`"
    assert (
        short_names(text)
        == "the next op `void at::native::(…)::multi_tensor_apply_kernel<…>(…)` was queued after `aten::mm`"
    )


def test_the_text_between_two_short_names_is_no_name():
    """The compact card shortened the text between two short backticked names as if it
    were one long name: "(the GP…an 9 copies" at 80x24 (a newcomer saw a sentence cut
    with a bracket left open). Names are paired in order."""
    from gapscope.tui.panel import short_names

    text = (
        "spent 27.598 ms on host work (1.149 ms in `aten::sum`, 0.889 ms in other work), 0.290 ms copying "
        "(the GPU ran 9 copies `dma_request` (7 host-to-device, 2 device-to-host)"
    )
    assert short_names(text) == text
