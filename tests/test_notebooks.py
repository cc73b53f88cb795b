"""Every analyst notebook (Databricks source format) against a lake built here: each SQL cell
through `misbench sql`, each Python cell (the plots) in one namespace per notebook, as on
Databricks. The lake: questions from the real slice with hand-written texts (the smallest
model's few texts may make no question), evaluated, hoax-evaluated and given its views with the
fake backend answering; the generation, quality and hoax tables come from the run-all test's
lake (every stage run on the same slice with the real small model; a hoax run reads the
slice's entities and triples and the hoax settings, which the two lakes share, so its
questions are the ones a hoax run here would make)."""
import contextlib
import io
import json
import re

import pytest

from misbench.cli import main
from tests.conftest import PROJECT, RUN_ALL_SMALL, copy_lake, settings_to_try

NOTEBOOKS = sorted((PROJECT / "notebooks").glob("*.py"))
# the run-all lake, and MiniLM in hoax-evaluate
ON_THE_RUN_ALL_LAKE = [pytest.mark.e2e, pytest.mark.model]


def cells(path):
    """(kind, source) per cell: kind is sql, md or python."""
    text = path.read_text()
    assert text.startswith("# Databricks notebook source\n"), path.name
    out = []
    for cell in text.split("# COMMAND ----------"):
        lines = [line for line in cell.strip().splitlines() if line != "# Databricks notebook source"]
        if not lines:
            continue
        if lines[0].startswith("# MAGIC"):
            body = [re.sub(r"^# MAGIC ?", "", line) for line in lines]
            kind = body[0].strip().lstrip("%")
            out.append((kind, "\n".join(body[1:]).strip()))
        else:
            out.append(("python", "\n".join(lines)))
    return out


# the generation tables the hand-written texts lack, and the hoax questions, from the run-all lake
FROM_THE_RUN_ALL_LAKE = ("evidence_slots", "generation_runs", "semantic_description_checks", "quality_stats",
                         "hoax_questions", "hoax_stats")


@pytest.fixture(scope="module")
def evaluated_lake(spark, bench_root, run_all_lake, tmp_path_factory):
    import shutil

    generated, code, out = run_all_lake
    assert code == 0, out[-3000:]
    root = tmp_path_factory.mktemp("notebooks") / "lake"
    copy_lake(spark, bench_root, root)
    for table in FROM_THE_RUN_ALL_LAKE:
        if not (root / table).exists():
            shutil.copytree(generated / table, root / table)
    settings = [part for setting in [*RUN_ALL_SMALL, *settings_to_try(), "llm.backend=fake"]
                for part in ("--set", setting)]
    for command in ("evaluate", "hoax-evaluate", "views"):  # run-all --from evaluate, less the hoax run
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main([command, "--lake", str(root), *settings])
        assert code == 0, f"{command}: {out.getvalue()[-3000:]}"
    return root


def test_every_notebook_has_sql_cells_and_a_plot():
    assert len(NOTEBOOKS) >= 7
    for path in NOTEBOOKS:
        kinds = [kind for kind, _ in cells(path)]
        assert kinds[0] == "md" and ("sql" in kinds or path.name == "00_setup.py"), path.name
    for path in NOTEBOOKS:
        if path.name != "00_setup.py":
            assert "run ./00_setup" in [kind for kind, _ in cells(path)], path.name
    for number in range(1, 6):
        (path,) = [p for p in NOTEBOOKS if p.name.startswith(f"0{number}_")]
        assert any("plt." in source for kind, source in cells(path) if kind == "python"), path.name


@pytest.mark.parametrize("path", [pytest.param(p, marks=ON_THE_RUN_ALL_LAKE) for p in NOTEBOOKS], ids=lambda p: p.name)
def test_every_sql_cell_runs_through_misbench_sql(evaluated_lake, path, capsys):
    queries = [source for kind, source in cells(path) if kind == "sql"]
    assert queries or path.name == "00_setup.py"
    answered = 0
    for query in queries:
        code = main(["sql", "--lake", str(evaluated_lake), "--format", "json", query])
        captured = capsys.readouterr()
        assert code == 0, f"{path.name}: {query[:200]}\n{captured.err[-1500:]}"
        answered += bool(json.loads(captured.out))
    # on a lake where every stage ran, most cells show something (a wrong filter shows nothing)
    assert answered >= 0.6 * len(queries), f"{path.name}: only {answered} of {len(queries)} cells return rows"


@pytest.mark.parametrize("path", [pytest.param(p, marks=ON_THE_RUN_ALL_LAKE) for p in NOTEBOOKS], ids=lambda p: p.name)
def test_every_python_cell_runs_and_plots(spark, evaluated_lake, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from misbench.lake import DeltaRsLake

    DeltaRsLake(spark, root=str(evaluated_lake)).register_views()
    namespace = {"spark": spark}

    def run_cells(notebook):
        for kind, source in cells(notebook):
            if kind == "python":
                exec(compile(source, notebook.name, "exec"), namespace)  # noqa: S102 - our own notebook
            elif kind.startswith("run "):  # %run ./other: its cells in the same namespace
                run_cells(notebook.parent / f"{kind.split()[1].removeprefix('./')}.py")

    plt.close("all")
    run_cells(path)
    # a plotting notebook made figures, and each shows something (lines, bars, points, images)
    figures = [plt.figure(number) for number in plt.get_fignums()]
    plots = path.name[:3] in {f"0{n}_" for n in range(1, 6)}  # the notebooks that draw (00_setup only sets up)
    assert bool(figures) == plots, f"{path.name}: {len(figures)} figures"
    for figure in figures:
        drawn = [artist for axes in figure.axes for artist in (*axes.lines, *axes.patches, *axes.collections, *axes.images)]
        assert drawn, f"{path.name}: figure {figure.number} is empty"
    plt.close("all")
