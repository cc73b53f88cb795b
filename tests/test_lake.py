"""The lake's contract, run against both backends on real Delta tables:
delta-rs under local Spark, and Spark-native Delta through a Spark Connect server (pysail)."""
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from deltalake import DeltaTable

from misbench.lake import DeltaRsLake, SparkDeltaLake

ROWS = [(1, "a", "x"), (2, "b", "y"), (3, "c", "x")]
SCHEMA = "k long, v string, p string"


def run_contract_on_spark_connect(root: str) -> str:
    """In a fresh process (pyspark switches every DataFrame API to Connect mode once a
    Connect session exists): start pysail's Spark Connect server, run the contract against
    the Spark-native Delta backend, return '' or the failure."""
    import traceback

    from pysail.spark import SparkConnectServer
    from pyspark.sql import SparkSession

    server = SparkConnectServer()
    server.start(background=True)
    try:
        host, port = server.listening_address
        session = SparkSession.builder.remote(f"sc://{host}:{port}").getOrCreate()
        check_lake_contract(SparkDeltaLake(session, root=root))
        return ""
    except Exception:  # noqa: BLE001 - reported back to the parent test
        return traceback.format_exc()
    finally:
        server.stop()


def run_catalog_contract_on_spark_connect(schema: str) -> str:
    """As above, with tables named ``schema.table`` in the server's catalog (Databricks' way):
    product tables, internal ones in ``<schema>_internal``, and analyst views as catalog views."""
    import traceback

    from pysail.spark import SparkConnectServer
    from pyspark.sql import SparkSession

    server = SparkConnectServer()
    server.start(background=True)
    try:
        host, port = server.listening_address
        session = SparkSession.builder.remote(f"sc://{host}:{port}").getOrCreate()
        session.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        lake = SparkDeltaLake(session, schema=schema)
        lake.write(session.createDataFrame(ROWS, SCHEMA), "t")
        lake.upsert(session.createDataFrame([(4, "d", "y")], SCHEMA), "t", ["k"])
        assert rows(lake, "t") == ROWS + [(4, "d", "y")]
        lake.write(session.createDataFrame(ROWS, SCHEMA), "eval_queue")
        assert lake.location("eval_queue") == f"`{schema}_internal`.`eval_queue`"
        assert lake.discovered_tables() == ["t"] and lake.discovered_tables(internal=True) == ["eval_queue"]
        lake.store_view("t_view", "SELECT k, upper(v) AS v FROM t")
        assert lake.discovered_tables() == ["t"]  # a view is no table
        assert lake.register_views() == ["eval_queue", "t", "t_view"]
        assert sorted(tuple(r) for r in session.sql("SELECT k, v FROM t_view").collect())[-1] == (4, "D")
        return ""
    except Exception:  # noqa: BLE001 - reported back to the parent test
        return traceback.format_exc()
    finally:
        server.stop()


def rows(lake, name):
    return sorted(tuple(r) for r in lake.read(name).select("k", "v", "p").collect())


def check_lake_contract(any_lake):
    spark = any_lake.spark
    any_lake.write(spark.createDataFrame(ROWS, SCHEMA), "t", partition_by=["p"])
    assert rows(any_lake, "t") == ROWS
    # The table on disk is a real Delta table that another engine reads.
    assert DeltaTable(any_lake.location("t")).to_pyarrow_table().num_rows == 3

    any_lake.write(spark.createDataFrame([(4, "d", "y")], SCHEMA), "t", mode="append",
                   partition_by=["p"])
    assert rows(any_lake, "t") == ROWS + [(4, "d", "y")]

    any_lake.write(spark.createDataFrame([(5, "e", "x")], SCHEMA), "t",
                   partition_by=["p"], replace_partitions={"p": "x"})
    assert rows(any_lake, "t") == [(2, "b", "y"), (4, "d", "y"), (5, "e", "x")]

    any_lake.upsert(spark.createDataFrame([(4, "D", "y"), (6, "f", "x")], SCHEMA), "t", ["k"])
    assert rows(any_lake, "t") == [(2, "b", "y"), (4, "D", "y"), (5, "e", "x"), (6, "f", "x")]

    any_lake.write(spark.createDataFrame([(7, "g", "z")], SCHEMA), "t", partition_by=["p"])
    assert rows(any_lake, "t") == [(7, "g", "z")]
    assert any_lake.version("t") == 4
    listed = {t.name: t for t in any_lake.tables()}
    assert listed["t"].rows == 1 and listed["t"].version == 4

    # replace_where: the matching rows alone are replaced, in one commit; what others wrote stays
    any_lake.write(spark.createDataFrame([(1, "a", "x"), (2, "it's", "y"), (3, "c", "x")], SCHEMA), "m")
    any_lake.replace_where(spark.createDataFrame([(9, "i", "x")], SCHEMA), "m", {"p": "x"}, "k < 100")
    assert rows(any_lake, "m") == [(2, "it's", "y"), (9, "i", "x")]
    any_lake.replace_where(spark.createDataFrame([(8, "it's", "y")], SCHEMA), "m", {"v": "it's"})
    assert rows(any_lake, "m") == [(8, "it's", "y"), (9, "i", "x")]
    with pytest.raises(ValueError, match="rows outside"):  # rows outside the predicate are refused, not written
        any_lake.replace_where(spark.createDataFrame([(7, "k", "z")], SCHEMA), "m", {"p": "x"})
    assert rows(any_lake, "m") == [(8, "it's", "y"), (9, "i", "x")]
    # a table another command created first: creating gives way, upsert merges into it
    assert any_lake._create(spark.createDataFrame([(1, "z", "q")], SCHEMA), "m") is False
    assert rows(any_lake, "m") == [(8, "it's", "y"), (9, "i", "x")]
    any_lake.upsert(spark.createDataFrame([(1, "n", "q")], SCHEMA), "new", ["k"])
    any_lake.upsert(spark.createDataFrame([(1, "N", "q"), (2, "o", "q")], SCHEMA), "new", ["k"])
    assert rows(any_lake, "new") == [(1, "N", "q"), (2, "o", "q")]
    any_lake.replace_where(spark.createDataFrame([(3, "p", "q")], SCHEMA), "created", {"p": "q"})
    assert rows(any_lake, "created") == [(3, "p", "q")]

    # Internal tables (queues, staging) live apart and are listed only when asked for.
    any_lake.write(spark.createDataFrame(ROWS, SCHEMA), "eval_queue")
    assert any_lake.location("eval_queue").endswith("/_internal/eval_queue")
    assert rows(any_lake, "eval_queue") == ROWS
    assert "eval_queue" not in any_lake.discovered_tables()
    assert any_lake.discovered_tables(internal=True) == ["eval_queue"]
    assert {t.name for t in any_lake.tables(include_internal=True)} == {"t", "m", "new", "created", "eval_queue"}

    # Analyst views: stored with the lake, registered wherever SQL runs over it.
    any_lake.register_views_of_tables()
    any_lake.store_view("t_view", "SELECT k, upper(v) AS v FROM t")
    assert "t_view" in any_lake.register_views()
    assert [tuple(r) for r in spark.sql("SELECT k, v FROM t_view").collect()] == [(7, "G")]
    with pytest.raises(Exception, match="(?i)not.*found|cannot be found|no_such"):
        any_lake.store_view("broken", "SELECT * FROM no_such_table")


def test_contract_on_delta_rs(spark, tmp_path):
    check_lake_contract(DeltaRsLake(spark, root=str(tmp_path / "lake")))


def test_contract_on_spark_native_delta_via_spark_connect(tmp_path):
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        failure = pool.apply(run_contract_on_spark_connect, (str(tmp_path / "lake"),))
    assert failure == "", failure


def test_catalog_names_internal_schema_and_views_via_spark_connect():
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        failure = pool.apply(run_catalog_contract_on_spark_connect, ("misbench",))
    assert failure == "", failure


def test_reads_follow_the_delta_log_not_the_folder(lake, spark):
    lake.write(spark.createDataFrame(ROWS, SCHEMA), "t")
    lake.write(spark.createDataFrame([(9, "z", "q")], SCHEMA), "t")
    parquet_files = [f for f in os.listdir(lake.location("t")) if f.endswith(".parquet")]
    assert len(parquet_files) >= 2  # the overwritten file is still on disk until vacuum
    assert rows(lake, "t") == [(9, "z", "q")]


def test_overwrite_may_change_schema_and_empty_tables_keep_theirs(lake, spark):
    lake.write(spark.createDataFrame(ROWS, SCHEMA), "t", partition_by=["p"])
    lake.write(spark.createDataFrame([("only",)], "w string"), "t")
    assert [r.w for r in lake.read("t").collect()] == ["only"]
    lake.write(spark.createDataFrame([], SCHEMA), "empty")
    empty = lake.read("empty")
    assert empty.count() == 0 and empty.columns == ["k", "v", "p"]
    with pytest.raises(ValueError, match="schema or partitioning"):
        lake.write(spark.createDataFrame([(1,)], "other long"), "t", mode="append")


def test_statistics_let_readers_skip_files(lake, spark):
    df = spark.createDataFrame([(i, f"P{i % 5}", "x") for i in range(100)], SCHEMA)
    lake.write(df.repartitionByRange(5, "v"), "t")
    actions = pa.table(DeltaTable(lake.location("t")).get_add_actions(flatten=True)).to_pydict()
    assert sum(actions["num_records"]) == 100
    files_for_p3 = DeltaTable(lake.location("t")).file_uris(file_pruning_predicate="v = 'P3'")
    assert 1 <= len(files_for_p3) < len(actions["path"])


def test_bad_names_modes_and_missing_tables_are_clear_errors(lake, spark):
    df = spark.createDataFrame(ROWS, SCHEMA)
    with pytest.raises(ValueError, match="table name"):
        lake.write(df, "bad-name")
    with pytest.raises(ValueError, match="write mode"):
        lake.write(df, "t", mode="merge")
    with pytest.raises(ValueError, match="non-partition"):
        lake.write(df, "t", partition_by=["p"], replace_partitions={"k": "1"})
    with pytest.raises(KeyError, match="does not exist"):
        lake.read("missing")


def _data_files(lake, name):
    return pa.table(DeltaTable(lake.location(name)).get_add_actions(flatten=True)).to_pydict()


def test_unsorted_rows_over_many_partitions_write_one_file_per_task_and_value(lake, spark):
    # 100 partition values, more than a task keeps open, in rows that arrive unsorted over
    # three Arrow batches per task: without grouping them first a task would close and reopen
    # a file per value and batch.
    batch = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
    total = 2 * 3 * min(batch, 20_000)
    df = spark.range(total, numPartitions=2).selectExpr("id AS k", "CAST(id * 7919 % 100 AS INT) AS p")
    lake.write(df, "t", partition_by=["p"])
    files = _data_files(lake, "t")
    assert len(files["path"]) <= 2 * 100
    assert sum(files["num_records"]) == total
    assert lake.read("t").groupBy("p").count().count() == 100


def test_rows_sorted_by_partition_and_key_keep_their_key_order_in_each_file(lake, spark):
    # Written as triples are: by partition, then by key, so that file statistics on the key
    # let readers skip files. Sorting again by the partition alone would lose the key order.
    df = spark.range(5_000, numPartitions=2).selectExpr(
        "CAST(id % 3 AS INT) AS p", "CAST((id * 7919) % 5000 AS BIGINT) AS k"
    )
    lake.write(df.repartition(2, "p").sortWithinPartitions("p", "k"), "t", partition_by=["p"])

    for path in _data_files(lake, "t")["path"]:
        keys = pq.read_table(os.path.join(lake.location("t"), path)).column("k").to_pylist()
        assert keys == sorted(keys)
    # The same through an alias of the sorted column: still known sorted, not sorted again.
    aliased = df.repartition(2, "p").sortWithinPartitions("p", "k").withColumn("q", F.col("p"))
    lake.write(aliased, "u", partition_by=["q"])
    for path in _data_files(lake, "u")["path"]:
        keys = pq.read_table(os.path.join(lake.location("u"), path)).column("k").to_pylist()
        assert keys == sorted(keys)


def test_compaction_merges_small_files_into_one_version_with_the_same_rows(lake, spark):
    for k in range(6):  # as a pass commits: an append per chunk
        lake.write(spark.createDataFrame([(k, "v", "x")], SCHEMA), "t", mode="append")
    before = lake.version("t")
    assert len(DeltaTable(lake.location("t")).file_uris()) == 6
    lake.compact("t")
    assert len(DeltaTable(lake.location("t")).file_uris()) == 1 and lake.version("t") == before + 1
    assert rows(lake, "t") == [(k, "v", "x") for k in range(6)]


def test_a_commit_that_lost_a_race_is_redone_from_a_fresh_read(tmp_path):
    """delta-rs's real conflict (another writer committed after this one read the table) is
    recognised and the merge redone on the table as it is now; other errors are not retried."""
    from deltalake import write_deltalake

    from misbench.lake import is_write_conflict, retry_write_conflicts

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"k": [1, 2], "v": ["a", "b"]}))
    handles = [DeltaTable(path)]  # read before the other writer's commit
    DeltaTable(path).merge(pa.table({"k": [1], "v": ["other"]}), "t.k = s.k", source_alias="s",
                           target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute()
    errors = []

    @retry_write_conflicts
    def merge_mine():
        table = handles.pop() if handles else DeltaTable(path)
        try:
            table.merge(pa.table({"k": [1], "v": ["mine"]}), "t.k = s.k", source_alias="s",
                        target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute()
        except Exception as error:
            errors.append(error)
            raise

    merge_mine()
    assert len(errors) == 1 and is_write_conflict(errors[0])
    assert dict(DeltaTable(path).to_pandas()[["k", "v"]].values.tolist()) == {1: "mine", 2: "b"}
    calls = []

    @retry_write_conflicts
    def broken():
        calls.append(1)
        raise ValueError("cannot append into 't': its schema differs")

    with pytest.raises(ValueError):
        broken()
    assert len(calls) == 1 and not is_write_conflict(ValueError("schema differs"))
