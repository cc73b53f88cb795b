"""The ingest job: read dump files, run the ingest stage, write the tables.

Every table is replaced in one Delta commit per run, so a rerun on the same input leaves the
same tables, and a run killed at any point leaves each table at its previous or its new
version; running again finishes as a clean run would.
"""
from __future__ import annotations

import glob
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from misbench import versions
from misbench.config import Config
from misbench.ingest import stage
from misbench.ingest.parse import parse_line_batches
from misbench.ingest.reader import Split, dump_identity, file_size, open_file, plan_splits, split_lines
from misbench.lake import Lake

log = logging.getLogger(__name__)

DUMP_SUFFIXES = (".json", ".json.bz2", ".json.gz", ".bz2", ".gz")
SPLIT_SCHEMA = "source_file string, start long, end long, size long"


class DumpNotFound(FileNotFoundError):
    pass


@dataclass(frozen=True)
class IngestReport:
    files: int
    entities: int
    triples: int
    rejects: int
    max_reject_rate: float
    seconds: float = 0.0
    dump_version: str = ""  # the dump's date, else its checksum (misbench.versions)

    @property
    def reject_rate(self) -> float:
        entity_lines = self.entities + self.rejects
        return self.rejects / entity_lines if entity_lines else 0.0

    @property
    def too_many_rejects(self) -> bool:
        return self.reject_rate > self.max_reject_rate


def resolve_dump_paths(paths: Sequence[str]) -> list[str]:
    """Expand local globs and check that each input exists and looks like a dump file.
    URIs (s3://, gs://, hdfs://, ...) are passed on as given."""
    resolved: list[str] = []
    for path in paths:
        if "://" in path:
            resolved.append(path)
            continue
        if path.startswith("dbfs:/"):  # Databricks' FUSE mount makes DBFS a local path
            path = "/dbfs/" + path[len("dbfs:/"):].lstrip("/")
        matches = sorted(glob.glob(os.path.expanduser(path)))
        if not matches:
            raise DumpNotFound(f"no dump file matches '{path}'")
        for match in matches:
            if os.path.isdir(match):
                raise DumpNotFound(f"'{match}' is a folder; pass the dump files or a glob")
            resolved.append(os.path.abspath(match))
    for path in resolved:
        if not path.lower().endswith(DUMP_SUFFIXES):
            raise DumpNotFound(f"'{path}' is not a Wikidata JSON dump ({', '.join(DUMP_SUFFIXES)})")
    if not resolved:
        raise DumpNotFound("no dump files given")
    return resolved


def dump_splits(spark: SparkSession, paths: Sequence[str], split_mb: float) -> DataFrame:
    """One row per byte range to read, one Spark task each (bz2 and plain files are split).

    Splits are at most ``split_mb`` and small enough that every core gets about four, so the
    last wave of tasks does not leave cores idle.
    """
    sizes = [(path, file_size(path)) for path in paths]
    total = sum(size for _, size in sizes)
    per_core = total // (4 * _parallelism(spark)) + 1
    split_bytes = max(1, min(int(split_mb * 1024 * 1024), max(per_core, 1024 * 1024)))
    splits = plan_splits(sizes, split_bytes)
    rows = [(s.source_file, s.start, s.end, s.size) for s in splits]
    log.info("ingest: %d file(s), %d split(s)", len(paths), len(rows))
    return spark.createDataFrame(rows, SPLIT_SCHEMA).repartition(len(rows))


def _parallelism(spark: SparkSession) -> int:
    try:
        return max(1, spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return int(spark.conf.get("spark.sql.shuffle.partitions", "200"))


def read_and_parse(languages: Sequence[str], batch_lines: int):
    """A mapInArrow function: split rows in, parsed rows (``parse.PARSED_SCHEMA``) out. Reading and parsing share one Python pass, so no dump line crosses into the JVM."""
    languages = list(languages)

    def run(split_batches):
        return parse_line_batches(_line_batches(split_batches, batch_lines), languages)

    return run


def _line_batches(split_batches, batch_lines: int) -> Iterator[pa.RecordBatch]:
    for split_batch in split_batches:
        for row in split_batch.to_pylist():
            split = Split(row["source_file"], row["start"], row["end"], row["size"])
            with open_file(split.source_file) as handle:
                values, problems = [], []
                for text, problem in split_lines(split, handle):
                    values.append(text)
                    problems.append(problem)
                    if len(values) >= batch_lines:
                        yield _lines_batch(values, problems, split)
                        values, problems = [], []
                if values:
                    yield _lines_batch(values, problems, split)


def _lines_batch(values, problems, split: Split) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": values,
            "source_file": [split.source_file] * len(values),
            "block_start": [split.start] * len(values),
            "problem": problems,
        }
    )


def _write_entities(lake: Lake, parsed: DataFrame) -> None:
    lake.write(stage.entities(parsed), "entities")


def _write_triples(lake: Lake, parsed: DataFrame) -> None:
    # Partitioned by value_type: the claims stages read only entity-valued statements, a
    # minority next to external ids and literals. Sorted by property within files, so
    # Parquet row-group statistics let per-relation filters skip most of each file.
    triples = stage.triples(parsed).sortWithinPartitions("value_type", "property", "subject_id")
    lake.write(triples, "triples", partition_by=["value_type"])


def _write_rejects(lake: Lake, parsed: DataFrame) -> None:
    lake.write(stage.rejects(parsed), "ingest_rejects")


_SPLIT_TABLES = (_write_entities, _write_triples, _write_rejects)


def run_ingest(spark: SparkSession, lake: Lake, cfg: Config, dumps: Sequence[str]) -> IngestReport:
    started = time.perf_counter()
    paths = resolve_dump_paths(dumps)
    dump_version = dump_identity(paths)
    versions.check_dump_order(lake, dump_version, bool(cfg.get("ingest.allow_older_dump")))
    splits = dump_splits(spark, paths, cfg.get("ingest.split_mb"))
    # One pass over the dump; everything after reads the stored parsed rows.
    lake.write_batches(
        splits,
        read_and_parse(cfg.get("ingest.languages"), cfg.get("ingest.batch_lines")),
        stage.PARSED_SPARK_SCHEMA,
        "ingest_staging",
    )
    log.info("ingest: dump parsed in %.1f s", time.perf_counter() - started)

    parsed = lake.read("ingest_staging")
    # The three tables are small next to the dump: write them concurrently (Spark runs jobs
    # from several threads) while checking for duplicate ids; in the rare case there are
    # some, write them again with the duplicates turned into rejects.
    with ThreadPoolExecutor(max_workers=4) as pool:
        duplicates = stage.duplicate_entity_lines(parsed)
        has_duplicates = pool.submit(lambda: not duplicates.isEmpty())
        writes = [pool.submit(write, lake, parsed) for write in _SPLIT_TABLES]
        for future in writes:
            future.result()
        if has_duplicates.result():
            deduplicated = stage.with_duplicates_rejected(parsed, duplicates)
            for future in [pool.submit(write, lake, deduplicated) for write in _SPLIT_TABLES]:
                future.result()

    report = IngestReport(
        files=len(paths),
        entities=lake.row_count("entities"),
        triples=lake.row_count("triples"),
        rejects=lake.row_count("ingest_rejects"),
        max_reject_rate=float(cfg.get("ingest.max_reject_rate")),
        seconds=time.perf_counter() - started,
        dump_version=dump_version,
    )
    # After the tables, and only for a dump that is taken (too many rejects fail the stage):
    # the lake holds this dump only once they are written.
    if not report.too_many_rejects:
        versions.record_dump(lake, dump_version, paths)
    log.info("ingest: done in %.1f s", report.seconds)
    return report
