"""Turn assembly: the exact message list the agent runtime sends to its LLM.

Order, built for a stable prefix (the LLM's KV cache):
1. the system prompt snapshot — self layer, resident memory, person memory, the person's notable
   emotional tendency (one line) and latest imprints, the time summaries, citation rule — rebuilt only on the first turn
   after a local 02:00 boundary, so the nightly tendency changes the prefix at most once a day;
2. the conversation: the live short-term summary, then the raw messages it does not cover;
3. one ``temporal_summary_peers`` assistant message per closed half-hour bucket of today (and of
   yesterday until 02:00), at the bucket's end on the timeline: the person's own other
   conversations in full, other people's as topic lines (``temporal.privacy``); frozen
   (``PeerBlock``) the first time it is rendered, so later activity elsewhere only ever adds
   blocks for newer buckets;
4. the runtime-only tail: ``passive_memory_context`` and the new user message.

Headings and framing are in the conversation's one language (``conversation_language``), Chinese in the characters
it is written in (``conversation_script``); memories, summaries and the self layer's blocks in the language they were
written in (the self layer is kept per language).
"""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from anima.agent.stm import ShortTermView, short_term_prepare
from anima.core.calendar import BUCKET, closed_buckets, local_day
from anima.core.config import config_get
from anima.core.segmentation import text_in_script_of
from conversations.models import Conversation, Language, PeerBlock, Person, Role
from conversations.selectors import (
    conversation_language,
    conversation_person,
    conversation_script,
    conversations_persons,
    conversations_resolving_to,
)
from conversations.services import message_create
from memory.imprints import imprint_prompt_section
from memory.models import SemanticMemory
from memory.mood import emotional_tendency_line
from memory.passive import passive_recall
from memory.selectors import memory_line, resident_memories, self_layer_text
from memory.subjects.selectors import active_facts
from temporal.rollup import OTHER, OWN, day_chunks_by_conversation, peer_rollups
from temporal.selectors import temporal_prompt_section
from temporal.tick import tick_mark_bucket

PEERS_NAME = "temporal_summary_peers"
SUMMARY_NAME = "short_term_memory"
REBUILD_HOUR = 2
PERSON_MEMORY_LIMIT = 30
ENSURE_ATTEMPTS = 3
# What decides a conversation's person (conversation_person), re-read when a snapshot write is refused.
PERSON_FIELDS = ("person", "channel", "platform", "chat_id")

# What the prompt says around the memories, in the conversation's language (``conversation_language``): the
# memories themselves stay in the language they were written in.
FRAMING = {
    Language.EN: {
        "self": "# Self",
        "resident": "## Resident memory",
        "about": "## About {name}",
        "citations": (
            "## Memory citations\n"
            "Whenever a reply uses a semantic memory — from the resident list, a memory_recall or "
            "memory_semantic_search semantic hit, or a marker in an earlier message — append its [[anima:ID]] "
            "marker at the end of the reply body, one per memory used. Session, limbic and autobiographical hits "
            "take no marker."
        ),
        "peers": "Other conversations {start}–{end}:",
        "others": "Other people, topics only:",
        "summary": "Conversation so far:",
    },
    Language.ZH: {
        "self": "# 自我",
        "resident": "## 常驻记忆",
        "about": "## 关于 {name}",
        "citations": (
            "## 记忆引用\n"
            "回复用到语义记忆（常驻列表、memory_recall / memory_semantic_search 的语义结果、或之前消息中的标记）时，"
            "在回复正文末尾附上每条记忆的 [[anima:ID]] 标记，每条用到的记忆一个。会话、情绪和自传类结果不加标记。"
        ),
        "peers": "其他会话 {start}–{end}：",
        "others": "其他人，仅话题：",
        "summary": "此前的对话：",
    },
}


def _framing(*, language: str, script: str) -> dict[str, str]:
    """FRAMING in ``language``, its Chinese in the characters the conversation is written in (``conversation_script``):
    「## 記憶引用」 for a conversation in traditional ones."""
    return {key: text_in_script_of(text, like=script) for key, text in FRAMING[language].items()}


def rebuild_boundary(*, now: datetime) -> datetime:
    """The latest local 02:00 at or before ``now``: the system prompt is a snapshot since then."""
    local = timezone.localtime(now)
    boundary = timezone.make_aware(datetime.combine(local.date(), time(REBUILD_HOUR)), local.tzinfo)
    return boundary if boundary <= local else boundary - timedelta(days=1)


def _memory_lines(memories) -> str:
    return "\n".join(memory_line(content=memory.content, entity_id=memory.pk) for memory in memories)


def _person_memories(person: Person, *, exclude: set[int]) -> list[SemanticMemory]:
    """That person's own active memories (most referenced first) not already resident.

    Their facts, not the profiles made of them: a profile says again what its facts say. It comes to the turn
    through recall when the message names its subject.
    """
    return list(
        active_facts()
        .filter(person=person)
        .exclude(pk__in=exclude)
        .order_by("-reference_count", "-id")[:PERSON_MEMORY_LIMIT]
    )


def system_prompt_build(*, conversation: Conversation, now: datetime, pending: str = "") -> str:
    """The full system prompt as of ``now`` (no peers of today: those live on the timeline).

    Framed in the conversation's language (``pending``: the message of the turn, for a conversation without any yet).
    """
    person = conversation_person(conversation=conversation)
    today = local_day(now)
    language = conversation_language(conversation=conversation, pending=pending)
    script = conversation_script(conversation=conversation, pending=pending)
    framing = _framing(language=language, script=script)
    # What is someone's is shown to this conversation's person only (others' narrative titles, sections).
    viewer_ids = frozenset({person.pk}) if person else frozenset()
    sections = []
    self_layer = self_layer_text(viewer_ids=viewer_ids, language=language, script=script)
    if self_layer:
        sections.append(f"{framing['self']}\n\n{self_layer}")
    resident = resident_memories(person=person, global_only=True)
    if resident:
        sections.append(f"{framing['resident']}\n{_memory_lines(resident)}")
    if person is not None:
        about = _person_memories(person, exclude={memory.pk for memory in resident})
        if about:
            name = person.display_name or person.slug
            sections.append(f"{framing['about'].format(name=name)}\n{_memory_lines(about)}")
        # Only this conversation's own person, and only when their week stood out.
        tendency = emotional_tendency_line(conversation=conversation, today=today, language=language, script=script)
        if tendency:
            sections.append(tendency)
        imprints = imprint_prompt_section(conversation=conversation, language=language, script=script)
        if imprints:
            sections.append(imprints)
    config = config_get(section="memory.temporal_summary")
    if config["enabled"]:
        # The person's own sections in full; other people's as memory.temporal_summary.cross_person says.
        section = temporal_prompt_section(
            today=today,
            max_chars=config["system_prompt_chars"],
            viewer_ids=viewer_ids,
            chinese=language == Language.ZH,
            script=script,
        )
        if section:
            sections.append(section)
    sections.append(framing["citations"])
    return "\n\n".join(sections)


def system_prompt_ensure(*, conversation: Conversation, now: datetime, pending: str = "") -> str:
    """The stored snapshot, rebuilt when it predates the latest 02:00 boundary or was dropped (new person, forget)."""
    prompt = ""
    for _ in range(ENSURE_ATTEMPTS):
        built_at = conversation.system_prompt_built_at
        if conversation.system_prompt and built_at is not None and built_at >= rebuild_boundary(now=now):
            return conversation.system_prompt
        person = conversation_person(conversation=conversation)
        prompt = system_prompt_build(conversation=conversation, now=now, pending=pending)
        # Conditional write: of two turns racing over the boundary the first snapshot wins, and one built
        # for a person the conversation no longer resolves to (changed meanwhile) is never stored.
        updated = (
            Conversation.objects.filter(pk=conversation.pk, system_prompt_built_at=built_at)
            .filter(conversations_resolving_to(person=person))
            .update(system_prompt=prompt, system_prompt_built_at=now)
        )
        if updated:
            conversation.system_prompt, conversation.system_prompt_built_at = prompt, now
            return prompt
        conversation.refresh_from_db(fields=["system_prompt", "system_prompt_built_at", *PERSON_FIELDS])
    # The person kept changing under every attempt: this turn's prompt, stored by the next one.
    return prompt


def _peer_text(*, bucket: datetime, rollups: dict[str, str], framing: dict[str, str]) -> str:
    """The block's text: the viewer's own other conversations in full, other people's as topic lines."""
    if not rollups:
        return ""
    start = timezone.localtime(bucket)
    parts = [framing["peers"].format(start=f"{start:%H:%M}", end=f"{start + BUCKET:%H:%M}")]
    if OWN in rollups:
        parts.append(rollups[OWN])
    if OTHER in rollups:
        parts.append(f"{framing['others']}\n{rollups[OTHER]}")
    return "\n".join(parts)


def _frozen(stored: QuerySet[PeerBlock]) -> dict[datetime, tuple[str, datetime]]:
    return {
        bucket: (content, created) for bucket, content, created in stored.values_list("bucket", "content", "created_at")
    }


def peer_blocks(
    *, conversation: Conversation, now: datetime, language: str, script: str
) -> list[tuple[datetime, datetime, str]]:
    """(bucket end, place on the timeline, text) for today's closed buckets with peer activity, as first rendered
    (framed in ``language``, its Chinese in ``script``'s characters).

    Until the 02:00 rebuild yesterday's blocks stay too, so midnight does not break the prefix.
    """
    days = sorted({local_day(rebuild_boundary(now=now)), local_day(now)})
    buckets = [bucket for day in days for bucket in closed_buckets(day=day, now=now)]
    if not buckets:
        return []
    stored = PeerBlock.objects.filter(conversation=conversation, bucket__gte=buckets[0], bucket__lte=buckets[-1])
    frozen = _frozen(stored)
    # Only buckets a finished tick has summarised may freeze; a later one waits for its chunks.
    ticked = tick_mark_bucket()
    missing = [bucket for bucket in buckets if bucket not in frozen and ticked is not None and bucket <= ticked]
    if missing:
        chunks = {day: day_chunks_by_conversation(day=day) for day in {local_day(bucket) for bucket in missing}}
        owners = conversations_persons(conversation_ids={pk for by_day in chunks.values() for pk in by_day})
        viewer = conversation_person(conversation=conversation)
        framing = _framing(language=language, script=script)
        new = []
        for bucket in missing:
            day = local_day(bucket)
            rollups = peer_rollups(
                day=day,
                bucket=bucket,
                chunks=chunks[day],
                owners=owners,
                viewer_id=conversation.pk,
                viewer_person_id=viewer.pk if viewer else None,
                chinese=language == Language.ZH,
                script=script,
            )
            text = _peer_text(bucket=bucket, rollups=rollups, framing=framing)
            new.append(PeerBlock(conversation=conversation, bucket=bucket, content=text, created_at=now))
        # A concurrent turn may have frozen some first: theirs stand, so re-read.
        PeerBlock.objects.bulk_create(new, ignore_conflicts=True)
        frozen = _frozen(stored)
    # A block sits at its bucket's end, or where it was first shown if that came later: it never
    # lands before messages an earlier turn already sent without it.
    return [
        (bucket + BUCKET, max(bucket + BUCKET, created), content)
        for bucket, (content, created) in sorted(frozen.items())
        if content
    ]


def _timeline(
    *, view: ShortTermView, blocks: list[tuple[datetime, datetime, str]], framing: dict[str, str]
) -> list[dict]:
    rendered = []
    if view.summary:
        content = f"{framing['summary']}\n{view.summary}"
        rendered.append({"role": Role.ASSISTANT.value, "name": SUMMARY_NAME, "content": content})
    # Blocks of buckets the summary already stands for are left out with the messages of that time.
    pending = [(at, text) for end, at, text in blocks if view.summary_until is None or end > view.summary_until]
    for message in view.messages:
        while pending and pending[0][0] <= message.created_at:
            rendered.append({"role": Role.ASSISTANT.value, "name": PEERS_NAME, "content": pending.pop(0)[1]})
        rendered.append({"role": message.role, "name": message.name, "content": message.content})
    rendered.extend({"role": Role.ASSISTANT.value, "name": PEERS_NAME, "content": text} for _, text in pending)
    return rendered


def prepare_turn(
    *, conversation: Conversation, user_message: str, now: datetime | None = None, store: bool = True
) -> list[dict]:
    """The message list for the next LLM call, each ``{role, name, content}``.

    Stores the user message (at ``now``) unless ``store`` is false.
    """
    now = now or timezone.now()
    system = system_prompt_ensure(conversation=conversation, now=now, pending=user_message)
    view = short_term_prepare(conversation=conversation, now=now)
    language = conversation_language(conversation=conversation, pending=user_message)
    script = conversation_script(conversation=conversation, pending=user_message)
    messages = [{"role": Role.SYSTEM.value, "name": "", "content": system}]
    blocks = peer_blocks(conversation=conversation, now=now, language=language, script=script)
    messages.extend(_timeline(view=view, blocks=blocks, framing=_framing(language=language, script=script)))
    person = conversation_person(conversation=conversation)
    passive = passive_recall(
        conversation=conversation, user_message=user_message, person=person, language=language, script=script
    ).as_message()
    if passive:
        messages.append(passive)
    messages.append({"role": Role.USER.value, "name": "", "content": user_message})
    if store:
        message_create(conversation=conversation, role=Role.USER, content=user_message, created_at=now)
    return messages


def messages_format(*, messages: list[dict]) -> str:
    """The message list as an operator reads it: one headed block per message."""
    blocks = []
    for index, message in enumerate(messages):
        name = f" ({message['name']})" if message["name"] else ""
        blocks.append(f"--- [{index}] {message['role']}{name}\n{message['content']}")
    return "\n".join(blocks)
