"""The children's starts (parallel decode: ``transfer.part_message``'s ``starts``) give
the same args and warning lines as a one-piece load, on awkward texts (written by an
attack on them: they held)."""

from __future__ import annotations

import gzip
import json

import pytest

import gapscope.parsers.chrome.parallel.fork as cp
from gapscope.parsers import load
from gapscope.parsers.chrome.decode import load_chrome
from tests.test_load_parallel import _kineto, _write, spy  # noqa: F401


def _all_args(tr):
    return [tr.args_of(i) for i in range(len(tr))]


def _one_piece(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(cp, "enabled", lambda size, held=False: False)
        return fn()


def _events(n, first="name"):
    ev = []
    for i in range(n):
        e = {
            "name": f"k{i}",
            "ph": "X",
            "cat": "kernel",
            "pid": 0,
            "tid": 7,
            "ts": 10.0 * i + 3.125,
            "dur": 4.0,
            "args": {"correlation": i, "device": 0, "stream": 7, "s": "}{]["},
        }
        if first == "args":
            e = {"args": e.pop("args"), **e}
        ev.append(e)
        ev.append(
            {
                "cat": "cuda_runtime",
                "ph": "X",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 10.0 * i,
                "dur": 2.5,
                "args": {"correlation": i},
            }
        )
    return ev


def _variants():
    ev = _events(1500)
    heavy_header = {"deviceProperties": [{"id": j, "x": {"y": {}}} for j in range(40)]}
    yield "array", json.dumps(ev, indent=1)
    yield "object-header-after", json.dumps({"traceEvents": ev, **heavy_header, "traceName": "t"}, indent=1)
    yield "bom-ws", "\ufeff  \n\n" + json.dumps({"traceEvents": ev, **heavy_header}, indent=1)
    yield "args-first", json.dumps({"traceEvents": _events(1500, first="args"), **heavy_header}, indent=1)
    yield "compact", json.dumps({"traceEvents": ev, **heavy_header}, separators=(",", ":"))
    odd = [dict(e) for e in ev]
    odd[2500] = {**odd[2500], "dur": -3.0}
    odd[2600] = {**odd[2600], "args": {"v": 1e300, "correlation": 9}}
    odd[10] = {**odd[10], "dur": -1.0}
    odd.insert(2700, {"ph": "B", "name": "open", "pid": 3, "tid": 3, "ts": 5.0})
    odd.insert(2800, {"ph": "X", "name": "nots", "pid": 3, "tid": 3, "dur": 1.0})
    yield "warnings-and-fallback-part", json.dumps({"traceEvents": odd, **heavy_header}, indent=1)
    txt = json.dumps({"traceEvents": odd, **heavy_header}, indent=1).replace('"name": "k2900"', '"n\\u0061me": "k2900"')
    yield "escaped-key", txt
    raw = [dict(e, ts=1700000000000000 + e["ts"]) for e in ev]
    yield "raw-ts", json.dumps({"traceEvents": raw, **heavy_header}, indent=1)


@pytest.mark.parametrize("name,text", list(_variants()), ids=[v[0] for v in _variants()])
def test_file_parts_args_and_warnings_equal_one_piece(name, text, tmp_path, monkeypatch, spy):  # noqa: F811
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    path = _write(tmp_path, text.encode("utf-8"))
    parts = load(path)
    assert spy and all(spy)
    whole = _one_piece(monkeypatch, lambda: load(path))
    assert parts.warnings == whole.warnings
    assert _all_args(parts) == _all_args(whole)


@pytest.mark.parametrize("name,text", list(_variants()), ids=[v[0] for v in _variants()])
def test_memory_parts_args_and_warnings_equal_one_piece(name, text, tmp_path, monkeypatch, spy):  # noqa: F811
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    data = text.encode("utf-8")
    parts = load_chrome(data, "t.json")
    assert spy and all(spy)
    whole = _one_piece(monkeypatch, lambda: load_chrome(data, "t.json"))
    assert parts.warnings == whole.warnings
    assert _all_args(parts) == _all_args(whole)


from tests.test_load_growing import grow  # noqa: F401


@pytest.mark.parametrize("name,text", list(_variants()), ids=[v[0] for v in _variants()])
def test_gzip_growing_args_and_warnings_equal_one_piece(name, text, tmp_path, monkeypatch, grow):  # noqa: F811
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    path = _write(tmp_path, gzip.compress(text.encode("utf-8"), 1), "t.json.gz")
    parts = load(path)
    assert grow and grow[0] == ("GrowingParts", True), grow
    whole = _one_piece(monkeypatch, lambda: load(path))
    assert parts.warnings == whole.warnings
    assert _all_args(parts) == _all_args(whole)


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])
@pytest.mark.parametrize("name,text", list(_variants()), ids=[v[0] for v in _variants()])
def test_cached_parts_args_equal_one_piece(name, text, gz, tmp_path, monkeypatch, spy):  # noqa: F811
    monkeypatch.delenv("GAPSCOPE_NO_CACHE", raising=False)
    data = text.encode("utf-8")
    path = _write(tmp_path, gzip.compress(data, 1) if gz else data, "t.json.gz" if gz else "t.json")
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
    first = load(path)
    assert spy and all(spy)
    from gapscope.parsers.cache.store import wait_for_writes

    wait_for_writes()
    again = load(path)  # from the cache
    inner = getattr(again._args_loader, "inner", again._args_loader)
    assert type(inner).__name__ == "CachedTextArgs", type(inner)
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    whole = _one_piece(monkeypatch, lambda: load(path))
    assert _all_args(first) == _all_args(whole)
    assert _all_args(again) == _all_args(whole)
