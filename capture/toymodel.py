"""A toy decoder and word tokenizer for the capture scenarios (deterministic, tiny).

Not a language model: fixed random weights (seed 0), a word-level tokenizer with a
stable hash, a KV cache of fixed length, greedy sampling. It exists to produce the
kernel and host-work pattern of a batch-1 decode loop: ``tokenize``, ``prefill``,
one ``decode_step`` per token (a few matmuls, attention over the cache, logits),
``sample``, ``detokenize``. torch is passed in, never imported here at module level.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from typing import Any

__all__ = ["Sizes", "TEXT", "WORDS", "tokenize", "detokenize", "ToyDecoder"]

TEXT = (
    "Timelines teach humility. The GPU may be doing exactly what you asked and still spend "
    "most of the request waiting for the host to ask again. A dense GPU lane means the kernels "
    "can be the story; white space means they are not. Classify first, do not rewrite attention "
    "in the blank regions. Feed the machine first."
)
WORDS = sorted(set(re.findall(r"[a-z]+", TEXT.lower()))) + ["<unk>"]
_WORD_RE = re.compile(r"[A-Za-z]+|[^\sA-Za-z]")


@dataclass(frozen=True)
class Sizes:
    """Model and loop sizes: ``vocab`` tokens, ``d_model`` features, ``layers``,
    ``max_len`` KV-cache positions, ``prompt_repeat`` copies of ``TEXT`` in the prompt
    (capped to fit), ``new_tokens`` decoded per request."""

    vocab: int = 512
    d_model: int = 256
    layers: int = 4
    max_len: int = 128
    prompt_repeat: int = 1
    new_tokens: int = 16


def tokenize(text: str, vocab: int) -> list[int]:
    """Word-level token ids in ``[0, vocab)``: regex split, lower case, CRC-32 hash.

    Deterministic across runs and machines (no Python ``hash`` randomisation).
    """
    ids = []
    for piece in _WORD_RE.findall(text):
        ids.append(zlib.crc32(piece.lower().encode("utf-8")) % vocab)
    return ids


def detokenize(ids: list[int]) -> str:
    """Text for token ids: ``WORDS[id % len(WORDS)]`` joined by spaces."""
    return " ".join(WORDS[i % len(WORDS)] for i in ids)


class ToyDecoder:
    """Embedding, ``layers`` x (attention over a KV cache + MLP), tied logits.

    ``cache_k``/``cache_v``: float32 ``[layers, max_len, d_model]`` on ``device``.
    ``prefill(ids)`` fills positions ``[0, len(ids))`` and returns logits ``[vocab]``;
    ``decode(token, pos)`` takes ``token`` as an int64 tensor of shape ``[1]`` and
    ``pos`` as an int64 tensor of shape ``[1]`` (both on ``device``, so the step can be
    captured in a CUDA graph) and returns logits ``[vocab]``.
    """

    def __init__(self, torch: Any, device: Any, sizes: Sizes) -> None:
        self.torch, self.device, self.sizes = torch, device, sizes
        g = torch.Generator().manual_seed(0)
        d, v, n = sizes.d_model, sizes.vocab, sizes.layers
        scale = 1.0 / math.sqrt(d)

        def w(*shape: int) -> Any:
            return (torch.randn(*shape, generator=g) * scale).to(device)

        self.emb = w(v, d)
        self.wqkv = [w(d, 3 * d) for _ in range(n)]
        self.wo = [w(d, d) for _ in range(n)]
        self.w1 = [w(d, 2 * d) for _ in range(n)]
        self.w2 = [w(2 * d, d) for _ in range(n)]
        self.cache_k = torch.zeros(n, sizes.max_len, d, device=device)
        self.cache_v = torch.zeros(n, sizes.max_len, d, device=device)
        self.positions = torch.arange(sizes.max_len, device=device)

    def reset(self) -> None:
        """Clear the KV cache in place (static addresses are kept for graph replay)."""
        self.cache_k.zero_()
        self.cache_v.zero_()

    def _qkv(self, i: int, h: Any) -> tuple[Any, Any, Any]:
        """Layer ``i`` projections of ``h`` ``[T, d]``: q, k, v each ``[T, d]``."""
        d = self.sizes.d_model
        qkv = h @ self.wqkv[i]
        return qkv[:, :d], qkv[:, d : 2 * d], qkv[:, 2 * d :]

    def _attend(self, i: int, h: Any, q: Any, mask: Any) -> Any:
        """Attention of ``q`` over layer ``i``'s cache (``mask`` ``[T, max_len]``, True = hidden) + MLP."""
        torch = self.torch
        scores = (q @ self.cache_k[i].T) * (1.0 / math.sqrt(self.sizes.d_model))
        scores = scores.masked_fill(mask, float("-inf"))
        att = torch.softmax(scores, dim=-1) @ self.cache_v[i]
        h = h + att @ self.wo[i]
        return h + torch.nn.functional.gelu(h @ self.w1[i]) @ self.w2[i]

    def prefill(self, ids: list[int]) -> Any:
        """Run the prompt ``ids`` (``len(ids) <= max_len``); return last-position logits ``[vocab]``."""
        torch = self.torch
        t = len(ids)
        tok = torch.tensor(ids, dtype=torch.long).to(self.device)
        h = self.emb[tok]
        mask = self.positions[None, :] > torch.arange(t, device=self.device)[:, None]
        for i in range(self.sizes.layers):
            q, k, v = self._qkv(i, h)
            self.cache_k[i, :t] = k
            self.cache_v[i, :t] = v
            h = self._attend(i, h, q, mask)
        return h[-1] @ self.emb.T

    def decode(self, token: Any, pos: Any) -> Any:
        """One decode step for ``token`` at position ``pos`` (int64 ``[1]`` tensors); logits ``[vocab]``."""
        h = self.emb[token]
        mask = self.positions[None, :] > pos[:, None]
        for i in range(self.sizes.layers):
            q, k, v = self._qkv(i, h)
            self.cache_k[i].index_copy_(0, pos, k)
            self.cache_v[i].index_copy_(0, pos, v)
            h = self._attend(i, h, q, mask)
        return (h @ self.emb.T)[0]
