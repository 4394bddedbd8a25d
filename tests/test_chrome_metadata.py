"""``M`` events into ``Metadata`` (``gapscope.parsers.chrome.phases.collect_metadata``):
leaving out the events that rewrite a slot's value (``_changing_writes``) gives the
very metadata and warnings of visiting every event."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.parsers.chrome import phases
from gapscope.parsers.chrome.schema import EVENT_CLASS, KinetoArgs
from gapscope.parsers.lanes import Metadata, id_text

M = EVENT_CLASS["M"]
NAMES = ["process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels", "other"]


def _collect(events: list, dedup: bool) -> tuple[list, list]:
    """(every field of the ``Metadata``, dicts as item lists: their order counts too;
    the warnings) of ``events``; ``dedup=False``: every event visited."""
    meta: Metadata = Metadata()
    warns: list = []
    real = phases._changing_writes
    if not dedup:
        phases._changing_writes = lambda picked, idt: None  # type: ignore[assignment]
    try:
        phases.collect_metadata(events, list(range(len(events))), meta, lambda *w: warns.append(w))
    finally:
        phases._changing_writes = real
    fields = {f.name: getattr(meta, f.name) for f in dataclasses.fields(meta)}
    return [(k, list(v.items()) if isinstance(v, dict) else v) for k, v in fields.items()], warns


_ids = st.sampled_from([0, 1, 1.0, "1", 2, "a", None, 1.5])
_texts = st.sampled_from(["A", "B", "", None, "7"])
_numbers = st.sampled_from(["A", None, 1, 1.0, 7, 7.5])


@st.composite
def _events(draw) -> list:
    """300-600 events drawn from up to 12 distinct ones; names and labels are texts in
    half of the lists (the skipping runs), numbers too in the other half (it must not)."""
    names = draw(st.sampled_from([_texts, _numbers]))
    kinds = draw(
        st.lists(st.tuples(st.sampled_from(NAMES), _ids, _ids, names, _numbers, names), min_size=1, max_size=12)
    )
    order = draw(st.lists(st.integers(0, len(kinds) - 1), min_size=300, max_size=600))
    if draw(st.booleans()):  # one object per distinct event, as the scanner hands them out
        made = [
            M(name=n, pid=p, tid=t, args=KinetoArgs(name=a, sort_index=s, labels=lab)) for n, p, t, a, s, lab in kinds
        ]
        return [made[i] for i in order]
    return [
        M(name=n, pid=p, tid=t, args=KinetoArgs(name=a, sort_index=s, labels=lab))
        for n, p, t, a, s, lab in (kinds[i] for i in order)
    ]


@settings(max_examples=150, deadline=None)
@given(events=_events())
def test_leaving_out_rewrites_changes_nothing(events) -> None:
    assert _collect(events, True) == _collect(events, False)


def test_a_repeated_conflict_is_still_counted() -> None:
    """A B A, A B A, ... for one pid: the first A sets the name; then each block's B
    and A change it (2 per block, 200 in all), its leading A is a rewrite."""
    events = [M(name="process_name", pid=1, tid=0, args=KinetoArgs(name=v)) for v in ["A", "B", "A"] * 100]
    fields, warns = _collect(events, True)
    assert dict(fields)["process_name"] == [("1", "A")]
    assert len(warns) == 1
    assert "(200 conflicting names in all)" in warns[0][2]
    assert warns[0][0] == 1  # the first conflict: the second event


def test_repeats_are_left_out() -> None:
    """300 copies of three events: three visits."""
    events = [
        M(name=n, pid=9, tid=0, args=KinetoArgs(name="MTIA 9", sort_index=5, labels="MTIA 9"))
        for n in ("process_name", "process_labels", "process_sort_index")
    ] * 100
    assert phases._changing_writes(events, id_text).tolist() == [0, 1, 2]


@pytest.mark.parametrize("number", [1, 1.0])
def test_a_number_as_a_name_visits_every_event(number) -> None:
    """``1`` and ``1.0`` are one value to Python but two process names."""
    events = [M(name="process_name", pid=1, tid=0, args=KinetoArgs(name=v)) for v in ([number, "x"] * 200)]
    assert phases._changing_writes(events, id_text) is None


@pytest.mark.parametrize("direction", [[1, 2], {"a": 1}])
def test_fields_that_cannot_be_hashed_visit_every_event(direction) -> None:
    """300 thread names whose args hold a JSON list or object (any JSON value may stand
    in ``direction``): no dedup, no error, and the last name wins."""
    events = [
        M(name="thread_name", pid=1, tid=2, args=KinetoArgs(name=v, direction=direction)) for v in ["A", "B"] * 150
    ]
    assert phases._changing_writes(events, id_text) is None
    fields, warns = _collect(events, True)
    assert dict(fields)["thread_name"] == [(("1", "2"), "B")] and warns == []
