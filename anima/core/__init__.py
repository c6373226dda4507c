"""The ground every app stands on: the entity base, the LLM layer, text and calendar helpers, env
readers, the embedded PostgreSQL backend, runtime config and the one application-error base.

Installed as the Django app labelled ``anima`` (its models keep that label and their tables;
migrations stay in ``anima/migrations``). Nothing here imports an app above it.
"""
