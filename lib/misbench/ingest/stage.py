"""Ingest stage: parsed rows -> entities, triples, rejects.

Pure DataFrame functions; the job (``misbench.ingest.job``) reads the dump and writes tables.
The job scans the dump once into the parsed shape (``misbench.ingest.parse.PARSED_SCHEMA``:
reading and parsing share one Python pass), stores it, and the three tables are split from
it here without re-reading the dump.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from misbench.ingest.parse import PARSED_SCHEMA

PARSED_SPARK_SCHEMA = from_arrow_schema(PARSED_SCHEMA)

ENTITY_COLUMNS = [
    "id", "type", "label", "description", "aliases", "sitelink_count",
    "instance_of", "subclass_of", "datatype",
]
TRIPLE_COLUMNS = [
    "statement_id", "subject_id", "property", "rank", "datatype", "value_type", "object_id",
    "value", "value_lang", "unit_id", "time_precision", "start_time", "end_time",
    "point_in_time",
]
REJECT_COLUMNS = ["source_file", "line_number", "reason", "raw_head"]


def duplicate_entity_lines(parsed: DataFrame) -> DataFrame:
    """Entity lines whose id already occurred earlier in the input (file, then position)."""
    entities = parsed.where(F.col("kind") == "entity").select(
        "id", "source_file", "block_start", "line_in_block"
    )
    first = Window.partitionBy("id").orderBy("source_file", "block_start", "line_in_block")
    return (
        entities.withColumn("occurrence", F.row_number().over(first))
        .where(F.col("occurrence") > 1)
        .drop("occurrence")
    )


def with_duplicates_rejected(parsed: DataFrame, duplicates: DataFrame) -> DataFrame:
    """Turn the given duplicate entity lines into rejects (their statements are dropped)."""
    flagged = duplicates.select(
        "source_file", "block_start", "line_in_block", F.lit(True).alias("is_duplicate")
    )
    joined = parsed.join(flagged, ["source_file", "block_start", "line_in_block"], "left")
    is_duplicate = F.coalesce(F.col("is_duplicate"), F.lit(False))
    replaced = {
        "kind": F.when(is_duplicate, F.lit("reject")).otherwise(F.col("kind")),
        "reason": F.when(
            is_duplicate, F.concat(F.lit("duplicate entity "), F.col("id"), F.lit(" (kept its first occurrence)"))
        ).otherwise(F.col("reason")),
        "triples": F.when(is_duplicate, F.array().cast(PARSED_SPARK_SCHEMA["triples"].dataType))
        .otherwise(F.col("triples")),
    }
    return joined.select(
        *[replaced.get(name, F.col(name)).alias(name) for name in PARSED_SPARK_SCHEMA.names]
    )


def entities(parsed: DataFrame) -> DataFrame:
    """One row per entity: id, type, label, description, aliases, sitelink_count,
    instance_of (P31 ids), subclass_of (P279 ids), datatype (properties)."""
    return parsed.where(F.col("kind") == "entity").select(*ENTITY_COLUMNS)


def triples(parsed: DataFrame) -> DataFrame:
    """One row per statement with a value main snak (every rank), subject_id first."""
    statements = parsed.where(F.col("kind") == "entity").select(
        F.col("id").alias("subject_id"), F.explode("triples").alias("t")
    )
    return statements.select(
        *[F.col("subject_id") if c == "subject_id" else F.col(f"t.{c}").alias(c) for c in TRIPLE_COLUMNS]
    )


def rejects(parsed: DataFrame) -> DataFrame:
    """Rejected lines with their 1-based line number in the source file.

    A line's number is the number of lines in earlier splits of its file plus its position in
    its own split; the ``block`` rows carry the per-split line counts.
    """
    blocks = parsed.where(F.col("kind") == "block").select(
        "source_file", "block_start", "line_count"
    )
    earlier = Window.partitionBy("source_file").orderBy("block_start").rowsBetween(
        Window.unboundedPreceding, -1
    )
    offsets = blocks.withColumn(
        "lines_before", F.coalesce(F.sum("line_count").over(earlier), F.lit(0))
    ).drop("line_count")
    rejected = parsed.where(F.col("kind") == "reject")
    return rejected.join(offsets, ["source_file", "block_start"], "left").select(
        "source_file",
        (F.col("lines_before") + F.col("line_in_block") + 1).alias("line_number"),
        "reason",
        "raw_head",
    )

