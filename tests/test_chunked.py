"""The pieces of the chunked model pass that speak to the user: crash causes and progress."""
import logging
import time

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


def test_worker_crash_causes_are_read_from_sparks_error():
    assert worker_crash_cause(RuntimeError(SEGFAULT)) == "Fatal Python error: Segmentation fault"
    assert "SIGKILL" in worker_crash_cause(RuntimeError(KILLED))
    assert worker_crash_cause(RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found")) is None
    assert worker_crash_cause(ValueError("a Python UDF raised: ZeroDivisionError")) is None


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
