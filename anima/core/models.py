"""Core models: the single citable id space (``entities``), the LLM audit log and the import log."""

from __future__ import annotations

from collections.abc import Sequence

import pgtrigger
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import migrations, models
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Left
from django.utils import timezone

from anima.core.segmentation import segment_text

# The transaction-local setting naming the open forget tombstone (see anima.core.redaction).
FORGET_SETTING = "anima.forget_tombstone"

# The ``english`` config stems English words and leaves jieba's CJK tokens as they are.
FTS_CONFIG = "english"


def search_vector_of(column: str) -> SearchVector:
    return SearchVector(column, config=FTS_CONFIG)


# The trigram branch of recall compares a query with the first TRIGRAM_PREFIX_CHARS characters of a row's
# segmented text, and its index holds exactly that prefix. word_similarity costs grow with the square of
# a repetitive text's length (1.2 ms at 1,000 characters, 82 ms at 10 KB, 5 s at 80 KB, 32 s at 160 KB:
# bench/long_rows.py); typos and partial words are what the branch is for, and full-text search still
# covers every word of a long row.
TRIGRAM_PREFIX_CHARS = 2000


# kB (PostgreSQL's least): see search_index.
SEARCH_INDEX_PENDING_LIST_KB = 64


def search_index(
    *expressions, name: str, fields: Sequence[str] = (), pending_list_kb: int = SEARCH_INDEX_PENDING_LIST_KB
) -> GinIndex:
    """A GIN index recall searches, whose list of entries waiting to be merged stays short.

    A GIN index queues new rows' entries in a pending list, and every search reads the whole list until an insert
    past ``gin_pending_list_limit`` or a vacuum merges it. At PostgreSQL's default of 4 MB, after 3,000 messages and
    1,500 memories, a four-source recall statement took 9-17 ms to run, 3-3.8 ms with the lists merged (``EXPLAIN
    ANALYZE``). Turning the list off (``fastupdate``) halved ``import_conversations``' throughput (4,100-4,300 →
    2,000 messages/s, ``bench/import_throughput.py``); at 64 kB, merged often and in batches, imports ran at
    4,200-4,700 messages/s and a search reads at most 64 kB more per index.
    """
    return GinIndex(*expressions, fields=list(fields), name=name, gin_pending_list_limit=pending_list_kb)


def search_indexes_pending_list_set(
    *, kb: int, fts: Sequence[tuple[str, str, str]], trigram: Sequence[tuple[str, str]], prefix_chars: int
) -> migrations.SeparateDatabaseAndState:
    """A migration's operation giving search indexes a pending list of ``kb`` kB: ``fts`` lists (model, index,
    column) of full-text indexes, ``trigram`` (model, index) of trigram indexes over ``prefix_chars`` characters.

    ALTER INDEX keeps each index and its statistics target (a rebuild would lose them); the entries already
    queued are merged. Values are the caller's, not this module's constants: a migration stays what it was.
    """
    indexes = [(model, search_index(fields=[column], name=name, pending_list_kb=kb)) for model, name, column in fts]
    indexes += [
        (model, trigram_index(name=name, prefix_chars=prefix_chars, pending_list_kb=kb)) for model, name in trigram
    ]
    names = [index.name for _, index in indexes]
    return migrations.SeparateDatabaseAndState(
        database_operations=[
            migrations.RunSQL(
                [f"ALTER INDEX {name} SET (gin_pending_list_limit = {int(kb)})" for name in names]
                + [f"SELECT gin_clean_pending_list('{name}'::regclass)" for name in names],
                reverse_sql=[f"ALTER INDEX {name} RESET (gin_pending_list_limit)" for name in names],
            ),
        ],
        state_operations=[
            *(migrations.RemoveIndex(model_name=model, name=index.name) for model, index in indexes),
            *(migrations.AddIndex(model_name=model, index=index) for model, index in indexes),
        ],
    )


def trigram_index(
    *, name: str, prefix_chars: int = TRIGRAM_PREFIX_CHARS, pending_list_kb: int = SEARCH_INDEX_PENDING_LIST_KB
) -> GinIndex:
    """The GIN trigram index of a segmented-text table: over the prefix the trigram branch compares.

    Its expression keeps statistics of one value (migrations anima 0012 and conversations 0009; an index built
    anew needs the same): planning the branch's ``<%`` otherwise computes word similarity over all of them.
    """
    return search_index(
        OpClass(Left("fts_segmented", prefix_chars), name="gin_trgm_ops"), name=name, pending_list_kb=pending_list_kb
    )


class SegmentedTextModel(models.Model):
    """A row whose searchable text is segmented synchronously on every ORM save."""

    fts_segmented = models.TextField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        self.segment()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "fts_segmented" not in update_fields:
            kwargs["update_fields"] = [*update_fields, "fts_segmented"]
        super().save(*args, **kwargs)

    def segment(self) -> None:
        """Recompute the segmented search text: ``save`` does it; a ``bulk_update`` caller calls it itself."""
        self.fts_segmented = segment_text(self.searchable_text())

    def searchable_text(self) -> str:
        raise NotImplementedError


class AppendOnly(pgtrigger.Protect):
    """Refuses UPDATE and DELETE, except inside a forgetting transaction that names its open tombstone.

    The one audited path past the trigger (``anima.core.redaction.forget_redaction``): the trigger is
    never disabled, and every change it lets through belongs to a ``forget_tombstones`` row.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(operation=pgtrigger.Update | pgtrigger.Delete, **kwargs)

    def get_func(self, model):
        return self.format_sql(
            "IF EXISTS (SELECT 1 FROM forget_tombstones WHERE finished_at IS NULL"
            f" AND id::text = current_setting('{FORGET_SETTING}', true)) THEN"
            " IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END IF;"
            " RAISE EXCEPTION 'pgtrigger: Cannot update or delete rows from % table', TG_TABLE_NAME;"
        )


class Component(models.TextChoices):
    SEMANTIC_MEMORY = "semantic_memory", "Semantic memory"
    DIARY_ENTRY = "diary_entry", "Diary entry"
    CONTENT_BLOCK = "content_block", "Content block"
    TEMPORAL_SUMMARY = "temporal_summary", "Temporal summary"


class MemoryType(models.TextChoices):
    WORLD = "world", "World"
    EXPERIENCE = "experience", "Experience"
    OPINION = "opinion", "Opinion"
    OBSERVATION = "observation", "Observation"
    PREFERENCE = "preference", "Preference"
    PROCEDURAL = "procedural", "Procedural"
    IMPRINT = "imprint", "Imprint"


class MemoryStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    DEPRECATED = "deprecated", "Deprecated"
    EXPIRED = "expired", "Expired"


class BlockTag(models.TextChoices):
    LIMBIC = "limbic", "Limbic"
    NARRATIVE = "narrative", "Narrative"
    DREAM = "dream", "Dream"


class Entity(SegmentedTextModel):
    """Every citable thing. ``[[anima:ID]]`` cites ``Entity.id``; proxies give each kind its manager."""

    primary_component = models.CharField(max_length=32, choices=Component.choices, db_index=True)
    external_id = models.CharField(max_length=200, null=True, blank=True)
    title = models.TextField(blank=True, default="")
    summary = models.TextField(blank=True, default="")
    content = models.TextField(blank=True, default="")
    body = models.JSONField(default=dict, blank=True)

    # Semantic memory
    memory_type = models.CharField(max_length=16, choices=MemoryType.choices, null=True, blank=True)
    status = models.CharField(max_length=16, choices=MemoryStatus.choices, null=True, blank=True)
    expired_reason = models.TextField(blank=True, default="")
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    # Belief history: when a semantic memory became true or known (its occurred_at, else its first sighting)
    # and when it stopped being held (expired, superseded or deprecated; the reason is expired_reason).
    # Recall "as of" a moment reads the memories valid then.
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    pinned = models.BooleanField(default=False)
    reference_count = models.IntegerField(default=0, editable=False)
    person = models.ForeignKey(
        "conversations.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="entities"
    )
    source_conversation = models.ForeignKey(
        "conversations.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="entities"
    )
    source_channel = models.CharField(max_length=64, blank=True, default="")
    # Local calendar day the entity is about: a memory's source day, a diary's day.
    source_day = models.DateField(null=True, blank=True)

    # Diary content blocks hang under their diary entry.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="blocks")
    tag = models.CharField(max_length=16, choices=BlockTag.choices, null=True, blank=True)

    search_fts = models.GeneratedField(
        expression=search_vector_of("fts_segmented"), output_field=SearchVectorField(), db_persist=True
    )

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "entities"
        verbose_name_plural = "entities"
        indexes = [
            search_index(fields=["search_fts"], name="entities_search_fts_gin"),
            # Trigram branch of hybrid retrieval: over the segmented text, since an unsegmented Chinese
            # sentence is one long "word" whose trigrams never match a query word.
            trigram_index(name="entities_fts_segmented_trgm"),
            # Resident memory: pinned + most-referenced active semantic memories.
            models.Index(
                fields=["primary_component", "status", "-reference_count"], name="entities_component_status_refs"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["primary_component", "external_id"],
                condition=Q(external_id__isnull=False),
                name="entities_external_id_unique_per_kind",
            ),
            models.UniqueConstraint(
                fields=["source_day"],
                condition=Q(primary_component=Component.DIARY_ENTRY),
                name="entities_one_diary_entry_per_day",
            ),
            models.UniqueConstraint(
                fields=["parent"],
                condition=Q(primary_component=Component.CONTENT_BLOCK, tag=BlockTag.DREAM),
                name="entities_one_dream_per_diary_day",
            ),
            models.UniqueConstraint(
                KeyTextTransform("window", "body"),
                KeyTextTransform("period_start", "body"),
                condition=Q(primary_component=Component.TEMPORAL_SUMMARY),
                name="entities_temporal_summary_window_period_unique",
            ),
            models.CheckConstraint(
                condition=~Q(primary_component=Component.SEMANTIC_MEMORY)
                | (Q(memory_type__isnull=False) & Q(status__isnull=False)),
                name="entities_semantic_memory_has_type_and_status",
            ),
            models.CheckConstraint(
                condition=~Q(primary_component=Component.CONTENT_BLOCK)
                | (Q(tag__isnull=False) & Q(parent__isnull=False)),
                name="entities_content_block_has_tag_and_parent",
            ),
            models.CheckConstraint(condition=Q(reference_count__gte=0), name="entities_reference_count_non_negative"),
        ]
        triggers = [
            # Limbic memory is append-only: emotions are kept as they were felt, never rewritten.
            AppendOnly(
                name="limbic_blocks_append_only",
                condition=pgtrigger.Q(old__primary_component="content_block", old__tag="limbic"),
            ),
        ]

    def __str__(self) -> str:
        text = self.title or self.content
        return f"#{self.pk} {self.primary_component}: {text[:60]}"

    def searchable_text(self) -> str:
        return "\n".join(part for part in (self.title, self.content) if part)


class ComponentManager(models.Manager):
    """The rows of one entity kind (and, for diary blocks, one tag)."""

    def __init__(self, component: str, **filters) -> None:
        super().__init__()
        self.component = component
        self.filters = filters

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(primary_component=self.component, **self.filters)


class ComponentKind:
    """Mixin of the per-kind proxies of ``Entity``: a save always stamps the kind."""

    component: str = ""

    def save(self, *args, **kwargs) -> None:
        self.primary_component = self.component
        super().save(*args, **kwargs)


class AutoLlmRun(models.Model):
    """One background LLM call (sleep stage, summary): audited here, never copied into conversations."""

    purpose = models.CharField(max_length=64, db_index=True)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=128, blank=True, default="")
    # How the answer's schema reached the model: json_schema, json_object_schema, ollama_format, json_object;
    # "none" where no server was asked (offline).
    dialect = models.CharField(max_length=32, blank=True, default="")
    # "" for a stage's first ask, "repair" for the round that showed the model its errors, "longer" for the
    # retry of a truncated answer with a larger budget.
    attempt = models.CharField(max_length=16, blank=True, default="")
    prompt = models.JSONField(default=list)
    response = models.TextField(blank=True, default="")
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    total_tokens = models.IntegerField(default=0)
    latency_ms = models.IntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # Correlates calls of one job (e.g. "sleep-run:42") for token budgets and audit pages.
    run_key = models.CharField(max_length=64, blank=True, default="", db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "auto_llm_runs"
        ordering = ["-created_at"]
        # One name in the console: the link, the page and the app list all say "LLM audit".
        verbose_name = "LLM call"
        verbose_name_plural = "LLM audit"

    def __str__(self) -> str:
        return f"{self.purpose} via {self.provider} at {timezone.localtime(self.created_at):%Y-%m-%d %H:%M}"


class ImportRun(models.Model):
    """One JSONL import (command or API): how many lines it read, stored and refused; /metrics sums them."""

    kind = models.CharField(max_length=32)
    lines = models.IntegerField(default=0)
    imported = models.IntegerField(default=0)
    bad = models.IntegerField(default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "import_runs"
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.kind} import of {self.lines} lines at {self.started_at:%Y-%m-%d %H:%M}"


class RuntimeConfig(models.Model):
    """Stored overrides of one runtime-config section; defaults live in ``anima.core.config.SCHEMA``."""

    section = models.CharField(max_length=64, unique=True)
    values = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "runtime_config"

    def __str__(self) -> str:
        return self.section


class RuntimeConfigChange(models.Model):
    """Who changed which runtime-config section, when, from what to what."""

    section = models.CharField(max_length=64, db_index=True)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    changed_by = models.CharField(max_length=150, blank=True, default="")
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "runtime_config_changes"
        ordering = ["-changed_at"]

    def __str__(self) -> str:
        return f"{self.section} by {self.changed_by or '?'} at {self.changed_at:%Y-%m-%d %H:%M}"


class ForgetReason(models.TextChoices):
    USER_REQUEST = "user_request", "The person asked to forget it"
    ERASURE = "erasure", "Right to erasure"
    OPERATOR = "operator", "Operator decision"


class ForgetTombstone(models.Model):
    """What was forgotten, when, by whom and why, without the content: ids, counts and fingerprints.

    ``fingerprints`` are hashes of what was taken in its normalized form (``anima.core.forgotten``), so an
    import can tell a forgotten fact or person from a new one without the tombstone holding the text.

    While ``finished_at`` is null the tombstone opens the append-only triggers to its own transaction.
    """

    kind = models.CharField(max_length=16)  # memory | person
    target_id = models.BigIntegerField()
    reason = models.CharField(max_length=16, choices=ForgetReason.choices)
    requested_by = models.CharField(max_length=150, blank=True, default="")
    with_messages = models.BooleanField(default=False)
    entity_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    # Rows redacted or deleted per table, e.g. {"entities": {"redacted": 3, "deleted": 2}}.
    counts = models.JSONField(default=dict, blank=True)
    fingerprints = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "forget_tombstones"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"forgot {self.kind} #{self.target_id} at {self.created_at:%Y-%m-%d %H:%M}"


class LlmTokenBudget(models.Model):
    """Tokens one job (``run_key``) has spent and reserved for calls in flight, shared by every worker.

    A call reserves its largest possible cost before it is sent, with a conditional UPDATE that
    only succeeds while spent + reserved is under the budget, and turns the reservation into what
    it spent when it returns. A worker killed mid-call leaves its reservation standing: the job may
    stop early, never overshoot.
    """

    run_key = models.CharField(max_length=64, primary_key=True)
    spent = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta:
        db_table = "llm_token_budgets"

    def __str__(self) -> str:
        return f"{self.run_key}: {self.spent} spent, {self.reserved} reserved"
