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


def test_sql_errors_are_reported_not_crashes(demo_lake, capsys):
    assert main(["sql", "--lake", demo_lake, "SELECT * FROM no_such_table"]) == 2
    assert "TABLE_OR_VIEW_NOT_FOUND" in capsys.readouterr().err
    assert main(["sql", "--lake", demo_lake, "SELEC nonsense"]) == 2
    assert "error" in capsys.readouterr().err
