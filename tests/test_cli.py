"""`misbench tables` and `misbench sql` for analysts, on a lake built from the demo dump."""
import csv
import io
import json

import pytest

from misbench.cli import main


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo") / "lake"
    # no --dump: the demo dump shipped with the project is the default input
    assert main(["ingest", "--lake", str(root), "--set", "spark.master=local[2]"]) == 0
    return str(root)


def test_tables_lists_rows_and_versions(demo_lake, capsys):
    assert main(["tables", "--lake", demo_lake]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines()[2:-1]}
    assert lines["entities"][1:3] == ["49", "0"]
    assert lines["triples"][1:3] == ["4282", "0"]  # 5 of them unknown / no value
    assert lines["ingest_rejects"][1] == "0"


def test_sql_formats(demo_lake, capsys):
    query = ("SELECT e.label AS country, count(*) AS cities FROM triples t "
             "JOIN entities e ON e.id = t.object_id WHERE t.property = 'P17' "
             "GROUP BY e.label ORDER BY cities DESC, country LIMIT 3")
    assert main(["sql", "--lake", demo_lake, "--format", "json", query]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and set(rows[0]) == {"country", "cities"}
    assert main(["sql", "--lake", demo_lake, "--format", "csv", query]) == 0
    parsed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["country"], int(r["cities"])) for r in parsed] == [
        (r["country"], r["cities"]) for r in rows]
    assert main(["sql", "--lake", demo_lake, "SELECT id, aliases FROM entities WHERE id='Q64'"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["id", "aliases"] and table[2].startswith("Q64")
    assert table[-1] == "(1 row)"


def test_sql_fills_the_checks_parameters_from_the_configuration(demo_lake, capsys):
    """The checks in notebooks/*.sql name :reference_date and :functional_premises instead of
    repeating the settings: `misbench sql` fills them in from the configuration it runs with."""
    from misbench.hoax.spec import load_spec

    started = ("SELECT count(*) AS n, split(:functional_premises, ',') AS functional, "
               "first(:disjoint_premises) AS disjoint FROM triples "
               "WHERE start_time IS NOT NULL AND start_time != 'somevalue' AND start_time <= :reference_date "
               "-- a marker in a comment is none: :no_such_parameter")
    counts = {}
    for day in ("2026-01-01", "1000-01-01"):
        assert main(["sql", "--lake", demo_lake, "--format", "json", "--set", f"claims.reference_date={day}",
                     started]) == 0
        [row] = json.loads(capsys.readouterr().out)
        assert row["functional"] == sorted(load_spec().functional_premises)
        assert row["disjoint"] == "P184:lifespan,P26:lifespan,P47:P30"
        counts[day] = row["n"]
    assert counts["2026-01-01"] > counts["1000-01-01"] > 0  # the date reached the query


def test_sql_errors_are_reported_not_crashes(demo_lake, capsys):
    assert main(["sql", "--lake", demo_lake, "SELECT * FROM no_such_table"]) == 2
    assert "TABLE_OR_VIEW_NOT_FOUND" in capsys.readouterr().err
    assert main(["sql", "--lake", demo_lake, "SELEC nonsense"]) == 2
    assert "error" in capsys.readouterr().err


def test_internal_tables_are_apart_and_listed_only_when_asked(demo_lake, capsys):
    assert main(["tables", "--lake", demo_lake]) == 0
    product = {line.split()[0] for line in capsys.readouterr().out.splitlines()[2:-1]}
    assert product == {"entities", "triples", "ingest_rejects", "dump_versions"}
    assert main(["tables", "--lake", demo_lake, "--all"]) == 0
    listed = {line.split()[0]: line.split()[-1] for line in capsys.readouterr().out.splitlines()[2:-1]}
    assert set(listed) == product | {"ingest_staging"}
    assert listed["ingest_staging"].endswith("/_internal/ingest_staging")
    # internal tables stay queryable by name for whoever debugs a stage
    assert main(["sql", "--lake", demo_lake, "SELECT count(*) AS n FROM ingest_staging"]) == 0


@pytest.mark.parametrize("order", ["before", "after", "both"])
def test_common_options_before_and_after_the_subcommand(demo_lake, order, capsys):
    query = "SELECT count(*) AS n FROM entities"
    before = {"before": ["--lake", demo_lake, "--set", "spark.conf.spark.sql.shuffle.partitions=3"],
              "after": [], "both": ["--lake", "/nowhere", "--set", "spark.conf.spark.sql.shuffle.partitions=3"]}[order]
    after = {"before": [], "after": ["--lake", demo_lake], "both": ["--lake", demo_lake]}[order]
    assert main([*before, "sql", *after, "--format", "json", query]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 49}]


def test_set_before_and_after_add_up():
    from misbench.cli import build_parser

    args = build_parser().parse_args(["--set", "a.b=1", "--profile", "local", "tables", "--set", "c.d=2"])
    assert args.overrides == ["a.b=1"] and args.overrides_after == ["c.d=2"] and args.profile == "local"
    args = build_parser().parse_args(["--profile", "databricks", "tables", "--profile", "local"])
    assert args.profile == "local"  # after the subcommand wins


def test_views_wait_for_their_tables_and_are_then_queryable(demo_lake, capsys):
    assert main(["views", "--lake", demo_lake]) == 0
    out = capsys.readouterr().out
    assert "not yet" in out and "answers_flat" in out  # no evaluation in this lake yet
    assert main(["sql", "--lake", demo_lake, "SELECT * FROM headline_metrics"]) == 2
    assert "TABLE_OR_VIEW_NOT_FOUND" in capsys.readouterr().err


def test_sql_registers_only_what_the_query_names_through_views_too(demo_lake, tmp_path, capsys):
    """`misbench sql` reads the tables its query names, and those of the stored views it names,
    a view over a view included, in any letter case; the lake's other tables stay unread."""
    import shutil

    from misbench.config import load_config
    from misbench.lake import DeltaRsLake, _registered_views
    from misbench.spark import get_spark

    root = tmp_path / "lake"
    shutil.copytree(demo_lake, root)
    lake = DeltaRsLake(get_spark(load_config("local", ["spark.master=local[2]"])), root=str(root))
    lake.register_views_of_tables()
    lake.store_view("berlin_triples", "SELECT * FROM triples WHERE subject_id = 'Q64'")
    lake.register_stored_views()  # the next view reads this one
    lake.store_view("berlin_properties", "SELECT DISTINCT property FROM Berlin_Triples")
    assert main(["sql", "--lake", str(root), "--format", "json", "SELECT count(*) AS n FROM BERLIN_properties"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n"] > 0
    assert _registered_views == {"triples", "berlin_triples", "berlin_properties"}
    assert main(["sql", "--lake", str(root), "--format", "json", "SELECT count(*) AS n FROM entities"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 49}]
    assert _registered_views == {"entities"}
    # a query that names no table of the lake sees them all, as before
    assert main(["sql", "--lake", str(root), "--format", "json", "SHOW TABLES"]) == 0
    assert {"entities", "triples", "berlin_properties"} <= {r["tableName"] for r in json.loads(capsys.readouterr().out)}


@pytest.mark.parametrize("styles, message", [
    ("[poetry]", "generate.styles names 'poetry', which has no prompt file prompts/style_poetry.txt"),
    ("[news, news]", "generate.styles: ['news', 'news'] names a style twice"),
])
def test_run_all_refuses_a_misnamed_style_before_the_first_stage(tmp_path, capsys, styles, message):
    lake = tmp_path / "lake"
    assert main(["run-all", "--lake", str(lake), "--set", f"generate.styles={styles}",
                 "--set", "spark.master=local[2]"]) == 2
    assert message in capsys.readouterr().err
    assert not (lake / "entities").exists()  # ingest did not run
