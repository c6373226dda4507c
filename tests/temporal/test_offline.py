from __future__ import annotations

import pytest

from anima.core.segmentation import text_simplified, text_traditional
from temporal.offline import conversation_theme


def test_a_day_line_gives_themes_and_outcomes_about_the_person_not_quotes():
    line = conversation_theme(
        {
            "person": "Leo",
            "title": "",
            "dialogue": [
                {"role": "user", "content": "跟你说个事，我上周搬到深圳了，房子也找好了。"},
                {"role": "assistant", "content": "恭喜！"},
                {"role": "user", "content": "深圳的房子离公司很近，我打算周末去买家具。"},
            ],
        }
    )
    assert line.startswith("聊了") and "结果：" in line and "深圳" in line
    assert "我" not in line and "「" not in line
    english = conversation_theme(
        {"person": "Maya", "title": "", "dialogue": [{"role": "user", "content": "I passed my exam today!"}]}
    )
    assert "Outcome: Maya passed" in english and " I " not in f" {english} "


SAID = [
    "谢谢你，真的。",
    "这周一直在准备搬家的事情，累死了。",
    "我们最后决定下个月搬到深圳，房子已经订了。",
    "我女儿也很期待新学校。",
]


def _theme(person: str, said: list[str]) -> str:
    dialogue = [{"role": "user", "content": text} for text in said]
    return conversation_theme({"person": person, "title": "", "dialogue": dialogue})


@pytest.mark.parametrize("person", ["Leo", "于小明", "陳明"])
def test_a_day_in_traditional_characters_reads_as_its_simplified_twin_and_is_told_in_its_characters(person):
    simplified = _theme(person, SAID)
    traditional = _theme(person, [text_traditional(s) for s in SAID])

    # The same themes and outcome (thanks carry none), in the person's characters, the name as written.
    assert simplified.replace(person, "") == text_simplified(traditional.replace(person, ""))
    assert "結果：" in traditional and "女兒" in traditional and "谢" not in traditional
    assert person in traditional and person in simplified
