"""Routes of the API; every one requires an authenticated user (token or session)."""

from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from anima.agent.api import PrepareTurnView
from anima.api.views import ConfigViewSet, DocsView, ToolCallView, ToolListView
from conversations.api import ConversationViewSet, HistoryView, IdentityViewSet, PersonViewSet
from memory.api import (
    DiaryViewSet,
    EmotionalTendencyViewSet,
    MemoryViewSet,
    PersonEntitiesView,
    PersonEntityView,
    PersonForgetView,
    RecallView,
)
from sleep.api import SleepRunViewSet
from temporal.api import TemporalSummaryViewSet

router = DefaultRouter()
router.register("conversations", ConversationViewSet, basename="conversation")
router.register("persons", PersonViewSet, basename="person")
router.register("identities", IdentityViewSet, basename="identity")
router.register("memories", MemoryViewSet, basename="memory")
router.register("diary", DiaryViewSet, basename="diary")
router.register("emotional-tendencies", EmotionalTendencyViewSet, basename="emotional-tendency")
router.register("temporal-summaries", TemporalSummaryViewSet, basename="temporal-summary")
router.register("sleep-runs", SleepRunViewSet, basename="sleep-run")
router.register("config", ConfigViewSet, basename="config")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", DocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("recall/", RecallView.as_view(), name="api-recall"),
    path("persons/<slug:slug>/forget/", PersonForgetView.as_view(), name="api-person-forget"),
    path("persons/<slug:slug>/entities/", PersonEntitiesView.as_view(), name="api-person-entities"),
    path("persons/<slug:slug>/entities/<str:key>/", PersonEntityView.as_view(), name="api-person-entity"),
    path("history/", HistoryView.as_view(), name="api-history"),
    path("tools/", ToolListView.as_view(), name="api-tools"),
    path("tools/<str:name>/", ToolCallView.as_view(), name="api-tool-call"),
    re_path(
        r"^conversations/(?P<pk>\d{1,18})/prepare-turn/$", PrepareTurnView.as_view(), name="conversation-prepare-turn"
    ),
    path("", include(router.urls)),
]
