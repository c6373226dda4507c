from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Lower layers announce what they stored; memory counts citations and thinks for the LLM layer.
        from anima.core.llm import identity_provider_set
        from anima.core.metrics import scrape_collector_register
        from conversations.signals import messages_stored
        from memory.citations import citations_on_messages_stored
        from memory.embedding import embed_backlog_metrics
        from memory.selectors import identity_context

        messages_stored.connect(citations_on_messages_stored, dispatch_uid="memory.citations")
        identity_provider_set(identity_context)
        scrape_collector_register(name="embeddings", collect=embed_backlog_metrics)
