"""The advice of a copy-class card: ``CopyFacts`` (the copies on the path, their
directions, sizes and issuers, computed once from the card's ``Facts``) and
``COPY_RULES``, the ordered table of ``CopyRule`` whose first match gives the first
experiment (DDP buckets, library memsets, many small copies, pinned late, pageable
H2D, P2P, ...). ``copy_advice(facts)`` applies it. Copy is GPU copy time only: the
thread's time in a copy call is host work (``host_rules``) or a wait (``rules``), and
those tables advise on it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np

from gapscope.analysis.card.advice import Advice
from gapscope.analysis.card.copies import COPY_KIND_WORDS, CopyLead, copy_lead
from gapscope.analysis.card.facts import Facts
from gapscope.analysis.card.why import (
    quote_name,
)
from gapscope.analysis.framework_work import (
    bucket_copies,
)
from gapscope.analysis.types import Evidence
from gapscope.parsers.model import CopyKind, Kind
from gapscope.units import fmt_bytes, fmt_dur

__all__ = ["CopyFacts", "CopyRule", "COPY_RULES", "copy_facts", "copy_advice", "library_issuer", "host_copy_fix"]

#: At most this many bytes, a copy's time is its fixed cost per copy, not bandwidth.
SMALL_COPY_BYTES = 4096

#: At least this many short copies (``SHORT_COPY_NS``) holding most of the copy time
#: are advised to be batched: their number costs, not their size.
MANY_COPIES = 4


def _batch_advice(lead, forbidden: str, proof: str) -> tuple[str, str, str]:
    """Many short copies holding most of the copy time: batch them, by kind."""
    kinds = lead.short_kinds
    how = {
        COPY_KIND_WORDS[int(CopyKind.H2D)]: "one pinned flat buffer copied with non_blocking=True, a step ahead",
        COPY_KIND_WORDS[int(CopyKind.D2H)]: "one flat buffer read back once, after the loop",
        COPY_KIND_WORDS[int(CopyKind.D2D)]: "one copy of a flat buffer, or a multi-tensor op (torch._foreach_copy_, a "
        "fused optimizer) instead of one per tensor, or none at all (an in-place op, a preallocated buffer)",
        "memsets": "one zero-fill of a flat buffer, or a preallocated one",
    }
    if len(kinds) == 1:
        (kind,) = kinds
        named = f" {quote_name(lead.big.name)}" if lead.same_name else ""
        head = (
            f"Batch the {lead.short_count} short {kind}{named} ({fmt_dur(lead.short_median_ns)} median each, "
            f"{fmt_dur(lead.short_ns)} in all)"
        )
        use = how.get(kind, "one copy of a flat buffer instead of one per tensor")
        return (
            f"{head}: each this short, their time is the cost per copy, not bandwidth. Use {use}.",
            forbidden,
            proof.replace("the copy should", "the copies should"),
        )
    ranked = sorted(kinds.items(), key=lambda kv: -kv[1][1])
    parts = "; ".join(f"{n} {_one(k) if n == 1 else k}, {fmt_dur(t)}" for k, (n, t) in ranked)
    use = " ".join(
        f"For the {_one(k) if n == 1 else k}, use {how.get(k, 'one copy of a flat buffer')}." for k, (n, _) in ranked
    )
    return (
        f"Batch the {lead.short_count} short copies ({parts}): each this short, their time is the cost per copy, "
        f"not bandwidth. {use}",
        forbidden,
        proof.replace("the copy should", "the copies should"),
    )


def _one(kind_words: str) -> str:
    """ "device-to-host copies" -> "device-to-host copy", "memsets" -> "memset"."""
    return kind_words[: -len("ies")] + "y" if kind_words.endswith("copies") else kind_words.removesuffix("s")


@dataclasses.dataclass(frozen=True, eq=False)
class CopyFacts:
    """What the copy advice of an occurrence is chosen from (``copy_facts``): the copy
    lead (``card.copies.copy_lead``) and its largest copy ``big``, quoted as ``what`` with
    ``detail`` (bytes, pageable side); its copy kind ``ck`` (``CopyKind`` int, -1 when
    not a GPU copy); whether it is a memset; whether it moves data to or from the host;
    ``n``: how many copies the advice is about; ``pinned``: Kineto names it pinned."""

    lead: CopyLead | None
    big: Evidence | None
    what: str
    detail: str
    ck: int
    is_memset: bool
    host_side: bool
    n: int
    pinned: bool


def copy_facts(f: Facts) -> CopyFacts:
    """The ``CopyFacts`` of a copy occurrence ``f``."""
    diag, trace = f.diag, f.diag.trace
    lead = copy_lead(diag, f.rows, list(f.evidence))
    big = lead.big if lead is not None else None
    bits = []
    if big is not None and big.bytes >= 0:
        bits.append(fmt_bytes(big.bytes))
    if big is not None and big.pageable:
        to_host = big.event >= 0 and int(trace.copy_kind[big.event]) == int(CopyKind.D2H)
        bits.append(f"{'to' if to_host else 'from'} pageable host memory")
    on_gpu = big is not None and big.event >= 0 and trace.lanes[big.lane].is_gpu
    n = 1  # how many copies the advice is about: all of one name and length, or those like the largest
    if lead is not None:
        n = lead.count if lead.same_name and lead.uniform else lead.like_big
    return CopyFacts(
        lead=lead,
        big=big,
        what=quote_name(big.name) if big else "the copy",
        detail=f" ({', '.join(bits)})" if bits else "",
        ck=int(trace.copy_kind[big.event]) if on_gpu and big is not None else -1,
        is_memset=big is not None and big.event >= 0 and trace.kind[big.event] == int(Kind.MEMSET),
        host_side=big is not None
        and big.event >= 0
        and int(trace.copy_kind[big.event]) in (int(CopyKind.H2D), int(CopyKind.D2H)),
        n=n,
        pinned=big is not None and "pinned" in big.name.lower(),  # Kineto: "Memcpy HtoD (Pinned -> Device)"
    )


@dataclasses.dataclass(frozen=True)
class CopyRule:
    """One first experiment for a copy: when ``when(facts, copy)`` holds (and no rule
    before it did), ``first(facts, copy)`` is the card's first experiment."""

    name: str
    when: Callable[[Facts, CopyFacts], bool]
    first: Callable[[Facts, CopyFacts], str]
    rationale: str


#: A library whose calls issue their own memsets and copies (workspace zero-fills).
LIBRARY_RE = re.compile(r"^(cudnn|miopen|cublas|hipblas|rocblas|cublasLt|hipblaslt)", re.IGNORECASE)


def library_issuer(trace, ev: int) -> str | None:
    """The library call (``LIBRARY_RE``) that issued GPU op ``ev``: its runtime call
    (by flow) or a CPU event enclosing that call on its thread; else None."""
    src = trace.flow_src[trace.flow_dst == ev]
    for s in src.tolist():
        if LIBRARY_RE.search(trace.name(s)):
            return trace.name(s)
        sl = trace.lane_slice(int(trace.lane[s]))
        st, en = trace.start_ns[sl], trace.start_ns[sl] + trace.dur_ns[sl]
        t = int(trace.start_ns[s])
        for k in np.flatnonzero((st <= t) & (en > t)).tolist():
            name = trace.name(int(sl.start + k))
            if LIBRARY_RE.search(name):
                return name
    return None


def host_copy_fix(f: Facts) -> str:
    """How to make a host copy call return at once, in the program's vocabulary."""
    if f.program.platform == "mtia":
        return "Keep the data on the device, or move it in fewer, larger transfers issued ahead of their use."
    if not f.program.torch:
        return (
            "Copy from page-locked host memory (cudaHostAlloc / cudaHostRegister) with cudaMemcpyAsync so the "
            "call returns at once, or keep the data on the device."
        )
    return "Use pinned host memory and non_blocking=True so the call returns at once, or keep the data on the device."


def _bucket_first(f: Facts, c: CopyFacts) -> str:
    bucket = bucket_copies(f.diag, f.rows, MANY_COPIES)
    assert bucket is not None
    n_copies, frame = bucket
    return (
        f"These are DDP's copies of the reduced gradient buckets back into each parameter's .grad ({n_copies:,} "
        f"copies issued inside {quote_name(f.diag.trace.name(frame))}): construct DDP with "
        f"gradient_as_bucket_view=True, so the gradients are views of the buckets and the copies go."
    )


def _library_memset_first(f: Facts, c: CopyFacts) -> str:
    assert c.big is not None
    lib = library_issuer(f.diag.trace, c.big.event)
    return (
        f"The memset {c.what}{c.detail} is issued by the library call {quote_name(lib or '')} itself (its "
        f"workspace or output zero-fill), not by your code: try another algorithm for that op (for cuDNN, "
        f"torch.backends.cudnn.benchmark=True picks the fastest; for MIOpen, MIOPEN_FIND_MODE), or a layout or "
        f"shape the library handles without it."
    )


def _fuse_first(f: Facts, c: CopyFacts) -> str:
    lead, big, n = c.lead, c.big, c.n
    noun = (
        ("memsets" if c.is_memset else "device-to-device copies")
        if n > 1
        else ("memset" if c.is_memset else "device-to-device copy")
    )
    largest = " largest" if lead is not None and 1 < n < lead.count else ""
    which = f"{n}{largest} {noun} {c.what}" if n > 1 else f"{noun} {c.what}"
    size = c.detail
    if n > 1 and big is not None and big.bytes >= 0 and lead is not None:
        same = lead.same_bytes if n == lead.count else lead.like_big_range[1] == lead.like_big_range[2] >= 0
        size = f" ({fmt_bytes(big.bytes)} each)" if same else f" (up to {fmt_bytes(big.bytes)})"
    small = ""
    if big is not None and 0 <= big.bytes <= SMALL_COPY_BYTES:
        small = (
            f"; at {fmt_bytes(big.bytes)} "
            + ("their time is the cost per copy" if n > 1 else "its time is the cost of one copy")
            + ", not bandwidth"
        )
    if c.is_memset:
        why = "the GPU writing a constant (a zero-fill" + (
            " such as torch.zeros or .zero_()" if f.program.torch else ""
        )
        why += " between kernels)"
    else:
        why = (
            "the GPU moving data it already has ("
            + ("a .contiguous(), clone, dtype cast" if f.program.torch else "a copy or layout change")
            + " between kernels)"
        )
    return (
        f"Fuse or remove the {which}{size}: {'they are' if n > 1 else 'it is'} {why}{small}; an in-place op, a "
        f"fused kernel or a preallocated buffer avoids {'them' if n > 1 else 'it'}."
    )


def _pinned_late_first(f: Facts, c: CopyFacts) -> str:
    assert c.big is not None
    # already pinned and asynchronous, under kernels until the GPU ran out of them
    # (extrap/con_kernel #3: a 40 MB cudaMemcpyAsync overlapped `test4` on another
    # stream and ran 2.68 ms past it, and the card advised pinned memory)
    return (
        f"{c.what}{c.detail} is already pinned and asynchronous, and it ran under kernels until the GPU ran out "
        f"of them: its last {fmt_dur(c.big.overlap_ns)} are this gap. Copy in chunks, each as soon as its part of "
        f"the data is ready, start the copy earlier, or copy less (keep on the device what does not need to "
        f"move)."
    )


def _h2d_first(f: Facts, c: CopyFacts) -> str:
    if f.program.platform == "mtia":
        how = "move it in fewer, larger transfers issued ahead of their use (the DMA engine copies while kernels run)"
    elif not f.program.torch:
        how = (
            "issue it with cudaMemcpyAsync on a stream of its own a step ahead, so kernels run while it copies"
            if c.pinned
            else "page-locked host memory (cudaHostAlloc) and cudaMemcpyAsync on a stream of its own, a step ahead"
        )
    elif c.pinned:
        how = "issue it with non_blocking=True a step ahead (prefetch) on a side stream, so kernels run while it copies"
    else:
        how = "pinned host memory (pin_memory=True) and non_blocking=True, issued a step ahead (prefetch)"
    return f"Make {c.what}{c.detail} overlap compute: {how}, or keep the data on the device."


def _p2p_first(f: Facts, c: CopyFacts) -> str:
    return (
        f"Overlap the peer-to-peer copy {c.what}{c.detail} with compute: issue it on a stream of its own ahead of "
        f"its use (non_blocking=True), or keep the data on the device that uses it."
    )


def _h2h_first(f: Facts, c: CopyFacts) -> str:
    return (
        f"{c.what}{c.detail} copies host to host, ordered on the GPU's stream by the runtime: copy on the host "
        f"without the runtime (or not at all), so the stream does not wait for it."
    )


def _keep_first(f: Facts, c: CopyFacts) -> str:
    if f.program.platform == "mtia":
        return (
            f"Keep the data on the device so {c.what}{c.detail} is not needed, or move it in fewer, larger transfers."
        )
    if not f.program.torch:
        return (
            f"Keep the data on the device so {c.what}{c.detail} is not needed; where a copy must stay, copy from "
            f"page-locked host memory with cudaMemcpyAsync so it overlaps compute."
        )
    return (
        f"Keep the data on the device so {c.what}{c.detail} is not needed (drop the .cpu()/numpy round trip); "
        f"where a copy must stay, use pinned host memory and non_blocking=True so it overlaps compute."
    )


#: The copy table, first match wins (the generic rule last).
COPY_RULES: tuple[CopyRule, ...] = (
    CopyRule(
        "DDP gradient buckets",
        lambda f, c: bucket_copies(f.diag, f.rows, MANY_COPIES) is not None,
        _bucket_first,
        "DDP copies buckets back into .grad: gradient_as_bucket_view removes them",
    ),
    CopyRule(
        "many short copies",
        lambda f, c: c.lead is not None and c.lead.short_count >= MANY_COPIES and c.lead.mostly_short,
        lambda f, c: "",  # copy_advice takes _batch_advice whole
        "short copies cost per copy, not bandwidth: batch them",
    ),
    CopyRule(
        "library memset",
        lambda f, c: c.is_memset and c.big is not None and library_issuer(f.diag.trace, c.big.event) is not None,
        _library_memset_first,
        "a memset issued by cuDNN/MIOpen/cuBLAS is the library's: not the user's zero-fill",
    ),
    CopyRule(
        "memset or device-to-device copy",
        lambda f, c: c.is_memset or c.ck == int(CopyKind.D2D),
        _fuse_first,
        "the GPU writing a constant or moving data it has: fuse or remove it",
    ),
    CopyRule(
        "already pinned, ran late",
        lambda f, c: (
            c.big is not None
            and c.ck in (int(CopyKind.H2D), int(CopyKind.D2H))
            and c.pinned
            and int(f.diag.trace.start_ns[c.big.event]) < int(f.diag.gaps.start_ns[int(f.rows[0])])
        ),
        _pinned_late_first,
        "a pinned asynchronous copy that outran the kernels: start it earlier or copy less",
    ),
    CopyRule("host to device", lambda f, c: c.ck == int(CopyKind.H2D), _h2d_first, "overlap the upload with compute"),
    CopyRule("peer to peer", lambda f, c: c.ck == int(CopyKind.P2P), _p2p_first, "overlap the peer copy"),
    CopyRule("host to host", lambda f, c: c.ck == int(CopyKind.H2H), _h2h_first, "a host copy ordered on the stream"),
    CopyRule("copy", lambda f, c: True, _keep_first, "keep the data on the device"),
)


def copy_advice(f: Facts) -> Advice:
    """Advice for a copy occurrence: the first ``COPY_RULES`` rule that holds (many
    short copies: ``_batch_advice``), with the copy's forbidden step and proof."""
    c = copy_facts(f)
    proof = (
        f"Exposed copy time per step (memcpy outside kernels) and the idle at this position ({f.dur_txt}) "
        f"on a new capture; the copy should vanish or run under a kernel."
    )
    forbidden = "Do not optimise the kernels: the GPU waits for data to move, not for compute."
    rule = next(r for r in COPY_RULES if r.when(f, c))
    if rule.name == "many short copies":
        assert c.lead is not None
        return Advice(*_batch_advice(c.lead, forbidden, proof))
    return Advice(rule.first(f, c), forbidden, proof)
