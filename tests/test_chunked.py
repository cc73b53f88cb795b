"""The pieces of the chunked model pass that speak to the user: crash causes and progress."""
import logging
import time

from pyspark.sql import functions as F

from misbench.chunked import PassProgress, WorkerCrashed, worker_crash_cause

# What Spark 4 puts into the driver-side error when a Python worker dies (abridged, real wording).
SEGFAULT = (
    "An error occurred while calling o1162.collectToPython.\n: org.apache.spark.SparkException: "
    "Job aborted due to stage failure: Task 0 in stage 49.0 failed 1 times, most recent failure: "
    "Lost task 0.0 in stage 49.0 (TID 48) (192.0.2.2 executor driver): org.apache.spark.SparkException: "
    "Python worker exited unexpectedly (crashed): Fatal Python error: Segmentation fault\n\n"
    "Current thread 0x00007f (most recent call first):\n  File \"llama.py\", line 1 in eval\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.read(PythonRunner.scala:600)"
)
KILLED = ("org.apache.spark.SparkException: Job aborted due to stage failure: ... "
          "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)\n"
          "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.read(PythonRunner.scala:600)\n"
          "Caused by: java.io.EOFException")


def recorded_writes(lake) -> list[str]:
    """The names of the tables ``lake`` writes from now on, in order."""
    writes = []
    original = lake.write

    def recording_write(df, name, *args, **kwargs):
        writes.append(name)
        return original(df, name, *args, **kwargs)

    lake.write = recording_write
    return writes


def test_worker_crash_causes_are_read_from_sparks_error():
    assert worker_crash_cause(RuntimeError(SEGFAULT)) == "Fatal Python error: Segmentation fault"
    assert "SIGKILL" in worker_crash_cause(RuntimeError(KILLED))
    assert worker_crash_cause(RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found")) is None
    assert worker_crash_cause(ValueError("a Python UDF raised: ZeroDivisionError")) is None
    # the EngineDied a task raised, with the end of the log of a server that was killed
    server_died = ("PythonException: misbench.llm.EngineDied: the vllm server (pid 7) for gpu0 went away "
                   "(APIConnectionError); the task fails and Spark retries it on a new server. Its log ends:\n"
                   "t server supervisor 6 the server was killed by signal SIGSEGV: stopping\n")
    assert worker_crash_cause(RuntimeError(server_died)) == "killed by signal SIGSEGV"


def test_a_crash_message_names_pass_engine_cause_and_what_to_try():
    message = str(WorkerCrashed("generate styles", "llama_cpp model m", "Fatal Python error: Aborted", SEGFAULT))
    assert message.startswith("generate styles: the Python worker running llama_cpp model m died "
                              "(Fatal Python error: Aborted)")
    assert "rerun the same command" in message and "Try:" in message
    assert "org.apache" not in message


def test_progress_lines_give_rows_rate_and_time_left(caplog):
    progress = PassProgress("generate styles", total=20, every_s=0.05, unit="tokens")
    with caplog.at_level(logging.INFO, logger="misbench.progress"):
        progress.chunk_started(0, 3)
        time.sleep(0.2)  # heartbeats while the chunk runs
        progress.chunk_finished(rows=8, units=1200)
    lines = [r.getMessage() for r in caplog.records]
    assert any("0/20 rows (0%)" in line and "chunk 1/3 running for" in line for line in lines[:-1])
    last = lines[-1]
    assert last.startswith("generate styles: 8/20 rows (40%), ") and " tokens/s" in last
    assert "left" in last and "elapsed" in last
    with caplog.at_level(logging.INFO, logger="misbench.progress"):
        progress.chunk_started(1, 3)
        progress.chunk_finished(rows=12, units=10)
    assert "20/20 rows (100%)" in caplog.records[-1].getMessage()
    assert "left" not in caplog.records[-1].getMessage()


def test_chunks_append_new_keys_merge_only_known_ones_and_recover_after_a_kill(spark, lake):
    """A pass over 40 queued rows, 10 of them keys the target already holds: every chunk
    commits its new keys by append (no MERGE reads the target), and those 10 wait in a side
    table, merged once at the end of the pass; the target ends with each key once and the
    new values. A chunk stored just before a kill is
    finished by recover_chunk, without a duplicate."""
    import pandas as pd

    from misbench.chunked import recover_chunk, run_chunks

    schema = "key string, value string"
    lake.write(spark.createDataFrame([(f"k{i}", "old") for i in range(10)], schema), "target")
    queue = spark.createDataFrame([(f"k{i}",) for i in range(40)], "key string")

    def produce(batches):
        for batch in batches:
            yield pd.DataFrame({"key": batch["key"], "value": "new"})

    chunks = list(run_chunks(lake, queue, 40, produce, schema, "target", "key", 5, 2, label="test", engine="none",
                             totals={"new": F.sum((F.col("value") == "new").cast("int"))}))
    assert sum(c["rows"] for c in chunks) == sum(c["new"] for c in chunks) == 40 and len(chunks) == 8
    rows = lake.read("target").collect()
    assert sorted(r.key for r in rows) == sorted(f"k{i}" for i in range(40))
    assert {r.value for r in rows} == {"new"}
    operations = [entry["operation"] for entry in lake._table("target").history()]
    merges, compactions = operations.count("MERGE"), operations.count("OPTIMIZE")
    # one append per chunk, and the 10 known keys merged once, at the end of the pass
    assert merges == 1 and len(operations) - 1 - merges - compactions == 8
    # A file per chunk, merged into one at the end of the pass: same rows, one file to read.
    assert operations[0] == "OPTIMIZE" and len(lake._table("target").file_uris()) == 1
    assert not lake.exists("chunk_target") and not lake.exists("work_target")

    # killed after the chunk was stored, before or after its append: finished once, no duplicate
    lake.write(spark.createDataFrame([("k3", "later"), ("k99", "later")], schema), "chunk_target")
    recover_chunk(lake, "target", "key")
    rows = {r.key: r.value for r in lake.read("target").collect()}
    assert len(rows) == 41 == lake.read("target").count() and rows["k3"] == rows["k99"] == "later"
    assert not lake.exists("chunk_target")


def test_a_pass_that_fits_one_chunk_reads_the_queue_as_it_is_and_still_merges_known_keys(spark, lake):
    """One chunk: no work table is stored; the keys the target holds are still merged (not
    doubled), and the chunk's sums come back with its row count."""
    import pandas as pd

    from misbench.chunked import run_chunks

    schema = "key string, value string"
    lake.write(spark.createDataFrame([(f"k{i}", "old") for i in range(4)], schema), "target")
    lake.write(spark.createDataFrame([(f"k{i}",) for i in range(2, 8)], "key string"), "queue")
    writes = recorded_writes(lake)

    def produce(batches):
        for batch in batches:
            yield pd.DataFrame({"key": batch["key"], "value": "new"})

    chunks = list(run_chunks(lake, lake.read("queue"), 6, produce, schema, "target", "key", 10, 2,
                             label="test", engine="none",
                             totals={"new": F.sum((F.col("value") == "new").cast("int"))}))
    assert [(c["rows"], c["new"]) for c in chunks] == [(6, 6)]
    assert "work_target" not in writes
    rows = {r.key: r.value for r in lake.read("target").collect()}
    assert rows == {"k0": "old", "k1": "old", **{f"k{i}": "new" for i in range(2, 8)}}
    assert lake.read("target").count() == 8


def test_chunks_of_new_keys_go_straight_into_the_target_with_their_sums(spark, lake):
    """delta-rs retries a conflicting commit without running the query again: a chunk of new
    keys is written into the target by the model's own Spark job (no stored chunk, no job of
    its own for the sums), and the sums gathered while writing are the chunk's."""
    import pandas as pd

    from misbench.chunked import run_chunks

    assert not lake.retry_recomputes
    schema = "key string, value string, tokens long"
    queue = spark.createDataFrame([(f"k{i}",) for i in range(12)], "key string")
    writes = recorded_writes(lake)

    def produce(batches):
        for batch in batches:
            yield pd.DataFrame({"key": batch["key"], "value": "new", "tokens": batch["key"].str[1:].astype("int64")})

    chunks = list(run_chunks(lake, queue, 12, produce, schema, "target", "key", 4, 2, label="test", engine="none",
                             units_column="tokens", totals={"odd": F.sum((F.col("tokens") % 2).cast("int"))}))
    assert len(chunks) == 3 and sum(c["rows"] for c in chunks) == 12
    assert sum(c["units"] for c in chunks) == sum(range(12)) and sum(c["odd"] for c in chunks) == 6
    assert "chunk_target" not in writes and writes.count("target") == 3
    assert sorted(r.key for r in lake.read("target").collect()) == sorted(f"k{i}" for i in range(12))
