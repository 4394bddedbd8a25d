"""Types of the C transcoder ``_pfscan.c`` (see ``gapscope.parsers.perfetto.loader``)."""

from collections.abc import Callable

from typing_extensions import Buffer

def descriptor_spans(data: Buffer, /) -> list[tuple[int, int]] | None: ...
def transcode(
    data: Buffer,
    tracks: dict[int, tuple[int, bytes]],
    n_tracks: int,
    fd: int = ...,
    on_flush: Callable[[int, int], object] | None = ...,
    flush_bytes: int = ...,
    /,
) -> tuple[bytearray, bytes] | None: ...
