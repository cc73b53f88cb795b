"""Quality control through Spark against the same models in a plain loop, measured in one run.

    python benchmarks/quality.py [--claims 2] [--copies 4] [--judge MODEL] [--backend llm_judge|nli]

Builds claims from the real Wikidata slice and generates their texts (Qwen 0.5B), copies each
text ``--copies`` times under new ids (more rows, same lengths), then:
  (a) ``misbench quality`` through Spark (local[2], two tasks) into the lake, model loads
      included;
  (b) standalone: the same models in this process, a plain loop over the same rows
      (completeness, entailment windows, similarity), loads included.
Both verdicts must agree row for row. The last line is ``quality_vs_standalone r`` with
r = (a texts/s) / (b texts/s).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SLICE = PROJECT / "tests" / "data" / "wikidata-dump-slice-49.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=2)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--judge", default="qwen2.5-coder-0.5b-instruct-q4km")
    parser.add_argument("--backend", default="llm_judge", choices=("llm_judge", "nli"))
    parser.add_argument("--nli-model", help="local folder of an NLI cross-encoder (--backend nli)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from pyspark.sql import functions as F

    from misbench.claims.job import run_claims
    from misbench.config import load_config
    from misbench.generate.job import run_generate
    from misbench.ingest.job import run_ingest
    from misbench.lake import open_lake
    from misbench.quality import stage
    from misbench.quality.job import resolved_settings, results_key, run_quality, semantic_descriptions
    from misbench.quality.scorers import ENTAILMENT_BACKENDS, QuestionSimilarity
    from misbench.spark import get_spark

    lake_root = tempfile.mkdtemp(prefix="misbench-bench-quality-")
    overrides = [
        "spark.master=local[2]", f"lake.root={lake_root}", f"llm.llama_cpp.model={args.judge}",
        "generate.tasks=2", "generate.target_words=80",
        "generate.sampling.max_tokens=160", "quality.tasks=2", "quality.commit_rows=1000",
        f"quality.entailment.backend={args.backend}", f"quality.device={args.device}",
    ]
    if args.nli_model:
        overrides.append(f"quality.entailment.nli.model={args.nli_model}")
    cfg = load_config("local", overrides)
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    run_ingest(spark, lake, cfg, [str(SLICE)])
    run_claims(spark, lake, cfg)
    run_generate(spark, lake, cfg, limit=args.claims)
    generated = lake.read("evidence")
    copies = [generated.withColumn("evidence_id", F.concat(F.col("evidence_id"), F.lit(f"-{n}")))
              for n in range(1, args.copies)]
    for copy in copies:
        lake.upsert(copy, "evidence", ["evidence_id"])
    lake.drop("evidence_qc")  # generation checked its texts as it went: both sides start from none

    started = time.perf_counter()
    report = run_quality(spark, lake, cfg)
    spark_s = time.perf_counter() - started
    spark_verdicts = {r.evidence_id: r.passed for r in lake.read("evidence_qc").collect()}
    loads = {r.load_id for r in lake.read("evidence_qc").where("complete").select("load_id").distinct().collect()}
    print(f"(a) misbench quality via Spark: {report.checked} texts in {spark_s:.1f} s = "
          f"{report.checked / spark_s:.2f} texts/s; {report.passed} passed, dropped by filter "
          f"{report.dropped_by_filter}; model loads {len(loads)}")

    settings = resolved_settings(cfg)
    rows = stage.qc_inputs(lake.read("evidence"), lake.read("claims"), lake.read("conflicts"),
                           results_key(settings), semantic_descriptions(lake)).toPandas()
    spark.stop()

    # One process, all cores: the judge's engine and torch get every thread.
    settings["tasks"] = 1
    settings["judge_llm"]["llama_cpp"]["workers"] = 1
    started = time.perf_counter()
    entailer = ENTAILMENT_BACKENDS[args.backend](settings)
    similarity = QuestionSimilarity(settings)
    frame = stage.verdict_frame(rows, settings, entailer, similarity)
    verdicts = dict(zip(frame["evidence_id"], frame["passed"]))
    standalone_s = time.perf_counter() - started
    print(f"(b) standalone loop: {len(verdicts)} texts in {standalone_s:.1f} s = "
          f"{len(verdicts) / standalone_s:.2f} texts/s (loads included)")
    differ = [e for e, v in verdicts.items() if spark_verdicts.get(e) != v]
    print(f"verdicts that differ between (a) and (b): {len(differ)} of {len(verdicts)}")
    shutil.rmtree(lake_root, ignore_errors=True)
    print(f"quality_vs_standalone {(report.checked / spark_s) / (len(verdicts) / standalone_s):.3f}")


if __name__ == "__main__":
    main()
