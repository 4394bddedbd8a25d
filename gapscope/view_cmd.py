"""``gapscope [TRACE]``: open the viewer (the bundled decode-step sample without TRACE).

Bad input prints one line (the ``TraceFormatError`` text) to stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gapscope",
        description="Terminal viewer for GPU profiler traces: walk the idle GPU gaps and see why.",
        epilog="Keys: n/N next/previous gap, s largest first, 1-4 next sync/copy/launch/host gap, "
        "+/- zoom, h/l pan, z zoom to gap, / search, %% kernel<->launch, p panel, ? help, q quit.",
    )
    p.add_argument("trace", nargs="?", help="Kineto/Chrome trace JSON (.json, .json.gz) or ASCII timeline (.txt); default: bundled decode-step sample")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the viewer; returns the exit status (0 ok, 1 load cancelled, 2 bad input)."""
    args = _parser().parse_args(argv)
    if args.trace is None:
        import sample_traces

        path = str(sample_traces.path())
    else:
        path = args.trace
    import os

    if not os.path.exists(path):
        print(f"{path}: no such file", file=sys.stderr)
        return 2
    from tui.factory import make_app

    app = make_app(path)
    rc = app.run()
    if app.error:
        print(app.error, file=sys.stderr)
        return 2
    if app.cancelled:
        print("load cancelled", file=sys.stderr)
        return 1
    return int(rc or app.return_code or 0)
