"""LOG_FORMAT=json: one JSON object a line, carrying the ids of the work being logged."""

from __future__ import annotations

import logging

from anima.core.logs import log_context


def test_each_record_is_one_json_object_with_the_context_ids(json_logs):
    log = logging.getLogger("anima.test")
    log.info("before")
    with log_context(pipeline_run=42, run_key="sleep-run:42"):
        log.info("outer %s", "work")
        with log_context(step="light-sleep", run_key=""):  # an empty id keeps the outer one
            log.warning("inner", extra={"conversation_id": 7})
        log.info("after inner")
    log.info("outside")
    records = json_logs()
    assert [r["message"] for r in records] == ["before", "outer work", "inner", "after inner", "outside"]
    assert "pipeline_run" not in records[0] and "pipeline_run" not in records[4]
    assert records[1]["pipeline_run"] == 42 and records[1]["run_key"] == "sleep-run:42" and "step" not in records[1]
    assert records[2] | {"ts": None} == {
        "ts": None,
        "level": "WARNING",
        "logger": "anima.test",
        "message": "inner",
        "pipeline_run": 42,
        "run_key": "sleep-run:42",
        "step": "light-sleep",
        "conversation_id": 7,
    }
    assert "step" not in records[3]


def test_an_exception_and_non_ascii_text_stay_inside_one_line(json_logs):
    log = logging.getLogger("anima.test")
    try:
        raise ValueError("坏了\nsecond line")
    except ValueError:
        log.exception("处理失败")
    (record,) = json_logs()
    assert record["message"] == "处理失败"
    assert record["exc"].startswith("Traceback") and "ValueError: 坏了" in record["exc"]
