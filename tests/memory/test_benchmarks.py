"""The dev-set benchmarks read both formats and measure what bench_recall prints (tiny sets written here)."""

from __future__ import annotations

import json
from datetime import datetime

from memory.benchmarks._common import CHATS, RecallTally, lead_figures, smalltalk_lines
from memory.benchmarks.locomo import locomo_load, locomo_run
from memory.benchmarks.madial import madial_load, madial_run
from memory.models import SemanticMemory


def _madial(tmp_path) -> None:
    memories = [
        {"1": {"event": "Bart performed a magic trick at the New Year's Eve party"}},
        {"2": {"event": "Bart adopted a grey kitten called Pixel"}},
        {"3": {"event": "Bart broke his arm skiing last winter"}},
    ]
    dialogues = [
        {
            "dialogue": ["<BOD>", "<Bart>: my kitten Pixel is sick", "<Assistant>: oh no", '<Bart>: "Pixel!"'],
            "test-turn": [3],
            "relevant-id": [2],
        }
    ]
    for lang in ("zh", "en"):
        (tmp_path / f"MADial-Bench-{lang}-memory.json").write_text("\n".join(json.dumps(m) for m in memories))
        (tmp_path / f"MADial-Bench-{lang}-dialogue.json").write_text("\n".join(json.dumps(d) for d in dialogues))


def test_madial_measures_recall_beside_bm25_and_passive_recall(tmp_path):
    _madial(tmp_path)
    loaded = madial_load(data=tmp_path, lang="en")

    figures = madial_run(data=tmp_path, lang="en", loaded=loaded, dense=False)

    assert figures["n"] == 1
    # No vectors: no dense.
    assert set(figures) == {"n", "anima", "anima_keyword", "bm25", "recalled", "lead", "passive", "smalltalk"}
    # Keyword-only, the default is its keyword branch: no lead, and none by chance.
    assert figures["lead"] == {"R@10": 0.0, "standard error": 0.0, "over": "anima_keyword"}
    assert (figures["anima"]["R@1"], figures["bm25"]["R@1"], figures["recalled"]["R@1"]) == (100.0, 100.0, 100.0)
    # Each line, after the one user's exchange.
    smalltalk = figures["smalltalk"]
    assert (smalltalk["lines"], smalltalk["conversations"]) == (len(smalltalk_lines(lang="en")), 1)


def test_madial_passive_recall_reads_the_last_message_after_the_dialogue_before_it(tmp_path):
    _madial(tmp_path)
    dialogue = {
        "dialogue": [
            "<BOD>",
            '<Bart>: "My kitten Pixel is sick"',
            '<Assistant>: "Oh no! What did the vet say?"',
            '<Bart>: "She has to stay there tonight"',
            '<Assistant>: "She will be back home soon."',
        ],
        "test-turn": [4],
        "relevant-id": [2],
    }
    (tmp_path / "MADial-Bench-en-dialogue.json").write_text(json.dumps(dialogue))

    figures = madial_run(
        data=tmp_path, lang="en", loaded=madial_load(data=tmp_path, lang="en"), dense=False, recall=False
    )

    # "She has to stay there tonight" names no kitten: the turns before it do, as in a real conversation.
    assert set(figures) == {"n", "passive", "smalltalk"}
    assert figures["passive"]["relevant %"] == 100.0, figures


def test_madial_english_memories_are_their_childs_as_the_chinese_ones_with_their_ids_say(tmp_path):
    _madial(tmp_path)
    # The Chinese file names each memory's user; the English one does not (as MADial's), its dialogues do.
    chinese = [
        {"1": {"event": "魔术", "user-id": 1}},
        {"2": {"event": "小猫", "user-id": 1}},
        {"3": {"event": "滑雪", "user-id": 2}},
    ]
    (tmp_path / "MADial-Bench-zh-memory.json").write_text("\n".join(json.dumps(m) for m in chinese))
    dialogue = {
        "dialogue": ["<BOD>", '<Bart>: "I broke my arm skiing, like last winter"', '<Assistant>: "Ouch!"'],
        "test-turn": [2],
        "relevant-id": [3],
        "user-id": 1,
    }
    (tmp_path / "MADial-Bench-en-dialogue.json").write_text(json.dumps(dialogue))

    memories, persons, key_of = madial_load(data=tmp_path, lang="en")

    assert sorted(persons) == ["1", "2"]
    owner = {key_of[row.pk]: row.person for row in SemanticMemory.objects.filter(pk__in=key_of)}
    assert owner == {"1": persons["1"], "2": persons["1"], "3": persons["2"]}
    # User 1's dialogue searches user 1's memories: the skiing one is another child's.
    figures = madial_run(data=tmp_path, lang="en", loaded=(memories, persons, key_of), dense=False)
    assert figures["anima"]["R@20"] == figures["bm25"]["R@20"] == 0.0


def test_madial_memories_named_by_no_file_are_one_persons(tmp_path):
    _madial(tmp_path)

    _, persons, _ = madial_load(data=tmp_path, lang="en")

    assert list(persons) == ["all"]


def test_locomo_finds_evidence_turns_by_dialogue_id_and_keeps_adversarial_questions_apart(tmp_path):
    sample = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! How have you been?"},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Swamped with the kids. You?"},
                {"speaker": "Caroline", "dia_id": "D1:3", "text": "I went to a support group yesterday."},
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:4",
                    "text": "Look at this!",
                    "blip_caption": "a photo of a painting of a sunset over a lake",
                },
            ],
        },
        "observation": {"session_1_observation": {"Caroline": [["Caroline attended a support group.", "D1:3"]]}},
        "qa": [
            {"question": "When did Caroline go to the support group?", "evidence": ["D1:3"], "category": 2},
            {"question": "What did Caroline paint, a sunset?", "evidence": ["D1:4"], "category": 5},
            {"question": "No evidence given", "evidence": [], "category": 1},
        ],
    }
    (tmp_path / "locomo10.json").write_text(json.dumps([sample]))

    figures = locomo_run(samples=locomo_load(data=tmp_path), dense=False)

    assert figures["n"] == 2  # the question without evidence is left out
    assert figures["1-4"]["anima"]["R@1"] == 100.0  # the support group turn
    assert figures["5"]["anima"]["R@1"] == 100.0  # found by the photo's caption
    assert set(figures["1-4"]) == {"anima", "anima_keyword", "bm25", "lead"}
    assert figures["passive"]["relevant %"] >= 50.0  # the fact from the evidence turn, offered for its question


def _tallies(found: dict[str, list[bool]]) -> dict[str, RecallTally]:
    """Tallies of one relevant key a query, found (ranked first) or not, query by query."""
    tallies = {name: RecallTally() for name in found}
    for name, hits in found.items():
        for hit in hits:
            tallies[name].add(ranked=["x"] if hit else ["y"], relevant={"x"})
    return tallies


def test_the_lead_is_over_the_best_branch_query_by_query_with_its_standard_error():
    tallies = _tallies(
        {
            "anima": [True, True, True, True, False],
            "dense": [True, True, False, False, False],
            "anima_keyword": [True, False, False, False, False],
            "bm25": [True, True, True, True, True],  # not one of Anima's branches: never the one to beat
        }
    )

    # Differences to dense, the better branch: 0, 0, 1, 1, 0 (mean 0.4, sample deviation sqrt(0.3), over sqrt(5)).
    assert lead_figures(tallies) == {"R@10": 40.0, "standard error": 24.5, "over": "dense"}


def test_the_same_lead_on_other_queries_is_told_from_chance_only_with_more_of_them():
    few = lead_figures(_tallies({"anima": [True, False] * 2, "dense": [False, False] * 2}))
    many = lead_figures(_tallies({"anima": [True, False] * 50, "dense": [False, False] * 50}))

    assert few["R@10"] == many["R@10"] == 50.0
    assert many["standard error"] < few["standard error"] / 4


def test_no_lead_without_the_default_or_a_branch_beside_it():
    assert lead_figures(_tallies({"dense": [True]})) == {}
    assert lead_figures(_tallies({"anima": [True], "bm25": [False]})) == {}


def test_the_chats_written_here_are_in_locomos_format_with_every_evidence_turn_present():
    # bench_recall measures them as LoCoMo (``chats``): a question whose evidence is missing would count as a miss.
    chats = sorted(CHATS.glob("*.json"))
    assert [path.stem for path in chats] == ["en", "zh"]
    for path in chats:
        for sample in json.loads(path.read_text(encoding="utf-8")):
            dialogue, turns = sample["conversation"], set()
            number = 1
            while f"session_{number}" in dialogue:
                datetime.strptime(dialogue[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y")
                turns |= {turn["dia_id"] for turn in dialogue[f"session_{number}"]}
                number += 1
            assert number > 1
            assert len(sample["qa"]) >= 30
            for question in sample["qa"]:
                assert question["evidence"] and set(question["evidence"]) <= turns, question
