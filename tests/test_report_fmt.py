"""Formatting helpers of the report: shares, sizes, untrusted names (durations and
times: ``tests/test_units.py``)."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text

from gapscope.report.fmt import fmt_share, safe_name
from gapscope.units import fmt_bytes


def test_share_and_bytes():
    assert fmt_share(738, 1050) == "70.3%"
    assert fmt_share(1, 0) == "-"
    assert fmt_bytes(65536) == "64.0 KiB" and fmt_bytes(100) == "100 B" and fmt_bytes(-1) == "?"
    assert fmt_bytes(3 * 1024**3) == "3.0 GiB"
    # the prefix steps up where one decimal would read 1024.0: 1023.95 KiB rounds to it
    assert fmt_bytes(1023) == "1023 B" and fmt_bytes(1024) == "1.0 KiB"
    assert fmt_bytes(1048575) == "1024.0 KiB" and fmt_bytes(1 << 20) == "1.0 MiB"
    assert fmt_bytes(5 * 1024**4) == "5.0 TiB" and fmt_bytes(2048 * 1024**4) == "2048.0 TiB"


@pytest.mark.parametrize(
    "name",
    [
        "[bold red]loss.backward()[/bold red]",
        "[/]",
        "\\[escaped] literal",
        "[link=https://example.invalid]open[/link]",
        "void gemv2T_kernel_val<int, int, float, float, 128, 16, 4, 4> [with T = float]",
        "python3 [worker 0]",
        "µ-kernel ✓",
    ],
)
def test_safe_name_keeps_printable_text_verbatim(name):
    assert safe_name(name) == name
    c = Console(width=200, no_color=True, color_system=None, file=None, record=True)
    c.print(Text(safe_name(name)))
    assert c.export_text().rstrip("\n") == name


def test_safe_name_neutralises_terminal_control():
    assert safe_name("a\x1b[31mred\x1b[0m") == "a\\e[31mred\\e[0m"
    assert safe_name("title\x1b]0;pwned\x07x") == "title\\e]0;pwned\\x07x"
    assert safe_name("two\nlines\ttab\x00") == "two\\x0alines\\x09tab\\x00"
    assert safe_name("rtl\u202eevil") == "rtl\\u202eevil"
    assert safe_name("lone\ud800") == "lone\\ud800"
    for s in (safe_name("\x1b[2J\x9b31m\r"),):
        assert all(ch.isprintable() for ch in s)


def test_safe_name_truncates():
    assert safe_name("abcdefghij", 5) == "abcd…"
    assert safe_name("abc", 5) == "abc"


def test_markdown_escaping_of_untrusted_text():
    from gapscope.report.markdown import md_code, md_text

    # issue 18 item 6: a name quoted in backticks becomes a code span (not escaped
    # backticks that show literally); the prose around it is escaped
    assert md_text("in `[b]x*_y_*[/b]` <img> a|b ~~s~~ \\") == "in `[b]x*_y_*[/b]` \\<img\\> a\\|b \\~\\~s\\~\\~ \\\\"
    assert md_text("waits on `Memset (Device)`.") == "waits on `Memset (Device)`."
    assert md_text("a `x|y` b") == "a `x|y` b"  # card prose is not a table cell
    assert md_text("line\nbreak") == "line\\\\x0abreak"  # renders as line\\x0abreak
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x") == "`` `x ``"
    assert md_code("a|b") == "`a\\|b`" and md_code("a|b", in_table=False) == "`a|b`"


def test_short_name_only_when_too_long():
    from gapscope.report.fmt import short_name

    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
    )
    assert short_name(long, 500) == long
    assert short_name(long, 80) == "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3> >"
    assert short_name(long, 64) == "vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, Array<…> >"
    assert short_name(long, 40) == "vectorized_elementwise_kernel<…>"
    assert short_name(long, 20) == "vectorized_elementw…"
    assert short_name("[bold]x[/bold] → " + long, 60).startswith("[bold]x[/bold] → vectorized_elementwise")
    assert short_name("a\x1bb", 2) == "a…"


# deviceProperties entries as Kineto writes them (copied from the corpus: hta/mi250_*,
# tracelens/mi300/*, tracelens/vllm_decode_full/*, tracelens/h100/*)
_MI250 = {
    "id": 0,
    "name": "AMD Radeon Graphics",
    "totalGlobalMem": 68702699520,
    "computeMajor": 9,
    "computeMinor": 0,
    "warpSize": 64,
    "numSms": 104,
}
_MI300X_VF = {
    "id": 0,
    "name": "AMD Instinct MI300X VF",
    "totalGlobalMem": 205571227648,
    "computeMajor": 9,
    "computeMinor": 4,
    "warpSize": 64,
    "numSms": 304,
}
_NAMELESS_MI300 = {
    "id": 0,
    "name": "",
    "totalGlobalMem": 206158430208,
    "computeMajor": 9,
    "computeMinor": 4,
    "warpSize": 64,
    "numSms": 304,
}
_H100 = {
    "id": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "totalGlobalMem": 85018279936,
    "computeMajor": 9,
    "computeMinor": 0,
    "warpSize": 32,
    "numSms": 132,
}


@pytest.mark.parametrize(
    "prop, text",
    [
        # 68702699520 B / 2**30 = 63.98 GiB; HIP's 9.0 is not CUDA's sm_90
        (_MI250, "AMD Radeon Graphics, 64.0 GiB, 104 CUs"),
        (_MI300X_VF, "AMD Instinct MI300X VF, 191.5 GiB, 304 CUs"),
        (_NAMELESS_MI300, "?, 192.0 GiB, 304 CUs"),  # warpSize 64 alone marks it AMD
        (dict(_MI250, gcnArchName="gfx90a:sramecc+:xnack-"), "AMD Radeon Graphics, 64.0 GiB, gfx90a, 104 CUs"),
        (dict(_MI300X_VF, gcnArchName="gfx942", warpSize=None), "AMD Instinct MI300X VF, 191.5 GiB, gfx942, 304 CUs"),
        (_H100, "NVIDIA H100 80GB HBM3, 79.2 GiB, sm_90, 132 SMs"),
        (
            {"id": 0, "name": "Quadro GP100", "computeMajor": 6, "computeMinor": 0, "warpSize": 32, "numSms": 56},
            "Quadro GP100, sm_60, 56 SMs",
        ),
        ({"id": 17, "name": "ARTEMIS"}, "ARTEMIS"),
    ],
)
def test_device_label(prop, text):
    from gapscope.report.fmt import device_label

    assert device_label(prop) == text


def test_warning_message_elides_long_quoted_names_so_the_finding_shows():
    from gapscope.report.fmt import warning_message

    long = "'void k<" + "x" * 300 + ", 4>)'"
    got = warning_message(f"stream 7: {long} (line 3) overlaps 'Memset (Device)' (line 4) by 2 µs; both kept")
    assert got == (
        "stream 7: 'void k<" + "x" * 32 + "…" + "x" * 13 + ", 4>)' (line 3) overlaps 'Memset (Device)' "
        "(line 4) by 2 µs; both kept"
    )
    assert warning_message("'step end' on CPU has no 'begin'") == "'step end' on CPU has no 'begin'"
