from __future__ import annotations

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
