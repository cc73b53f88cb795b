"""Ingest throughput against a raw floor and against qwikidata, measured in one run.

    python benchmarks/ingest.py [--mb 400] [--qwikidata-mb 100]

Builds (once, cached under benchmarks/out/) a bz2 dump of at least --mb MB of JSON by
replicating the real Wikidata slice with fresh entity ids, then measures:
  (a) floor: one process, bz2 decompression + orjson parse of every line (MB/s of JSON);
  (b) misbench: ``run_ingest`` end to end into a delta-rs lake on local[2] (Spark session
      already started: start-up is a one-off per cluster, not per MB);
  (c) qwikidata: one process extracting the same value triples with qwikidata's dump reader
      and entity classes (on the first --qwikidata-mb MB, to bound the run time).
The last line is ``ingest_vs_floor_per_core r`` with r = (b) / (2 x (a)).
"""
from __future__ import annotations

import argparse
import bz2
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

PROJECT = Path(__file__).resolve().parents[1]
SLICE = PROJECT / "tests" / "data" / "wikidata-dump-slice-49.json"
OUT = PROJECT / "benchmarks" / "out"
_ID = re.compile(r'^\{"type":"item","id":"Q(\d+)"')


def build_dump(target_mb: int) -> tuple[Path, int]:
    """Replicate the slice's entity lines with fresh ids until target_mb of JSON."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"replicated-{target_mb}mb.json.bz2"
    entity_lines = [
        line for line in SLICE.read_text(encoding="utf-8").split("\n") if line.startswith("{")
    ]
    if path.exists():
        return path, _json_bytes(path)
    tmp = path.with_suffix(".partial")
    written, replica = 0, 0
    compressor = bz2.BZ2Compressor(9)
    with open(tmp, "wb") as out:
        out.write(compressor.compress(b"[\n"))
        while written < target_mb * 1_000_000:
            for line in entity_lines:
                fresh = _ID.sub(
                    lambda m: f'{{"type":"item","id":"Q{int(m.group(1)) + replica * 10_000_000}"',
                    line,
                    count=1,
                )
                data = (fresh + "\n").encode("utf-8")
                written += len(data)
                out.write(compressor.compress(data))
            replica += 1
        out.write(compressor.compress(b"]\n"))
        out.write(compressor.flush())
    tmp.rename(path)
    return path, _json_bytes(path)


def _json_bytes(path: Path) -> int:
    total = 0
    with bz2.open(path, "rb") as handle:
        while chunk := handle.read(16 * 1024 * 1024):
            total += len(chunk)
    return total


def floor_mb_per_s(path: Path, json_bytes: int) -> float:
    start = time.perf_counter()
    entities = 0
    with bz2.open(path, "rb") as handle:
        for line in handle:
            line = line.rstrip(b",\n")
            if len(line) > 1:
                orjson.loads(line)
                entities += 1
    return json_bytes / 1e6 / (time.perf_counter() - start)


def qwikidata_mb_per_s(path: Path, limit_mb: int) -> tuple[float, int]:
    from qwikidata.entity import WikidataItem
    from qwikidata.json_dump import WikidataJsonDump

    start = time.perf_counter()
    consumed, triples = 0, 0
    for entity_dict in WikidataJsonDump(str(path)):
        consumed += len(orjson.dumps(entity_dict))  # approximate JSON bytes of the line
        item = WikidataItem(entity_dict)
        for group in item.get_claim_groups().values():
            for claim in group:
                if claim.mainsnak.snaktype == "value":
                    _ = claim.mainsnak.datavalue.value
                    triples += 1
        if consumed >= limit_mb * 1_000_000:
            break
    return consumed / 1e6 / (time.perf_counter() - start), triples


def misbench_mb_per_s(path: Path, json_bytes: int) -> tuple[float, float, int]:
    sys.path.insert(0, str(PROJECT / "lib"))
    from misbench.config import load_config
    from misbench.ingest.job import run_ingest
    from misbench.lake import open_lake
    from misbench.spark import get_spark

    lake_root = tempfile.mkdtemp(prefix="misbench-bench-lake-")
    cfg = load_config("local", ["spark.master=local[2]", f"lake.root={lake_root}"])
    started = time.perf_counter()
    spark = get_spark(cfg)
    session_s = time.perf_counter() - started
    lake = open_lake(spark, cfg)
    run_ingest(spark, lake, cfg, [str(SLICE)])  # warm-up: JIT, Python workers
    started = time.perf_counter()
    report = run_ingest(spark, lake, cfg, [str(path)])
    elapsed = time.perf_counter() - started
    spark.stop()
    shutil.rmtree(lake_root, ignore_errors=True)
    return json_bytes / 1e6 / elapsed, session_s, report.triples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400, help="MB of JSON in the replicated dump")
    parser.add_argument("--qwikidata-mb", type=int, default=100)
    args = parser.parse_args()
    if not SLICE.is_file():
        sys.exit(f"missing real slice {SLICE}")

    path, json_bytes = build_dump(args.mb)
    print(f"dump: {path.name}: {json_bytes / 1e6:.0f} MB JSON, "
          f"{os.path.getsize(path) / 1e6:.1f} MB bz2; cores: {os.cpu_count()}")
    floor = floor_mb_per_s(path, json_bytes)
    print(f"(a) floor, 1 process bz2 + orjson: {floor:.1f} MB/s")
    ours, session_s, triples = misbench_mb_per_s(path, json_bytes)
    print(f"(b) misbench ingest, local[2], into the lake: {ours:.1f} MB/s "
          f"({triples} triples; Spark session start {session_s:.1f} s not included)")
    theirs, their_triples = qwikidata_mb_per_s(path, args.qwikidata_mb)
    print(f"(c) qwikidata, 1 process, first {args.qwikidata_mb} MB: {theirs:.1f} MB/s "
          f"({their_triples} triples)")
    print(f"ingest_vs_qwikidata {ours / theirs:.2f}")
    print(f"ingest_vs_floor_per_core {ours / (2 * floor):.3f}")


if __name__ == "__main__":
    main()
