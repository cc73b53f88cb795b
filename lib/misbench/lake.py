"""The lake: the one place that reads and writes tables.

Stages never touch storage; the job runner hands them DataFrames read here and writes back
what they return. Two backends produce real Delta tables:

- ``delta_rs`` (embedded default, offline): Spark executors write Parquet data files straight
  into the table folder and the driver commits them in one Delta transaction with delta-rs.
  Reads follow the Delta log (``DeltaTable.file_uris()``), never a folder listing, which would
  resurrect files that an overwrite removed.
- ``spark_delta`` (Databricks, clusters with the Delta jars, Spark Connect servers such as
  pysail): ``format("delta")`` reads and writes, SQL ``MERGE INTO`` for upserts. Tables are
  Unity Catalog names ``catalog.schema.table`` when ``lake.catalog``/``lake.schema`` are set,
  else folders under ``lake.root``.
"""
from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
import tenacity
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from misbench.config import Config, ConfigError

log = logging.getLogger(__name__)

WRITE_MODES = ("overwrite", "append")
# Tables the stages keep for themselves (staging, queues, chunks, candidates): they live apart
# from the product tables (a folder ``_internal`` under the root, or a schema of their own) so
# that analysts browsing the lake or the catalog see only what they can use.
INTERNAL_TABLES = (
    "ingest_staging", "claim_facts", "claim_candidates", "conflicts_staging", "generation_claims",
    "generation_queue_*", "generation_requests_*", "quality_queue", "eval_items", "eval_queue",
    "eval_items_*", "eval_queue_*",
    "rtd_requests_*", "hoax_requests_*", "chunk_*", "work_*", "replace_*", "view_definitions",
)
INTERNAL_FOLDER = "_internal"
# Temporary views this process registered (tables and analyst views), dropped before another
# lake registers its own.
_registered_views: set[str] = set()
_warned_roots: set[str] = set()


# What another writer's commit to the same table raises: delta-rs's CommitFailedError ("a
# concurrent transaction added new data"), Delta on Spark's Concurrent*Exception (by class name,
# whether it reaches Python as its own class or inside a Py4J / Spark Connect error), and
# delta-rs's "table already exists" when two writers create one table at once.
_CONFLICT_NAMES = ("CommitFailedError", "ConcurrentAppendException", "ConcurrentDeleteReadException",
                   "ConcurrentDeleteDeleteException", "ConcurrentTransactionException",
                   "ConcurrentWriteException", "MetadataChangedException", "ProtocolChangedException",
                   "DELTA_CONCURRENT_",
                   "A Delta Lake table already exists at that location")
WRITE_ATTEMPTS = 6


def is_write_conflict(error: BaseException) -> bool:
    """Whether ``error`` is another writer's commit to the same table, so that committing
    again (reading the table anew) can succeed."""
    text = f"{type(error).__name__}: {error}"
    return any(name in text for name in _CONFLICT_NAMES)


def _log_retry(state: tenacity.RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.warning("write conflict with another command on the same table (attempt %d of %d), committing again: %s",
                state.attempt_number, WRITE_ATTEMPTS, str(error).splitlines()[0][:200] if error else "")


# A commit that lost a race with another command's commit is redone from a fresh read of the
# table: never lost, never doubled (appends add files; merges and partition overwrites re-read).
retry_write_conflicts = tenacity.retry(
    retry=tenacity.retry_if_exception(is_write_conflict),
    stop=tenacity.stop_after_attempt(WRITE_ATTEMPTS),
    wait=tenacity.wait_random_exponential(multiplier=0.5, max=10),
    before_sleep=_log_retry,
    reraise=True,
)


def is_internal(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in INTERNAL_TABLES)

_SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A word of SQL that could be a table's or a view's name (names are letters, digits, underscores).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SAFE_PARTITION_VALUE = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class TableInfo:
    name: str
    rows: int | None
    version: int | None
    location: str


class Lake(ABC):
    """Read, write, upsert and list the project's Delta tables by logical name."""

    # Whether write() retries a conflicting commit by running the DataFrame's query again
    # (Spark's Delta writer retries the whole write); delta-rs retries only the commit of the
    # files already written. A model's output is written straight into its table only where
    # not (misbench.chunked).
    retry_recomputes = True

    def __init__(self, spark: SparkSession, known_tables: Sequence[str] = ()):
        self.spark = spark
        self.known_tables = list(known_tables)

    @abstractmethod
    def location(self, name: str) -> str:
        """Where table ``name`` lives (a path or a catalog name)."""

    @abstractmethod
    def exists(self, name: str) -> bool: ...

    @abstractmethod
    def read(self, name: str) -> DataFrame: ...

    @abstractmethod
    def write(
        self,
        df: DataFrame,
        name: str,
        mode: str = "overwrite",
        partition_by: Sequence[str] = (),
        replace_partitions: Mapping[str, str] | None = None,
    ) -> None:
        """Write ``df`` as table ``name`` in one commit.

        ``mode``: ``overwrite`` (the table becomes ``df``) or ``append``. With
        ``replace_partitions`` (column -> value) an overwrite replaces only those partitions.
        """

    def write_batches(
        self,
        source: DataFrame,
        produce,
        schema,
        name: str,
        mode: str = "overwrite",
        partition_by: Sequence[str] = (),
    ) -> None:
        """Write what ``produce`` (a mapInArrow function: Arrow batches of ``source`` in,
        Arrow batches of ``schema`` out) makes of each task's rows. A backend may run the
        writing in the same Python pass, sparing a round trip of every row through the JVM."""
        self.write(source.mapInArrow(produce, schema), name, mode=mode, partition_by=partition_by)

    def upsert(self, df: DataFrame, name: str, keys: Sequence[str]) -> None:
        """Insert rows of ``df`` whose key is new, replace rows whose key exists. A table that
        does not exist yet is created; one another command created meanwhile is merged into."""
        if not keys:
            raise ValueError("upsert needs at least one key column")
        if not self.exists(name) and self._create(df, name):
            return
        self._merge(df, name, keys)

    def replace_where(self, df: DataFrame, name: str, equal: Mapping[str, str], condition: str = "TRUE") -> None:
        """Replace the rows whose columns hold the values of ``equal`` and that meet
        ``condition`` (SQL read alike by Spark and delta-rs, e.g. ``substr(setting, 1, 5) =
        'hoax_'``) by ``df``'s rows (which must match too), in one commit: what other commands
        wrote outside it stays, even when they commit at the same time."""
        inside = F.expr(condition)
        for column, value in equal.items():
            inside = inside & (F.col(column) == F.lit(value))
        if df.where(~inside).limit(1).count():  # checked here: not every engine refuses them
            raise ValueError(f"replace_where into '{name}': rows outside {dict(equal)} and {condition}")
        if not self.exists(name) and self._create(df, name):
            return
        quoted = self._quoted
        self._replace_where(df, name, " AND ".join(
            [f"`{column}` = {quoted(value)}" for column, value in equal.items()] + [f"({condition})"]))

    @staticmethod
    def _quoted(value: str) -> str:
        """A SQL string literal (delta-rs's SQL: a quote doubled)."""
        return "'" + str(value).replace("'", "''") + "'"

    @abstractmethod
    def _create(self, df: DataFrame, name: str) -> bool:
        """Create table ``name`` holding ``df``; False where it exists (another command
        created it first), and nothing is written."""

    @abstractmethod
    def _merge(self, df: DataFrame, name: str, keys: Sequence[str]) -> None: ...

    @abstractmethod
    def _replace_where(self, df: DataFrame, name: str, predicate: str) -> None: ...

    @abstractmethod
    def compact(self, name: str) -> None:
        """Rewrite the table's small files into fewer large ones: a new version with the same
        rows. Passes that commit chunk by chunk leave a file per chunk; readers then open
        thousands of files and replay a long log."""

    @abstractmethod
    def version(self, name: str) -> int | None: ...

    @abstractmethod
    def drop(self, name: str) -> None: ...

    @abstractmethod
    def discovered_tables(self, internal: bool = False) -> list[str]:
        """Tables found in storage, known or not: the product tables, or the internal ones."""

    def row_count(self, name: str) -> int:
        return self.read(name).count()

    def tables(self, include_internal: bool = False) -> list[TableInfo]:
        names = sorted(set(self.discovered_tables()))
        if include_internal:
            names += sorted(set(self.discovered_tables(internal=True)) - set(names))
        return [
            TableInfo(name, self.row_count(name), self.version(name), self.location(name))
            for name in names
        ]

    def register_views(self, for_query: str | None = None) -> list[str]:
        """Expose every existing table, internal ones included, as a temporary view named
        after it (for SQL); then the analyst views stored in the lake (see misbench.views).

        ``for_query``: only what that SQL names, directly or through the stored views it
        names (what ``misbench sql`` runs): a query then costs what its own tables cost, not
        a read of every table in the lake. SQL that names none of them (``SHOW TABLES``)
        gets them all."""
        if for_query is not None:
            names = self._names_used_by(for_query)
            registered = self.register_views_of_tables(names) + self.register_stored_views(names)
            if registered:
                return registered
        return self.register_views_of_tables() + self.register_stored_views()

    def _names_used_by(self, sql: str) -> set[str]:
        """Every word of ``sql`` that could name a table or view, and those of the stored
        views it names, transitively (a word that names nothing costs nothing)."""
        definitions = {}
        if self.exists("view_definitions"):
            definitions = {row["name"].lower(): row["sql"] for row in self.read("view_definitions").collect()}
        names, pending = set(), [sql]
        while pending:
            for word in _WORD.findall(pending.pop().lower()):  # SQL names are case-insensitive
                if word not in names:
                    names.add(word)
                    if word in definitions:
                        pending.append(definitions[word])
        return names

    # Analyst views: SQL over the product tables by their bare names. A catalog keeps them as
    # views of its own; a folder lake keeps their definitions in an internal table
    # (``view_definitions``) and registers them as temporary views wherever SQL runs over it.

    def store_view(self, name: str, sql: str) -> None:
        """Create or replace analyst view ``name``; its tables must exist (registered by
        ``register_views_of_tables`` on a folder lake)."""
        _check_view_name(name)
        self.spark.sql(sql).schema  # noqa: B018 - analyses the SQL: a missing table fails here
        definition = self.spark.createDataFrame(
            [(name, sql, _now())], "name string, sql string, stored_at timestamp")
        self.upsert(definition, "view_definitions", ["name"])

    def register_stored_views(self, names: set[str] | None = None) -> list[str]:
        """Temporary views for the stored analyst views whose tables exist (with ``names``:
        only those among them)."""
        from pyspark.errors import AnalysisException

        if not self.exists("view_definitions"):
            return []
        registered = []
        waiting = [row for row in self.read("view_definitions").orderBy("name").collect()
                   if names is None or row["name"].lower() in names]
        # A view over another view waits for it: rounds until one registers nothing new.
        while waiting:
            missing = []
            for row in waiting:
                try:
                    self.spark.sql(row["sql"]).createOrReplaceTempView(row["name"])
                    _registered_views.add(row["name"])
                    registered.append(row["name"])
                except AnalysisException as exc:
                    if "TABLE_OR_VIEW_NOT_FOUND" in str(exc):  # over a table not written yet
                        missing.append(row)
                    else:
                        log.warning("view %s could not be registered: %s", row["name"], str(exc).splitlines()[0])
            if len(missing) == len(waiting):
                for row in missing:
                    log.debug("view %s skipped: its tables are not all there", row["name"])
                break
            waiting = missing
        return registered

    def register_views_of_tables(self, names: set[str] | None = None) -> list[str]:
        """Every table as a temporary view (with ``names``: only those among them)."""
        # Views left by another lake in the same session would answer for tables this one lacks.
        for name in list(_registered_views):
            self.spark.catalog.dropTempView(name)
            _registered_views.discard(name)
        found = set(self.discovered_tables()) | set(self.discovered_tables(internal=True))
        names = sorted(found if names is None else {name for name in found if name.lower() in names})
        for name in names:
            self.read(name).createOrReplaceTempView(name)
            _registered_views.add(name)
        return names

    @staticmethod
    def _check(name: str, mode: str, partition_by: Sequence[str], replace_partitions) -> None:
        if not _SAFE_NAME.match(name):
            raise ValueError(f"table name '{name}' must be letters, digits and underscores")
        if mode not in WRITE_MODES:
            raise ValueError(f"write mode '{mode}' is not one of {WRITE_MODES}")
        if replace_partitions:
            if mode != "overwrite":
                raise ValueError("replace_partitions only applies to mode='overwrite'")
            unknown = set(replace_partitions) - set(partition_by)
            if unknown:
                raise ValueError(f"replace_partitions names non-partition columns {sorted(unknown)}")


def open_lake(spark: SparkSession, cfg: Config) -> Lake:
    backend = cfg.get("lake.backend")
    known = list((cfg.get("tables", {}) or {}).keys())
    if backend == "delta_rs":
        return DeltaRsLake(spark, root=cfg.get("lake.root"), known_tables=known)
    if backend == "spark_delta":
        return SparkDeltaLake(
            spark,
            root=cfg.get("lake.root", None),
            catalog=cfg.get("lake.catalog", None),
            schema=cfg.get("lake.schema", None),
            known_tables=known,
            internal_schema=cfg.get("lake.internal_schema", None),
        )
    raise ConfigError(f"lake.backend '{backend}' is not one of delta_rs, spark_delta")


def write_partition(lake: Lake, df: DataFrame, name: str, source: str) -> None:
    """Replace one source's rows of a table partitioned by ``source``."""
    lake.write(df, name, partition_by=["source"], replace_partitions={"source": source})


def _has_column(schema, path: str) -> bool:
    """Whether ``schema`` has the column ``path``; a dotted path reaches into structs and
    arrays of structs (``hops.at``)."""
    kind = schema
    for part in path.split("."):
        while isinstance(kind, T.ArrayType):
            kind = kind.elementType
        if not isinstance(kind, T.StructType) or part not in kind.fieldNames():
            return False
        kind = kind[part].dataType
    return True


def drop_older_layout(lake: Lake, name: str, marker_column: str, own_source: str, layout: str,
                      companions: Sequence[str] = ()) -> None:
    """Drop table ``name`` (and ``companions``) where it lacks ``marker_column``: the layout of
    an earlier misbench (``layout`` says which), so the running stage writes it anew. Its
    sources other than ``own_source`` (imported sets) are named in the warning, to import
    again: they cannot be rebuilt from the dump."""
    if not lake.exists(name) or _has_column(lake.read(name).schema, marker_column):
        return
    sources = sorted(r.source for r in lake.read(name).select("source").distinct().collect())
    imported = [s for s in sources if s != own_source]
    log.warning("table %s has the layout of an earlier misbench (%s); it is rebuilt%s", name, layout,
                f"; imported sets dropped, import them again: {', '.join(imported)}" if imported else "")
    for table in (name, *companions):
        lake.drop(table)


# --------------------------------------------------------------------------------------------
# delta-rs backend
# --------------------------------------------------------------------------------------------

ADD_ACTION_SCHEMA = (
    "path string, size long, partition_values string, modification_time long, stats string"
)


class DeltaRsLake(Lake):
    retry_recomputes = False
    def __init__(self, spark: SparkSession, root: str, known_tables: Sequence[str] = ()):
        super().__init__(spark, known_tables)
        if "://" in root:
            self.root = root.rstrip("/")
        else:
            self.root = str(Path(root).expanduser().resolve())

    def location(self, name: str) -> str:
        return f"{self.root}/{INTERNAL_FOLDER}/{name}" if is_internal(name) else f"{self.root}/{name}"

    def _table(self, name: str):
        from deltalake import DeltaTable

        return DeltaTable(self.location(name))

    def exists(self, name: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.location(name))

    def version(self, name: str) -> int | None:
        return self._table(name).version() if self.exists(name) else None

    def spark_schema(self, name: str):
        return from_arrow_schema(pa.schema(self._table(name).schema().to_arrow()))

    def read(self, name: str) -> DataFrame:
        if not self.exists(name):
            raise KeyError(f"table '{name}' does not exist in the lake at {self.root}")
        table = self._table(name)
        schema = from_arrow_schema(pa.schema(table.schema().to_arrow()))
        files = table.file_uris()
        if not files:
            return self.spark.createDataFrame([], schema)
        # basePath makes Spark read partition columns from the folder names; the explicit
        # schema keeps their declared types instead of inferring them from the values.
        return (
            self.spark.read.schema(schema)
            .option("basePath", self.location(name))
            .parquet(*files)
        )

    def row_count(self, name: str) -> int:
        actions = pa.table(self._table(name).get_add_actions(flatten=True))
        if "num_records" in actions.column_names and actions.num_rows:
            counts = actions.column("num_records").to_pylist()
            if all(count is not None for count in counts):
                return int(sum(counts))
        return super().row_count(name)

    def discovered_tables(self, internal: bool = False) -> list[str]:
        return _folder_tables(self, internal)

    def drop(self, name: str) -> None:
        _drop_folder(self, name)

    def write(self, df, name, mode="overwrite", partition_by=(), replace_partitions=None):
        if partition_by and not _ordered_by(df, list(partition_by)):
            # As Spark's own file writer does: each task's rows grouped by partition value, so
            # a task writes one file per value however many values it holds (unsorted rows
            # over more values than the writer keeps open would close and reopen files).
            df = df.sortWithinPartitions(*partition_by)
        self._write_files(df, None, df.schema, name, mode, partition_by, replace_partitions)

    def write_batches(self, source, produce, schema, name, mode="overwrite", partition_by=()):
        self._write_files(source, produce, schema, name, mode, partition_by, None)

    def _create(self, df, name):
        return self._write_files(df, None, df.schema, name, "overwrite", (), None, create_only=True)

    def _write_files(self, source, produce, spark_schema, name, mode, partition_by,
                     replace_partitions, create_only=False) -> bool:
        from deltalake import DeltaTable, Schema

        self._check(name, mode, partition_by, replace_partitions)
        partition_by = list(partition_by)
        # Spark hands timestamps to Python as UTC instants. Tables are written with every
        # column nullable: two writers of one table (a stage and an import) then agree even
        # where Spark inferred a column of one of them as never null.
        arrow_schema = _relaxed(_arrow_schema(spark_schema))
        uri = self.location(name)
        if self.exists(name):
            current = pa.schema(DeltaTable(uri).schema().to_arrow())
            if _relaxed(current).equals(arrow_schema) and not current.equals(arrow_schema):
                arrow_schema = current  # an older table with stricter flags: keep them
        delta_schema = Schema.from_arrow(arrow_schema)
        write_files = _parquet_file_writer(uri, partition_by, arrow_schema)
        if produce is None:
            task = write_files
        else:
            def task(batches):
                return write_files(produce(batches))
        rows = source.mapInArrow(task, ADD_ACTION_SCHEMA).collect()
        return self._commit_files(name, rows, delta_schema, mode, partition_by, replace_partitions, create_only)

    @retry_write_conflicts
    def _commit_files(self, name, rows, delta_schema, mode, partition_by, replace_partitions,
                      create_only=False) -> bool:
        """One Delta transaction adding the written files; redone from a fresh read of the
        table when another writer committed first. ``create_only``: only as a new table
        (False, nothing committed, where another writer created it first)."""
        from deltalake import DeltaTable
        from deltalake.transaction import AddAction, create_table_with_add_actions

        uri = self.location(name)
        actions = [
            AddAction(
                row.path,
                row.size,
                json.loads(row.partition_values),
                row.modification_time,
                True,
                row.stats,
            )
            for row in rows
        ]
        if not self.exists(name):
            # two writers creating one table: the second's "already exists" is retried, and
            # then appends (or, create_only, gives way)
            create_table_with_add_actions(
                uri, delta_schema, actions, mode="error", partition_by=partition_by or None
            )
            return True
        if create_only:
            return False
        table = DeltaTable(uri)
        same_layout = (
            pa.schema(table.schema().to_arrow()).equals(pa.schema(delta_schema.to_arrow()))
            and list(table.metadata().partition_columns) == partition_by
        )
        if mode == "overwrite" and not replace_partitions and not same_layout:
            # A full overwrite may change the schema or the partitioning.
            create_table_with_add_actions(
                uri, delta_schema, actions, mode="overwrite", partition_by=partition_by or None
            )
            return True
        if not same_layout:
            raise ValueError(
                f"cannot {mode} into '{name}': its schema or partitioning differs from the data"
            )
        filters = None
        if replace_partitions:
            filters = [(column, "=", str(value)) for column, value in replace_partitions.items()]
        table.create_write_transaction(
            actions, mode, delta_schema, partition_by=partition_by or None, partition_filters=filters
        )
        return True

    def compact(self, name):
        # delta-rs bins files under its target size (100 MB) and rewrites each bin as one file
        # (on the driver). Compacted files come out under that size, so they are rewritten
        # again with the next pass's files: a target costs at most ~100 MB of rewrite per pass.
        self._table(name).optimize.compact()

    def _merge(self, df, name, keys):
        predicate = " AND ".join(f"target.`{key}` = source.`{key}`" for key in keys)
        self._merge_arrow(name, df.toArrow(), predicate)

    @retry_write_conflicts
    def _merge_arrow(self, name: str, source: pa.Table, predicate: str) -> None:
        (
            self._table(name)
            .merge(source, predicate, source_alias="source", target_alias="target")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def _replace_where(self, df, name, predicate):
        self._replace_arrow(name, df.toArrow(), predicate)

    @retry_write_conflicts
    def _replace_arrow(self, name: str, rows: pa.Table, predicate: str) -> None:
        from deltalake import write_deltalake

        table = self._table(name)
        schema = pa.schema(table.schema().to_arrow())
        write_deltalake(table, rows.select(schema.names).cast(schema), mode="overwrite", predicate=predicate)


def _arrow_schema(spark_schema) -> pa.Schema:
    """The Arrow schema of a Spark schema, timestamps in UTC (Spark 4.0 names the option
    timestamp_utc, later releases timezone)."""
    import inspect

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(spark_schema, timezone="UTC")
    return to_arrow_schema(spark_schema, timestamp_utc=True)


def _relaxed_type(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_map(data_type):  # map keys stay non-null (Arrow and Delta require it)
        return pa.map_(data_type.key_field, _relaxed_field(data_type.item_field))
    if pa.types.is_large_list(data_type):
        return pa.large_list(_relaxed_field(data_type.value_field))
    if pa.types.is_list(data_type):
        return pa.list_(_relaxed_field(data_type.value_field))
    if pa.types.is_struct(data_type):
        return pa.struct([_relaxed_field(data_type.field(i)) for i in range(data_type.num_fields)])
    return data_type


def _relaxed_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _relaxed_type(field.type), nullable=True, metadata=field.metadata)


def _relaxed(schema: pa.Schema) -> pa.Schema:
    """The schema with every field, element and value nullable."""
    return pa.schema([_relaxed_field(f) for f in schema], metadata=schema.metadata)


def _ordered_by(df, columns: list[str]) -> bool:
    """Whether each task's rows of ``df`` already arrive sorted by ``columns`` (in any order of
    them), as the plan's output ordering says. Asked rather than sorted again: Spark drops an
    inner sortWithinPartitions under an outer one, so sorting rows already sorted by
    (partition, key) by the partition alone would lose the key order a table was written for."""
    try:
        plan = df._jdf.queryExecution().optimizedPlan()
        output = plan.outputSet()
        ordering = plan.outputOrdering()
        leading = []
        for i in range(min(ordering.size(), len(columns))):
            order = ordering.apply(i)
            # The sort key or a column known equal to it (an alias of it), of this output.
            names = set()
            candidates = [order.child()] + list(_scala_iterable(order.sameOrderExpressions()))
            for expression in candidates:
                if expression.getClass().getSimpleName() == "AttributeReference" and output.contains(expression):
                    names.add(expression.name().lower())
            leading.append(names)
    except Exception as error:  # a plan that cannot be asked (Spark Connect): sort to be safe
        log.warning("cannot read the plan's ordering (%s); sorting by %s before writing", error, columns)
        return False
    # Each leading sort key one of the columns, and together all of them.
    wanted = {c.lower() for c in columns}
    matched = [names & wanted for names in leading]
    return len(matched) == len(columns) and all(matched) and set().union(*matched) == wanted


def _scala_iterable(sequence):
    iterator = sequence.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _parquet_file_writer(table_uri: str, partition_by: list[str], arrow_schema: pa.Schema):
    """A mapInArrow function: write each task's rows as Parquet files under ``table_uri``
    (Hive-style partition folders) and yield one Delta add action per file."""
    max_rows_per_file = 2_000_000

    def write_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        import pyarrow.fs as pafs

        filesystem, base_path = pafs.FileSystem.from_uri(table_uri)
        data_schema = pa.schema([f for f in arrow_schema if f.name not in partition_by])
        open_files: dict[tuple, _OpenFile] = {}
        finished: list[dict] = []

        def close(key: tuple) -> None:
            finished.append(open_files.pop(key).close())

        for batch in batches:
            table = pa.Table.from_batches([batch])
            if table.schema != arrow_schema:
                table = table.cast(arrow_schema)
            if partition_by:
                groups = table.group_by(partition_by, use_threads=False).aggregate([]).to_pylist()
            else:
                groups = [{}]
            for group in groups:
                part = table
                for column, value in group.items():
                    if len(groups) == 1:
                        break  # the whole batch is one partition (input sorted by it)
                    values = part.column(column)
                    part = part.filter(
                        pc.is_null(values) if value is None else pc.equal(values, value)
                    )
                key = tuple(str(group[c]) if group[c] is not None else None for c in partition_by)
                if key not in open_files:
                    if len(open_files) >= _MAX_OPEN_FILES:
                        close(next(iter(open_files)))
                    open_files[key] = _OpenFile(
                        filesystem, base_path, dict(zip(partition_by, key)), data_schema
                    )
                open_files[key].write(part.select(data_schema.names))
                if open_files[key].rows >= max_rows_per_file:
                    close(key)
        for key in list(open_files):
            close(key)
        if finished:
            yield pa.RecordBatch.from_pylist(finished, schema=_ADD_ACTION_ARROW)

    return write_files


# Files one write task keeps open at once (one per partition value): bounded file handles
# however many partitions a table has. write() hands the writer rows grouped by partition
# value, so a file once closed never reopens (but for a new file every 2M rows);
# write_batches() cannot (its partition columns are made by ``produce`` in the task), so
# partition its output by few values only.
_MAX_OPEN_FILES = 32
_ADD_ACTION_ARROW = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("partition_values", pa.string()),
        ("modification_time", pa.int64()),
        ("stats", pa.string()),
    ]
)


class _OpenFile:
    """One Parquet data file being written, with the statistics Delta keeps for it."""

    _ROW_GROUP_BYTES = 64 * 1024 * 1024

    def __init__(self, filesystem, base_path: str, partition: dict, schema: pa.Schema):
        import pyarrow.parquet as pq

        folder = "/".join(f"{column}={_partition_folder(value)}" for column, value in partition.items())
        name = f"part-{uuid.uuid4().hex}.snappy.parquet"
        self.relative_path = f"{folder}/{name}" if folder else name
        self.partition = partition
        full_path = f"{base_path}/{self.relative_path}"
        self.filesystem, self.full_path = filesystem, full_path
        filesystem.create_dir(full_path.rsplit("/", 1)[0], recursive=True)
        self.writer = pq.ParquetWriter(
            full_path, schema, compression="snappy", filesystem=filesystem
        )
        self.stats = _FileStats(schema)
        self.rows = 0
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0

    def write(self, table: pa.Table) -> None:
        # Input batches can be small (a few hundred rows); buffer them so that row groups
        # stay large enough for efficient scans.
        if table.num_rows:
            self.pending.append(table)
            self.pending_bytes += table.nbytes
            self.rows += table.num_rows
            if self.pending_bytes >= self._ROW_GROUP_BYTES:
                self._flush()

    def _flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending)
            self.writer.write_table(table)
            self.stats.update(table)
            self.pending, self.pending_bytes = [], 0

    def close(self) -> dict:
        self._flush()
        self.writer.close()
        info = self.filesystem.get_file_info(self.full_path)
        return {
            "path": self.relative_path,
            "size": info.size,
            "partition_values": json.dumps(self.partition),
            "modification_time": int(time.time() * 1000),
            "stats": json.dumps(self.stats.as_delta(self.rows)),
        }


def _partition_folder(value: str | None) -> str:
    if value is None:
        return "__HIVE_DEFAULT_PARTITION__"
    if not _SAFE_PARTITION_VALUE.match(value):
        raise ValueError(f"partition value {value!r} must be letters, digits, '.', '_' or '-'")
    return value


class _FileStats:
    """Delta per-file statistics (numRecords, min/max, null counts) for flat columns; they let
    readers skip files, e.g. triples of other properties."""

    _MAX_STRING = 64

    def __init__(self, schema: pa.Schema):
        self.columns = [
            field.name
            for field in schema
            if pa.types.is_integer(field.type)
            or pa.types.is_floating(field.type)
            or pa.types.is_string(field.type)
            or pa.types.is_boolean(field.type)
            or pa.types.is_date(field.type)
            or pa.types.is_timestamp(field.type)
        ]
        self.minimum: dict = {}
        self.maximum: dict = {}
        self.nulls: dict = {name: 0 for name in self.columns}
        self.unbounded: set = set()

    def update(self, table: pa.Table) -> None:
        import pyarrow.compute as pc

        for name in self.columns:
            column = table.column(name)
            self.nulls[name] += column.null_count
            if name in self.unbounded or column.null_count == len(column):
                continue
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            if isinstance(low, str) and (
                len(low) > self._MAX_STRING or len(high) > self._MAX_STRING
            ):
                # Long strings would need truncation rules; leaving them out is always correct.
                self.unbounded.add(name)
                self.minimum.pop(name, None)
                self.maximum.pop(name, None)
                continue
            self.minimum[name] = low if name not in self.minimum else min(self.minimum[name], low)
            self.maximum[name] = high if name not in self.maximum else max(self.maximum[name], high)

    def as_delta(self, rows: int) -> dict:
        def encode(value):
            if hasattr(value, "isoformat"):
                text = value.isoformat()
                return text.replace("+00:00", "Z") if "T" in text else text
            return value

        return {
            "numRecords": rows,
            "minValues": {k: encode(v) for k, v in self.minimum.items()},
            "maxValues": {k: encode(v) for k, v in self.maximum.items()},
            "nullCount": self.nulls,
        }


# --------------------------------------------------------------------------------------------
# Spark-native Delta backend
# --------------------------------------------------------------------------------------------


class SparkDeltaLake(Lake):
    def __init__(
        self,
        spark: SparkSession,
        root: str | None = None,
        catalog: str | None = None,
        schema: str | None = None,
        known_tables: Sequence[str] = (),
        internal_schema: str | None = None,
    ):
        super().__init__(spark, known_tables)
        if not root and not schema:
            raise ConfigError("spark_delta lake needs lake.root or lake.catalog + lake.schema")
        self.by_name = bool(schema)
        self.namespace = ".".join(f"`{part}`" for part in (catalog, schema) if part)
        internal_schema = internal_schema or f"{schema}_internal"
        self.internal_namespace = ".".join(f"`{part}`" for part in (catalog, internal_schema) if part)
        self._internal_schema_ready = False
        if root and "://" not in root:
            root = str(Path(root).expanduser().resolve())
        self.root = (root or "").rstrip("/")

    def location(self, name: str) -> str:
        if self.by_name:
            namespace = self.internal_namespace if is_internal(name) else self.namespace
            return f"{namespace}.`{name}`"
        return f"{self.root}/{INTERNAL_FOLDER}/{name}" if is_internal(name) else f"{self.root}/{name}"

    def _sql_target(self, name: str) -> str:
        return self.location(name) if self.by_name else f"delta.`{self.location(name)}`"

    def exists(self, name: str) -> bool:
        if self.by_name:
            return self.spark.catalog.tableExists(self.location(name).replace("`", ""))
        try:
            self.spark.read.format("delta").load(self.location(name)).schema
            return True
        except Exception:  # noqa: BLE001 - any engine's "not a Delta table" error
            return False

    def read(self, name: str) -> DataFrame:
        if self.by_name:
            return self.spark.read.table(self.location(name))
        return self.spark.read.format("delta").load(self.location(name))

    @retry_write_conflicts
    def write(self, df, name, mode="overwrite", partition_by=(), replace_partitions=None):
        self._check(name, mode, partition_by, replace_partitions)
        writer = df.write.format("delta").mode(mode)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        if replace_partitions:
            condition = " AND ".join(
                f"`{column}` = '{_sql_string(value)}'" for column, value in replace_partitions.items()
            )
            writer = writer.option("replaceWhere", condition)
        elif mode == "overwrite":
            writer = writer.option("overwriteSchema", "true")
        self._save(writer, name)

    def compact(self, name):
        # Delta's OPTIMIZE (Databricks, delta-spark), run by the cluster. Unity Catalog's
        # predictive optimisation may do it too; a second OPTIMIZE finds little to do.
        self.spark.sql(f"OPTIMIZE {self._sql_target(name)}")

    def _save(self, writer, name: str) -> None:
        if self.by_name:
            if is_internal(name) and not self._internal_schema_ready:
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.internal_namespace}")
                self._internal_schema_ready = True
            writer.saveAsTable(self.location(name).replace("`", ""))
        else:
            writer.save(self.location(name))

    def _create(self, df, name):
        try:
            self._save(df.write.format("delta").mode("error"), name)
        except Exception as error:  # noqa: BLE001 - the engines word it differently
            text = str(error)
            # delta-spark: DELTA_PATH_EXISTS, or a conflict where both created it at once;
            # pysail and catalogs: "already exists"
            if (is_write_conflict(error) or "already exist" in text.lower() or "DELTA_PATH_EXISTS" in text) \
                    and self.exists(name):
                return False
            raise
        return True

    @staticmethod
    def _quoted(value: str) -> str:
        return f"'{_sql_string(value)}'"  # Spark SQL: backslash escapes

    @retry_write_conflicts
    def _replace_where(self, df, name, predicate):
        self._save(df.write.format("delta").mode("overwrite").option("replaceWhere", predicate), name)

    def _merge(self, df, name, keys):
        view = f"misbench_upsert_{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(view)
        condition = " AND ".join(f"target.`{key}` = source.`{key}`" for key in keys)
        retry_write_conflicts(self.spark.sql)(
            f"MERGE INTO {self._sql_target(name)} AS target USING {view} AS source "
            f"ON {condition} WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )

    def version(self, name: str) -> int | None:
        try:
            row = self.spark.sql(f"DESCRIBE HISTORY {self._sql_target(name)} LIMIT 1").first()
            return int(row["version"]) if row else None
        except Exception:  # noqa: BLE001 - engines without DESCRIBE HISTORY (pysail)
            pass
        if not self.by_name:
            try:  # the Delta log itself says it, wherever delta-rs can read the path
                from deltalake import DeltaTable

                return DeltaTable(self.location(name)).version()
            except Exception:  # noqa: BLE001
                return None
        return None

    def drop(self, name: str) -> None:
        if self.by_name:
            self.spark.sql(f"DROP TABLE IF EXISTS {self.location(name)}")
        else:
            _drop_folder(self, name)

    def store_view(self, name: str, sql: str) -> None:
        if not self.by_name:
            super().store_view(name, sql)
            return
        _check_view_name(name)
        # A view resolves its bare table names in the namespace current at its creation.
        catalog = self.spark.catalog.currentCatalog()
        database = self.spark.catalog.currentDatabase()
        parts = [p.strip("`") for p in self.namespace.split(".")]
        try:
            if len(parts) == 2:
                self.spark.catalog.setCurrentCatalog(parts[0])
            self.spark.catalog.setCurrentDatabase(parts[-1])
            self.spark.sql(f"CREATE OR REPLACE VIEW {self.namespace}.`{name}` AS {sql}")
        finally:
            self.spark.catalog.setCurrentCatalog(catalog)
            self.spark.catalog.setCurrentDatabase(database)

    def register_stored_views(self, names: set[str] | None = None) -> list[str]:
        if not self.by_name:
            return super().register_stored_views(names)
        views = [name for name in _view_names(self.spark, self.namespace) if names is None or name.lower() in names]
        for name in views:
            self.spark.read.table(f"{self.namespace}.`{name}`").createOrReplaceTempView(name)
            _registered_views.add(name)
        return views

    def discovered_tables(self, internal: bool = False) -> list[str]:
        if self.by_name:
            namespace = self.internal_namespace if internal else self.namespace
            if internal and not self.spark.catalog.databaseExists(namespace.replace("`", "")):
                return []
            rows = self.spark.sql(f"SHOW TABLES IN {namespace}").collect()
            views = set(_view_names(self.spark, namespace))
            return [row["tableName"] for row in rows if not row["isTemporary"]
                    and row["tableName"] not in views and is_internal(row["tableName"]) == internal]
        return _folder_tables(self, internal)


def _folder_tables(lake, internal: bool = False) -> list[str]:
    """Delta tables under a lake root folder (internal ones under its ``_internal`` folder);
    on remote storage, the known names that exist. A product listing skips internal names
    that an older version kept beside the product tables."""
    folder = os.path.join(lake.root, INTERNAL_FOLDER) if internal else lake.root
    if "://" in lake.root or not os.path.isdir(folder):
        if internal:
            return []
        return [name for name in lake.known_tables if not is_internal(name) and lake.exists(name)]
    tables = [entry for entry in os.listdir(folder) if os.path.isdir(os.path.join(folder, entry, "_delta_log"))]
    older = sorted(name for name in tables if is_internal(name)) if not internal else []
    if older and lake.root not in _warned_roots:
        # Written by a version that kept them beside the product tables; the stages now use
        # _internal/ (queues are rebuilt from the outputs, so nothing finished is lost).
        _warned_roots.add(lake.root)
        log.warning("lake %s: internal tables of an older version at its top (%s); they are no "
                    "longer used and can be removed", lake.root, ", ".join(older))
    return sorted(name for name in tables if is_internal(name) == internal)


def _drop_folder(lake, name: str) -> None:
    import shutil

    if "://" in lake.root:
        raise NotImplementedError("drop of tables on remote storage: remove the folder")
    # The log first: a kill during the removal leaves files without a table, never a table
    # whose files are gone.
    shutil.rmtree(f"{lake.location(name)}/_delta_log", ignore_errors=True)
    shutil.rmtree(lake.location(name), ignore_errors=True)


def _check_view_name(name: str) -> None:
    if not _SAFE_NAME.match(name):
        raise ValueError(f"view name '{name}' must be letters, digits and underscores")


def _view_names(spark, namespace: str) -> list[str]:
    """Persistent views in a namespace (Spark calls the column viewName, some engines tableName)."""
    rows = spark.sql(f"SHOW VIEWS IN {namespace}").collect()
    return [row.asDict().get("viewName", row.asDict().get("tableName")) for row in rows if not row["isTemporary"]]


def _now():
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc)


def _sql_string(value) -> str:
    return str(value).replace("\\", "\\\\").replace("'", "\\'")
