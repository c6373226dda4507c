"""An operator's evening in the Habitat console, driven through headless Chromium.

Opens the console of a real ``runserver`` started as the docs say (DEBUG unset) and checks it is
styled and that the API docs work offline; logs in, searches memories in Chinese, pins one, runs a
historical day's sleep step from the Sleep page, and leaves screenshots in ``test-artifacts/`` (CI
keeps them as artifacts).
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from anima.core.models import BlockTag, MemoryStatus
from conversations.models import Role
from memory.models import SemanticMemory
from memory.services import memory_expire
from sleep.models import PipelineRun, RunStatus, StepStatus
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    EmotionalTendencyFactory,
    MessageFactory,
    PersonFactory,
    PipelineRunFactory,
    PipelineStepRunFactory,
    SemanticMemoryFactory,
    UserFactory,
)
from tests.served import runserver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
PASSWORD = "pw-for-tests"
WAIT_SECONDS = 30

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="headless Chromium not installed: apt-get install -y chromium chromium-driver",
    ),
]


@pytest.fixture
def browser() -> Iterator:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="anima-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(WAIT_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _screenshot(driver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def _message_texts(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [element.text for element in driver.find_elements(By.CSS_SELECTOR, "ul.messagelist li")]


def test_operator_searches_pins_and_sleeps_a_historical_day(browser, live_server, finished_run):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.ui import Select, WebDriverWait

    UserFactory(username="operator", is_staff=True, is_superuser=True)
    hangzhou = SemanticMemoryFactory(content="Leo 住在杭州，喜欢西湖边散步")
    SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    SemanticMemoryFactory(content="Maya lives in Lisbon")
    noon = timezone.make_aware(dt.datetime(2026, 7, 18, 12, 0))
    talk = ConversationFactory(title="搬家", updated_at=noon)
    MessageFactory(conversation=talk, content="我叫 Leo，我下个月搬去杭州。我喜欢喝龙井茶。", created_at=noon)
    MessageFactory(conversation=talk, role=Role.ASSISTANT, content="杭州很好！", created_at=noon)
    day = DiaryEntryFactory(source_day=dt.date(2026, 7, 18))
    ContentBlockFactory(parent=day, tag=BlockTag.LIMBIC, content="我感到安心", body={"valence": 0.6, "intensity": 0.7})
    ContentBlockFactory(parent=day, tag=BlockTag.NARRATIVE, content="今天 Leo 说他要搬去杭州。")
    PipelineStepRunFactory(
        step="deep-sleep",
        status=StepStatus.SUCCEEDED,
        output={
            "mode": "full",
            "rounds": [
                {
                    "round": "contradiction_expiry",
                    "summary": "1 subject groups checked, 1 memories expired",
                    "changes": [{"action": "expire", "ids": [1], "before": {"content": "女儿属虎"}, "after": {}}],
                }
            ],
        },
    )

    # Log in.
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    browser.find_element(By.ID, "habitat-links")
    _screenshot(browser, "01-index")

    # Search memories in Chinese: a question's words find the stored fact.
    browser.get(f"{live_server.url}/admin/memory/semanticmemory/")
    search = browser.find_element(By.ID, "searchbar")
    search.send_keys("杭州在哪")
    search.submit()
    # The unsearched list's rows are still there until the answer replaces the page: wait for it.
    WebDriverWait(browser, WAIT_SECONDS).until(staleness_of(search))
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert [row.find_element(By.CSS_SELECTOR, "input.action-select").get_attribute("value") for row in rows] == [
        str(hangzhou.pk)
    ]
    assert "Lisbon" not in browser.page_source
    _screenshot(browser, "02-memory-search")

    # Pin it with the action.
    rows[0].find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("memory_pin")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    assert "Pinned 1 memory." in _message_texts(browser)
    hangzhou.refresh_from_db()
    assert hangzhou.pinned and hangzhou.status == MemoryStatus.ACTIVE
    _screenshot(browser, "03-memory-pinned")

    browser.get(f"{live_server.url}/admin/memory/semanticmemory/{hangzhou.pk}/change/")
    assert browser.find_element(By.NAME, "content").get_attribute("value") == hangzhou.content
    _screenshot(browser, "04-memory-change")

    # Light sleep for a historical day, with force (its dependency never ran), from the Sleep page.
    browser.get(f"{live_server.url}/admin/sleep/dashboard/")
    browser.execute_script("document.getElementById('id_day').value = '2026-07-18'")
    Select(browser.find_element(By.ID, "id_step")).select_by_value("light-sleep")
    browser.find_element(By.ID, "id_force").click()
    Select(browser.find_element(By.ID, "id_mode")).select_by_value("full")
    browser.find_element(By.CSS_SELECTOR, "#sleep-run-form input[type=submit]").click()
    assert any(
        "Started light-sleep for 2026-07-18 (force), mode full" in text and "in the background" in text
        for text in _message_texts(browser)
    )
    finished_run(PipelineRun.objects.get(options__step="light-sleep").pk)
    browser.get(f"{live_server.url}/admin/sleep/dashboard/")  # refresh to follow it, as the message says
    row = browser.find_element(By.CSS_SELECTOR, "tr.step-row[data-step='light-sleep']")
    assert row.get_attribute("data-status") == "succeeded"
    assert "contradiction_expiry" in browser.page_source and "女儿属虎" in browser.page_source
    _screenshot(browser, "05-sleep-page")
    run = PipelineRun.objects.get(options__step="light-sleep")
    assert run.day == dt.date(2026, 7, 18)
    assert [c["conversation_id"] for c in run.steps.get().output["conversations"]] == [talk.pk]

    # The other console pages render for a look in the artifacts.
    for name, path in [
        ("06-diary-day", f"/admin/memory/diaryentry/{day.pk}/change/"),
        ("07-conversation", f"/admin/conversations/conversation/{talk.pk}/change/"),
        ("08-runtime-config", "/admin/anima/runtimeconfig/"),
        ("09-llm-audit", "/admin/anima/autollmrun/"),
    ]:
        browser.get(f"{live_server.url}{path}")
        browser.find_element(By.ID, "content")
        assert "Server Error" not in browser.title
        _screenshot(browser, name)
    browser.get(f"{live_server.url}/admin/conversations/conversation/{talk.pk}/change/")
    browser.execute_script("document.getElementById('conversation-messages').scrollIntoView()")
    assert "我下个月搬去杭州" in browser.find_element(By.ID, "conversation-messages").text
    _screenshot(browser, "10-conversation-messages")
    assert SemanticMemory.objects.filter(pinned=True).count() == 1


def test_a_runserver_without_debug_shows_a_styled_console_and_api_docs_that_need_no_internet(
    browser, transactional_db, tmp_path
):
    from selenium.webdriver.common.by import By

    UserFactory(username="operator", is_staff=True, is_superuser=True)
    with runserver(log=tmp_path / "runserver.log") as app:
        css = app.get("/static/admin/css/base.css")
        assert css.status == 200 and css.headers["content-type"].startswith("text/css")

        browser.get(f"{app.url}/admin/login/")
        stylesheets = [
            link.get_attribute("href") for link in browser.find_elements(By.CSS_SELECTOR, "link[rel=stylesheet]")
        ]
        assert f"{app.url}/static/admin/css/base.css" in stylesheets
        # Unstyled, the header has the browser's default: a transparent background.
        header = browser.execute_script("return getComputedStyle(document.getElementById('header')).backgroundColor")
        assert header not in ("rgba(0, 0, 0, 0)", "transparent")
        _screenshot(browser, "00-login-runserver")

        browser.find_element(By.NAME, "username").send_keys("operator")
        browser.find_element(By.NAME, "password").send_keys(PASSWORD)
        browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        browser.find_element(By.ID, "habitat-links")

        # The docs page gets Swagger UI from Anima's own static files, never from a CDN.
        browser.get(f"{app.url}/api/docs/")
        assert "Anima API" in browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text
        loaded = browser.execute_script("return performance.getEntriesByType('resource').map(entry => entry.name)")
        assert any(url.endswith("/swagger-ui-bundle.js") for url in loaded)
        assert [url for url in loaded if not url.startswith(app.url)] == []
        _screenshot(browser, "11-api-docs")


def test_an_operator_reads_the_home_page_and_a_diary_day(browser, live_server):
    from selenium.webdriver.common.by import By

    UserFactory(username="operator", is_staff=True, is_superuser=True)
    now = timezone.now()
    night = PipelineRunFactory(
        day=timezone.localdate() - dt.timedelta(days=1),
        status=RunStatus.FAILED,
        started_at=now - dt.timedelta(hours=2),
        finished_at=now - dt.timedelta(hours=1),
        options={"step": None},
    )
    PipelineStepRunFactory(run=night, step="light-sleep", status=StepStatus.SUCCEEDED)
    PipelineStepRunFactory(run=night, step="dream", status=StepStatus.FAILED, error="the model answered no JSON")
    leo = PersonFactory(slug="leo", display_name="Leo")
    old, new = SemanticMemoryFactory(person=leo, content="Leo 喜欢 Python"), SemanticMemoryFactory(person=leo)
    memory_expire(memory=old, reason="changed", superseded_by=new)
    SemanticMemory.objects.filter(pk=old.pk).update(updated_at=now - dt.timedelta(hours=1, minutes=30))
    EmotionalTendencyFactory(person=leo, day=timezone.localdate() - dt.timedelta(days=1), mood="stressed")
    day = DiaryEntryFactory(source_day=dt.date(2026, 11, 26))
    for n in range(4):
        ContentBlockFactory(
            parent=day,
            tag=BlockTag.LIMBIC,
            person=leo,
            content=f"我感到担心，也很牵挂：Leo说「我真的很焦虑」（{n}）",
            body={"valence": -0.7, "arousal": 0.7, "intensity": 0.8, "semantic_memory_ids": list(range(20))},
        )
    ContentBlockFactory(
        parent=day,
        tag=BlockTag.NARRATIVE,
        person=leo,
        title="产品上线前的担心",
        content="2026-11-26，Leo 跟我讲了不少自己的事。",
        body={"significance": "normal", "source_facts": list(range(30)), "source_conversations": [1]},
    )
    ContentBlockFactory(parent=day, tag=BlockTag.DREAM, content="我梦见自己变成了一封还没寄出的信。")

    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    attention = browser.find_element(By.ID, "home-attention").text
    assert "dream" in attention and "the model answered no JSON" in attention
    assert "Leo 喜欢 Python" in attention and "expired" in attention
    steps = browser.find_elements(By.CSS_SELECTOR, "#home-steps tr.night-step")
    assert [(row.get_attribute("data-step"), row.get_attribute("data-status")) for row in steps] == [
        ("light-sleep", "succeeded"),
        ("dream", "failed"),
    ]
    assert "More stressed than usual" in browser.find_element(By.ID, "home-mood").text
    # Framework internals are folded away, and "View site" is the API docs.
    periodic_tasks = browser.find_element(By.CSS_SELECTOR, "#system-apps a[href$='/django_celery_beat/periodictask/']")
    assert not periodic_tasks.is_displayed()
    assert browser.find_element(By.ID, "site-link").get_attribute("href") == f"{live_server.url}/api/docs/"
    _screenshot(browser, "12-home")

    browser.get(f"{live_server.url}/admin/memory/diaryentry/{day.pk}/change/")
    sections = [element.text for element in browser.find_elements(By.CSS_SELECTOR, "#diary-day section h2")]
    assert sections == ["Feelings (limbic memory: kept as felt, never edited) (4)", "Narratives (1)", "Dream (1)"]
    assert "valence -0.70" in browser.find_element(By.ID, "diary-day").text
    assert '"semantic_memory_ids"' not in browser.page_source
    height = browser.execute_script("return document.documentElement.scrollHeight")
    assert height < 2200, height  # six blocks; the raw-JSON page was 6,700 px for a day like this
    browser.set_window_size(1400, height)
    _screenshot(browser, "13-diary-day")
