"""Where one stage's time goes: its Spark queries, each tied to the misbench line that ran it,
and the operators that took the time.

    python benchmarks/profile_stage.py --stage hoax [--entities 100000] [--seed 0] [--top 12]

Builds (or reuses) the synthetic dump of ``--entities`` entities (benchmarks/scale.py's), a
lake under benchmarks/out/profile-lake-<N>-s<seed>/ with the tables the stage reads (ingest,
claims and, for bench, scale.py's stand-in texts; kept for the next profile of that size), then
runs the stage once with Spark's UI on (``local[2]``, the local profile) and reads Spark's SQL
REST API (per query its wall time and its operators' metrics). A query is tied to the
misbench line that started it (the action: a table write, a local checkpoint, a count) by when
it was submitted. Prints the time per misbench line, then for the longest queries their
heaviest operators (task time) and their largest shuffles (rows, size in memory); the raw
queries go to benchmarks/out/profile-<stage>-<N>-s<seed>.json (rows per operator are there).
A second profile of claims or bench on the same lake measures a rerun (claims compares
with the stored claims).

Operator times are summed over tasks; a whole-stage-codegen block's time includes the
non-codegen operators under it (a window, a sort-merge join's inputs), so read its rows and
shuffle bytes with it. What issue 34's second step found with it is in docs/scaling.md.
"""
from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import re
import shutil
import sys
import time
import traceback
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
OUT = PROJECT / "benchmarks" / "out"
PACKAGE = PROJECT / "lib" / "misbench"
sys.path.insert(0, str(PROJECT / "benchmarks"))
sys.path.insert(0, str(PROJECT / "lib"))

# Actions that start Spark queries; each call records where in misbench it was made.
ACTIONS = ("localCheckpoint", "collect", "count", "isEmpty", "first", "toArrow", "toPandas")
TIMED = ("duration", "time in aggregation build", "sort time", "shuffle write time", "time to run Python workers",
         "time to build hash map")


def misbench_lines() -> str:
    """The innermost three misbench call sites of the current stack (plans.py left out: it
    only marks), outermost last."""
    sites = [f"{Path(frame.filename).relative_to(PACKAGE)}:{frame.lineno}" for frame in traceback.extract_stack()[:-2]
             if Path(frame.filename).is_relative_to(PACKAGE) and not frame.filename.endswith("plans.py")]
    return " < ".join(reversed(sites[-3:]))


def record_actions(calls: list) -> None:
    """Wrap the DataFrame actions so that each call appends (start ms, end ms, where)."""
    from pyspark.sql.classic.dataframe import DataFrame

    for name in ACTIONS:
        original = getattr(DataFrame, name)

        def wrapped(self, *args, _original=original, _name=name, **kwargs):
            started = time.time() * 1000
            try:
                return _original(self, *args, **kwargs)
            finally:
                calls.append((started, time.time() * 1000, f"{_name} @ {misbench_lines()}"))

        setattr(DataFrame, name, wrapped)


def seconds(value: str) -> float:
    """A Spark SQL metric's total ("total (min, med, max ...)\\n12.3 s (...)" or "12.3 s") in seconds."""
    match = re.search(r"([\d.,]+) (ms|s|m|h)\b", value.split("\n")[-1])
    if not match:
        return 0.0
    return float(match.group(1).replace(",", "")) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def mib(value: str) -> float:
    """A Spark size metric's total in MiB."""
    match = re.search(r"([\d.,]+) (B|KiB|MiB|GiB|TiB)\b", value.split("\n")[-1])
    if not match:
        return 0.0
    return float(match.group(1).replace(",", "")) * {"B": 2 ** -20, "KiB": 2 ** -10, "MiB": 1, "GiB": 1024,
                                                      "TiB": 2 ** 20}[match.group(2)]


def epoch_ms(text: str) -> float:
    return dt.datetime.strptime(text.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=dt.timezone.utc).timestamp() * 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", required=True, choices=("claims", "hoax", "bench"))
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=12, help="queries whose operators are listed")
    args = parser.parse_args(argv)

    import scale
    from misbench.bench.job import run_bench
    from misbench.claims.job import run_claims
    from misbench.config import load_config
    from misbench.hoax.job import run_hoax
    from misbench.ingest.job import run_ingest
    from misbench.lake import open_lake
    from misbench.spark import get_spark

    dump, _ = scale.ensure_dump(args.entities, args.seed)
    root = OUT / f"profile-lake-{args.entities}-s{args.seed}"
    cfg = load_config("local", ["spark.master=local[2]", f"lake.root={root}"])
    cfg.data["spark"]["conf"].update({
        "spark.ui.enabled": "true", "spark.sql.ui.retainedExecutions": "5000", "spark.ui.retainedJobs": "20000",
        "spark.ui.retainedStages": "20000",
        "spark.sql.shuffle.partitions": str(scale.shuffle_partitions(args.entities))})
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    if not lake.exists("triples"):
        shutil.rmtree(root, ignore_errors=True)
        run_ingest(spark, lake, cfg, [str(dump)])
    if args.stage != "claims" and not lake.exists("claims"):
        run_claims(spark, lake, cfg)
    if args.stage == "bench" and not lake.exists("evidence"):
        scale.bench_inputs(spark, lake)

    context = spark.sparkContext
    api = f"{context.uiWebUrl.rstrip('/')}/api/v1/applications/{context.applicationId}"

    def queries(details: bool) -> list[dict]:
        url = f"{api}/sql?details={str(details).lower()}&planDescription=false&length=100000"
        with urllib.request.urlopen(url, timeout=300) as response:
            return json.loads(response.read())

    before = {query["id"] for query in queries(False)}
    calls: list = []
    record_actions(calls)
    run = {"claims": run_claims, "hoax": run_hoax, "bench": run_bench}[args.stage]
    started = time.perf_counter()
    run(spark, lake, cfg)
    wall = time.perf_counter() - started
    ran = [query for query in queries(True) if query["id"] not in before]

    def started_by(query: dict) -> str:
        at = epoch_ms(query["submissionTime"])
        around = [call for call in calls if call[0] - 5 <= at <= call[1] + 5]
        return min(around, key=lambda call: call[1] - call[0])[2] if around else query["description"]

    for query in ran:
        query["misbench"] = started_by(query)
    OUT.mkdir(parents=True, exist_ok=True)
    raw = OUT / f"profile-{args.stage}-{args.entities}-s{args.seed}.json"
    raw.write_text(json.dumps(ran))

    print(f"[{args.entities}] {args.stage}: {wall:.1f} s, {len(ran)} Spark queries")
    by_line = collections.defaultdict(lambda: [0, 0.0])
    for query in ran:
        entry = by_line[query["misbench"]]
        entry[0] += 1
        entry[1] += query["duration"] / 1000
    for line, (count, total) in sorted(by_line.items(), key=lambda item: -item[1][1]):
        print(f"  {total:7.1f} s  {count:3d} queries  {line}")
    for query in sorted(ran, key=lambda q: -q["duration"])[:args.top]:
        print(f"\n{query['duration'] / 1000:.1f} s  {query['misbench']}")
        nodes = query.get("nodes", [])
        members = collections.defaultdict(list)
        for node in nodes:
            if node.get("wholeStageCodegenId") is not None:
                members[node["wholeStageCodegenId"]].append(node["nodeName"])
        heavy = []
        for node in nodes:
            metrics = {m["name"]: m["value"] for m in node.get("metrics", [])}
            for metric in TIMED:
                if metric in metrics and seconds(metrics[metric]) >= 0.5:
                    block = re.search(r"\((\d+)\)", node["nodeName"]) if node["nodeName"].startswith("WholeStage") else None
                    inside = ",".join(members.get(int(block.group(1)), [])) if block else ""
                    heavy.append((seconds(metrics[metric]), node["nodeName"], metric, inside[:110]))
        for taken, name, metric, inside in sorted(heavy, key=lambda h: -h[0])[:8]:
            print(f"  {taken:7.1f} s  {name}  {metric}  {inside}")
        shuffled = [(mib(m["value"]), next((x["value"] for x in node["metrics"] if x["name"] == "shuffle records written"), ""))
                    for node in nodes if node["nodeName"] == "Exchange"
                    for m in node.get("metrics", []) if m["name"] == "data size"]
        big = [f"{size:,.0f} MiB ({rows.split(chr(10))[-1].split(' ')[0]} rows)" for size, rows in sorted(shuffled, reverse=True)
               if size >= 50]
        if big:
            print(f"  shuffled: {', '.join(big)}")
    print(f"\nraw queries: {raw.relative_to(PROJECT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
