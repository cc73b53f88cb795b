"""Cost of one chunk's commit as the target table grows, against the MERGE it replaced.

    python benchmarks/commit.py [--sizes 1000 10000 100000 1000000] [--chunk 256] [--chunks 4]

For each target size N: a target of N rows shaped like ``evidence`` (random keys, a text of a
few hundred characters) in a delta-rs lake on local[2]; then a pass of ``--chunks`` chunks of
``--chunk`` new rows through ``run_chunks`` (the real loop: the model function is an identity
over ready rows, so only the commit is timed), and, as the baseline measured in the same run,
the same chunks through the loop run_chunks had before (each chunk stored, then MERGEd by key
into the target, which reads the target).
Prints per N the median seconds per chunk of both; the last lines are the growth from the
smallest to the largest N of both (target for run_chunks: about 1, i.e. flat) and
``commit_merge_vs_append r`` at the largest N.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SCHEMA = "evidence_id string, claim_id string, text string, error string, attempts int"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000, 1000000])
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--chunks", type=int, default=4)
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    import logging

    logging.basicConfig(level=logging.WARNING)
    from pyspark.sql import functions as F

    from misbench.chunked import run_chunks
    from misbench.config import load_config
    from misbench.lake import open_lake
    from misbench.spark import get_spark

    root = tempfile.mkdtemp(prefix="misbench-bench-commit-")
    # the profile's 8 shuffle partitions: its numbers in docs/benchmarks.md were measured so
    # (the override of 4 written here never reached Spark)
    cfg = load_config("local", ["spark.master=local[2]", f"lake.root={root}"])
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)

    def rows(count: int, salt: str):
        return spark.range(count).select(
            F.sha2(F.concat(F.lit(salt), F.col("id").cast("string")), 256).alias("evidence_id"),
            F.concat(F.lit("Q"), (F.col("id") % 5000).cast("string")).alias("claim_id"),
            # about 150 words, as generate.target_words asks
            F.concat_ws(" ", F.array_repeat(F.sha2(F.col("id").cast("string"), 256), 14)).alias("text"),
            F.lit(None).cast("string").alias("error"), F.lit(1).alias("attempts"))

    def identity(batches):
        yield from batches

    results = {}
    for size in args.sizes:
        for name in ("append", "merge"):
            lake.write(rows(size, f"target{size}").repartition(max(1, size // 200000)), f"target_{name}")
        total = args.chunk * args.chunks
        lake.write(rows(total, f"new{size}"), "new_rows")
        queue = lake.read("new_rows")
        # run_chunks: the seconds between chunks are one chunk's run and commit.
        times, last = [], time.perf_counter()
        for _ in run_chunks(lake, queue, total, identity, SCHEMA, "target_append", "evidence_id",
                            args.chunk, 2, label="bench", engine="none"):
            now = time.perf_counter()
            times.append(now - last)
            last = now
        append_s = statistics.median(times[1:] or times)  # the first also stores the queue (several chunks)
        # the old loop (before issue 14): the chunk stored, then merged by key into the target
        merge_times, last = [], time.perf_counter()
        chunked = queue.withColumn("_chunk", F.pmod(F.xxhash64("evidence_id"), F.lit(args.chunks)))
        for chunk in range(args.chunks):
            part = chunked.where(F.col("_chunk") == chunk).drop("_chunk").repartition(2)
            lake.write(part.mapInPandas(identity, SCHEMA), "chunk_old")
            written = lake.read("chunk_old")
            lake.upsert(written, "target_merge", ["evidence_id"])
            written.agg(F.count("*")).first()
            now = time.perf_counter()
            merge_times.append(now - last)
            last = now
        merge_s = statistics.median(merge_times)
        counted = lake.row_count("target_append"), lake.row_count("target_merge")
        assert counted == (size + total, size + total), counted
        results[size] = (append_s, merge_s)
        print(f"target {size:>9} rows: run_chunks append {append_s:.2f} s/chunk, "
              f"MERGE {merge_s:.2f} s/chunk (chunk {args.chunk} rows)", flush=True)
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)
    small, large = min(results), max(results)
    print(f"commit_growth_append {results[large][0] / results[small][0]:.2f}")
    print(f"commit_growth_merge {results[large][1] / results[small][1]:.2f}")
    print(f"commit_merge_vs_append {results[large][1] / results[large][0]:.2f}")


if __name__ == "__main__":
    main()
