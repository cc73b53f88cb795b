"""The ingest job: read dump files, run the ingest stage, write the tables.

Every table is replaced in one Delta commit per run, so a rerun on the same input leaves the
same tables, and a run killed at any point leaves each table at its previous or its new
version; running again finishes as a clean run would.
"""
from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from misbench.config import Config
from misbench.ingest import stage
from misbench.lake import Lake

DUMP_SUFFIXES = (".json", ".json.bz2", ".json.gz", ".bz2", ".gz")


class DumpNotFound(FileNotFoundError):
    pass


@dataclass(frozen=True)
class IngestReport:
    files: int
    entities: int
    triples: int
    rejects: int
    max_reject_rate: float

    @property
    def reject_rate(self) -> float:
        entity_lines = self.entities + self.rejects
        return self.rejects / entity_lines if entity_lines else 0.0

    @property
    def too_many_rejects(self) -> bool:
        return self.reject_rate > self.max_reject_rate


def resolve_dump_paths(paths: Sequence[str]) -> list[str]:
    """Expand local globs and check that each input exists and looks like a dump file.
    Remote URIs (s3://, dbfs:/, abfss://, /Volumes/...) are passed to Spark as given."""
    resolved: list[str] = []
    for path in paths:
        if "://" in path or path.startswith("dbfs:"):
            resolved.append(path)
            continue
        matches = sorted(glob.glob(os.path.expanduser(path))) or (
            [path] if os.path.exists(path) else []
        )
        if not matches:
            raise DumpNotFound(f"no dump file matches '{path}'")
        for match in matches:
            if os.path.isdir(match):
                raise DumpNotFound(f"'{match}' is a folder; pass the dump files or a glob")
            if not match.endswith(DUMP_SUFFIXES):
                raise DumpNotFound(
                    f"'{match}' is not a Wikidata JSON dump ({', '.join(DUMP_SUFFIXES)})"
                )
            resolved.append(os.path.abspath(match))
    if not resolved:
        raise DumpNotFound("no dump files given")
    return resolved


def _source_name(column_or_uri):
    """Local files as plain paths (Spark says file:/x or file:///x), other URIs unchanged."""
    if isinstance(column_or_uri, str):
        return re.sub(r"^file:/+", "/", column_or_uri)
    return F.regexp_replace(column_or_uri, r"^file:/+", "/")


def read_dump_lines(spark: SparkSession, paths: Sequence[str], split_mb: float) -> DataFrame:
    """Lines of the dumps with the file split each came from (bz2 files split across tasks).

    A compressed stream that breaks off (partial download) must not fail the whole job nor
    lose the lines before the break: Spark keeps what it read, and ``stream_problems``
    reports the file so that it gets a reject row.
    """
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(int(split_mb * 1024 * 1024)))
    return (
        spark.read.option("ignoreCorruptFiles", "true")
        .text(list(paths))
        .select(
            "value",
            _source_name(F.col("_metadata.file_path")).alias("source_file"),
            F.col("_metadata.file_block_start").alias("block_start"),
        )
    )


def stream_problems(spark: SparkSession, lines: DataFrame) -> DataFrame:
    """(source_file, problem) for each compressed input whose stream is incomplete; the
    checks run as Spark tasks, one per file, next to the data."""
    compressed = [
        _source_name(uri) for uri in lines.inputFiles() if uri.lower().endswith((".bz2", ".gz"))
    ]
    schema = "source_file string, problem string"
    if not compressed:
        return spark.createDataFrame([], schema)

    def check(batches):
        import pyarrow as pa

        from misbench.ingest.integrity import stream_problem

        for batch in batches:
            files = batch.column("source_file").to_pylist()
            problems = [stream_problem(f) for f in files]
            yield pa.RecordBatch.from_pydict({"source_file": files, "problem": problems})

    files = spark.createDataFrame([(uri,) for uri in compressed], "source_file string")
    return (
        files.repartition(len(compressed))
        .mapInArrow(check, schema)
        .where(F.col("problem").isNotNull())
    )


def run_ingest(spark: SparkSession, lake: Lake, cfg: Config, dumps: Sequence[str]) -> IngestReport:
    paths = resolve_dump_paths(dumps)
    spark.conf.set(
        "spark.sql.execution.arrow.maxRecordsPerBatch", str(cfg.get("ingest.batch_lines"))
    )
    lines = read_dump_lines(spark, paths, cfg.get("ingest.split_mb"))
    # One scan of the dump; everything after reads the stored parsed rows.
    lake.write(
        stage.parsed_dump(lines, cfg.get("ingest.languages")),
        "ingest_staging",
        partition_by=["kind"],
    )
    parsed = lake.read("ingest_staging")
    duplicates = stage.duplicate_entity_lines(parsed)
    if not duplicates.isEmpty():
        parsed = stage.with_duplicates_rejected(parsed, duplicates)

    lake.write(stage.entities(parsed), "entities")
    # Range-partitioned and sorted by property: per-file min/max statistics then let the
    # per-relation stages skip most files; value_type partitions separate entity-valued
    # statements (what claims use) from the many literals and external ids.
    triples = stage.triples(parsed).repartitionByRange("property").sortWithinPartitions(
        "property", "subject_id"
    )
    lake.write(triples, "triples", partition_by=["value_type"])
    truncated = stream_problems(spark, lines)
    lake.write(
        stage.rejects(parsed).unionByName(stage.truncation_rejects(parsed, truncated)),
        "ingest_rejects",
    )

    return IngestReport(
        files=len(paths),
        entities=lake.row_count("entities"),
        triples=lake.row_count("triples"),
        rejects=lake.row_count("ingest_rejects"),
        max_reject_rate=float(cfg.get("ingest.max_reject_rate")),
    )
