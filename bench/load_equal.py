"""Does a change of the loader load every trace the same? Array by array, two checkouts.

Usage (from the repository root)::

    .venv/bin/python bench/load_equal.py --before /work/main/.venv/bin/python
    .venv/bin/python bench/load_equal.py --before OTHER_PY --extra bench/out/kineto_v2_1000000_s0.json

Each interpreter (``--before``'s and this one, each with its own editable install of
gapscope) loads every trace file of the corpus (``$GAPSCOPE_SHARED/traces/public``,
else ``../shared/traces/public``) plus the ``--extra`` files, in a subprocess of its
own with the cache off (``GAPSCOPE_NO_CACHE=1``: a first load), and saves what it got
under ``--out`` (default ``/tmp/gapscope-load-equal``): every array field of the
``Trace`` to one ``.npz`` per file, and its names, lanes, source, warnings, extent and
the ``args`` of up to ``ARGS_ROWS`` rows (first, last and spread between) to a JSON
file beside it. Then every array is compared (dtype, shape and values; NaN equal to
NaN) and the JSON compared as a whole; a file one side refused must be refused by the
other with the same message. Prints one line per file and a count; exit status 1 on
any difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Rows whose ``args`` are compared per file (args are read back from the text lazily).
ARGS_ROWS = 64
#: Files of the corpus that are traces (the rest is provenance and notes).
SUFFIXES = (".json", ".json.gz", ".gz", ".txt", ".sqlite", ".pftrace", ".nsys-rep")


def corpus_files(extra: list[str]) -> list[Path]:
    shared = Path(os.environ.get("GAPSCOPE_SHARED", ROOT.parent / "shared"))
    corpus = shared / "traces" / "public"
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
    return files + [Path(x).resolve() for x in extra]


def _name(path: Path) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in str(path).strip("/"))


def dump(out: Path, files: list[Path]) -> None:
    """Load each of ``files`` with the gapscope this interpreter imports; write
    ``out/NAME.npz`` and ``out/NAME.json`` (or ``NAME.json`` with the error only)."""
    import numpy as np

    from gapscope.parsers import TraceFormatError, load

    out.mkdir(parents=True, exist_ok=True)
    for path in files:
        name = _name(path)
        try:
            tr = load(path)
        except TraceFormatError as exc:
            (out / f"{name}.json").write_text(json.dumps({"error": str(exc)}))
            continue
        arrays = {
            f.name: getattr(tr, f.name) for f in dataclasses.fields(tr) if isinstance(getattr(tr, f.name), np.ndarray)
        }
        np.savez(out / f"{name}.npz", **arrays)
        n = len(tr)
        rows = sorted(
            {
                *range(min(n, 8)),
                *range(max(0, n - 8), n),
                *np.linspace(0, max(0, n - 1), ARGS_ROWS // 2, dtype=int).tolist(),
            }
            if n
            else set()
        )
        meta = {
            "names": list(tr.names),
            "lanes": [repr(lane) for lane in tr.lanes],
            "source": repr(tr.source),
            "warnings": [repr(w) for w in tr.warnings],
            "extent_ns": list(tr.extent_ns),
            "args": {str(i): repr(tr.args_of(i)) for i in rows},
        }
        (out / f"{name}.json").write_text(json.dumps(meta))


def compare(a: Path, b: Path, files: list[Path]) -> int:
    """Print one line per file; the number of files that differ."""
    import numpy as np

    bad = 0
    arrays = 0
    for path in files:
        name = _name(path)
        ja, jb = (json.loads((d / f"{name}.json").read_text()) for d in (a, b))
        diffs: list[str] = []
        if ja != jb:
            diffs += [k for k in sorted({*ja, *jb}) if ja.get(k) != jb.get(k)]
        if "error" not in ja and "error" not in jb:
            with np.load(a / f"{name}.npz") as za, np.load(b / f"{name}.npz") as zb:
                for key in sorted({*za.files, *zb.files}):
                    arrays += 1
                    if key not in za.files or key not in zb.files:
                        diffs.append(f"{key} (missing on one side)")
                        continue
                    x, y = za[key], zb[key]
                    if (
                        x.dtype != y.dtype
                        or x.shape != y.shape
                        or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
                    ):
                        diffs.append(key)
        bad += bool(diffs)
        what = (
            "refused alike"
            if "error" in ja and not diffs
            else ("equal" if not diffs else "DIFFERS: " + ", ".join(diffs))
        )
        print(f"{path}: {what}")
    print(f"{len(files)} files, {arrays} arrays compared; {bad} files differ")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--before", required=True, help="python of the other checkout (its venv)")
    ap.add_argument("--out", default="/tmp/gapscope-load-equal")
    ap.add_argument("--extra", action="append", default=[], help="another trace file to compare")
    ap.add_argument("--dump", help=argparse.SUPPRESS)  # internal: the subprocess's own work
    a = ap.parse_args(argv)
    a.extra = [str(Path(x).resolve()) for x in a.extra]
    files = corpus_files(a.extra)
    if a.dump:
        dump(Path(a.dump), files)
        return 0
    out = Path(a.out)
    env = {**os.environ, "GAPSCOPE_NO_CACHE": "1"}
    for side, python in (("before", a.before), ("after", sys.executable)):
        cmd = [python, str(Path(__file__).resolve()), "--before", a.before, "--dump", str(out / side)]
        cmd += [x for e in a.extra for x in ("--extra", e)]
        subprocess.run(cmd, check=True, env=env, cwd="/tmp")
    return 1 if compare(out / "before", out / "after", files) else 0


if __name__ == "__main__":
    raise SystemExit(main())
