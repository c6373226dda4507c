"""Every JSONL import leaves a row with its counts, also when it stops half way."""

from __future__ import annotations

import pytest

from anima.core.jsonl import LineError, jsonl_import
from anima.core.models import ImportRun


def parse(number: int, obj: dict) -> dict:
    if "text" not in obj:
        raise LineError("line.text is required")
    return obj


def test_an_import_records_its_lines_stored_and_refused():
    stored: list[dict] = []

    def store(parsed: list[dict], report) -> None:
        stored.extend(parsed)
        report.imported += len(parsed)

    lines = ['{"text": "a"}', "", "[1]", '{"other": 1}', '{"text": "b"}']
    report = jsonl_import(kind="things", lines=lines, parse=parse, store=store, batch_lines=2)
    assert [obj["text"] for obj in stored] == ["a", "b"]
    run = ImportRun.objects.get()
    assert (run.kind, run.lines, run.imported, run.bad) == ("things", 5, 2, 2)
    assert (report.lines, report.imported, len(report.errors)) == (5, 2, 2)
    assert run.started_at <= run.finished_at


def test_an_import_stopped_by_an_error_still_records_what_it_did():
    def store(parsed: list[dict], report) -> None:
        if any(obj["text"] == "boom" for obj in parsed):
            raise OSError("disk full")
        report.imported += len(parsed)

    lines = ['{"text": "a"}', '{"text": "boom"}', '{"text": "c"}']
    with pytest.raises(OSError, match="disk full"):
        jsonl_import(kind="things", lines=lines, parse=parse, store=store, batch_lines=1)
    run = ImportRun.objects.get()
    assert (run.lines, run.imported, run.bad) == (2, 1, 0)
