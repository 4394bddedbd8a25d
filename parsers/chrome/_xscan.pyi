"""Types of the C scanner ``_xscan.c`` (see ``gapscope.parsers.chrome.fastscan``)."""

from typing_extensions import Buffer

def scan(text: Buffer, raw_ts: bool, /) -> tuple | None: ...
