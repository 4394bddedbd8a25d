"""The msgspec error messages the tolerant decoder reads, pinned.

``gapscope.parsers`` recovers from damaged traces by parsing msgspec's exception text:
the byte offset of a syntax error, the ``$[i]`` index of the element that failed in a
list decode, and the "Expected `...`, got `...` - at `$.path`" form of a validation
error; and it catches DecodeError as a ValueError. msgspec documents none of these as stable, so ``pyproject.toml`` caps it below
its next major and this file triggers each message through msgspec directly and reads
it with the parsers' own patterns. If an upgrade breaks one, the decoder's recovery
degrades silently (events dropped, offsets wrong) rather than failing loudly: this test
is where it fails.
"""

from __future__ import annotations

import re

import msgspec
import pytest

from gapscope.parsers.chrome.recover import _INDEX_RE, _VALIDATION, plain_validation
from gapscope.parsers.json.resync import _BYTE

# Written inline in parsers/chrome/recover.py (no module constant to import): the byte
# offset in _failed_index() and the trailing-text offset in the document-tail check.
_FAILED_BYTE = re.compile(r"byte (\d+)")
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


class _Event(msgspec.Struct):
    pid: int | float | str | None = None
    ts: float = 0.0


def _message(exc_type: type[Exception], decode, data: bytes) -> str:
    with pytest.raises(exc_type) as info:
        decode(data)
    return str(info.value)


@pytest.mark.parametrize(
    "data, offending",
    [
        (b'{"a": 1,, }', 8),  # the second comma: "object keys must be strings"
        (b'[{"pid":1},{"pid":2 "x"}]', 20),  # the quote of "x": "expected ',' or '}'"
    ],
)
def test_syntax_error_names_the_offending_byte(data, offending):
    """resync.error_offset and recover._failed_index: ``(byte N)``, N the 0-based offset
    of the first byte that cannot be read."""
    msg = _message(msgspec.DecodeError, msgspec.json.decode, data)
    m = _BYTE.search(msg)
    assert m is not None, msg
    assert _FAILED_BYTE.search(msg).group(1) == m.group(1)
    assert int(m.group(1)) == offending, msg


def test_truncated_input_names_no_byte():
    """The fallback both readers take: no offset in a truncation message."""
    msg = _message(msgspec.DecodeError, msgspec.json.decode, b'{"traceEvents": [1, 2')
    assert _BYTE.search(msg) is None and _FAILED_BYTE.search(msg) is None, msg


@pytest.mark.parametrize("tail", [b" x", b"{}", b'\n{"traceEvents":[]}'])
def test_trailing_text_names_the_byte_after_its_first(tail):
    """The document-tail check in recover.py: ``trailing characters (byte N)`` with N one
    past the first byte after the document (the check subtracts that one)."""
    data = b'{"traceEvents":[]}' + tail
    msg = _message(msgspec.DecodeError, msgspec.json.decode, data)
    m = _TRAILING.search(msg)
    assert m is not None, msg
    first = len(b'{"traceEvents":[]}') + len(tail) - len(tail.lstrip())
    assert int(m.group(1)) == first + 1, msg


def test_list_validation_error_names_the_element_and_field():
    """recover._failed_index reads ``$[i]``; plain_validation reads the whole message."""
    decoder = msgspec.json.Decoder(list[_Event])
    msg = _message(msgspec.ValidationError, decoder.decode, b'[{"pid":1},{"pid":2},{"pid":{}}]')
    assert msg == "Expected `int | float | str | null`, got `object` - at `$[2].pid`"
    assert _INDEX_RE.search(msg).group(1) == "2"
    m = _VALIDATION.match(msg)
    assert m is not None and m.groups() == ("int | float | str | null", "object", "[2].pid")


@pytest.mark.parametrize(
    "data, plain",
    [
        (b'{"pid": {}}', "field pid: expected a number, a string or null, got an object"),
        (b'{"ts": "x"}', "field ts: expected a number, got a string"),
        (b'{"ts": [1]}', "field ts: expected a number, got an array"),
    ],
)
def test_validation_error_in_the_users_words(data, plain):
    msg = _message(msgspec.ValidationError, msgspec.json.Decoder(_Event).decode, data)
    assert _VALIDATION.match(msg) is not None, msg
    assert plain_validation(msg) == plain


def test_a_message_outside_the_form_is_kept_verbatim():
    """'Number out of range' has no Expected/got part: shown as msgspec wrote it."""
    msg = _message(msgspec.ValidationError, msgspec.json.Decoder(_Event).decode, b'{"pid": 1e999}')
    assert _VALIDATION.match(msg) is None
    assert plain_validation(msg) == msg


def test_decode_errors_are_value_errors():
    """parsers/detect.py catches ``ValueError`` around ``msgspec.json.decode`` (the
    JSON-scalar check), which holds from msgspec 0.21; before, a DecodeError escaped it."""
    assert issubclass(msgspec.DecodeError, ValueError)
    assert issubclass(msgspec.ValidationError, msgspec.DecodeError)


@pytest.mark.parametrize("literal", [b"1e999", b"-1e400", b"9" * 400 + b".0"])
def test_no_json_number_decodes_to_a_non_finite_float(literal):
    """The parts of a large text travel between processes as JSON when ``ts`` is kept
    as text (``gapscope.parsers.chrome.parallel.transfer``), where a non-finite float
    would become null: none can be decoded, since a number beyond float range is an
    error, not infinity (and JSON has no NaN or Infinity)."""
    from gapscope.parsers.chrome.schema import EVENT_LIST_RAW_TS

    for typ in (list, EVENT_LIST_RAW_TS):
        text = (
            b'[{"ph": "M", "name": "n", "ts": 1, "pid": ' + literal + b"}]"
            if typ is not list
            else b"[" + literal + b"]"
        )
        with pytest.raises(msgspec.ValidationError, match="Number out of range"):
            msgspec.json.decode(text, type=typ)
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(b"[NaN]")
