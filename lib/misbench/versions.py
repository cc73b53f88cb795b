"""Dump versions: which dump the lake was built from, what changed between two, and the
benchmark version a question belongs to.

A dump's identity (``dump_version``) is the date in its file names (Wikidata names its dumps
``wikidata-YYYYMMDD-all.json.bz2``), else the SHA-256 of its bytes. Ingest records each dump in
``dump_versions`` in the order the lake took them (``sequence``); the benchmark version of a
question is the dump version it entered with, and it stays in every later version until the
one it left in (``version_entered`` / ``version_left`` in ``questions`` and ``bench_texts``).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from misbench.ids import stable_id
from misbench.lake import Lake

DUMP_VERSIONS = "dump_versions"
DUMP_VERSIONS_SCHEMA = T.StructType([
    T.StructField("dump_version", T.StringType()),
    T.StructField("sequence", T.IntegerType()),       # order the lake took the dumps in: 1, 2, ...
    T.StructField("files", T.StringType()),           # JSON list of the dump's file names
    T.StructField("ingested_at", T.TimestampType()),  # the latest ingest of this dump
])
VERSION_COLUMNS = ("version_entered", "version_left")


class OlderDump(ValueError):
    """The dump is older than the one the lake was last built from."""


def _is_date(version: str) -> bool:
    return bool(re.fullmatch(r"\d{8}", version))


def recorded(lake: Lake) -> list[dict]:
    """The lake's dumps, oldest first (empty for a lake built before dumps were recorded)."""
    if not lake.exists(DUMP_VERSIONS):
        return []
    return [row.asDict() for row in lake.read(DUMP_VERSIONS).orderBy("sequence").collect()]


def latest_version(lake: Lake) -> str | None:
    rows = recorded(lake)
    return rows[-1]["dump_version"] if rows else None


def check_dump_order(lake: Lake, version: str, allow_older: bool) -> None:
    """Refuse a dump older than the lake's latest (by date, or one the lake took before a later
    one) unless ``allow_older``: building from it would retire the newer dump's questions."""
    rows = recorded(lake)
    if not rows or rows[-1]["dump_version"] == version:
        return
    latest = rows[-1]["dump_version"]
    earlier = [row["dump_version"] for row in rows[:-1]]
    if version in earlier:
        # its questions' versions are ordered before the newer ones: taken again, the lake's
        # history would read backwards
        raise OlderDump(
            f"ingest: dump {version} was taken before {latest}, the dump this lake was last built from; "
            "a lake cannot go back to a dump it already took (build that version in a new lake)")
    if allow_older:
        return
    if _is_date(version) and _is_date(latest) and version < latest:
        raise OlderDump(
            f"ingest: dump {version} is older than {latest}, the dump this lake was last built from; "
            "its questions would retire the newer ones. To go back to it on purpose, pass "
            "--allow-older-dump (ingest.allow_older_dump=true)")


def record_dump(lake: Lake, version: str, paths: Sequence[str]) -> int:
    """Record that the lake's ingest tables now hold ``version``; returns its sequence. The
    latest dump taken again keeps its place (``check_dump_order`` refuses an earlier one)."""
    rows = recorded(lake)
    if rows and rows[-1]["dump_version"] == version:
        sequence = rows[-1]["sequence"]
    else:
        sequence = (rows[-1]["sequence"] + 1) if rows else 1
    row = (version, sequence, json.dumps([os.path.basename(p.rstrip("/")) for p in paths]),
           dt.datetime.now(dt.timezone.utc))
    lake.upsert(lake.spark.createDataFrame([row], DUMP_VERSIONS_SCHEMA), DUMP_VERSIONS, ["dump_version"])
    return sequence


def resolve_version(lake: Lake, version: str | None, source: str = "wikidata") -> str | None:
    """The benchmark version a command asked for (None: the latest), checked against the lake.
    Imported question sets (any other ``source``) have none."""
    if source != "wikidata":
        if version is not None:
            raise ValueError(f"--version: imported question sets ('{source}') have no benchmark versions")
        return None
    if version is None:
        return latest_version(lake)
    rows = recorded(lake)
    if version not in {row["dump_version"] for row in rows}:
        known = ", ".join(row["dump_version"] for row in rows) or "none recorded"
        raise ValueError(f"benchmark version '{version}' is not a dump this lake was built from (known: {known})")
    return version


def as_of(lake: Lake, frame: DataFrame, version: str | None) -> DataFrame:
    """The rows of a versioned table (``questions``, ``bench_texts``) that belong to benchmark
    ``version``: entered at or before it and not left at or before it. Rows without a version
    (imported sets, lakes built before versions) belong to every version; for ``None`` (a lake
    without recorded dumps) the current rows. A table of the layout before versions is
    returned as it is (the stage that reads it names its layout)."""
    if "version_left" not in frame.columns:
        return frame
    if version is None:
        return frame.where(F.col("version_left").isNull())
    order = {row["dump_version"]: row["sequence"] for row in recorded(lake)}
    wanted = order[version]

    def sequence_of(column: str) -> Column:
        mapping = F.create_map(*[F.lit(x) for pair in order.items() for x in pair])
        return mapping[F.col(column)]

    entered = F.col("version_entered").isNull() | (sequence_of("version_entered") <= wanted)
    not_left = F.col("version_left").isNull() | (sequence_of("version_left") > wanted)
    return frame.where(entered & not_left)


def entering_with(frame: DataFrame, version: str | None) -> DataFrame:
    """``frame``'s rows as entering with ``version`` (None: rows of no version, which belong to
    every version: imported sets)."""
    return frame.withColumn("version_entered", F.lit(version).cast("string")) \
        .withColumn("version_left", F.lit(None).cast("string"))


def _canonical(column: Column, data_type: T.DataType) -> Column:
    """The column with every map as its entries sorted by key: maps built by aggregation
    list their keys in no fixed order, which must not read as a change."""
    if isinstance(data_type, T.MapType):
        entries = F.transform(F.map_entries(column), lambda entry: F.struct(
            entry["key"].alias("key"), _canonical(entry["value"], data_type.valueType).alias("value")))
        return F.array_sort(entries)
    if isinstance(data_type, T.ArrayType) and isinstance(data_type.elementType, (T.MapType, T.ArrayType)):
        return F.transform(column, lambda item: _canonical(item, data_type.elementType))
    return column


def versioned(stored: DataFrame | None, current: DataFrame, key: str, version: str | None,
              id_column: str | None = None) -> DataFrame:
    """The rows to store for a versioned table, given what is ``stored`` and the rows of the
    ``current`` build (without version columns), matched by ``key``: a stored row still current
    and identical stays as it is (its ``version_entered`` too); one that is gone or changed is
    retired (``version_left`` = ``version``, kept); a new or changed row enters with ``version``.
    Retired rows stay as they were. Without a recorded version the current rows replace all.

    ``id_column`` (questions: ``question_id``, matched by ``claim_id``): a changed row that
    enters under an id the table already holds gets an id of its own (the id, the version and
    the row's content, hashed), so the id stays unique over every version and answers of an older version still
    join the row they answered; the id is not part of the comparison."""
    columns = current.columns
    if stored is None or version is None:
        return entering_with(current, version)
    if "version_left" not in stored.columns:  # stored before versions: it entered with no version
        stored = stored.withColumn("version_entered", F.lit(None).cast("string")) \
            .withColumn("version_left", F.lit(None).cast("string"))
    compared = [c for c in columns if c != id_column]
    types = {field.name: field.dataType for field in current.schema.fields}
    signature = F.sha2(F.to_json(F.struct(*[_canonical(F.col(c), types[c]).alias(c) for c in compared])), 256)
    live = stored.where(F.col("version_left").isNull()).withColumn("_signature", signature)
    retired = stored.where(F.col("version_left").isNotNull())
    now = current.withColumn("_signature", signature)
    matched = [key, "_signature"]
    kept = live.join(now.select(*matched), matched, "left_semi")
    # a row that entered with this very version and leaves again (a rebuild on the same dump)
    # was in no published version: it goes
    leaving = live.join(now.select(*matched), matched, "left_anti") \
        .where(F.col("version_entered").isNull() | (F.col("version_entered") != F.lit(version))) \
        .withColumn("version_left", F.lit(version))
    entering = now.join(live.select(*matched), matched, "left_anti")
    if id_column:
        taken = stored.select(F.col(id_column).alias("_taken")).distinct()
        entering = entering.join(taken, F.col(id_column) == F.col("_taken"), "left") \
            .withColumn(id_column, F.when(F.col("_taken").isNull(), F.col(id_column))
                        .otherwise(stable_id(F.col(id_column), F.lit(version), F.col("_signature"))))
        entering = entering.drop("_taken")
    entering = entering_with(entering, version)
    order = [*columns, *VERSION_COLUMNS]
    return kept.select(*order).unionByName(leaving.select(*order)).unionByName(entering.select(*order)) \
        .unionByName(retired.select(*order))


CLAIMS_CHANGES = "claims_changes"
CHANGES = ("added", "changed", "removed", "unchanged")


def claims_version(lake: Lake) -> str | None:
    """The dump version the stored claims were built from: the latest recorded dump that
    ``claims_changes`` names (None for a lake without recorded dumps)."""
    if not lake.exists(CLAIMS_CHANGES):
        return None
    built = {row["dump_version"] for row in lake.read(CLAIMS_CHANGES).select("dump_version").distinct().collect()}
    for row in reversed(recorded(lake)):
        if row["dump_version"] in built:
            return row["dump_version"]
    return None


def claim_changes(changed: DataFrame, old_claims: DataFrame | None, new_claims: DataFrame,
                  version: str | None) -> DataFrame:
    """claim_id, subject_id, relation, change, dump_version: each claim of the old and new
    claims, ``added`` (only new), ``removed`` (only old), ``changed`` (in ``changed``: its
    statement, true object or a conflict's inputs differ) or ``unchanged``."""
    keys = ["claim_id", "subject_id", "relation"]
    new = new_claims.select(*keys)
    if old_claims is None:
        rows = new.withColumn("change", F.lit("added"))
    else:
        old = old_claims.select(*keys)
        flagged = changed.select("claim_id").distinct().withColumn("_changed", F.lit(True))
        both = new.join(old.select("claim_id"), "claim_id", "left_semi").join(flagged, "claim_id", "left") \
            .select(*keys, F.when(F.col("_changed"), F.lit("changed")).otherwise(F.lit("unchanged")).alias("change"))
        rows = new.join(old.select("claim_id"), "claim_id", "left_anti").withColumn("change", F.lit("added")) \
            .unionByName(old.join(new.select("claim_id"), "claim_id", "left_anti").withColumn("change", F.lit("removed"))) \
            .unionByName(both)
    return rows.withColumn("dump_version", F.lit(version).cast("string"))


def keep_earlier_record(changes: DataFrame, earlier: DataFrame) -> DataFrame:
    """Claims rebuilt from the dump they were built from before: what that earlier run
    recorded for the version stands where this run finds nothing changed (a rerun on the
    same dump does not turn the version's ``added`` into ``unchanged``), and its ``removed``
    rows stay."""
    recorded_change = earlier.select("claim_id", F.col("change").alias("_earlier"))
    merged = changes.join(recorded_change, "claim_id", "left").withColumn(
        "change", F.when((F.col("change") == "unchanged") & F.col("_earlier").isNotNull(), F.col("_earlier"))
        .otherwise(F.col("change"))).drop("_earlier")
    gone = earlier.join(changes.select("claim_id"), "claim_id", "left_anti")
    return merged.unionByName(gone.select(*changes.columns))
