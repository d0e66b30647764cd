"""Reads of the commit side are repeated on a transient store failure (pure logic; the store is faked)."""

from __future__ import annotations

import pytest

from mvsink.core import storage
from mvsink.exceptions import StoreError

FLUSH = "AWS Error INTERNAL_FAILURE during GetObject operation: Failed to flush response stream (eof: 0, bad: 1)"
WHERE = "s3://lake/views/v/_mv_staging/m.json"


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    monkeypatch.setattr(storage, "filesystem", lambda where: (object(), "lake/views/v/_mv_staging/m.json"))
    monkeypatch.setattr("time.sleep", lambda s: None)
    return []


def _failing(attempts: list[int], errors: list[OSError]):
    def read(fs: object, path: str) -> bytes:
        attempts.append(1)
        if errors:
            raise errors.pop(0)
        return b"{}"

    return read


def test_a_dropped_response_stream_is_read_again(monkeypatch: pytest.MonkeyPatch, attempts: list[int]) -> None:
    monkeypatch.setattr(storage, "_read_once", _failing(attempts, [OSError(FLUSH), OSError(FLUSH)]))
    assert storage.read_bytes(WHERE) == b"{}"
    assert len(attempts) == 3


def test_a_lasting_transient_failure_is_raised_after_the_last_attempt(
    monkeypatch: pytest.MonkeyPatch, attempts: list[int]
) -> None:
    monkeypatch.setattr(storage, "_read_once", _failing(attempts, [OSError(FLUSH)] * 10))
    with pytest.raises(StoreError, match="reading failed: OSError: AWS Error INTERNAL_FAILURE"):
        storage.read_bytes(WHERE)
    assert len(attempts) == storage.READ_ATTEMPTS


def test_other_failures_are_not_repeated(monkeypatch: pytest.MonkeyPatch, attempts: list[int]) -> None:
    monkeypatch.setattr(storage, "_read_once", _failing(attempts, [OSError("AWS Error UNKNOWN: checksum mismatch")]))
    with pytest.raises(StoreError, match="checksum mismatch"):
        storage.read_bytes(WHERE)
    assert len(attempts) == 1


def test_a_missing_object_is_none_at_once(monkeypatch: pytest.MonkeyPatch, attempts: list[int]) -> None:
    monkeypatch.setattr(storage, "_read_once", _failing(attempts, [FileNotFoundError("no such key")]))
    monkeypatch.setattr(storage, "check_container", lambda where: None)
    assert storage.read_bytes(WHERE) is None
    assert len(attempts) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [(FLUSH, True), ("Connection reset by peer", True), ("HTTP 503 SlowDown", True), ("Access Denied", False)],
)
def test_transient_words(text: str, expected: bool) -> None:
    assert storage.transient(OSError(text)) is expected
