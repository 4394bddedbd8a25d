"""How a forked child's value comes back to its parent: pickled (protocol 5, arrays and
blobs out of band: never copied into the pickle), through an anonymous shared map when
it fits, else through the pipe; the pipe's end of file says the child is done.

A leaf of the loader: the standard library only. ``chrome.child`` sends and receives
with it; ``parallel.transfer`` frames a decoded part's columns as such a message.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import select
import time
from collections.abc import Callable

__all__ = ["pack", "unpack_message", "unpack_object", "send", "receive", "receive_all", "GIVE_UP_POLL_S"]


def pack(obj) -> list[bytes | memoryview]:
    """``obj`` pickled (protocol 5) with its arrays and blobs out of band, as pieces to
    send one after another: a prefix of lengths, the pickle, the raw buffers. The
    arrays are never copied into the pickle."""
    bufs: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
    raws = [b.raw() for b in bufs]
    sizes = [len(head)] + [r.nbytes for r in raws]
    prefix = len(raws).to_bytes(8, "little") + b"".join(n.to_bytes(8, "little") for n in sizes)
    return [prefix, head, *raws]


def unpack_message(payload: bytes | memoryview):
    """The object ``pack`` sent, its arrays viewing ``payload`` (no copy); raises on
    a damaged message."""
    view = memoryview(payload).cast("B")
    count = int.from_bytes(view[:8], "little")
    sizes = [int.from_bytes(view[8 + 8 * i : 16 + 8 * i], "little") for i in range(count + 1)]
    at = 8 + 8 * (count + 1)
    pieces = []
    for n in sizes:
        if at + n > len(view):
            raise ValueError("message cut short")
        pieces.append(view[at : at + n])
        at += n
    return pickle.loads(pieces[0], buffers=pieces[1:])


def send(fd: int, shared: mmap.mmap, pieces: list[bytes | memoryview]) -> None:
    """Put the message ``pieces`` (``pack``) one after another in ``shared`` and its
    length on the pipe (mode 0), or, when it does not fit, the length and then the
    message itself on the pipe (mode 1)."""
    size = sum(memoryview(p).nbytes for p in pieces)
    fits = size <= len(shared)
    head = size.to_bytes(8, "little") + (b"\0" if fits else b"\1")
    if fits:
        at = 0
        for p in pieces:
            n = memoryview(p).nbytes
            shared[at : at + n] = p
            at += n
        pieces = []
    for p in [head, *pieces]:
        view = memoryview(p).cast("B")
        while view:
            view = view[os.write(fd, view) :]


def receive(
    fd: int, shared: mmap.mmap, deadline: float, give_up: Callable[[], bool] | None = None
) -> bytes | memoryview | None:
    """The child's payload (see ``send``), or None (EOF early, past ``deadline``, or
    ``give_up()`` true: asked every ``GIVE_UP_POLL_S`` while waiting): ``receive_all``
    of one child."""
    got = receive_all([(fd, shared)], deadline, give_up)
    return None if got is None else got[0]


def receive_all(
    children: list[tuple[int, mmap.mmap]],
    deadline: float,
    give_up: Callable[[], bool] | None = None,
    stop: Callable[[int, bytes | memoryview], bool] | None = None,
) -> list[bytes | memoryview] | None:
    """The payloads (see ``receive``) of the children (pipe fd, shared map), in their
    order, read as each comes (all pipes polled at once), or None when one fails (its
    pipe ends early), past ``deadline``, when ``give_up()`` is true (asked every
    ``GIVE_UP_POLL_S``), or when ``stop(j, payload)`` is true of child ``j``'s payload
    as soon as it comes (no waiting for the others). ``select.poll``, not a selector:
    it needs no descriptor of its own (an epoll selector does, and fails with EMFILE
    in a process at its descriptor limit) and any fd number works."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd, _ in children}
    got: dict[int, bytes | memoryview] = {}
    where = {fd: j for j, (fd, _) in enumerate(children)}
    try:
        poller = select.poll()
        for fd, _ in children:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while len(got) < len(children):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if give_up is not None:
                if give_up():
                    return None
                left = min(left, GIVE_UP_POLL_S)
            for fd, _ in poller.poll(max(1, math.ceil(left * 1000))):
                chunk = os.read(fd, 1 << 22)
                if chunk:
                    chunks[fd].append(chunk)
                    continue
                poller.unregister(fd)
                j = where[fd]
                payload = _payload(b"".join(chunks.pop(fd)), children[j][1])
                if payload is None or (stop is not None and stop(j, payload)):
                    return None
                got[j] = payload
        return [got[j] for j in range(len(children))]
    except OSError:  # EMFILE, ENOMEM...: as a failed child
        return None


def _payload(msg: bytes, shared: mmap.mmap) -> bytes | memoryview | None:
    """The payload a child's whole pipe message ``msg`` stands for (``send``), or None."""
    if len(msg) < 9:
        return None
    size = int.from_bytes(msg[:8], "little")
    if msg[8:9] == b"\0":
        return memoryview(shared)[:size] if size <= len(shared) else None
    return msg[9:] if len(msg) - 9 == size else None


#: Seconds between two ``give_up()`` checks while waiting for a child.
GIVE_UP_POLL_S = 0.05


def unpack_object(payload: bytes | memoryview, copy: bool = True):
    """The object ``pack`` sent (any picklable value), its buffers copied out of
    ``payload`` (``copy=False``: viewing it, which they keep alive); raises on a
    damaged message."""
    return unpack_message(bytes(memoryview(payload).cast("B")) if copy else payload)
