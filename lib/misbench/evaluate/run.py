"""The evaluation run that ``misbench evaluate`` (MisBench) and ``misbench hoax-evaluate``
(MultiHoax) share: items answered chunk by chunk into ``eval_responses``, one MLflow run per
model with a nested run per setting, the ``eval_metrics`` rows that replace the model's earlier
ones, and the headline of each setting, defined once (``conf/views/headline_metrics.sql``) for
the analysts' view, the MLflow summary and the command's report.

What differs between the two commands (which items, which metrics, which figures) stays in
their jobs; this is I/O around them, so it lives beside the job runners, not in a stage.
"""
from __future__ import annotations

import contextlib
import math
import re
import unicodedata
import uuid
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.chunked import pending_rows, recover_chunk, run_chunks, work_table
from misbench.evaluate import metrics as metric_rules
from misbench.evaluate import stage
from misbench.evaluate import tracking
from misbench.ids import stable_id
from misbench.lake import Lake
from misbench.llm import engine_name

@contextlib.contextmanager
def parent_run(command: str, model: str, source: str, params: dict, tags: dict | None = None):
    """The MLflow run of one model's evaluation, its settings' runs nested in it: tagged with a
    new evaluation id (every eval_metrics row of it carries the id) and the question set, its
    parameters logged. Yields (the run, the evaluation id)."""
    import mlflow

    evaluation_id = uuid.uuid4().hex[:12]
    with mlflow.start_run(run_name=f"{command} {model}", tags=tracking.owner_tags()) as run:
        mlflow.set_tags({"misbench.evaluation_id": evaluation_id, "misbench.source": source, **(tags or {})})
        mlflow.log_params(params)
        yield run, evaluation_id


# The columns a metric row is broken down by, MisBench's and MultiHoax's.
BREAKDOWNS = (*metric_rules.DIMENSIONS, *metric_rules.HOAX_DIMENSIONS)


def answer_items(lake: Lake, options: dict, llm: dict, model: str, mode: str, items: DataFrame,
                 produce, command: str = "evaluate", source: str = "") -> tuple[int, DataFrame]:
    """Run ``produce`` (a mapInPandas function: queued items in, eval_responses rows out) over
    the items that have no answer yet for this model and mode, committed chunk by chunk into
    eval_responses; returns (rows answered now, the responses of ``items``). The items, the
    queue and the chunks are tables of this ``command``, model, mode and ``source`` alone
    (``work_table``): evaluate and hoax-evaluate, or two models, may answer on one lake at
    once."""
    scope = f"{command} {model} {mode} {source}".strip()
    items_table, queue_table = work_table("eval_items", scope), work_table("eval_queue", scope)
    keyed = items.withColumn("response_id", stage.response_key(model, mode))
    lake.write(keyed, items_table)
    keyed = lake.read(items_table)
    recover_chunk(lake, "eval_responses", "response_id", scope)
    done = lake.read("eval_responses").select("response_id", "error", "attempts") \
        if lake.exists("eval_responses") else None
    lake.write(pending_rows(keyed, done, "response_id", int(options["max_attempts"])), queue_table)
    queue = lake.read(queue_table)
    total = lake.row_count(queue_table)
    if total:
        for _ in run_chunks(lake, queue, total, produce, stage.RESPONSE_SCHEMA, "eval_responses",
                            "response_id", int(options["commit_rows"]), int(options["tasks"]),
                            float(options["gpus_per_task"] or 0), label=f"{command} {model}",
                            engine=engine_name(llm), unit="answers",
                            progress_every_s=float(options["progress_seconds"]), scope=scope):
            pass  # each chunk is committed inside; finishing the loop means the queue is done
    # the run an answer belongs to lives on its item (eval_responses has no run column)
    runs = ["run"] if "run" in keyed.columns else []
    responses = lake.read("eval_responses").join(keyed.select("response_id", *runs).distinct(), "response_id")
    return total, responses


def metric_id() -> F.Column:
    return stable_id(*[F.coalesce(F.col(c).cast("string"), F.lit("~")) for c in (
        "model", "answer_mode", "source", "setting", "metric", *BREAKDOWNS)])


def metric_key(row: dict) -> str:
    """The MLflow metric name of a metric row: ``success_rate``, or with its breakdown
    ``success_rate/kind_factual/memory_memory``; labels as MLflow takes them ("People's
    Republic of China" has a quote; eval_metrics keeps the label as it is)."""
    def slug(value) -> str:
        plain = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode()
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", plain.replace("&", "and")).strip("_") or "x"

    return "/".join([row["metric"]] + [f"{d}_{slug(row[d])}" for d in BREAKDOWNS if row.get(d) is not None])


def log_setting_runs(computed: DataFrame, settings: list[str]) -> dict[str, str]:
    """One nested MLflow run per setting with its metrics (and their ``n/`` and, over several
    runs, ``spread/``); returns setting -> MLflow run id."""
    import mlflow

    setting_runs = {}
    for setting in settings:
        with mlflow.start_run(run_name=setting, nested=True) as child:
            setting_runs[setting] = child.info.run_id
            rows = [r.asDict() for r in computed.where(F.col("setting") == setting).collect()]
            values = {metric_key(r): r["value"] for r in rows if r["value"] is not None}
            values.update({f"n/{metric_key(r)}": r["n"] for r in rows})
            values.update({f"spread/{metric_key(r)}": r["value_spread"] for r in rows
                           if r.get("value_spread") is not None})
            mlflow.log_metrics(values)
    return setting_runs


def run_id_of_setting(setting_runs: dict[str, str]) -> F.Column:
    """The nested MLflow run of each row's setting."""
    run_ids = F.create_map(*[x for s, run in setting_runs.items() for x in (F.lit(s), F.lit(run))])
    return F.element_at(run_ids, F.col("setting"))


def replace_metrics(lake: Lake, rows: DataFrame, model: str, mode: str | None, source: str,
                    hoax: bool = False, benchmark_version: str | None = None) -> None:
    """This evaluation's rows replace every earlier row of the same model, answer mode (any
    mode when None) and source, MisBench's or MultiHoax's (``hoax_*`` settings) alone: a
    breakdown an earlier run had and this one lacks must not linger; another benchmark version's
    rows of the model stay (each row names its ``benchmark_version``). Earlier evaluations
    stay in MLflow. One commit that replaces these rows alone: another model's evaluation
    finishing at the same time keeps its own."""
    rows = rows.withColumn("benchmark_version", F.lit(benchmark_version).cast("string"))
    if benchmark_version is not None:  # one row per version of the same metric
        rows = rows.withColumn("metric_id", stable_id(F.col("metric_id"), F.lit(benchmark_version)))
    equal = {"model": model, "source": source, **({} if mode is None else {"answer_mode": mode})}
    hoax_setting = "substr(setting, 1, 5) = 'hoax_'"
    condition = hoax_setting if hoax else f"NOT ({hoax_setting})"
    if benchmark_version is not None:
        # this version's rows, and the model's rows of no version (before versions were recorded)
        condition = (f"({condition}) AND (benchmark_version IS NULL OR "
                     f"benchmark_version = {lake._quoted(benchmark_version)})")
    if lake.exists("eval_metrics") and lake.read("eval_metrics").columns != rows.columns:
        # a table of an older misbench (other columns): rewritten whole, in the new columns
        stored = lake.read("eval_metrics")
        same = F.col("setting").startswith("hoax_") == F.lit(hoax)
        for column, value in equal.items():
            same = same & (F.col(column) == value)
        if benchmark_version is not None and "benchmark_version" in stored.columns:
            same = same & (F.col("benchmark_version").isNull() | (F.col("benchmark_version") == benchmark_version))
        earlier = stored.where(~same)
        lake.write(earlier.unionByName(rows, allowMissingColumns=True).select(*rows.columns), "eval_metrics")
        return
    lake.replace_where(rows, "eval_metrics", equal, condition)


def headline_metrics(lake: Lake, evaluation_id: str) -> dict[str, tuple[str, float | None, int]]:
    """setting -> (metric, value, n) of one evaluation: the rows of the ``headline_metrics``
    view (the one definition of a setting's headline)."""
    from misbench.views import view_definitions

    # The view's SQL over this evaluation's rows alone, under a name of its own (the
    # session's other views stay as they are).
    view = f"eval_metrics_{evaluation_id}"
    lake.read("eval_metrics").where(F.col("evaluation_id") == evaluation_id).createOrReplaceTempView(view)
    try:
        rows = lake.spark.sql(re.sub(r"\beval_metrics\b", view, view_definitions()["headline_metrics"])).collect()
    finally:
        lake.spark.catalog.dropTempView(view)
    return {row["setting"]: (row["metric"], row["value"], int(row["n"])) for row in rows}


@dataclass
class Published:
    metrics: pd.DataFrame  # this evaluation's eval_metrics rows
    headline: dict  # setting -> (metric, value, n)
    per_item: pd.DataFrame  # its answers, as logged


def publish(lake: Lake, rows: DataFrame, *, evaluation_id: str, model: str, mode: str | None, source: str,
            hoax: bool, settings: list[str], stats_table: str, per_item: DataFrame,
            per_item_artifact: str, benchmark_version: str | None = None) -> Published:
    """Store an evaluation's metric rows (replacing the model's earlier ones) and log what a
    reader of its MLflow run needs: every metric row, the headline of each setting (as run
    metrics and ``summary.json``, in the order of ``settings``), the benchmark's make-up
    (``stats_table``) and the answers per item."""
    import mlflow

    replace_metrics(lake, rows, model, mode, source, hoax=hoax, benchmark_version=benchmark_version)
    table = lake.read("eval_metrics").where(F.col("evaluation_id") == evaluation_id).toPandas()
    mlflow.log_table(table.drop(columns=["computed_at"]), artifact_file="eval_metrics.json")
    found = headline_metrics(lake, evaluation_id)
    headline = {setting: found[setting] for setting in settings if setting in found}
    for setting, (metric, value, _) in headline.items():
        if value is not None and not math.isnan(value):
            mlflow.log_metric(f"{setting}/{metric}", float(value))
    mlflow.log_table(pd.DataFrame([{"setting": s, "metric": m, "value": v, "n": n}
                                   for s, (m, v, n) in headline.items()]), artifact_file="summary.json")
    if lake.exists(stats_table):
        mlflow.log_table(lake.read(stats_table).where(F.col("source") == source).toPandas(),
                         artifact_file=f"{stats_table}.json")
    answers = per_item.withColumn("role_probabilities", F.to_json("role_probabilities")).toPandas()
    tracking.log_parquet(answers, per_item_artifact)
    return Published(table, headline, answers)
