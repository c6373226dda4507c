from django.contrib import admin
from django.urls import include, path

from anima.agent.api import ChatCompletionsView, ModelsView, ModelView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("anima.api.urls")),
    # OpenAI-compatible: a client's base_url is <host>/v1.
    path("v1/chat/completions", ChatCompletionsView.as_view(), name="chat-completions"),
    path("v1/models", ModelsView.as_view(), name="proxy-models"),
    path("v1/models/<path:model>", ModelView.as_view(), name="proxy-model"),
]

# An unreachable database is a 503 with a JSON body everywhere, not Django's HTML 500.
handler500 = "anima.api.exceptions.server_error"
