"""Models held by a Python worker: loaded on first use, reused by every later batch and task.

Spark reuses Python workers (``spark.python.worker.reuse``), so a module-level cache keyed by
the model's settings means one load per worker, not one per task or batch.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, TypeVar

from misbench.ids import settings_digest

Model = TypeVar("Model")

_MODELS: dict[str, object] = {}
_LOCK = threading.RLock()  # re-entrant: a model may load another (the judge loads its LLM)


def settings_key(settings) -> str:
    """The key of a model's settings: one cached model per key."""
    return settings_digest(settings)


def worker_cached(kind: str, settings, load: Callable[[], Model]) -> Model:
    """The ``kind`` model for ``settings`` in this process; ``load()`` runs on first use only."""
    key = f"{kind}:{settings_key(settings)}"
    with _LOCK:
        if key not in _MODELS:
            pin_task_gpu()
            _MODELS[key] = load()
        return _MODELS[key]  # type: ignore[return-value]


def pin_task_gpu() -> None:
    """On GPU clusters, load on the GPU Spark assigned to this task (stage-level scheduling)."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        gpus = context.resources().get("gpu") if context else None
    except Exception:  # noqa: BLE001 - outside Spark, or no resources
        gpus = None
    if gpus is not None and gpus.addresses:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus.addresses)


def cpu_threads(configured, tasks: int) -> int:
    """Threads for one model in one task: the configured number, or the cores shared by the
    tasks running at once (more oversubscribes the CPU and every engine slows down)."""
    return int(configured or max(1, (os.cpu_count() or 1) // max(1, int(tasks))))
