"""Recall quality on public benchmark formats (``bench_recall``): MADial-Bench and LoCoMo, each loaded into the
database the caller provides (the command uses a throwaway one) and queried through the same selectors every
recall surface uses, beside BM25 over the same rows.

``madial`` (memories, zh and en) and ``locomo`` (two-person conversations, en) each return a dict of figures;
``_common`` holds what both measure: R@k, BM25, passive recall and the small-talk lines of
``bench/recall/smalltalk.jsonl``.
"""
