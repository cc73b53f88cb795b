"""Model passes in committed chunks: the resumable loop shared by generation and quality control.

A pass reads a queue of pending rows, splits it into chunks of about ``chunk_rows`` rows,
runs a mapInPandas function (a model per worker) over each chunk and commits the chunk's
output into the target table before the next chunk starts: an append of files the tasks
wrote, so a commit costs what the chunk costs however large the target has grown. A run
killed at any point loses at most the chunk in flight; the next run first merges a chunk
that was written but not merged.
"""
from __future__ import annotations

import logging
import math
import re
import threading
import time
import uuid
from typing import Callable, Iterator

from pyspark.sql import Column, DataFrame, Observation, Row
from pyspark.sql import functions as F

from misbench.ids import digest, seeded_hash
from misbench.lake import Lake
from misbench.logs import duration

log = logging.getLogger("misbench.progress")

# How Spark words the death of a Python worker (segfault, out of memory, SIGKILL) on the driver;
# a model server's death reaches it as the EngineDied its tasks raised (misbench.llm.client).
_WORKER_DIED = re.compile(
    r"Python worker exited unexpectedly|PYTHON_WORKER_EXITED|worker.{0,40}crashed"
    # the worker died while the JVM was writing to it: Spark rethrows the socket error
    r"|(Broken pipe|Connection reset)[\s\S]{0,4000}PythonRunner", re.IGNORECASE)
# faulthandler's first line (spark.python.worker.faulthandler.enabled), e.g. "Segmentation fault".
_FATAL = re.compile(r"Fatal Python error: ([^\n]+)")
_KILLED_BY = re.compile(r"killed by signal (SIG[A-Z]+)")
_EXIT_CODE = re.compile(r"exit(?:ed)? (?:code|status)[ :=]+(-?\d+)", re.IGNORECASE)


class WorkerCrashed(RuntimeError):
    """A Python worker, or the model server its tasks call, died while it ran a model pass.
    Chunks committed before it stay."""

    def __init__(self, label: str, engine: str, cause: str, detail: str):
        self.label, self.engine, self.cause, self.detail = label, engine, cause, detail
        process = "model server" if "EngineDied" in detail else "Python worker"
        super().__init__(
            f"{label}: the {process} running {engine} died ({cause}). Chunks committed "
            "before the crash are kept; rerun the same command to continue where it stopped. "
            "Try: fewer tasks at once (generate.tasks / quality.tasks), more memory per worker, a "
            "smaller model, or llm.llama_cpp.extra_buffer_types=false "
            "if llama.cpp crashed.")


def worker_crash_cause(error: BaseException) -> str | None:
    """What Spark reports of a dead Python worker (signal, exit code, faulthandler's first
    line), or None when ``error`` is not a worker death."""
    text = str(error)
    if not _WORKER_DIED.search(text) and "EngineDied" not in text:
        return None
    fatal = _FATAL.search(text)
    if fatal:
        return f"Fatal Python error: {fatal.group(1).strip()}"
    signalled = _KILLED_BY.search(text)  # a model server that died while it loaded
    if signalled and signalled.group(1) != "SIGKILL":
        return f"killed by signal {signalled.group(1)}"
    code = _EXIT_CODE.search(text)
    if code:
        return f"exit code {code.group(1)}"
    return "killed without a Python traceback: a signal such as SIGKILL (out of memory?)"


class PassProgress:
    """Progress of a model pass in the driver's log (the terminal for the CLI, the driver log
    on a cluster): rows done of rows, rate, time left after each chunk, and a heartbeat while
    a chunk runs, so a long pass is never silent."""

    def __init__(self, label: str, total: int, every_s: float = 30.0, unit: str = "texts"):
        self.label, self.total, self.every_s, self.unit = label, total, every_s, unit
        self.started = time.perf_counter()
        self.rows = 0
        self.units = 0.0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        share = self.rows / self.total if self.total else 1.0
        parts = [f"{self.label}: {self.rows}/{self.total} rows ({share:.0%})"]
        if self.units and elapsed > 0:
            parts.append(f"{self.units / elapsed:.1f} {self.unit}/s")
        if 0 < self.rows < self.total:
            parts.append(f"about {duration(elapsed / self.rows * (self.total - self.rows))} left")
        parts.append(f"{duration(elapsed)} elapsed")
        return ", ".join(parts)

    def chunk_started(self, chunk: int, chunks: int) -> None:
        self.stop()
        stop = self._stop = threading.Event()  # one per heartbeat thread
        chunk_started = time.perf_counter()

        def beat():
            while not stop.wait(self.every_s):
                log.info("%s; chunk %d/%d running for %s", self.line(), chunk + 1, chunks,
                         duration(time.perf_counter() - chunk_started))

        self._thread = threading.Thread(target=beat, name="misbench-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def chunk_finished(self, rows: int, units: float) -> None:
        self.stop()
        self.rows += rows
        self.units += units
        log.info(self.line())


def gpu_profile(gpus: float):
    """A stage-level resource profile asking ``gpus`` GPUs per task (a fraction shares one)."""
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    requests = TaskResourceRequests().cpus(1).resource("gpu", gpus)
    return ResourceProfileBuilder().require(requests).build


def pending_rows(requests: DataFrame, done: DataFrame | None, key: str, max_attempts: int) -> DataFrame:
    """Requests without a result yet, or whose result failed with attempts left, with the
    ``attempts`` they are at. ``done``: ``key``, error, attempts of earlier results."""
    if done is None:
        return requests.withColumn("attempts", F.lit(0))
    earlier = done.select(key, F.col("error").alias("_earlier_error"), F.col("attempts").alias("_earlier_attempts"))
    return requests.join(earlier, key, "left").where(
        F.col("_earlier_attempts").isNull()
        | (F.col("_earlier_error").isNotNull() & (F.col("_earlier_attempts") < max_attempts))
    ).withColumn("attempts", F.coalesce(F.col("_earlier_attempts"), F.lit(0))) \
        .drop("_earlier_error", "_earlier_attempts")


def work_table(name: str, scope: str = "") -> str:
    """The internal table ``name`` of one command's pass (``scope``: the command and its model,
    "evaluate qwen2.5-1.5b"): commands that share a lake at once never read or replace each
    other's queues and chunks, and a rerun of the same command finds what its killed run left.
    No scope: the lake's one table of that name (a stage that runs once per lake)."""
    return f"{name}_{digest(scope, 10)}" if scope else name


def staged_tables(target: str, scope: str = "") -> tuple[str, str]:
    """Where a pass into ``target`` keeps rows between its model and ``target``: the chunk
    stored before its commit, and replacements waiting for the end of the pass."""
    return work_table(f"chunk_{target}", scope), work_table(f"replace_{target}", scope)


def recover_chunk(lake: Lake, target: str, key: str, scope: str = "") -> None:
    """A chunk written just before a kill, and replacements not merged yet: make sure they
    reached their table (merged by key: a row already there is replaced, never doubled)."""
    for staged in staged_tables(target, scope):
        if lake.exists(staged):
            lake.upsert(lake.read(staged), target, [key])
            lake.drop(staged)


def _store_then_commit(lake: Lake, produced: DataFrame, rows: DataFrame, key: str, chunk_table: str,
                       replace_table: str, target: str, replaces: bool) -> DataFrame:
    """A chunk's output stored in ``chunk_table``, then committed: appended to ``target``, or
    where it ``replaces`` keys the target holds, those rows into ``replace_table`` (merged once
    at the end of the pass: a pass re-checking every row then reads the target once). Returns
    the stored chunk."""
    lake.write(produced, chunk_table)
    written = lake.read(chunk_table)
    if replaces:
        # The side table first: where ``rows`` is the queue itself (one chunk) it flags keys by
        # reading the target, and a lake that reads its newest version (Spark's Delta) would
        # flag the rows just appended too.
        replaced = rows.where("_replaces").select(key)
        lake.write(written.join(replaced, key, "left_semi").coalesce(1), replace_table, mode="append")
        lake.write(written.join(replaced, key, "left_anti").coalesce(1), target, mode="append")
    else:
        lake.write(written.coalesce(1), target, mode="append")
    return written


def run_chunks(
    lake: Lake, queue: DataFrame, total: int, function: Callable, schema: str, target: str, key: str,
    chunk_rows: int, tasks: int, gpus_per_task: float = 0, *, label: str, engine: str,
    units_column: str | None = None, unit: str = "texts", progress_every_s: float = 30.0,
    totals: dict[str, Column] | None = None, scope: str = "",
) -> Iterator[Row]:
    """Run ``function`` over ``queue`` (``total`` rows) chunk by chunk; each chunk's output is
    committed into ``target`` and yielded with its sums (gathered while its rows are written):
    ``rows``, ``units`` and the caller's ``totals`` (aggregate columns over the chunk's output,
    by name). Where the lake retries a conflicting commit without running the query again
    (delta-rs), a chunk of new keys is one Spark job: the model's rows written into ``target``
    and committed, its sums gathered while they are written (a chunk lost to a kill or a
    failed commit leaves unlisted files in the target's folder); elsewhere the chunk is stored
    first (``chunk_<target>``), appended, then summed.

    A commit costs what its chunk costs, however large ``target`` has grown: the tasks write
    the chunk's files and the driver commits only their names (no rows pass through it). Rows
    of new keys are appended; only keys ``target`` already holds (a failed row retried, a text
    checked again under new settings) are merged by key, which reads the target; those are
    rare, and wait in ``replace_<target>`` to be merged once at the end of the pass. The queue
    is stored once more, partitioned by chunk, so a chunk reads only its own rows; a pass
    that fits one chunk reads the queue as it is (``queue`` must be a stored table's rows:
    it is read again, with the target's keys, after the chunk is stored).

    ``label`` names the pass and ``engine`` the model in progress lines and in the
    ``WorkerCrashed`` error raised when a Python worker dies; ``units_column`` (e.g.
    ``tokens_out``, unit ``tokens``) is summed for the progress rate, else rows count.
    ``scope``: the command and model whose staging tables these are (``work_table``)."""
    chunks = max(1, math.ceil(total / max(1, chunk_rows)))
    chunk_table, replace_table = staged_tables(target, scope)
    queue_table = work_table(f"work_{target}", scope)
    queue = queue.withColumn("_chunk", F.pmod(seeded_hash(F.col(key)), F.lit(chunks)).cast("int"))
    # One pass over the target to flag the keys it holds, then never again.
    target_exists = lake.exists(target)
    if target_exists:
        present = lake.read(target).select(key).distinct().withColumn("_replaces", F.lit(True))
        queue = queue.join(present, key, "left")
    else:
        queue = queue.withColumn("_replaces", F.lit(None).cast("boolean"))
    queue = queue.withColumn("_replaces", F.coalesce("_replaces", F.lit(False)))
    if chunks > 1:
        # Each chunk's rows together: one file per chunk, however many chunks.
        lake.write(queue.repartition("_chunk").sortWithinPartitions("_chunk"), queue_table, partition_by=["_chunk"])
        work = lake.read(queue_table)
    else:  # small passes (most of them): one Spark job and one commit fewer
        work = queue
    # Which chunks hold keys the target has (rare): the others commit by append alone.
    replacing = {row["_chunk"] for row in work.where("_replaces").select("_chunk").distinct().collect()} \
        if target_exists else set()
    profile = gpu_profile(float(gpus_per_task)) if gpus_per_task else None
    progress = PassProgress(label, total, progress_every_s, unit)
    sums = [F.count("*").alias("rows"), (F.sum(units_column) if units_column else F.count("*")).alias("units"),
            *[column.alias(name) for name, column in (totals or {}).items()]]
    for chunk in range(chunks):
        rows = work.where(F.col("_chunk") == chunk)
        part = rows.drop("_chunk", "_replaces").repartition(tasks)
        produced = part.mapInPandas(function, schema, profile=profile)
        # A chunk of new keys on delta-rs: its sums gathered while its rows are written, not by a
        # Spark job of their own. Elsewhere summed from the stored chunk: a Spark Delta write
        # (and a Spark Connect session) is not where Observation's metrics are known to arrive.
        direct = chunk not in replacing and not lake.retry_recomputes and hasattr(produced, "_jdf")
        observation = Observation(f"chunk_{chunk}_{uuid.uuid4().hex[:8]}") if direct else None
        if observation is not None:
            produced = produced.observe(observation, *sums)
        progress.chunk_started(chunk, chunks)
        try:
            if observation is not None:
                # Straight into the target: one Spark job per chunk, the model's rows written and
                # committed once (a conflicting commit is retried, never the query). A kill before
                # the commit, or a commit that fails for good, leaves files no table version
                # lists (disk only, never read), and the rerun asks for the chunk again.
                lake.write(produced, target, mode="append")
            else:
                # Stored before committing: a model must not run twice for one row (a Spark writer
                # retrying a conflict runs the query again), and the stored chunk is what
                # recover_chunk finishes after a kill.
                written = _store_then_commit(lake, produced, rows, key, chunk_table, replace_table, target,
                                             chunk in replacing)
            done = Row(**observation.get) if observation is not None else written.agg(*sums).first()
        except Exception as error:
            cause = worker_crash_cause(error)
            if cause is not None:
                raise WorkerCrashed(label, engine, cause, str(error)) from error
            raise
        finally:
            progress.stop()  # whatever ends the chunk, the heartbeat ends with it
        progress.chunk_finished(int(done["rows"]), float(done["units"] or 0))
        yield done
    if lake.exists(replace_table):
        lake.upsert(lake.read(replace_table), target, [key])
        lake.drop(replace_table)
    lake.drop(chunk_table)
    lake.drop(queue_table)  # also one a killed run with more chunks left behind
    # A file per chunk: merged before analysts read the table. Only an optimisation, after
    # everything is committed: a failure (another job merging into the target at the same
    # time, an engine without OPTIMIZE) costs nothing but small files, so it is logged.
    try:
        lake.compact(target)
    except Exception as error:  # noqa: BLE001
        log.warning("could not compact %s after the pass (%s); its rows are all committed",
                    target, str(error).splitlines()[0][:300])
