"""What deep sleep's four rounds ask the model, and the JSON each answer must be (``sleep.steps.deep``)."""

from __future__ import annotations

from anima.core.llm.schema import schema_array, schema_enum, schema_integer, schema_object, schema_string
from anima.core.models import MemoryType

MEMORY_TYPES = list(MemoryType.values)

_REASON = schema_string(max_length=300)
# Bounds on what one round may change in one batch: a batch holds at most deep_sleep_batch_bytes of memory lines
# (~100 memories); a round that changes more than this is rewriting the store, not consolidating it.
MAX_CHANGES = 30
MAX_PARTS = 8
_COMMON = "Each memory is one compact JSON line. `changes` is the authoritative log of what earlier rounds changed."

CONTRADICTION_INSTRUCTIONS = (
    "Round 1, contradiction detection. All memories in `group` are about the same person and subject. Two "
    "memories contradict when they are mutually exclusive and the difference cannot be explained by change over "
    "time (「女儿属虎」 vs 「女儿属羊」). Memories that can coexist (「喜欢苹果」 vs 「喜欢樱桃」) are not "
    "contradictions. A later statement of change (「喜欢 Python」 → 「现在更喜欢 TypeScript」) is a change: "
    "expire the older one with kind 'change'. For a contradiction expire the less trustworthy (usually older) one "
    f"with kind 'contradiction'. Only ids from `group` may appear. {_COMMON} "
    'Answer JSON: {"expire": [{"id", "superseded_by", "kind", "reason"}]}.'
)
CONTRADICTION_SCHEMA = schema_object(
    {
        "expire": schema_array(
            schema_object(
                {
                    "id": schema_integer(),
                    "superseded_by": schema_integer(nullable=True),
                    "kind": schema_enum(["contradiction", "change"]),
                    "reason": _REASON,
                },
                required=["id", "kind", "reason"],
            ),
            max_items=MAX_CHANGES,
        )
    },
    required=["expire"],
)
SPLIT_INSTRUCTIONS = (
    "Round 2, split. For each memory in `candidate_ids` that holds several independent facts, split it into "
    "self-contained single-fact memories (each naming its subject, same language as the original). Leave "
    f"single-fact memories and step-by-step procedures alone. {_COMMON} "
    'Answer JSON: {"splits": [{"id", "parts": [{"memory_type", "content"}]}]}.'
)
_PART = schema_object(
    {"memory_type": schema_enum(MEMORY_TYPES), "content": schema_string(min_length=1, max_length=600)},
    required=["memory_type", "content"],
)
SPLIT_SCHEMA = schema_object(
    {
        "splits": schema_array(
            schema_object(
                {"id": schema_integer(), "parts": schema_array(_PART, max_items=MAX_PARTS)}, required=["id", "parts"]
            ),
            max_items=MAX_CHANGES,
        )
    },
    required=["splits"],
)
MERGE_INSTRUCTIONS = (
    "Round 3, dedupe-merge. Find memories about the same person that say the same thing (duplicates or "
    "near-duplicates) and merge each set of two or more into one memory that keeps every detail, in the language "
    "of the sources. `candidates` lists groups of ids whose embeddings are very close: check those first, but "
    f"merge only what says the same thing. Never merge memories of different people. {_COMMON} "
    'Answer JSON: {"merges": [{"ids": [id, id, ...], "memory_type", "content"}]}.'
)
MERGE_SCHEMA = schema_object(
    {
        "merges": schema_array(
            schema_object(
                {
                    "ids": schema_array(schema_integer(), max_items=MAX_PARTS),
                    "memory_type": schema_enum(MEMORY_TYPES),
                    "content": schema_string(min_length=1, max_length=1000),
                },
                required=["ids", "memory_type", "content"],
            ),
            max_items=MAX_CHANGES,
        )
    },
    required=["merges"],
)
PINS_INSTRUCTIONS = (
    "Round 4, pin review. Pinned memories always ride in the system prompt (at most 40). Unpin ones that are "
    "expired, outdated or trivial; pin an active memory only when it is essential in every conversation (safety, "
    f"identity). {_COMMON} "
    'Answer JSON: {"unpin": [{"id", "reason"}], "pin": [{"id", "reason"}]}.'
)
# Pinned memories are at most 40, so no review unpins more.
_ID_REASONS = schema_array(
    schema_object({"id": schema_integer(), "reason": _REASON}, required=["id", "reason"]), max_items=40
)
PINS_SCHEMA = schema_object({"unpin": _ID_REASONS, "pin": _ID_REASONS}, required=["unpin", "pin"])
