"""Questions and a full evaluation at volume, on the replicated real slice.

    python benchmarks/evaluate_volume.py [--replicas 5] [--model qwen2.5-coder-0.5b-instruct-q4km]

Replicates the real Wikidata slice ``--replicas`` times with fresh entity ids (as
benchmarks/ingest.py does), ingests it, builds claims, stands hand-written texts in for the
generated ones (as the tests do: generation has its own benchmark), builds the questions and
evaluates the model in every setting (probe, detection, single, pair, style, +Desc, RtD) with
an MLflow run. Prints the question set's make-up (per setting, left out, letter spread), the
answering rate, and the headline metrics with their n. The last line is
``evaluate_answers_per_s r``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4km")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    sys.path.insert(0, str(PROJECT))
    sys.path.insert(0, str(PROJECT / "benchmarks"))
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from ingest import SLICE, build_dump

    from misbench.config import load_config
    from misbench.evaluate.job import run_evaluate
    from misbench.lake import open_lake
    from misbench.spark import get_spark
    from tests.bench.handmade import bench_lake_from_dump

    slice_mb = SLICE.stat().st_size / 1_000_000
    dump, _ = build_dump(int(slice_mb * args.replicas) + 1)
    lake_root = tempfile.mkdtemp(prefix="misbench-bench-evaluate-")
    cfg = load_config("local", ["spark.master=local[2]", f"lake.root={lake_root}",
                                f"llm.llama_cpp.model={args.model}", "evaluate.commit_rows=256",
                                "evaluate.rtd.reconstruct_words=40", "generate.commit_rows=256"])
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    claims, bench = bench_lake_from_dump(spark, lake, cfg, str(dump))
    print(f"claims {claims.claims}; questions {bench.questions} {bench.by_kind}; per setting {bench.by_setting}")
    print(f"left out {bench.left_out}; true answer per letter {bench.memory_positions}")
    started = time.perf_counter()
    (report,) = run_evaluate(spark, lake, cfg)
    seconds = time.perf_counter() - started
    print(f"evaluate: {report.items} answers ({report.unparsed} unparsed) in {seconds:.0f} s; MLflow run "
          f"{report.mlflow_run_id} in {lake_root}/_mlflow")
    for setting, (metric, value, n) in report.headline.items():
        print(f"  {setting} {metric} {value:.3f} (n={n})" if value == value and value is not None
              else f"  {setting} {metric} null (n={n})")
    print(f"evaluate_answers_per_s {report.items / seconds:.3f}")


if __name__ == "__main__":
    main()
