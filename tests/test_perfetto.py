"""Perfetto TrackEvent traces (``.pftrace``, issue 46): a corpus Kineto trace written as
protobuf by an independent encoder (``tests/perfetto_encode.py``, the ``perfetto``
package's generated classes) loads into the same ``Trace`` and the same diagnosis as
the JSON original; a hand-built trace gives hand-computed values; damaged protobuf
gives a ``TraceFormatError`` naming the packet and byte, or a named warning; the CLI's
report, diff and rank folders read ``.pftrace`` files."""

from __future__ import annotations

import gzip
import io
import json
import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

from gapscope.analysis.diagnose import diagnose
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.parsers import Kind, TraceFormatError, load
from gapscope.parsers.chrome import decode as chrome_loader
from gapscope.parsers.chrome.parallel import fork as cp
from gapscope.parsers.detect import sniff
from gapscope.parsers.perfetto import loader as pf
from gapscope.report.cmd import run as report_run
from tests import perfetto_encode as enc
from tests.conftest import CORPUS, require
from tests.test_load_growing import grow  # noqa: F401 - the fixture ``growing`` builds on
from tests.test_load_parallel import _reaped

#: Corpus traces held equal (flows, args, several streams, ROCm mi210/mi250/MI300-era
#: exports, CUDA graphs, python_function stacks, text pids such as "Spans").
EQUAL_TRACES = [
    "kineto/after_fix_trace.json",
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/inference_rank_1.json.gz",
    "tracelens/mi210/gpu_only_trace.json.gz",
    "tracelens/torch_compile_triton/trace.json.gz",
    "tracelens/vllm_decode_full/graph_execution.json.gz",
    "tracelens/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
]


@pytest.fixture(params=["c", "c-mapped", "c-disk", "python"])
def decoder(request, monkeypatch):
    """Each test four times: through the C transcoder (``_pfscan``, which must then
    decode the whole file: the generated classes are not called), in memory, into a
    mapped in-memory file (``memfd``) and into a mapped temporary file on disk (no free
    memory said), and through the generated classes alone (``GAPSCOPE_PFSCAN=0``)."""
    if request.param in ("c-mapped", "c-disk"):
        monkeypatch.setattr(pf, "MAP_MIN_BYTES", 0)
    if request.param == "c-disk":
        monkeypatch.setattr(pf, "_available_bytes", lambda: 0)
    if request.param.startswith("c"):
        if pf._pfscan is None:
            pytest.skip("the C transcoder was not built")

        def refuse(*a, **k):
            raise AssertionError("the C transcoder gave up on this file")

        monkeypatch.setattr(pf, "_packets", refuse)
    else:
        monkeypatch.setenv("GAPSCOPE_PFSCAN", "0")
    return request.param


def _pftrace(tmp_path, rel: str, clear_every: int = 50, name: str = "t.pftrace"):
    src = require(CORPUS / rel)
    data, _ = enc.encode(enc.read_events(src), clear_every=clear_every)
    out = tmp_path / name
    out.write_bytes(data)
    return src, out


def _diagnosis(trace) -> dict:
    doc = json.loads(json.dumps(diagnosis_to_json(diagnose(trace)), default=str))
    doc.pop("source")  # path and format: the one thing that differs
    # the JSON header (distributedInfo, deviceProperties, ...) has no place in a .pftrace,
    # so what the header check says of it is the JSON side's alone
    doc["warnings"] = [w for w in doc["warnings"] if not str(w).startswith("header field")]
    return doc


def _lanes(trace) -> list[tuple]:
    return [(la.pid, la.tid, la.process_name, la.thread_name, la.is_gpu, la.device, la.stream) for la in trace.lanes]


@pytest.mark.parametrize("rel", EQUAL_TRACES)
def test_pftrace_loads_as_its_json_twin(tmp_path, rel, decoder):
    src, out = _pftrace(tmp_path, rel)
    _assert_twins(load(out), load(src))


def _assert_twins(got, want) -> None:
    """``got`` (a ``.pftrace``'s trace) holds what ``want`` (its JSON original's) holds."""
    assert got.source.format == "perfetto"
    assert _lanes(got) == _lanes(want)
    for field in ("start_ns", "dur_ns", "lane", "kind", "correlation", "external_id", "bytes", "copy_kind", "depth"):
        assert np.array_equal(getattr(got, field), getattr(want, field)), field
    assert [got.names[i] for i in got.name_id] == [want.names[i] for i in want.name_id]
    assert sorted(zip(got.flow_src.tolist(), got.flow_dst.tolist())) == sorted(
        zip(want.flow_src.tolist(), want.flow_dst.tolist())
    )
    assert _diagnosis(got) == _diagnosis(want)  # every busy figure, gap, class and card
    k = int(np.flatnonzero(got.kind == int(Kind.KERNEL))[0]) if (got.kind == int(Kind.KERNEL)).any() else 0
    assert got.args_of(k) == want.args_of(k)  # every Chrome arg came back as a debug annotation


@pytest.fixture
def growing(request, monkeypatch):
    """The transcoder's text decoded by the Chrome loader's children while it is
    written (``perfetto.loader._Growing``), at test sizes: ``test_load_growing.grow``
    (parts forced on, the growing path for any size, a small head), the text mapped
    at any size and written 16 KiB at a time. A list of (kind of parts, whether their
    decode gave a trace) per ``decode_file``."""
    if pf._pfscan is None:
        pytest.skip("the C transcoder was not built")
    calls = request.getfixturevalue("grow")
    monkeypatch.setattr(pf, "MAP_MIN_BYTES", 0)
    monkeypatch.setattr(pf, "TEXT_FLUSH_BYTES", 16 << 10)
    # a plan of 12 parts of a 5 MB text: too long by up to 1/12 is taken (16 KiB parts: 1/300)
    monkeypatch.setattr(cp, "CHUNK_BYTES", 512 << 10)
    return calls


#: Corpus traces whose text is several times the test head (``growing``).
GROWING_TRACES = [
    "hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
]


@pytest.mark.parametrize("rel", GROWING_TRACES)
def test_decoded_while_transcoding_equals_the_json_twin(tmp_path, rel, growing):
    src, out = _pftrace(tmp_path, rel)
    seen: list[float] = []
    real = pf._Growing.__call__

    def slow(self, final_bytes, consumed_bytes):
        real(self, final_bytes, consumed_bytes)
        if self.decoders.parts is not None:
            time.sleep(0.002)  # a transcoder slower than the children: they catch up and wait
            seen.append(cp.progress() or 0.0)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(pf._Growing, "__call__", slow)
        got = load(out)
    assert growing == [("GrowingParts", True)]
    assert len(seen) > 10 and 0 < seen[-2] < 1  # decoded some, not all, before the text's end
    growing.clear()
    _assert_twins(got, load(src))


def test_a_slice_open_from_first_to_last_packet_does_not_hold_the_text_back(tmp_path, growing):
    """A slice's duration is known before it is written (``_pfscan.pair_slices``), so
    a slice around the whole trace, ended by the last packet, holds back none of the
    text the children decode while it grows; the trace is the same."""
    src = require(CORPUS / GROWING_TRACES[0])
    events = enc.read_events(src)
    xs = [e for e in events if e.get("ph") == "X"]
    first = min(xs, key=lambda e: e["ts"])
    end = max(e["ts"] + e["dur"] for e in xs)
    events.append(dict(first, name="whole run", ts=first["ts"] - 1, dur=end - first["ts"] + 2, args={}))
    data, _ = enc.encode(events, clear_every=50)
    out = tmp_path / "t.pftrace"
    out.write_bytes(data)
    twin = tmp_path / "t.json"
    twin.write_text(json.dumps({"traceEvents": events}, default=float))
    got = load(out)
    assert growing == [("GrowingParts", True)]
    growing.clear()
    _assert_twins(got, load(twin))
    assert "whole run" in got.names


def test_a_packet_the_transcoder_refuses_late_ends_its_children(tmp_path, growing):
    """A packet outside the C transcoder's subset at the end of the file: the children
    already decoding its text are killed and reaped, and the generated classes decode
    the whole file, with what the model cannot hold named as usual."""
    src, out = _pftrace(tmp_path, GROWING_TRACES[0])
    tail = pb.Trace()
    _packet(tail).process_stats.processes.add(pid=1)  # not in the subset: refused there
    out.write_bytes(out.read_bytes() + tail.SerializeToString())
    forked: list[list[int]] = []
    real = pf._Growing.close

    def closing(self):
        if self.decoders.parts is not None:
            forked.append([c.pid for c in self.decoders.parts.children])
        real(self)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(pf._Growing, "close", closing)
        got = load(out)
    assert len(forked) == 1 and forked[0] and _reaped(forked[0])
    assert "not kept (the trace model has no place for them): 1 process_stats packets" in [
        w.message for w in got.warnings
    ]
    growing.clear()
    want = load(src)
    for field in ("start_ns", "dur_ns", "lane", "kind", "correlation", "external_id"):
        assert np.array_equal(getattr(got, field), getattr(want, field)), field


def test_children_that_cannot_be_started_leave_the_load_to_the_file_s_own(tmp_path, growing, monkeypatch):
    src, out = _pftrace(tmp_path, GROWING_TRACES[0])

    def refuse(*a, **k):
        raise OSError(5, "simulated: the text cannot be read")

    monkeypatch.setattr(chrome_loader, "start_growing", refuse)
    got = load(out)
    assert growing == [("FileParts", True)]
    growing.clear()
    _assert_twins(got, load(src))


@pytest.mark.parametrize("setting", [None, "2", "3"])
def test_decoders_while_transcoding_are_as_many_as_the_user_set(tmp_path, growing, monkeypatch, setting):
    """The growing text's decoders: ``pf.EXTRA_CHILDREN`` more than the CPUs, but
    ``GAPSCOPE_LOAD_PROCESSES=N`` decoders when it is set (it forked N + 1); the
    trace the same whatever their number."""
    src, out = _pftrace(tmp_path, GROWING_TRACES[0])
    if setting is None:
        monkeypatch.delenv("GAPSCOPE_LOAD_PROCESSES", raising=False)
    else:
        monkeypatch.setenv("GAPSCOPE_LOAD_PROCESSES", setting)
    # as ``cp.processes`` on two CPUs (``growing`` forces three): the setting, else 2
    monkeypatch.setattr(cp, "processes", lambda: int(setting) if setting else 2)
    forked: list[int] = []
    real = cp._fork_children

    def counting(nproc, *a, **k):
        forked.append(nproc)
        return real(nproc, *a, **k)

    monkeypatch.setattr(cp, "_fork_children", counting)
    got = load(out)
    assert growing == [("GrowingParts", True)]
    want = int(setting) if setting else 2 + pf.EXTRA_CHILDREN
    assert forked == [want] and pf.EXTRA_CHILDREN >= 1
    growing.clear()
    _assert_twins(got, load(src))


def test_gzip_and_any_name_are_read_by_content(tmp_path, decoder):
    src, out = _pftrace(tmp_path, "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", clear_every=7)
    gz = tmp_path / "odd-name.bin"
    gz.write_bytes(gzip.compress(out.read_bytes()))
    pbfile = tmp_path / "trace.pb"
    pbfile.write_bytes(out.read_bytes())
    assert sniff(out) == sniff(gz) == sniff(pbfile) == "perfetto"
    want = _diagnosis(load(src))
    assert _diagnosis(load(gz)) == want  # incremental state cleared every 7 packets
    assert _diagnosis(load(pbfile)) == want


# --- a trace built by hand: the values below are computed from it, not from the loader


def _packet(trace, ts=None, seq=1):
    p = trace.packet.add()
    if ts is not None:
        p.timestamp = ts
    p.trusted_packet_sequence_id = seq
    return p


def _hand_trace(*, intern_first: bool = True, clear: bool = True) -> bytes:
    t = pb.Trace()
    d = _packet(t).track_descriptor
    d.uuid, d.process.pid, d.process.process_name = 10, 42, "python3"
    d = _packet(t).track_descriptor
    d.uuid, d.parent_uuid, d.thread.pid, d.thread.tid, d.thread.thread_name = 11, 10, 42, 43, "main"
    d = _packet(t).track_descriptor
    d.uuid, d.name = 20, "GPU 1"
    d = _packet(t).track_descriptor
    d.uuid, d.parent_uuid, d.name = 21, 20, "stream 7"
    # the launch: 1_000_000_123 → 1_000_005_123 ns on the CPU thread, correlation 9
    b = _packet(t, 1_000_000_123)
    if clear:
        b.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    if intern_first:
        b.interned_data.event_names.add(iid=1, name="cudaLaunchKernel")
        b.interned_data.event_categories.add(iid=1, name="cuda_runtime")
        b.interned_data.debug_annotation_names.add(iid=1, name="correlation")
    b.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
    b.track_event.track_uuid = 11
    b.track_event.name_iid = 1
    b.track_event.category_iids.append(1)
    b.track_event.debug_annotations.add(name_iid=1, int_value=9)
    b.track_event.flow_ids.append(9)
    e = _packet(t, 1_000_005_123)
    e.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    e.track_event.type = pb.TrackEvent.TYPE_SLICE_END
    e.track_event.track_uuid = 11
    # the kernel: 1_000_020_000 → 1_000_050_500 ns on stream 7 of GPU 1, names not interned
    k = _packet(t, 1_000_020_000)
    k.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
    k.track_event.track_uuid = 21
    k.track_event.name = "gemm"
    k.track_event.categories.append("kernel")
    k.track_event.debug_annotations.add(name="correlation", int_value=9)
    k.track_event.debug_annotations.add(name="grid", legacy_json_value="[4, 1, 1]")
    k.track_event.terminating_flow_ids.append(9)
    e = _packet(t, 1_000_050_500)
    e.track_event.type = pb.TrackEvent.TYPE_SLICE_END
    e.track_event.track_uuid = 21
    # an instant at 1_000_060_000 on the thread
    i = _packet(t, 1_000_060_000)
    i.track_event.type = pb.TrackEvent.TYPE_INSTANT
    i.track_event.track_uuid = 11
    i.track_event.name = "mark"
    return t.SerializeToString()


def test_hand_built_trace(tmp_path, decoder):
    p = tmp_path / "hand.pftrace"
    p.write_bytes(_hand_trace())
    t = load(p)
    assert [(la.pid, la.tid, la.process_name, la.thread_name, la.is_gpu, la.device, la.stream) for la in t.lanes] == [
        ("42", "43", "python3", "main", False, -1, -1),
        ("1", "7", "GPU 1", "stream 7", True, 1, 7),
    ]
    rows = sorted(zip(t.start_ns.tolist(), t.dur_ns.tolist(), [t.names[i] for i in t.name_id], t.kind.tolist()))
    assert rows == [
        (1_000_000_123, 5_000, "cudaLaunchKernel", int(Kind.LAUNCH)),
        (1_000_020_000, 30_500, "gemm", int(Kind.KERNEL)),
        (1_000_060_000, 0, "mark", int(Kind.INSTANT)),
    ]
    launch = int(np.flatnonzero(t.kind == int(Kind.LAUNCH))[0])
    kernel = int(np.flatnonzero(t.kind == int(Kind.KERNEL))[0])
    assert t.correlation[launch] == t.correlation[kernel] == 9
    assert list(zip(t.flow_src.tolist(), t.flow_dst.tolist())) == [(launch, kernel)]
    assert t.args_of(kernel) == {"correlation": 9, "grid": [4, 1, 1]}
    assert t.warnings == ()


def test_sequence_without_its_interned_data_is_a_named_warning(tmp_path):
    p = tmp_path / "noint.pftrace"
    p.write_bytes(_hand_trace(intern_first=False))
    t = load(p)
    messages = [w.message for w in t.warnings]
    assert any("event names" in m and "never defined" in m and "packet 4" in m for m in messages), messages
    assert any("debug annotation names" in m for m in messages), messages
    assert "<iid 1>" in t.names


def test_incremental_state_clear_forgets_the_interned_names(tmp_path):
    raw = pb.Trace.FromString(_hand_trace())
    raw.packet[6].sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED  # the kernel's packet
    raw.packet[6].track_event.ClearField("name")
    raw.packet[6].track_event.name_iid = 1  # defined before the clear: no longer
    p = tmp_path / "cleared.pftrace"
    p.write_bytes(raw.SerializeToString())
    t = load(p)
    assert "<iid 1>" in t.names and "cudaLaunchKernel" in t.names
    assert any("event names" in w.message for w in t.warnings)


def test_what_the_model_cannot_hold_is_one_warning(tmp_path):
    raw = pb.Trace.FromString(_hand_trace())
    extra = raw.packet.add()
    extra.process_stats.processes.add(pid=42)
    begin = raw.packet.add()  # a slice begun and never ended
    begin.timestamp = 1_000_070_000
    begin.trusted_packet_sequence_id = 1
    begin.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
    begin.track_event.track_uuid = 11
    begin.track_event.name = "open"
    p = tmp_path / "extra.pftrace"
    p.write_bytes(raw.SerializeToString())
    t = load(p)
    lost = [w.message for w in t.warnings if w.message.startswith("not kept")]
    assert lost == [
        "not kept (the trace model has no place for them): 1 process_stats packets, 1 slices begun and never ended"
    ]
    assert "open" not in t.names


def test_unknown_fields_are_skipped(tmp_path):
    data = _hand_trace()
    # field 9999 (varint) appended inside the first packet: protobuf skips what it does not know
    first_len = data[1]
    unknown = b"\xf8\xe1\x04\x05"  # tag (9999 << 3 | 0) as a varint, then the value 5
    patched = b"\x0a" + bytes([first_len + len(unknown)]) + data[2 : 2 + first_len] + unknown + data[2 + first_len :]
    p, q = tmp_path / "unknown.pftrace", tmp_path / "plain.pftrace"
    p.write_bytes(patched)
    q.write_bytes(data)
    a, b = load(p), load(q)
    assert np.array_equal(a.start_ns, b.start_ns) and a.names == b.names


@pytest.mark.parametrize(
    ("cut", "needle"),
    [
        (-3, "is cut off"),  # the last packet loses its end
        (None, "varint"),  # a length of 11 bytes of 0xff
    ],
)
def test_damaged_protobuf_names_packet_and_byte(tmp_path, cut, needle):
    data = _hand_trace()
    if cut is not None:
        data = data[:cut]
        last = _packet_offsets(data)[-1]
        want = f"packet {len(_packet_offsets(data)) - 1} (byte {last:,})"
    else:
        at = _packet_offsets(data)[5]
        data = data[:at] + b"\x0a" + b"\xff" * 11 + data[at + 2 :]
        want = "packet 5 (byte"
    p = tmp_path / "broken.pftrace"
    p.write_bytes(data)
    with pytest.raises(TraceFormatError) as err:
        load(p)
    assert str(err.value).startswith(str(p)) and want in str(err.value) and needle in str(err.value), str(err.value)


def _packet_offsets(data: bytes) -> list[int]:
    """Where each top-level packet record starts (walked by hand: tag 0x0a, varint length)."""
    out, at = [], 0
    while at < len(data):
        out.append(at)
        n, shift, i = 0, 0, at + 1
        while data[i] & 0x80:
            n |= (data[i] & 0x7F) << shift
            shift += 7
            i += 1
        n |= data[i] << shift
        at = i + 1 + n
    return out


def test_missing_extra_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pf, "_extra_installed", lambda: False)
    p = tmp_path / "hand.pftrace"
    p.write_bytes(_hand_trace())
    with pytest.raises(TraceFormatError, match=r"gapscope\[perfetto\]"):
        load(p)


_INT32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def _descriptor(draw):
    d = pb.TrackDescriptor()
    if draw(st.booleans()):
        d.uuid = draw(st.integers(0, 2**64 - 1))
    if draw(st.booleans()):
        d.parent_uuid = draw(st.integers(0, 2**64 - 1))
    name = st.text(max_size=8)
    which = draw(st.sampled_from(["name", "static_name", "atrace_name", None]))
    if which is not None:
        setattr(d, which, draw(name))
    kind = draw(st.sampled_from(["process", "thread", "counter", None]))
    if kind == "process":
        d.process.pid = draw(_INT32)
        if draw(st.booleans()):
            d.process.process_name = draw(name)
        if draw(st.booleans()):
            d.process.legacy_sort_index = draw(_INT32)
        d.process.cmdline.append("x")  # a field not read: skipped
    elif kind == "thread":
        d.thread.pid, d.thread.tid = draw(_INT32), draw(st.integers(-(2**63), 2**63 - 1))
        if draw(st.booleans()):
            d.thread.thread_name = draw(name)
        if draw(st.booleans()):
            d.thread.legacy_sort_index = draw(_INT32)
    elif kind == "counter":
        d.counter.unit_name = "ns"
    if draw(st.booleans()):
        d.sibling_order_rank = draw(_INT32)
    return d.SerializeToString()


def _seen(d) -> tuple:
    """What ``_Decoder`` reads of a descriptor."""
    out = [d.uuid, d.parent_uuid, d.name, d.HasField("name"), d.HasField("counter"), d.HasField("sibling_order_rank")]
    out.append(d.sibling_order_rank)
    for sub, fields in (("process", ("pid", "process_name")), ("thread", ("pid", "tid", "thread_name"))):
        m = getattr(d, sub)
        out += [d.HasField(sub), m.HasField("legacy_sort_index"), m.legacy_sort_index]
        out += [getattr(m, f) for f in fields]
    return tuple(out)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(parts=st.lists(_descriptor(), min_size=1, max_size=2), ts=st.integers(0, 2**63))
def test_track_descriptors_read_from_the_wire_as_the_generated_classes_read_them(parts, ts):
    """Two descriptors' bytes in a row are one descriptor, merged (a message seen twice
    is merged, the last scalar wins), as protobuf reads them."""
    body = b"".join(parts)
    packet = pb.TracePacket(timestamp=ts).SerializeToString() + b"\xe2\x03" + enc_varint(len(body)) + body
    want = pb.TracePacket.FromString(packet).track_descriptor
    got = pf._track_descriptor(packet, 0, len(packet))
    assert got is not None and _seen(got) == _seen(want)


def enc_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_the_c_path_never_imports_the_generated_classes(tmp_path):
    if pf._pfscan is None:
        pytest.skip("the C transcoder was not built")
    import subprocess
    import sys

    p = tmp_path / "hand.pftrace"
    p.write_bytes(_hand_trace())
    code = (
        "import sys; from gapscope.parsers import load; t = load(sys.argv[1]); "
        "print(t.source.format, 'perfetto.protos.perfetto.trace.perfetto_trace_pb2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["perfetto", "False"]


def test_an_odd_track_descriptor_is_left_to_the_generated_classes(tmp_path):
    """A name that is not UTF-8, or two descriptors in one packet: the wire reader
    gives up (None) and the generated classes decode the file."""
    d = pb.TrackDescriptor(uuid=5).SerializeToString() + b"\x12\x02\xff\xfe"  # name: 2 bytes, not UTF-8
    packet = b"\xe2\x03" + enc_varint(len(d)) + d
    assert pf._track_descriptor(packet, 0, len(packet)) is None
    one = pb.TrackDescriptor(uuid=5).SerializeToString()
    twice = (b"\xe2\x03" + enc_varint(len(one)) + one) * 2
    assert pf._track_descriptor(twice, 0, len(twice)) is None


def test_a_system_trace_without_track_events_is_refused(tmp_path):
    t = pb.Trace()
    _packet(t).process_stats.processes.add(pid=1)
    _packet(t).process_stats.processes.add(pid=2)
    p = tmp_path / "sys.pftrace"
    p.write_bytes(t.SerializeToString())
    with pytest.raises(TraceFormatError, match="no track events"):
        load(p)


# --- the commands


def _report_json(path) -> dict:
    out = io.StringIO()
    assert report_run(["--json", str(path)], stdout=out) == 0
    doc = json.loads(out.getvalue())
    doc.pop("source")  # path, format and the JSON header (which a .pftrace has no place for)
    doc["diagnosis"].pop("source")
    return doc


def test_report_json_equal_to_the_json_original(tmp_path, decoder):
    src, out = _pftrace(tmp_path, "tracelens/mi210/gpu_only_trace.json.gz")
    a, b = _report_json(out), _report_json(src)
    assert a == b


def test_cli_report_diff_and_rank_folder(tmp_path):
    from tests.test_cli import gapscope

    _, a = _pftrace(tmp_path, "tracelens/sglang_decode/sglang_Qwen3-8B_decode.json.gz", name="rank0.pftrace")
    _, b = _pftrace(tmp_path, "tracelens/sglang_decode/sglang_Qwen3-8B_decode.json.gz", 9, name="rank1.pftrace")
    proc = gapscope("report", str(a))
    assert proc.returncode == 0 and "Format  perfetto" in proc.stdout, proc.stderr
    proc = gapscope("diff", str(a), str(b))
    assert proc.returncode == 0 and "no change" in proc.stdout, proc.stdout + proc.stderr
    proc = gapscope("report", "--json", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]


# --- fuzz: seeded mutations of a real-shaped file (bounded examples, small input)


@pytest.fixture(scope="module")
def small_pftrace(tmp_path_factory):
    path = require(CORPUS / "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    return enc.encode(enc.read_events(path), clear_every=20)[0]


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 4), mode=st.sampled_from(["flip", "cut", "insert", "mix"]))
def test_mutated_pftrace_loads_or_errors(tmp_path_factory, small_pftrace, seed, edits, mode):
    rng = random.Random(seed)
    data = bytearray(small_pftrace)
    for _ in range(edits):
        m = mode if mode != "mix" else rng.choice(["flip", "cut", "insert"])
        at = rng.randrange(len(data))
        if m == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif m == "cut":
            del data[at:]
            if len(data) < 8:
                data = bytearray(small_pftrace[:8])
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
    path = tmp_path_factory.mktemp("pf") / "m.pftrace"
    path.write_bytes(bytes(data))
    try:
        trace = load(path)
    except TraceFormatError as exc:
        assert str(exc).startswith(str(path)), str(exc)
        return
    out = io.StringIO()
    assert report_run(["--json", str(path)], stdout=out) in (0, 2)
    assert trace.start_ns.dtype == np.int64


def test_json_named_pftrace_is_read_as_json(tmp_path):
    # torch 2.13's export_chrome_trace("run.pftrace") on a CPU-only machine writes Chrome
    # JSON whatever the suffix (its Perfetto writer is the CUPTI monitor's): the content decides
    src = require(CORPUS / "kineto/after_fix_trace.json")
    p = tmp_path / "run.pftrace"
    p.write_bytes(src.read_bytes())
    assert sniff(p) == "chrome"
    t = load(p)
    assert t.source.format == "kineto" and _diagnosis(t) == _diagnosis(load(src))


def test_viewer_opens_a_pftrace(tmp_path):
    import asyncio

    from gapscope.tui.factory import make_app
    from tests.test_tui_app import wait_ready

    p = tmp_path / "hand.pftrace"
    p.write_bytes(_hand_trace())

    async def run():
        app = make_app(str(p))  # the default loader: gapscope.parsers.load, by content
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("n")  # next gap: the one between the launch's end and the kernel
            return screen.trace, screen.header_text(120).plain

    trace, header = asyncio.run(run())
    assert trace.source.format == "perfetto" and "gemm" in trace.names
    assert "hand.pftrace" in header


def test_a_first_packet_longer_than_the_sniffed_head_is_recognised(tmp_path):
    raw = pb.Trace.FromString(_hand_trace())
    first = pb.TracePacket()
    first.trusted_packet_sequence_id = 1
    first.interned_data.event_names.add(iid=99, name="x" * 5000)  # a first packet of 5 KB
    both = pb.Trace()
    both.packet.append(first)
    both.packet.extend(raw.packet)
    data = both.SerializeToString()
    for cut in range(4090, 4100):  # wherever the 4 KiB head ends inside it
        assert pf.looks_like_perfetto(data[:cut]), cut
    p = tmp_path / "big-first.pftrace"
    p.write_bytes(data)
    assert sniff(p) == "perfetto" and "gemm" in load(p).names


def test_a_packet_on_another_clock_is_moved_by_the_clock_snapshot(tmp_path):
    raw = pb.Trace.FromString(_hand_trace())
    snap = pb.TracePacket()
    snap.clock_snapshot.clocks.add(clock_id=6, timestamp=5_000_000_000)  # BOOTTIME, the trace clock
    snap.clock_snapshot.clocks.add(clock_id=3, timestamp=4_000_000_000)  # MONOTONIC: 1 s behind
    instant = raw.packet[-1]
    instant.timestamp = 60_000  # 60 µs on MONOTONIC ...
    instant.timestamp_clock_id = 3
    both = pb.Trace()
    both.packet.append(snap)
    both.packet.extend(raw.packet)
    p = tmp_path / "clocks.pftrace"
    p.write_bytes(both.SerializeToString())
    t = load(p)
    mark = t.names.index("mark")
    assert t.start_ns[t.name_id == mark].tolist() == [60_000 + 1_000_000_000]  # ... is 1 s later on BOOTTIME
    assert t.warnings == ()
