"""Temporal summaries over the API (read-only), filtered by window and period."""

from __future__ import annotations

import datetime as dt

from anima.api.testing import api_client, operator_client
from tests.factories import TemporalSummaryFactory


def test_summaries_filter_by_window_and_period():
    TemporalSummaryFactory(source_day=dt.date(2026, 10, 1), body={"window": "day", "period_start": "2026-10-01"})
    TemporalSummaryFactory(source_day=dt.date(2026, 10, 2), body={"window": "day", "period_start": "2026-10-02"})
    TemporalSummaryFactory(source_day=dt.date(2026, 10, 1), body={"window": "month", "period_start": "2026-10-01"})
    client = operator_client()

    days = client.get("/api/temporal-summaries/", {"window": "day", "since": "2026-10-02"}).json()
    months = client.get("/api/temporal-summaries/", {"window": "month"}).json()
    bad = client.get("/api/temporal-summaries/", {"window": "week"})

    assert [(s["window"], s["period_start"]) for s in days["results"]] == [("day", "2026-10-02")]
    assert [s["window"] for s in months["results"]] == ["month"]
    assert bad.status_code == 400 and "window" in bad.json()


def test_summaries_cannot_be_written_through_the_api():
    summary = TemporalSummaryFactory()

    response = api_client(staff=True).patch(f"/api/temporal-summaries/{summary.pk}/", {"content": "x"}, format="json")

    assert response.status_code == 405
