"""The tokens a call is counted for: the server's usage, never less than a local estimate.

A server may report no usage, zero, a negative or an impossible figure (a broken proxy, a
hostile model): a budget that trusted it would let calls through for free, or run backwards.
So each side of a call (prompt, completion) counts the larger of what the server reports and
what its text must have cost, and the estimate alone when the report is no count at all. A
report above the estimate is believed (a server may add a system prompt or hidden reasoning of
its own), up to what no single call can reach.
"""

from __future__ import annotations

import math
import re

# Scripts a tokenizer spends about one token a character on: CJK ideographs and punctuation, kana,
# hangul and full-width forms. Everything else is about four characters a token.
_WIDE = re.compile("[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
# More tokens than the largest context windows hold (10M): a report past it is no count of one call.
MAX_CALL_TOKENS = 2**24


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text``: one a CJK (kana, hangul) character, one per four other characters."""
    wide = len(_WIDE.findall(text))
    return wide + math.ceil((len(text) - wide) / 4)


def tokens_counted(*, reported: int | None, text: str) -> int:
    """The tokens of ``text`` to count: the larger of ``reported`` and the estimate, the estimate alone when
    ``reported`` is missing, negative or past MAX_CALL_TOKENS."""
    estimated = estimate_tokens(text)
    if reported is None or not 0 <= reported <= MAX_CALL_TOKENS:
        return estimated
    return max(reported, estimated)
