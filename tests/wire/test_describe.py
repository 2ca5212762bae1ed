"""docs/protocol.md carries the reference generated from the message types, exactly."""

from __future__ import annotations

from pathlib import Path

from eventcloud.errors import ErrorCode
from eventcloud.wire.describe import BEGIN, END, reference
from eventcloud.wire.ops import Op

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_the_protocol_document_is_true_to_the_code():
    text = DOC.read_text()
    assert BEGIN in text and END in text, "docs/protocol.md lost its generated reference"
    embedded = text[text.index(BEGIN): text.index(END) + len(END)]
    assert embedded == reference(), "regenerate it: python -m eventcloud.wire.describe --update docs/protocol.md"


def test_the_reference_names_every_operation_and_error_code():
    text = reference()
    for op in Op:
        assert f"| `{op.value}` |" in text
    for code in ErrorCode:
        assert f"| `{code.value}` |" in text
