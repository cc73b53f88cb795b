"""Model passes in committed chunks: the resumable loop shared by generation and quality control.

A pass reads a queue of pending rows, splits it into chunks of about ``chunk_rows`` rows,
runs a mapInPandas function (a model per worker) over each chunk and commits the chunk's
output into the target table before the next chunk starts. A run killed at any point loses at
most the chunk in flight; the next run first merges a chunk that was written but not merged.
"""
from __future__ import annotations

import math
from typing import Callable, Iterator

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.lake import Lake


def gpu_profile(gpus: float):
    """A stage-level resource profile asking ``gpus`` GPUs per task (a fraction shares one)."""
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    requests = TaskResourceRequests().cpus(1).resource("gpu", gpus)
    return ResourceProfileBuilder().require(requests).build


def recover_chunk(lake: Lake, target: str, key: str) -> None:
    """A chunk written just before a kill: make sure it reached its table."""
    chunk_table = f"chunk_{target}"
    if lake.exists(chunk_table):
        lake.upsert(lake.read(chunk_table), target, [key])


def run_chunks(
    lake: Lake, queue: DataFrame, total: int, function: Callable, schema: str, target: str, key: str,
    chunk_rows: int, tasks: int, gpus_per_task: float = 0,
) -> Iterator[DataFrame]:
    """Run ``function`` over ``queue`` (``total`` rows) chunk by chunk; each chunk's output is
    upserted into ``target`` by ``key`` and then yielded (read back) for progress accounting."""
    chunks = max(1, math.ceil(total / max(1, chunk_rows)))
    chunk_table = f"chunk_{target}"
    queue = queue.withColumn("_chunk", F.pmod(F.xxhash64(key), F.lit(chunks)))
    profile = gpu_profile(float(gpus_per_task)) if gpus_per_task else None
    for chunk in range(chunks):
        part = queue.where(F.col("_chunk") == chunk).drop("_chunk").repartition(tasks)
        produced = part.mapInPandas(function, schema, profile=profile)
        # Stored before merging: a MERGE may read its source twice, a model must not run twice.
        lake.write(produced, chunk_table)
        written = lake.read(chunk_table)
        lake.upsert(written, target, [key])
        yield written
    lake.drop(chunk_table)
