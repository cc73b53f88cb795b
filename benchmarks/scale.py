"""How ingest, claims, hoax and bench grow with the graph: wall time, driver memory, data sent
to the driver and task skew at several sizes of a synthetic Wikidata dump.

    python benchmarks/scale.py [--sizes 10000 100000 1000000] [--seed 0] [--stages ingest claims hoax bench]
                               [--resume]

For each size N: a synthetic dump of N entities (benchmarks/synthetic_dump.py, plain JSON,
cached under benchmarks/out/ with its counts), then, in a fresh Python process with its own
Spark session (the ``local`` profile: ``local[2]``, delta-rs folder lake under benchmarks/out/,
removed once every stage ran; each finished stage's numbers are saved at once, so a run that
is killed goes on with ``--resume`` from the stage it was in), after a warm-up ingest of the
real slice:
  ingest  ``run_ingest`` of the dump;
  claims  ``run_claims`` (one-hop and two-hop claims, conflicts, claims_stats);
  hoax    ``run_hoax`` (MultiHoax-style questions from the graph; rewording off);
  bench   ``run_bench``. Bench needs texts that passed quality control; here they are
          stand-ins, built with Spark from the claims and conflicts tables (the ``bench_inputs``
          step, timed apart and not part of any stage): for every claim and kind (correct and
          each conflict kind) and the styles wikipedia, news and blog, one ``evidence`` row
          whose text is the claim's (or the conflict's) statement in a plain template, an
          ``evidence_qc`` row that passed, and an ``evidence_slots`` row that passed. The same
          tables generation and quality control write, so bench runs its real code on them.

Per size and stage it reports the wall time; the Python driver's peak RSS (sampled) and the
JVM's heap (peak of the old generation, and live heap after a full GC at the end of the stage;
in local mode the executors share the driver's JVM, so this is an upper bound for the driver);
the bytes tasks sent back to the driver (``resultSize`` of every task, from Spark's REST API):
data collected to the driver shows up there; and skew from the task list of every Spark stage
the pipeline stage ran: per Spark stage the longest task's share of the stage's task time and
max / median task time, and ``idle_core_s``: the seconds a core stood idle because one task
ran longer than an even split of the stage's task time over both cores (a hot key putting one
task on one core for the whole stage shows up there). Then, per stage, the growth exponent
between consecutive sizes: log(t2/t1) / log(N2/N1). Raw numbers go to
benchmarks/out/scale-<timestamp>.json. The last lines are ``<stage>_growth_exponent x``
(between the two largest sizes).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
OUT = PROJECT / "benchmarks" / "out"
SLICE = PROJECT / "tests" / "data" / "wikidata-dump-slice-49.json"
STAGES = ("ingest", "claims", "hoax", "bench")
STYLES = ("wikipedia", "news", "blog")
CORES = 2

sys.path.insert(0, str(PROJECT / "benchmarks"))
sys.path.insert(0, str(PROJECT / "lib"))


# --------------------------------------------------------------------------------------------
# the dump
# --------------------------------------------------------------------------------------------


def ensure_dump(entities: int, seed: int) -> tuple[Path, dict]:
    from synthetic_dump import write_dump

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"synthetic-{entities}-s{seed}.json"
    meta = path.with_suffix(".counts.json")
    if path.exists() and meta.exists():
        return path, json.loads(meta.read_text())
    started = time.perf_counter()
    counts = write_dump(path, entities, seed)
    counts["write_seconds"] = round(time.perf_counter() - started, 1)
    meta.write_text(json.dumps(counts, indent=1))
    return path, counts


# --------------------------------------------------------------------------------------------
# measuring one pipeline stage in the child process
# --------------------------------------------------------------------------------------------


class PythonRss:
    """Samples this process's resident memory; ``peak()`` since the last ``reset()``."""

    def __init__(self, every_s: float = 0.2):
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def current(self) -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * self._page

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self._peak = max(self._peak, self.current())

    def reset(self) -> None:
        self._peak = self.current()

    def peak(self) -> int:
        return max(self._peak, self.current())


class Jvm:
    """Heap of the driver JVM through py4j: per-pool peaks (reset per stage), live heap after GC."""

    def __init__(self, spark):
        self.jvm = spark.sparkContext._jvm
        management = self.jvm.java.lang.management.ManagementFactory
        self.pools = [p for p in management.getMemoryPoolMXBeans() if str(p.getType().toString()) == "Heap memory"]
        self.memory = management.getMemoryMXBean()

    def reset(self) -> None:
        for pool in self.pools:
            pool.resetPeakUsage()

    def peaks(self) -> dict:
        return {str(p.getName()): int(p.getPeakUsage().getUsed()) for p in self.pools}

    def live_after_gc(self) -> int:
        self.jvm.java.lang.System.gc()
        return int(self.memory.getHeapMemoryUsage().getUsed())

    def max_heap(self) -> int:
        return int(self.memory.getHeapMemoryUsage().getMax())


class SparkRest:
    """Spark's monitoring REST API at the driver UI: stages completed since the last call."""

    def __init__(self, spark):
        self.base = spark.sparkContext.uiWebUrl.rstrip("/") + "/api/v1"
        self.app = spark.sparkContext.applicationId
        self.seen: set[tuple[int, int]] = set()

    def _get(self, path: str):
        with urllib.request.urlopen(f"{self.base}/applications/{self.app}/{path}", timeout=60) as response:
            return json.loads(response.read())

    def mark(self) -> None:
        """Forget nothing, but count every stage finished so far as seen."""
        for stage in self._get("stages"):
            self.seen.add((stage["stageId"], stage["attemptId"]))

    def storage_memory_used(self) -> int:
        return sum(int(e.get("memoryUsed", 0)) for e in self._get("executors"))

    def new_stages(self) -> list[dict]:
        out = []
        for stage in self._get("stages"):
            key = (stage["stageId"], stage["attemptId"])
            if key in self.seen or stage["status"] not in ("COMPLETE", "FAILED"):
                continue
            self.seen.add(key)
            tasks = self._get(f"stages/{key[0]}/{key[1]}/taskList?length=1000000")
            durations = sorted(max(0, int(t.get("duration") or 0)) for t in tasks)
            result_bytes = sum(int((t.get("taskMetrics") or {}).get("resultSize", 0)) for t in tasks)
            total = sum(durations)
            longest = durations[-1] if durations else 0
            median = durations[len(durations) // 2] if durations else 0
            out.append({
                "stage_id": key[0], "name": _relative(stage.get("name", ""))[:120], "tasks": len(durations),
                "wall_s": round(_span_s(stage), 3), "task_s": round(total / 1000, 3),
                "longest_task_s": round(longest / 1000, 3),
                "longest_share": round(longest / total, 3) if total else 0.0,
                "max_over_median": round(longest / median, 2) if median else None,
                "idle_core_s": round(max(0.0, longest - total / CORES) / 1000, 3) if len(durations) > 1 else 0.0,
                "result_bytes": result_bytes,
                "shuffle_read_bytes": int(stage.get("shuffleReadBytes", 0)),
                "input_bytes": int(stage.get("inputBytes", 0)),
            })
        return out


def _relative(text: str) -> str:
    """A Spark stage name without this machine's folders (call sites are file paths)."""
    text = text.replace(str(PROJECT) + os.sep, "")
    return re.sub(r"/\S*/site-packages/", "site-packages/", text)


def _span_s(stage: dict) -> float:
    def parse(text):
        return dt.datetime.strptime(text.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f")

    if stage.get("submissionTime") and stage.get("completionTime"):
        return (parse(stage["completionTime"]) - parse(stage["submissionTime"])).total_seconds()
    return 0.0


def skew_summary(stages: list[dict]) -> dict:
    """Per pipeline stage: how much skew cost, and the Spark stage where it cost most."""
    idle = sum(s["idle_core_s"] for s in stages)
    worst = max(stages, key=lambda s: s["idle_core_s"], default=None)
    # the longest task's share among stages with enough tasks and time to judge
    judged = [s for s in stages if s["tasks"] >= 4 and s["task_s"] >= 1.0]
    heaviest = max(judged, key=lambda s: s["longest_share"], default=None)
    return {
        "spark_stages": len(stages), "tasks": sum(s["tasks"] for s in stages),
        "task_s": round(sum(s["task_s"] for s in stages), 1),
        "idle_core_s": round(idle, 1),
        "worst_stage": worst,
        "max_longest_share": heaviest["longest_share"] if heaviest else None,
        "max_longest_share_stage": heaviest,
        "result_bytes": sum(s["result_bytes"] for s in stages),
    }


def bench_inputs(spark, lake) -> dict:
    """Stand-ins for generated, checked texts (see the module docstring), built with Spark."""
    from pyspark.sql import functions as F

    from misbench.generate.stage import GENERATED_SCHEMA
    from misbench.quality.stage import QC_SCHEMA

    claims = lake.read("claims").select("claim_id", "hop", "statement")
    conflicts = lake.read("conflicts").select("claim_id", "kind", "statement")
    rows = claims.select("claim_id", "hop", F.lit("correct").alias("kind"), "statement").unionByName(
        conflicts.join(claims.select("claim_id", "hop"), "claim_id").select("claim_id", "hop", "kind", "statement"))
    rows = rows.select("*", F.explode(F.array(*[F.lit(s) for s in STYLES])).alias("style")).withColumn(
        "evidence_id", F.substring(F.sha2(F.concat_ws("|", "claim_id", "kind", "style"), 256), 1, 24))
    now = F.current_timestamp()
    values = {
        "text": F.concat(F.col("statement"), F.lit(" This "), F.col("style"),
                         F.lit(" text says so in plain words, for the benchmark.")),
        "backend": F.lit("synthetic"), "model": F.lit("template"), "tokens_in": F.lit(0), "tokens_out": F.lit(0),
        "finish_reason": F.lit("stop"), "latency_s": F.lit(0.0), "attempts": F.lit(1), "load_id": F.lit("synthetic"),
        "generated_at": now, "passed": F.lit(True), "reasons": F.array().cast("array<string>"), "checked_at": now,
        "first_attempt_passed": F.lit(True),
    }

    def shaped(ddl: str):
        schema = spark.createDataFrame([], ddl).schema
        return rows.select(*[(values.get(f.name, F.col(f.name)) if f.name in values or f.name in rows.columns
                              else F.lit(None)).cast(f.dataType).alias(f.name) for f in schema])

    lake.write(shaped(GENERATED_SCHEMA), "evidence")
    lake.write(shaped(QC_SCHEMA), "evidence_qc")
    lake.write(shaped("claim_id string, hop int, kind string, style string, attempts long, passed boolean, "
                      "first_attempt_passed boolean, evidence_id string"), "evidence_slots")
    return {"evidence": lake.row_count("evidence")}


def shuffle_partitions(entities: int) -> int:
    """8 per 10^5 entities, at least the local profile's 8 (so 10^4 and 10^5 run as before)."""
    return max(8, entities // 12_500)


def child(entities: int, dump: str, state_path: str, stages: list[str]) -> None:
    """Run the stages of ``stages`` that ``state_path`` does not record as finished yet, on the
    size's lake (kept between runs until every stage finished), saving after each stage."""
    from misbench.config import load_config
    from misbench.ingest.job import run_ingest
    from misbench.lake import open_lake
    from misbench.spark import get_spark

    state_file = Path(state_path)
    results = json.loads(state_file.read_text())
    lake_root = OUT / results["lake"]
    lake_root.mkdir(exist_ok=True)
    cfg = load_config("local", ["spark.master=local[2]", f"lake.root={lake_root}"])
    # set directly, as a dict, rather than one --set per setting
    conf = cfg.data["spark"]["conf"]
    conf.update({"spark.ui.enabled": "true", "spark.ui.retainedTasks": "500000", "spark.ui.retainedStages": "20000",
                 "spark.ui.retainedJobs": "20000", "spark.sql.ui.retainedExecutions": "50"})
    # Shuffle partitions sized to the data, as a user would (the local profile's 8 are for the
    # demo's slice): at 10^6 entities 8 partitions of several GB each ran a sort out of memory.
    # AQE still coalesces small ones.
    conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions(results["entities"]))
    rss = PythonRss()
    started = time.perf_counter()
    spark = get_spark(cfg)
    session_s = time.perf_counter() - started
    lake = open_lake(spark, cfg)
    jvm, rest = Jvm(spark), SparkRest(spark)
    warm_root = tempfile.mkdtemp(prefix="scale-warm-", dir=OUT)
    run_ingest(spark, open_lake(spark, cfg.with_overrides([f"lake.root={warm_root}"])), cfg, [str(SLICE)])
    shutil.rmtree(warm_root, ignore_errors=True)
    results.setdefault("session_s", round(session_s, 1))
    results["max_heap"] = jvm.max_heap()
    results.setdefault("sessions", 0)
    results["sessions"] += 1

    def measure(name: str, work):
        if name in results["stages"]:
            return
        rest.mark()
        rss.reset()
        jvm.reset()
        t0 = time.perf_counter()
        report = work()
        seconds = time.perf_counter() - t0
        spark_stages = rest.new_stages()
        peaks = jvm.peaks()
        entry = {
            "seconds": round(seconds, 2),
            "session": results["sessions"],
            "python_rss_peak": rss.peak(),
            "jvm_old_gen_peak": sum(v for k, v in peaks.items() if "Old" in k or "Tenured" in k),
            "jvm_heap_pool_peaks": peaks,
            "jvm_live_after_gc": jvm.live_after_gc(),
            "storage_memory_used": rest.storage_memory_used(),
            "report": report,
            "skew": skew_summary(spark_stages),
            "spark_stages": spark_stages,
        }
        results["stages"][name] = entry
        print(f"  [{entities}] {name}: {seconds:.1f} s {report}", file=sys.stderr, flush=True)
        state_file.write_text(json.dumps(results))

    try:
        if "ingest" in stages:
            def ingest():
                r = run_ingest(spark, lake, cfg, [dump])
                return {"entities": r.entities, "triples": r.triples, "rejects": r.rejects}
            measure("ingest", ingest)
        if "claims" in stages:
            from misbench.claims.job import run_claims

            def claims():
                r = run_claims(spark, lake, cfg)
                return {"claims": r.claims, "one_hop": r.one_hop, "two_hop": r.two_hop, "conflicts": r.conflicts}
            measure("claims", claims)
        if "hoax" in stages:
            from misbench.hoax.job import run_hoax
            from misbench.hoax.stage import NOT_TRIED

            def hoax():
                r = run_hoax(spark, lake, cfg)
                return {"questions": r.questions, "by_reasoning": r.by_reasoning,
                        "candidates": r.questions + sum(r.rejected.values()),
                        "passed_over": r.rejected.get("another premise chosen for the chain", 0),
                        "not_tried": r.rejected.get(NOT_TRIED, 0)}
            measure("hoax", hoax)
        if "bench" in stages:
            from misbench.bench.job import run_bench

            measure("bench_inputs", lambda: bench_inputs(spark, lake))

            def bench():
                r = run_bench(spark, lake, cfg)
                return {"questions": r.questions, "by_kind": r.by_kind}
            measure("bench", bench)
        results["python_ru_maxrss"] = max(results.get("python_ru_maxrss", 0), _ru_maxrss())
        state_file.write_text(json.dumps(results))
    finally:
        spark.stop()


def _ru_maxrss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --------------------------------------------------------------------------------------------
# the parent: sizes, printing, exponents
# --------------------------------------------------------------------------------------------


def _mb(value) -> str:
    return "-" if value is None else f"{value / 1e6:.0f}"


def exponent(t1: float, t2: float, n1: int, n2: int) -> float:
    return math.log(max(t2, 1e-6) / max(t1, 1e-6)) / math.log(n2 / n1)


def report(runs: list[dict], stages: list[str]) -> tuple[list[str], list[str]]:
    """(report lines, the ``<stage>_growth_exponent x`` lines)."""
    lines = []
    sizes = [r["entities"] for r in runs]
    named = [s for s in stages] + (["bench_inputs"] if "bench" in stages else [])
    lines.append("dumps:")
    for r in runs:
        d = r["dump"]
        lines.append(f"  N={r['entities']:>9}: {d['json_bytes'] / 1e6:8.1f} MB JSON, {d['statements']:>10} statements "
                     f"({d['entity_valued']} entity-valued), written in {d.get('write_seconds', '?')} s; "
                     f"people {d['by_kind']['person']}, films {d['by_kind']['film']}, cities {d['by_kind']['city']}, "
                     f"countries {d['by_kind']['country']}")
    lines.append("wall time per stage (s):")
    lines.append("  " + "stage".ljust(13) + "".join(f"{n:>12}" for n in sizes))
    for stage in named:
        lines.append("  " + stage.ljust(13) + "".join(
            f"{r['stages'][stage]['seconds']:>12.1f}" if stage in r["stages"] else f"{'-':>12}" for r in runs))
    lines.append("  " + "spark start".ljust(13) + "".join(f"{r['session_s']:>12.1f}" for r in runs))
    lines.append("outputs:")
    for r in runs:
        lines.append(f"  N={r['entities']}: " + "; ".join(f"{s} {r['stages'][s]['report']}" for s in named
                                                          if s in r["stages"]))
    lines.append("memory per stage (MB): python driver peak RSS / JVM old-gen peak / JVM live heap after GC / "
                 "Spark storage memory used (cached and checkpointed blocks)")
    for stage in named:
        cells = []
        for r in runs:
            e = r["stages"].get(stage)
            cells.append("-" if e is None else f"{_mb(e['python_rss_peak'])}/{_mb(e['jvm_old_gen_peak'])}/"
                                                 f"{_mb(e['jvm_live_after_gc'])}/{_mb(e['storage_memory_used'])}")
        lines.append("  " + stage.ljust(13) + "".join(f"{c:>22}" for c in cells))
    lines.append("  JVM max heap (MB): " + ", ".join(_mb(r["max_heap"]) for r in runs))
    lines.append("bytes sent to the driver by tasks (resultSize, all Spark stages of the stage), KB:")
    for stage in named:
        lines.append("  " + stage.ljust(13) + "".join(
            f"{r['stages'][stage]['skew']['result_bytes'] / 1e3:>12.0f}" if stage in r["stages"] else f"{'-':>12}"
            for r in runs))
    lines.append("skew per stage: Spark stages, tasks, task time (s), idle core time from uneven tasks (s); the Spark "
                 "stage where one task kept a core busy longest beyond an even split: its wall, tasks, "
                 "longest task, share of its task time, max/median")
    for stage in named:
        for r in runs:
            e = r["stages"].get(stage)
            if e is None:
                continue
            s = e["skew"]
            w = s["worst_stage"]
            worst = ("" if not w else f"; worst: stage {w['stage_id']} '{w['name'][:60]}' wall {w['wall_s']:.1f} s, "
                     f"{w['tasks']} tasks, longest {w['longest_task_s']:.1f} s = {w['longest_share']:.0%} of "
                     f"{w['task_s']:.1f} s, max/median {w['max_over_median']}")
            share = s["max_longest_share"]
            lines.append(f"  {stage:<12} N={r['entities']:<9} {s['spark_stages']:>4} stages {s['tasks']:>6} tasks "
                         f"{s['task_s']:>8.1f} s, idle core {s['idle_core_s']:>6.1f} s "
                         f"({s['idle_core_s'] / max(e['seconds'], 1e-6):.0%} of wall); "
                         f"max longest-task share {'-' if share is None else f'{share:.0%}'}{worst}")
    lines.append("growth exponents log(t2/t1)/log(N2/N1) between consecutive sizes:")
    exponents = {}
    for stage in named:
        values = []
        for a, b in zip(runs, runs[1:]):
            if stage in a["stages"] and stage in b["stages"]:
                values.append(exponent(a["stages"][stage]["seconds"], b["stages"][stage]["seconds"],
                                       a["entities"], b["entities"]))
        exponents[stage] = values
        lines.append(f"  {stage:<13}" + "  ".join(f"{v:.2f}" for v in values))
    last = [f"{stage}_growth_exponent {exponents[stage][-1]:.2f}" for stage in stages if exponents.get(stage)]
    return lines, last


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--resume", action="store_true",
                        help="go on from the stages an interrupted run of the same sizes and seed finished "
                             "(their results and lake are kept under benchmarks/out/ until every stage ran)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.dump, args.result, args.stages)
        return 0
    stages = [s for s in STAGES if s in args.stages]
    if "bench" in stages and "claims" not in stages or "claims" in stages and "ingest" not in stages \
            or "hoax" in stages and "ingest" not in stages:
        parser.error("claims and hoax need ingest, bench needs claims")
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    runs = []
    for entities in sorted(args.sizes):
        print(f"N={entities}: writing or reusing the dump", file=sys.stderr, flush=True)
        path, counts = ensure_dump(entities, args.seed)
        state = OUT / f"scale-state-{entities}-s{args.seed}.json"
        lake = OUT / f"scale-lake-{entities}-s{args.seed}"
        if not args.resume or not state.exists():
            state.unlink(missing_ok=True)
            shutil.rmtree(lake, ignore_errors=True)
            state.write_text(json.dumps({"entities": entities, "lake": lake.name, "stages": {}}))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--child", str(entities), "--dump", str(path),
                               "--result", str(state), "--stages", *stages], cwd=PROJECT)
        run = json.loads(state.read_text())
        run.setdefault("session_s", 0)
        run.setdefault("max_heap", 0)
        run["dump"] = counts
        run["child_seconds"] = round(time.perf_counter() - started, 1)
        finished = all(s in run["stages"] for s in stages)
        run["returncode"] = done.returncode if done.returncode or finished else 1
        runs.append(run)
        if run["returncode"] == 0:
            state.unlink(missing_ok=True)
            shutil.rmtree(lake, ignore_errors=True)
        else:
            print(f"N={entities}: the run stopped (exit {done.returncode}); its finished stages and lake are kept: "
                  f"rerun with --resume to go on from there", file=sys.stderr)
            break
    lines, last = report(runs, stages)
    out = OUT / f"scale-{stamp}.json"
    out.write_text(json.dumps({"sizes": [r["entities"] for r in runs], "seed": args.seed, "cores": CORES,
                               "runs": runs}, indent=1))
    print("\n".join(lines))
    print(f"raw numbers: {out.relative_to(PROJECT)}")
    print("\n".join(last))
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
