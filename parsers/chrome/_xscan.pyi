"""Types of the C scanner ``_xscan.c`` (see ``gapscope.parsers.chrome.fastscan``)."""

from typing import Literal, overload

from typing_extensions import Buffer

def scan(text: Buffer, raw_ts: bool, /) -> tuple | None: ...
@overload
def device_events(
    text: Buffer, begin: int, end: int, cats: tuple[bytes, ...], spans: Literal[False] = ..., /
) -> bytes | None: ...
@overload
def device_events(
    text: Buffer, begin: int, end: int, cats: tuple[bytes, ...], spans: Literal[True], /
) -> tuple[bytes, bytes] | None: ...
def device_scan(text: Buffer, begin: int, end: int, cats: tuple[bytes, ...], raw_ts: bool, /) -> tuple | None: ...
