"""Which mind ran: the provider, model and structured-output dialect of the calls a job made, or of the next one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Sum

from anima.core.llm.dialects import AUTO, dialect_known
from anima.core.models import AutoLlmRun


@dataclass(frozen=True)
class Mind:
    provider: str
    model: str
    dialect: str
    calls: int = 0
    tokens: int = 0

    def label(self) -> str:
        if self.provider == "offline":
            return f"offline provider ({self.model}: deterministic extractive handlers, no model)"
        dialect = self.dialect or "unknown"
        return f"{self.provider} server, model {self.model}, structured output {dialect}"


def mind_configured() -> Mind:
    """The mind the next call will use, from the settings (``auto`` shows what a probe found, without probing)."""
    if settings.ANIMA_LLM_PROVIDER != "openai":
        return Mind(provider="offline", model="offline-extractive", dialect="none")
    dialect = settings.ANIMA_LLM_STRUCTURED
    if dialect == AUTO:
        found = dialect_known(base_url=settings.ANIMA_LLM_BASE_URL, model=settings.ANIMA_LLM_MODEL)
        dialect = f"auto: {found}" if found else "auto (probed on the first call)"
    return Mind(provider="openai", model=settings.ANIMA_LLM_MODEL, dialect=dialect)


def minds_of_runs(*, run_keys: Iterable[str]) -> dict[str, list[Mind]]:
    """Each run key's minds as its audit rows record them, the most used first."""
    minds: dict[str, list[Mind]] = {}
    rows = (
        AutoLlmRun.objects.filter(run_key__in=list(run_keys))
        .values("run_key", "provider", "model", "dialect")
        .annotate(calls=Count("id"), tokens=Sum("total_tokens"))
        .order_by("run_key", "-calls", "provider", "model", "dialect")
    )
    for row in rows:
        minds.setdefault(row["run_key"], []).append(
            Mind(row["provider"], row["model"], row["dialect"], row["calls"], row["tokens"] or 0)
        )
    return minds


def minds_since(*, after_id: int) -> list[Mind]:
    """The minds of every call audited after the row ``after_id``, the most used first."""
    rows = (
        AutoLlmRun.objects.filter(pk__gt=after_id)
        .values("provider", "model", "dialect")
        .annotate(calls=Count("id"), tokens=Sum("total_tokens"))
        .order_by("-calls", "provider", "model", "dialect")
    )
    return [Mind(row["provider"], row["model"], row["dialect"], row["calls"], row["tokens"] or 0) for row in rows]
