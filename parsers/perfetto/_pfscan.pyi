"""Types of the C transcoder ``_pfscan.c`` (see ``gapscope.parsers.perfetto.loader``)."""

from typing_extensions import Buffer

def descriptor_spans(data: Buffer, /) -> list[tuple[int, int]] | None: ...
def transcode(
    data: Buffer, tracks: dict[int, tuple[int, bytes]], n_tracks: int, fd: int = ..., /
) -> tuple[bytearray, bytes] | None: ...
