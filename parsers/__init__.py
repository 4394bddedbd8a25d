"""Trace loaders: Chrome Trace Event Format / Kineto JSON and ASCII timelines.

``load(path)`` detects the format from the content (gzip magic, JSON object or array,
text), never from the suffix, and returns an immutable columnar ``Trace``. Bad input
raises ``TraceFormatError`` (path, line, column, hint); nothing else escapes.
Imports numpy and msgspec only (no UI library).
"""

from gapscope.parsers.detect import load
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import CopyKind, Kind, Lane, SourceInfo, Trace, TraceWarning

__all__ = ["load", "Trace", "Kind", "Lane", "SourceInfo", "TraceWarning", "CopyKind", "TraceFormatError"]
