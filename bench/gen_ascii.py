"""Deterministic generator of large ASCII event lists (``docs/ascii-timelines.md``).

Used by ``bench/ascii_load.py`` and by tests that need many lines of every form the
event-list grammar allows. API::

    generate(n_lines, *, style="typical", seed=0) -> str

returns the text of a file with exactly ``n_lines`` lines (comments and blank lines
included), which loads without error. Styles:

- ``"typical"``: what a long pasted or exported list looks like: ``12.345 ms  CPU
  decode_step begin`` lines, a unit on every line, three decimals, ranges, points,
  launches linked by name, copies, a few comments and blank lines.
- ``"mixed"``: every form the grammar allows, often: the unit carried, glued
  (``0.5ms``), spaced or missing; ``.5``, ``5.``, exponents (``2.58E+2``), long
  fractions below a ns (rounded, ties to even), 20-digit integers, tabs, leading
  blanks, ``CPU1`` / ``gpu`` / ``GPU2:`` lanes, ``Begin``/``END`` in any case, names
  with unicode, quotes, inner blanks and tabs, ``#`` comments anywhere, CRLF line
  ends and a byte-order mark, and the lines that warn: ``X end`` without a begin, a
  ``begin`` never closed, launches linked by order or left unlinked.
- ``"nounit"``: a graph-replay list with no unit at all (read as ms), integers and
  decimals.

Lines of one lane never go back in time; lanes interleave in any order. Command line::

    python bench/gen_ascii.py OUT.txt 100000 [--style mixed] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

__all__ = ["STYLES", "generate", "LAYOUT_VERSION"]

#: Bump when the output for a given (n_lines, style, seed) changes (cache keys).
LAYOUT_VERSION = 1
STYLES = ("typical", "mixed", "nounit")

_UNIT_PS = {"ns": 10**3, "us": 10**6, "µs": 10**6, "μs": 10**6, "ms": 10**9, "s": 10**12}
_KERNELS = ["matmul", "attention", "gemm", "layernorm", "softmax", "fused decode graph", "rope"]
_GPU_COPIES = ["H2D", "D2H", "memcpy DtoH", "memcpy", "D2D", "memset", "copy"]
_CPU_POINTS = [
    "sample previous token",
    "tensor.item()",
    "logging callback",
    "json response chunk",
    "batch.cuda()",
    "x.cpu()",
    "np.array(out)",
    "torch.cuda.synchronize()",
    "wait",
    "tokenize",
    "python loop",
]
_ODD_NAMES = [
    "αβγ kernel",
    "naïve_ünïcode",
    "名前",
    'say "hi"',
    "it's",
    "a  b",
    "tab\there",
    "emoji 🙂",
    "x<y>&z",
    "[bold]markup[/]",
    "\\back\\slash",
    "µs-ish 5 ms",
    "beginning",
    "endgame",
]


def _render(ps: int, unit: str, rnd: random.Random, form: str) -> str:
    """``ps`` picoseconds as an exact decimal in ``unit`` (every digit written, so the
    value read back is ``ps`` exactly before rounding to ns)."""
    den = _UNIT_PS[unit]
    k = len(str(den)) - 1
    whole, frac = divmod(ps, den)
    fs = f"{frac:0{k}d}".rstrip("0")
    if form == "exp":
        digits = str(ps).lstrip("0") or "0"
        if digits == "0":
            return "0e0"
        exp = len(digits) - 1 - k
        mant = digits[0] + ("." + digits[1:].rstrip("0") if digits[1:].rstrip("0") else "")
        mark = rnd.choice(["e", "E"])
        sign = "+" if exp >= 0 and rnd.random() < 0.5 else ""
        return f"{mant}{mark}{sign}{exp}"
    if form == "pad":  # trailing zeros, many decimals
        return f"{whole}.{f'{frac:0{k}d}'}{'0' * rnd.randint(0, 6)}"
    if form == "lead0" and whole == 0 and fs:
        return "." + fs
    if form == "dot" and not fs:
        return f"{whole}."
    if form == "zeros":  # leading zeros on the integer part
        return "0" * rnd.randint(1, 8) + f"{whole}" + (f".{fs}" if fs else "")
    return f"{whole}" + (f".{fs}" if fs else "")


class _Gen:
    def __init__(self, style: str, seed: int) -> None:
        self.style = style
        self.rnd = random.Random(seed)
        self.unit = "ms"  # the unit carried to the next line without one
        self.clock: dict[str, int] = {}  # lane -> ps
        self.open: dict[str, list[str]] = {}  # lane -> names of open ranges, in order
        self.closed: dict[str, set[str]] = {}  # lane -> names seen (a bare 'end' would then be an error)
        self.orphans = 0
        self.lines: list[str] = []

    # -------------------------------------------------------------- pieces
    def lane_token(self, lane: str) -> str:
        r = self.rnd
        if self.style != "mixed":
            return lane
        tok = lane if r.random() < 0.7 else lane.lower() if r.random() < 0.5 else lane.capitalize()
        return tok + (":" if r.random() < 0.1 else "")

    def time_text(self, ps: int) -> str:
        r = self.rnd
        if self.style == "typical":
            us = ps // 10**6  # whole µs: three decimals of ms
            return f"{us // 1000}.{us % 1000:03d} ms"
        if self.style == "nounit":
            return _render(ps, "ms", r, "plain")
        x = r.random()
        if x < 0.3:
            unit = None  # carried
        else:
            unit = r.choice(["ns", "us", "µs", "μs", "ms", "s", "ms", "us"])
        u = unit or self.unit
        form = r.choices(["plain", "pad", "exp", "lead0", "dot", "zeros"], [60, 12, 10, 6, 6, 6])[0]
        num = _render(ps, u, r, form)
        if unit is None:
            return num
        self.unit = unit
        glue = "" if r.random() < 0.3 else r.choice([" ", "  ", "\t", " \t "])
        return num + glue + unit

    def gap(self) -> str:
        if self.style != "mixed":
            return "  " if self.rnd.random() < 0.8 else " "
        return self.rnd.choice([" ", "  ", "\t", "   ", " \t"])

    def advance(self, lane: str) -> int:
        r = self.rnd
        t = self.clock.get(lane, 0)
        step = r.choice([0, 1, 7, 12, 30, 152, 400, 2_000]) * 10**6  # µs steps, in ps
        if self.style == "mixed" and r.random() < 0.15:
            step += r.randrange(0, 10**6)  # sub-µs, sub-ns digits: rounding and ties
            if r.random() < 0.3:
                step += 500 - step % 1000  # a tie at half a ns
        self.clock[lane] = t + step
        return t + step

    def emit(self, lane: str, text: str) -> None:
        ps = self.advance(lane)
        lead = "" if self.style != "mixed" or self.rnd.random() < 0.8 else self.rnd.choice([" ", "\t", "   "])
        tail = "" if self.style != "mixed" or self.rnd.random() < 0.9 else self.rnd.choice([" ", "\t", "  "])
        self.lines.append(f"{lead}{self.time_text(ps)}{self.gap()}{self.lane_token(lane)}{self.gap()}{text}{tail}")

    def edge(self, name: str, action: str) -> str:
        r = self.rnd
        if self.style == "mixed" and r.random() < 0.2:
            action = r.choice([action.upper(), action.capitalize()])
        sep = " " if self.style != "mixed" or r.random() < 0.85 else r.choice(["  ", "\t"])
        return f"{name}{sep}{action}"

    def depth(self) -> int:
        return sum(len(v) for v in self.open.values())

    def close_one(self) -> None:
        """Close the latest open range (styles but ``mixed`` leave none open), or a point."""
        for lane, stack in self.open.items():
            if stack:
                self.emit(lane, self.edge(stack.pop(), "end"))
                return
        self.emit("CPU", "tick")

    # -------------------------------------------------------------- units of text
    def step(self) -> None:
        r = self.rnd
        mixed = self.style == "mixed"
        cpu = "CPU" if not mixed or r.random() < 0.7 else r.choice(["CPU1", "CPU2", "CPU12"])
        gpu = "GPU" if not mixed or r.random() < 0.7 else r.choice(["GPU1", "GPU3"])
        for lane in (cpu, gpu):  # GPU work happens after its launch
            self.clock[lane] = max(self.clock.get(lane, 0), self.clock.get(cpu, 0))
        x = r.random()
        if x < 0.35:
            k = r.choice(_KERNELS)
            self.emit(cpu, f"launch {k}")
            self.clock[gpu] = max(self.clock.get(gpu, 0), self.clock[cpu])
            self.emit(gpu, self.edge(k, "begin"))
            self.emit(gpu, self.edge(k, "end"))
        elif x < 0.5:
            self.emit(cpu, r.choice(_CPU_POINTS))
        elif x < 0.6:
            c = r.choice(_GPU_COPIES)
            self.emit(gpu, self.edge(c, "begin"))
            self.emit(gpu, self.edge(c, "end"))
        elif x < 0.72:
            name = r.choice(["decode_step", "ProfilerStep#3", "forward", "dataloader next"])
            self.open.setdefault(cpu, []).append(name)
            self.closed.setdefault(cpu, set()).add(name)
            self.emit(cpu, self.edge(name, "begin"))
        elif x < 0.84:
            stack = self.open.get(cpu)
            if stack:
                name = stack.pop() if r.random() < 0.8 else stack.pop(r.randrange(len(stack)))
                self.emit(cpu, self.edge(name, "end"))
            else:
                self.emit(cpu, "tick")
        elif x < 0.9 and mixed:
            self.emit(r.choice([cpu, gpu]), r.choice(_ODD_NAMES))
        elif x < 0.93 and mixed:
            self.orphans += 1  # warns: began before the excerpt
            self.emit(r.choice([cpu, gpu]), self.edge(f"orphan{self.orphans}", "end"))
        elif x < 0.95 and mixed:
            self.orphans += 1  # warns at the end: never closed
            self.emit(r.choice([cpu, gpu]), self.edge(f"leak{self.orphans}", "begin"))
        elif x < 0.97 and mixed:
            self.emit(cpu, r.choice(["cudaLaunchKernel", "launch nothing_like_it", "cudaGraphLaunch"]))
        elif mixed and x < 0.985:
            self.lines.append(r.choice(["# a comment", "   # indented comment", "#", "\t#\ttab", "# 1 ms CPU x"]))
        elif mixed:
            self.lines.append(r.choice(["", "   ", "\t"]))
        else:
            self.emit(gpu, "marker")  # a GPU instant


def generate(n_lines: int, *, style: str = "typical", seed: int = 0) -> str:
    """The text of an event list of exactly ``n_lines`` lines (see the module docstring).
    Deterministic for a given (n_lines, style, seed). Raises ``ValueError`` for an
    unknown style."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}: one of {', '.join(STYLES)}")
    g = _Gen(style, seed)
    g.lines += ["# generated event list", f"# style {style}, seed {seed}", ""]
    tail = 1 if style == "mixed" else 0  # closing lines kept for the end of the file
    while len(g.lines) < n_lines - tail - (0 if style == "mixed" else g.depth()):
        g.step()
    if style == "mixed":
        g.emit("CPU", "launch the last one")  # no GPU span after it: warns, unlinked
    while len(g.lines) < n_lines:
        g.close_one()
    del g.lines[n_lines:]
    eol = "\r\n" if style == "mixed" and seed % 2 else "\n"
    bom = "\ufeff" if style == "mixed" and seed % 2 else ""
    return bom + eol.join(g.lines) + eol


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("n_lines", type=int)
    ap.add_argument("--style", default="typical", choices=STYLES)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    a.out.write_text(generate(a.n_lines, style=a.style, seed=a.seed), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
