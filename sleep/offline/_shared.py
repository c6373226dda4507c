"""Text helpers shared by the offline answers of several sleep stages."""

from __future__ import annotations

from anima.core.text import normalized


def bigrams(text: str) -> set[str]:
    text = normalized(text)
    return {text[i : i + 2] for i in range(len(text) - 1)}
