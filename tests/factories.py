"""factory-boy factories for every model."""

from __future__ import annotations

import datetime as dt

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from anima.core.models import (
    AutoLlmRun,
    BlockTag,
    Component,
    MemoryStatus,
    MemoryType,
    RuntimeConfig,
    RuntimeConfigChange,
)
from anima.core.text import is_chinese
from conversations.models import (
    Conversation,
    HistoryEntry,
    Identity,
    Message,
    PeerBlock,
    Person,
    Platform,
    Role,
    ShortTermMemory,
    StmScope,
)
from memory.models import (
    ContentBlock,
    DiaryEntry,
    EmotionalTendency,
    MemoryReference,
    SelfBlock,
    SelfLayerBlock,
    SemanticMemory,
    Subject,
    SubjectKind,
    SubjectMention,
)
from memory.services import memory_create, memory_expire
from sleep.models import PipelineRun, PipelineStepRun
from temporal.models import TemporalSummary


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests")


class PersonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Person
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"person-{n}")
    display_name = factory.LazyAttribute(lambda o: o.slug.title())


class IdentityFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Identity

    channel = "telegram"
    external_id = factory.Sequence(lambda n: f"chat-{n}")
    person = factory.SubFactory(PersonFactory)


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    external_id = factory.Sequence(lambda n: f"conv-{n}")
    platform = Platform.WEB
    channel = "web"
    chat_id = factory.Sequence(lambda n: f"chat-{n}")
    person = factory.SubFactory(PersonFactory)
    title = factory.Sequence(lambda n: f"Conversation {n}")


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Message

    conversation = factory.SubFactory(ConversationFactory)
    role = Role.USER
    content = factory.Sequence(lambda n: f"message number {n}")
    external_id = factory.Sequence(lambda n: f"msg-{n}")
    created_at = factory.LazyFunction(timezone.now)


class HistoryEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = HistoryEntry

    content = factory.Sequence(lambda n: f"history event {n}")
    channel = "telegram"
    person = factory.SubFactory(PersonFactory)


class SemanticMemoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SemanticMemory

    primary_component = Component.SEMANTIC_MEMORY
    memory_type = MemoryType.WORLD
    status = MemoryStatus.ACTIVE
    content = factory.Sequence(lambda n: f"fact number {n}")
    person = factory.SubFactory(PersonFactory)
    source_day = factory.LazyFunction(lambda: timezone.localdate())


def belief_superseded(*, person: Person) -> tuple[SemanticMemory, SemanticMemory, Conversation]:
    """Leo's daughter's sign, held from 2026-11-10 and corrected in a conversation on 2026-11-25 at 20:00."""
    old = memory_create(
        content="Leo's daughter's zodiac sign is Leo",
        memory_type=MemoryType.WORLD,
        person=person,
        body={"occurred_at": "2026-11-10"},
        created_at=timezone.make_aware(dt.datetime(2026, 11, 10, 9)),
    )
    correction = ConversationFactory(person=person)
    new = memory_create(
        content="Leo's daughter's zodiac sign is Virgo",
        memory_type=MemoryType.WORLD,
        person=person,
        source_conversation=correction,
        created_at=timezone.make_aware(dt.datetime(2026, 11, 25, 20)),
    )
    memory_expire(memory=old, reason="contradiction: corrected", superseded_by=new, at=new.created_at)
    return old, new, correction


class DiaryEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DiaryEntry
        django_get_or_create = ("source_day",)

    primary_component = Component.DIARY_ENTRY
    source_day = factory.Sequence(lambda n: dt.date(2026, 1, 1) + dt.timedelta(days=n))
    title = factory.LazyAttribute(lambda o: o.source_day.isoformat())


class ContentBlockFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ContentBlock

    primary_component = Component.CONTENT_BLOCK
    parent = factory.SubFactory(DiaryEntryFactory)
    tag = BlockTag.NARRATIVE
    content = factory.Sequence(lambda n: f"I remember moment {n}")
    source_day = factory.LazyAttribute(lambda o: o.parent.source_day)


class LimbicAnchorFactory(ContentBlockFactory):
    """A limbic anchor about ``day`` (``parent`` follows it), with its valence, arousal and intensity."""

    class Params:
        day = dt.date(2026, 11, 1)
        valence = 0.0
        arousal = 0.5
        intensity = 0.6

    parent = factory.LazyAttribute(lambda o: DiaryEntryFactory(source_day=o.day))
    tag = BlockTag.LIMBIC
    content = factory.Sequence(lambda n: f"I feel moment {n}")
    body = factory.LazyAttribute(
        lambda o: {"valence": o.valence, "arousal": o.arousal, "intensity": o.intensity, "kind": "conversation_mood"}
    )


class EmotionalTendencyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = EmotionalTendency

    person = factory.SubFactory(PersonFactory)
    day = dt.date(2026, 11, 1)


class TemporalSummaryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TemporalSummary

    primary_component = Component.TEMPORAL_SUMMARY
    content = factory.Sequence(lambda n: f"summary of period {n}")
    source_day = factory.Sequence(lambda n: dt.date(2026, 1, 1) + dt.timedelta(days=n))
    body = factory.LazyAttribute(lambda o: {"window": "day", "period_start": o.source_day.isoformat()})


class MemoryReferenceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MemoryReference

    entity = factory.SubFactory(SemanticMemoryFactory)
    message = factory.SubFactory(MessageFactory)
    weight = 1


class SelfLayerBlockFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SelfLayerBlock
        django_get_or_create = ("key", "language")

    key = SelfBlock.SELF_MODEL
    content = "I am Anima, a companion who remembers."
    # The language the content is written in.
    language = factory.LazyAttribute(lambda block: "zh" if is_chinese(block.content) else "en")


class AutoLlmRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AutoLlmRun

    purpose = "light-sleep.semantic"
    provider = "offline"
    model = "offline-extractive"
    prompt = factory.LazyFunction(lambda: [{"role": "user", "content": "hello"}])
    response = "{}"


class PipelineRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PipelineRun

    day = factory.LazyFunction(lambda: timezone.localdate() - dt.timedelta(days=1))


class PipelineStepRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PipelineStepRun

    run = factory.SubFactory(PipelineRunFactory)
    step = "light-sleep"


class RuntimeConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RuntimeConfig
        django_get_or_create = ("section",)

    section = "memory.passive_recall"
    values = factory.LazyFunction(dict)


class ShortTermMemoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ShortTermMemory

    conversation = factory.SubFactory(ConversationFactory)
    scope = StmScope.SERVER
    summary = factory.Sequence(lambda n: f"short-term summary {n}")
    covers_until = factory.LazyFunction(timezone.now)


class PeerBlockFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PeerBlock

    conversation = factory.SubFactory(ConversationFactory)
    bucket = factory.Sequence(lambda n: dt.datetime(2026, 11, 28, tzinfo=dt.UTC) + dt.timedelta(minutes=30 * n))
    content = factory.Sequence(lambda n: f"Other conversations: peer digest {n}")


class RuntimeConfigChangeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RuntimeConfigChange

    section = "memory.passive_recall"
    before = factory.LazyFunction(dict)
    after = factory.LazyFunction(lambda: {"limit": 7})
    changed_by = "operator"


class SubjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Subject

    person = factory.SubFactory(PersonFactory)
    kind = SubjectKind.PERSON
    relation = "daughter"
    name = factory.Sequence(lambda n: f"Kid{n}")
    key = factory.LazyAttribute(lambda s: f"{s.relation}:{s.name.casefold()}")
    aliases = factory.LazyAttribute(lambda s: [s.name])


class SubjectMentionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SubjectMention

    subject = factory.SubFactory(SubjectFactory)
    memory = factory.SubFactory(SemanticMemoryFactory, person=factory.SelfAttribute("..subject.person"))
