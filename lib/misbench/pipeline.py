"""``misbench run-all``: every stage in order, each skipped when it already finished on the same
inputs, with a record per stage run in ``pipeline_runs``.

A stage is skipped only when its newest run (skips aside) succeeded with the same fingerprint
(the versions of the tables it reads, the settings, config files and prompts it uses, its
arguments: dump files, models, limit), its output tables are still at the versions run-all
last left them at (nothing dropped or rewrote them since, e.g. a standalone ``misbench
claims``), and it left no failed rows that a rerun would retry. Inside a stage, the model passes resume
by key as they always do, so a stage killed half way runs again and only does what is left.

Also here: each stage as a command runs it (``ingest_stage`` ... ``views_stage``: run the job,
return the line it prints), run-all's wiring of them (``stage_runners``, ``stage_arguments``)
and its closing summary (``run_summary``); ``cli`` only parses arguments and prints.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from misbench.config import Config, conf_dir
from misbench.ids import digest, settings_digest
from misbench.lake import Lake
from misbench.logs import duration

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    name: str                      # the CLI command of the stage
    reads: tuple[str, ...]         # tables whose versions decide whether it runs again
    writes: tuple[str, ...]        # its product tables: changed since its run, it runs again
    settings: tuple[str, ...]      # config sections it uses
    files: tuple[str, ...] = ()    # config files (under conf/) it uses
    prompts: bool = False          # it renders prompts (its files in prompts/ are part of its inputs)
    retries: tuple[str, ...] = ()  # output tables whose failed rows a rerun retries
    max_attempts: str = ""         # the setting that bounds those retries
    always: bool = False           # cheap and depends on everything: run every time
    ignores: tuple[str, ...] = ()  # settings inside those sections that belong to another stage
    settings_when: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (flag, sections it adds when on)
    judges_texts: bool = False     # it runs quality's rules: their version is one of its inputs


STAGES = (
    # allow_older_dump only lets a dump in: not an input of what ingest writes
    Stage("ingest", (), ("entities", "triples", "ingest_rejects", "dump_versions"), ("ingest",),
          ignores=("ingest.allow_older_dump",)),
    Stage("claims", ("entities", "triples"), ("claims", "conflicts", "claims_stats", "claims_changes"), ("claims",),
          ("relations.yaml", "multihop.yaml")),
    # generation runs quality control between its passes
    Stage("generate", ("claims", "conflicts", "entities"),
          ("evidence", "semantic_descriptions", "semantic_description_checks", "evidence_slots"),
          ("generate", "llm", "quality"), prompts=True, retries=("evidence", "semantic_descriptions"),
          max_attempts="generate.max_attempts", judges_texts=True),
    Stage("quality", ("claims", "evidence", "semantic_description_checks", "entities"), ("evidence_qc", "quality_stats"),
          ("quality", "llm"), prompts=True, judges_texts=True),
    Stage("bench", ("claims", "conflicts", "evidence", "evidence_qc"), ("questions", "bench_texts", "bench_stats"),
          ("bench",)),
    Stage("evaluate", ("questions", "bench_texts", "entities"), ("eval_responses", "eval_metrics", "rtd_entities"),
          ("evaluate", "llm", "mlflow"), prompts=True, retries=("eval_responses", "rtd_steps"),
          max_attempts="evaluate.max_attempts"),
    # rewording (hoax.reword) goes through the LLM
    Stage("hoax", ("entities", "triples", "claims"), ("hoax_questions", "hoax_stats"), ("hoax",),
          ("hoax.yaml",), prompts=True, ignores=("hoax.evaluate",),
          settings_when=(("hoax.reword.enabled", ("llm", "generate")),)),
    # the justification task measures similarity with quality's embedding model
    Stage("hoax-evaluate", ("hoax_questions",), ("eval_responses", "eval_metrics", "hoax_judgements"),
          ("hoax", "evaluate", "llm", "mlflow", "quality"), ("hoax_answer.schema.json",), prompts=True,
          retries=("eval_responses",), max_attempts="evaluate.max_attempts"),
    Stage("views", (), (), (), always=True),
)
STAGE_NAMES = tuple(stage.name for stage in STAGES)
# Which stage renders which prompt files (by name prefix, the longest match wins): a changed
# evaluation prompt must not rerun generation. Generation also runs quality's judge. A file
# no prefix names (system.txt, a prompt of your own) counts for every stage that renders prompts.
PROMPT_OWNERS = {
    # quality reads the writing prompts too: a kept text may not repeat their wording
    "semantic_description": ("generate",), "evidence_": ("generate", "quality"),
    "misinformation_": ("generate", "quality"), "style_": ("generate", "quality"), "note_": ("generate", "quality"),
    "judge_": ("generate", "quality"),
    "eval_": ("evaluate",), "rtd_": ("evaluate",), "hoax_reword": ("hoax",), "hoax_": ("hoax-evaluate",),
}


def prompt_files_of(stage: str, names: list[str]) -> list[str]:
    """The prompt files (names in prompts/) that are part of ``stage``'s inputs."""
    def owners(name: str) -> tuple[str, ...] | None:
        prefixes = sorted((p for p in PROMPT_OWNERS if name.startswith(p)), key=len, reverse=True)
        return PROMPT_OWNERS[prefixes[0]] if prefixes else None

    return [name for name in names if owners(name) is None or stage in owners(name)]

PIPELINE_RUNS_SCHEMA = T.StructType([
    T.StructField("run_id", T.StringType()),
    T.StructField("stage", T.StringType()),
    T.StructField("position", T.IntegerType()),
    T.StructField("status", T.StringType()),        # succeeded | incomplete | failed | skipped
    T.StructField("fingerprint", T.StringType()),
    T.StructField("inputs", T.StringType()),        # JSON: table versions, settings, arguments
    T.StructField("outputs", T.StringType()),       # JSON: versions of its tables when it ended
    T.StructField("summary", T.StringType()),       # the stage's one-line report, or the error
    T.StructField("started_at", T.TimestampType()),
    T.StructField("seconds", T.DoubleType()),
])


class StageFailed(Exception):
    """A stage ended with a result that must stop the run (its report says why)."""

    def __init__(self, summary: str, exit_code: int):
        super().__init__(summary)
        self.summary, self.exit_code = summary, exit_code


@dataclass
class StageOutcome:
    stage: str
    status: str
    summary: str
    seconds: float


@dataclass
class RunReport:
    run_id: str
    outcomes: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0


def stage_inputs(stage: Stage, lake: Lake, cfg: Config, arguments: dict) -> dict:
    """What a stage's result depends on, as plain JSON-able values."""
    sections = list(stage.settings)
    for flag, extra in stage.settings_when:
        if cfg.get(flag, False):
            sections += extra
    settings = {section: cfg.get(section, None) for section in sections}
    for ignored in stage.ignores:
        section, _, key = ignored.partition(".")
        settings[section] = {k: v for k, v in (settings.get(section) or {}).items() if k != key}
    if stage.judges_texts:  # code, not settings: a changed rule judges every text again
        from misbench.quality.checks import RULES_VERSION

        settings["quality_rules"] = RULES_VERSION
    files = {}
    for name in stage.files:
        path = conf_dir() / name
        files[name] = digest(path.read_bytes(), 16) if path.is_file() else None
    if stage.prompts:
        from misbench.prompts import prompts_dir

        names = sorted(path.name for path in prompts_dir().glob("*.txt"))
        files["prompts/"] = digest(b"".join(name.encode() + b"\0" + (prompts_dir() / name).read_bytes()
                                            for name in prompt_files_of(stage.name, names)), 16)
    return {"tables": {name: lake.version(name) if lake.exists(name) else None for name in stage.reads},
            "settings": settings, "files": files, "arguments": arguments}


def fingerprint(inputs: dict) -> str:
    return settings_digest(inputs, 20)


def dump_identity(paths: list[str]) -> list[dict]:
    """Dump files by path, size and modification time: a new dump makes ingest run again."""
    identity = []
    for path in paths:
        try:
            stat = os.stat(path)
            identity.append({"path": os.path.abspath(path), "bytes": stat.st_size, "mtime": int(stat.st_mtime)})
        except OSError:  # remote storage: the path alone
            identity.append({"path": path})
    return identity


def output_versions(stage: Stage, lake: Lake) -> dict:
    return {name: lake.version(name) if lake.exists(name) else None for name in stage.writes}


def retryable_rows(stage: Stage, lake: Lake, cfg: Config) -> int:
    """Failed rows of its outputs that a rerun of the stage would try again."""
    if not stage.retries:
        return 0
    limit = int(cfg.get(stage.max_attempts))
    return sum(lake.read(name).where(f"error IS NOT NULL AND attempts < {limit}").count()
               for name in stage.retries if lake.exists(name))


def run_history(lake: Lake) -> tuple[dict[str, dict], dict[str, object]]:
    """Per stage its newest record that is not a skip (status, fingerprint); per table the
    version the newest stage run that wrote it left (evaluate and hoax-evaluate share tables)."""
    if not lake.exists("pipeline_runs"):
        return {}, {}
    rows = (lake.read("pipeline_runs").where("status <> 'skipped'")
            .orderBy("started_at").select("stage", "status", "fingerprint", "outputs").collect())
    newest, versions = {}, {}
    for row in rows:
        newest[row["stage"]] = row.asDict()
        versions.update(json.loads(row["outputs"] or "{}"))
    return newest, versions


def is_finished(stage: Stage, newest: dict | None, key: str, known_versions: dict, lake: Lake) -> bool:
    """Its newest run succeeded on the same inputs, and nothing outside run-all changed its
    output tables since run-all last wrote them."""
    return (not stage.always and newest is not None and newest["status"] == "succeeded"
            and newest["fingerprint"] == key
            and all(known_versions.get(name) == version
                    for name, version in _plain(output_versions(stage, lake)).items()))


def _plain(value):
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def run_all(
    spark: SparkSession,
    lake: Lake,
    cfg: Config,
    stage_runners: dict[str, Callable[[], str]],
    stage_arguments: dict[str, dict],
    start: str | None = None,
    force: bool = False,
    progress: Callable[[str], None] = print,
) -> RunReport:
    """Run the stages in order from ``start``; ``stage_runners`` holds, per stage, a function
    that runs it and returns its one-line report (it raises StageFailed to stop the run)."""
    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    report = RunReport(run_id)
    began = time.perf_counter()
    first = STAGE_NAMES.index(start) if start else 0
    newest, known_versions = ({}, {}) if force else run_history(lake)
    total = len(STAGES)
    for position, stage in enumerate(STAGES[first:], start=first + 1):
        inputs = stage_inputs(stage, lake, cfg, stage_arguments.get(stage.name, {}))
        key = fingerprint(inputs)
        started_at = dt.datetime.now(dt.timezone.utc)
        prefix = f"[{position}/{total}] {stage.name}"
        if is_finished(stage, newest.get(stage.name), key, known_versions, lake):
            progress(f"{prefix}: skipped, finished before on the same inputs")
            report.outcomes.append(StageOutcome(stage.name, "skipped", "", 0.0))
            _record(spark, lake, run_id, stage, position, "skipped", key, inputs, {}, "", started_at, 0.0)
            continue
        progress(f"{prefix}: running")
        stage_began = time.perf_counter()
        try:
            summary = stage_runners[stage.name]()
        except Exception as exc:
            seconds = time.perf_counter() - stage_began
            message = exc.summary if isinstance(exc, StageFailed) else \
                f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:500]}"
            try:
                _record(spark, lake, run_id, stage, position, "failed", key, inputs, {}, message, started_at, seconds)
            except Exception:  # noqa: BLE001 - Spark itself may be gone: keep the stage's own error
                log.exception("run-all: could not record the failure of %s", stage.name)
            raise
        seconds = time.perf_counter() - stage_began
        # Failed rows with attempts left: done for now, but the next run-all runs it again.
        retry = retryable_rows(stage, lake, cfg)
        status = "incomplete" if retry else "succeeded"
        if retry:
            summary += f" ({retry} failed row(s) will be retried by the next run)"
        _record(spark, lake, run_id, stage, position, status, key, inputs, output_versions(stage, lake), summary,
                started_at, seconds)
        report.outcomes.append(StageOutcome(stage.name, status, summary, seconds))
        progress(f"{prefix}: done in {duration(seconds)}")
        progress(f"    {summary}")
    report.seconds = time.perf_counter() - began
    return report


def _record(spark, lake, run_id, stage, position, status, key, inputs, outputs, summary, started_at,
            seconds) -> None:
    row = (run_id, stage.name, position, status, key, json.dumps(inputs, sort_keys=True, default=str),
           json.dumps(outputs, sort_keys=True, default=str), summary, started_at, float(seconds))
    lake.write(spark.createDataFrame([row], PIPELINE_RUNS_SCHEMA), "pipeline_runs", mode="append")



# --- The stages as run-all and the commands run them: each runs its job and returns the line
# it prints (and run-all records in pipeline_runs).

EXIT_TOO_MANY_REJECTS = 3  # the command's exit status when ingest rejects too much


def stage_runners(spark: SparkSession, lake: Lake, cfg: Config, dumps: list[str], limit: int | None,
                  models: list[str] | None) -> dict[str, Callable[[], str]]:
    """run-all's stage functions, with the command's dumps, limit and models. The styles are
    checked here, before the first stage: a misnamed one would otherwise stop the run after
    ingest and claims."""
    from misbench.generate.job import generation_prompts

    generation_prompts(cfg)
    def unless_empty(command, table, stats, evaluate):
        # A graph too small for questions is an outcome (the stats table says why), not a failure.
        if not lake.exists(table):
            return evaluate()
        rows = lake.read(table).where("source = 'wikidata'")
        if "version_left" in rows.columns:  # retired questions are not asked
            rows = rows.where("version_left IS NULL")
        if rows.isEmpty():
            return f"{command}: no questions in {table} (see {stats}): nothing to evaluate"
        return evaluate()

    return {
        "ingest": lambda: ingest_stage(spark, lake, cfg, dumps),
        "claims": lambda: claims_stage(spark, lake, cfg),
        "generate": lambda: generate_stage(spark, lake, cfg, limit),
        "quality": lambda: quality_stage(spark, lake, cfg),
        "bench": lambda: bench_stage(spark, lake, cfg),
        "evaluate": lambda: unless_empty("evaluate", "questions", "bench_stats",
                                         lambda: evaluate_stage(spark, lake, cfg, models)),
        "hoax": lambda: hoax_stage(spark, lake, cfg),
        "hoax-evaluate": lambda: unless_empty("hoax-evaluate", "hoax_questions", "hoax_stats",
                                              lambda: hoax_evaluate_stage(spark, lake, cfg, models)),
        "views": lambda: views_stage(spark, lake, cfg),
    }


def stage_arguments(dumps: list[str], start: str | None, limit: int | None, models: list[str] | None) -> dict:
    """The command's arguments that are inputs of a stage (a changed one runs it again)."""
    from misbench.ingest.job import resolve_dump_paths

    return {
        "ingest": {"dumps": dump_identity(resolve_dump_paths(dumps)) if start in (None, "ingest") else []},
        "generate": {"limit": limit},
        "evaluate": {"models": models},
        "hoax-evaluate": {"models": models},
    }


def ingest_stage(spark, lake, cfg, dumps) -> str:
    from misbench.ingest.job import run_ingest

    report = run_ingest(spark, lake, cfg, dumps)
    if report.too_many_rejects:
        raise StageFailed(
            f"ingest: FAILED: {report.rejects} of {report.entities + report.rejects} entity lines "
            f"rejected ({report.reject_rate:.4%}), above the allowed {report.max_reject_rate:.4%}. "
            "Everything parsed and every reject were written; see table ingest_rejects "
            "(misbench sql \"SELECT * FROM ingest_rejects\").", EXIT_TOO_MANY_REJECTS)
    return (f"ingest: {report.files} file(s) of dump {report.dump_version} -> entities {report.entities}, "
            f"triples {report.triples}, ingest_rejects {report.rejects} "
            f"(lake: {lake.location('entities').rsplit('/', 1)[0]})")


def claims_stage(spark, lake, cfg, two_wiki=()) -> str:
    from misbench.claims.job import run_claims

    report = run_claims(spark, lake, cfg, two_wiki=list(two_wiki))
    return (f"claims: {report.claims} claims ({report.one_hop} one-hop, {report.two_hop} two-hop), "
            f"{report.conflicts} conflicts ({report.without_temporal} claims have no temporal conflict: "
            f"their relation does not change over time), {report.enriched} entities enriched; "
            + (f"{report.retired_slots} evidence slots of changed conflicts removed (generate writes them again); "
               if report.retired_slots else "")
            + _changes_line(report)
            + "see claims_stats for every fact not kept")


def _changes_line(report) -> str:
    changes = report.changes or {}
    if not changes.get("unchanged") and not changes.get("changed") and not changes.get("removed"):
        return ""  # the first build: every claim is new
    return (f"against the claims before (dump {report.dump_version or 'not recorded'}): "
            + ", ".join(f"{changes[c]} {c}" for c in ("added", "changed", "removed", "unchanged"))
            + " (claims_changes); ")


def generate_stage(spark, lake, cfg, limit=None) -> str:
    from misbench.generate.job import run_generate

    report = run_generate(spark, lake, cfg, limit=limit)
    return (f"generate: {report.claims} claims, {report.generated} texts generated this run "
            f"({report.failed} failed); {report.slots_passed} of {report.slots} slots (claim, kind, style) "
            f"hold a text that passed quality control ({report.slots_passed_first_attempt} at the first "
            f"attempt); model loaded {report.model_loads} time(s). See evidence_slots and evidence_qc.")


def quality_stage(spark, lake, cfg) -> str:
    from misbench.quality.job import run_quality

    report = run_quality(spark, lake, cfg)
    dropped = ", ".join(f"{name} {count}" for name, count in report.dropped_by_filter.items())
    return (f"quality: {report.evidence} evidence texts, {report.checked} checked this run, "
            f"{report.passed} passed; dropped by {dropped or 'no filter'}; "
            f"models loaded {report.model_loads} time(s). See evidence_qc (reasons) and quality_stats.")


def bench_stage(spark, lake, cfg) -> str:
    from misbench.bench.job import run_bench

    report = run_bench(spark, lake, cfg)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.by_kind.items()))
    settings = ", ".join(f"{k} {v}" for k, v in sorted(report.by_setting.items()))
    left = "; ".join(f"{s}{'' if k is None else ' ' + k}: {r} ({n})"
                     for (s, k, r), n in sorted(report.left_out.items(), key=lambda kv: str(kv[0]))) or "none"
    spread = ", ".join(f"{k} {v}" for k, v in report.memory_positions.items())
    return (f"bench: {report.questions} questions, one per claim (with misinformation texts of kind: {kinds}); per setting: {settings}; left out: {left}; "
            f"true answer at letter: {spread}. See questions and bench_stats.")


def _model_line(command: str, report, answers: int) -> str:
    """One evaluated model's summary: answers, the headline metric per setting with its n."""
    parts = []
    for setting, (metric, value, n) in report.headline.items():
        shown = "null" if value is None or value != value else f"{value:.3f}"
        parts.append(f"{setting} {metric} {shown} (n={n})")
    return (f"{command} {report.model} ({report.backend}, {report.answer_mode}): {answers} answers "
            f"({report.answered_now} new, {report.unparsed} unparsed); " + "; ".join(parts)
            + f"; MLflow run {report.mlflow_run_id}")


def _evaluation_lines(command: str, cfg, reports, answers: str, tables: str) -> str:
    from misbench.evaluate.tracking import store_location

    lines = [_model_line(command, report, getattr(report, answers)) for report in reports]
    lines.append(f"{command}: see {tables}; MLflow UI: mlflow ui --backend-store-uri {store_location(cfg)[0]}")
    return "\n".join(lines)


def evaluate_stage(spark, lake, cfg, models=None, settings=None, source="wikidata", version=None) -> str:
    from misbench.evaluate.job import run_evaluate

    reports = run_evaluate(spark, lake, cfg, models=models, settings=settings, source=source, version=version)
    return _evaluation_lines("evaluate", cfg, reports, "items", "eval_metrics and eval_responses")


def hoax_stage(spark, lake, cfg) -> str:
    from misbench.hoax.job import run_hoax

    report = run_hoax(spark, lake, cfg)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.by_reasoning.items())) or "none"
    rejected = "; ".join(f"{r} ({n})" for r, n in sorted(report.rejected.items(), key=lambda x: -x[1])) or "none"
    spread = ", ".join(f"{k} {v}" for k, v in report.idk_positions.items())
    reworded = "" if report.reworded is None else f"; reworded {report.reworded}"
    return (f"hoax: {report.questions} questions ({kinds}); candidates rejected: {rejected}; "
            f"'I do not know' at letter: {spread}{reworded}. See hoax_questions and hoax_stats.")


def hoax_evaluate_stage(spark, lake, cfg, models=None, tasks=None, source="wikidata") -> str:
    from misbench.hoax.evaluate_job import run_hoax_evaluate

    reports = run_hoax_evaluate(spark, lake, cfg, models=models, tasks=tasks, source=source)
    return _evaluation_lines("hoax-evaluate", cfg, reports, "answers",
                             "eval_metrics (setting hoax_*), eval_responses and hoax_judgements")


def views_stage(spark, lake, cfg) -> str:
    from misbench.views import run_views

    report = run_views(spark, lake, cfg)
    waiting = "; ".join(f"{name} ({why})" for name, why in report.waiting.items())
    return (f"views: stored {', '.join(report.stored) or 'none'}"
            + (f"; not yet (their tables are missing): {waiting}" if waiting else "")
            + "; query them like tables with misbench sql")


def run_summary(spark, lake, cfg, report) -> str:
    """Where everything is: the product tables with their rows, the headline metrics per model
    with their n and MLflow runs, and how to open the MLflow UI."""
    from misbench.evaluate.tracking import store_location
    from misbench.views import view_definitions

    ran = sum(o.status != "skipped" for o in report.outcomes)
    skipped = sum(o.status == "skipped" for o in report.outcomes)
    lines = [f"run-all: finished in {duration(report.seconds)}: {ran} stage(s) ran, {skipped} skipped "
             f"(run {report.run_id}; see pipeline_runs)", "", "Tables (product tables; misbench tables --all adds "
             "the internal ones):"]
    tables = lake.tables()
    width = max([len(t.name) for t in tables] + [5])
    lines += [f"  {t.name.ljust(width)}  {t.rows if t.rows is not None else '?':>9} rows" for t in tables]
    where = tables[0].location.rsplit(".", 1)[0] if tables and getattr(lake, "by_name", False) \
        else getattr(lake, "root", "")
    lines += ["", f"Lake: {where}"]
    if lake.exists("eval_metrics"):
        lake.register_views_of_tables()
        rows = spark.sql(view_definitions()["headline_metrics"] + " ORDER BY model, source, setting").collect()
        lines += ["", "Headline metrics (overall, with n; per kind, style, topic and label in eval_metrics):"]
        runs = {}
        for row in rows:
            value = "null" if row["value"] is None or row["value"] != row["value"] else f"{row['value']:.3f}"
            over = f"  (mean of {row['runs']} runs, spread {row['value_spread']:.3f})" \
                if row["runs"] and row["runs"] > 1 and row["value_spread"] is not None else ""
            lines.append(f"  {row['model']:<36} {row['source']:<12} {row['setting']:<20} "
                         f"{row['metric']:<20} {value:>6}  n={row['n']}{over}")
            runs.setdefault(row["model"], set()).add(row["mlflow_run_id"])
        lines += ["", "MLflow runs:"] + [f"  {model}: {', '.join(sorted(r for r in ids if r))}"
                                        for model, ids in sorted(runs.items())]
        lines.append(f"  open the UI: mlflow ui --backend-store-uri {store_location(cfg)[0]}")
    lines += ["", "Analyst views: answers_flat, hoax_answers_flat, headline_metrics, style_results "
              "(misbench sql \"SELECT * FROM headline_metrics\"); notebooks in notebooks/."]
    return "\n".join(lines)
