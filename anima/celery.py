from __future__ import annotations

import gc
import os

from celery import Celery
from celery.signals import worker_init

from anima.core.segmentation import segmentation_load

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

app = Celery("anima")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _load_before_fork(**kwargs) -> None:
    """Load jieba's dictionary and tagger in the worker's parent, before its pool forks: every process starts warm.

    Otherwise each pool process loads it on its first Chinese write (about a second of CPU each,
    ten when four processes load at once on two cores). Plain Python data, safe to fork (unlike the
    embedding model, which each process loads itself).
    """
    segmentation_load(tags=True)
    # Never collected: the tables live as long as the process, and a collection in a child that walked them
    # would cost it tens of milliseconds each time and copy every page of them it shares with the parent. The
    # garbage loading made goes first (frozen, it would never be freed).
    gc.collect()
    gc.freeze()
