"""The quality job: evidence -> evidence_qc, quality_stats.

Resumable and idempotent: each evidence row is keyed by ``qc_key`` (settings + what the checks
read); only rows without a current result are checked, in chunks committed one by one. A rerun
after a kill checks only what is left; a rerun after a change of text or setting re-checks
exactly the rows it affects.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from misbench.chunked import recover_chunk, run_chunks, staged_tables
from misbench.config import Config, pointed_at_endpoint
from misbench.lake import Lake
from misbench.llm import answer_words, engine_name, model_identity
from misbench.prompts import load_prompt, prompt_wording, prompts_dir
from misbench.quality import checks, stage
from misbench.styles import prompt_names
from misbench.workers import settings_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QualityReport:
    evidence: int
    checked: int
    passed: int
    dropped_by_filter: dict
    model_loads: int


def resolved_settings(cfg: Config) -> dict:
    """The quality section with what the workers need from elsewhere: the target length, and
    for the LLM judge its LLM settings (llm, overridden by the judge's own) and its prompt."""
    settings = dict(cfg.get("quality"))
    settings["target_words"] = int(cfg.get("generate.target_words"))
    judge = settings["entailment"]["llm_judge"]
    llm = pointed_at_endpoint(cfg.get("llm"), judge.get("llm"))
    settings["judge_llm"] = llm
    settings["judge_prompt"] = load_prompt(judge["prompt"])
    # The generation prompts' own wording, which a kept text must not repeat: every style
    # prompt there is, not only generate.styles' (texts of other styles stay in the lake, and a
    # changed list of styles does not judge every text again).
    shipped = sorted(path.name[len("style_"):-len(".txt")] for path in prompts_dir().glob("style_*.txt")
                     if path.name.count(".") == 1)
    writing = [load_prompt(name) for name in prompt_names(shipped) if name != "semantic_description"]
    settings["echo_prompts"] = sorted(prompt.sha for prompt in writing)
    settings["echo_grams"] = sorted(checks.prompt_ngrams(prompt_wording(writing),
                                                         int(settings["content"]["echo_ngram_words"])))
    return settings


def results_key(settings: dict) -> str:
    """What the results depend on (not tasks, threads, batch sizes or devices)."""
    entailment = settings["entailment"]
    backend = entailment["backend"]
    key = {
        "rules": checks.RULES_VERSION,
        "completeness": settings["completeness"], "target_words": settings["target_words"],
        "content": settings["content"], "echo_prompts": settings["echo_prompts"],
        "threshold": entailment["threshold"], "overlap": entailment["overlap_sentences"], "backend": backend,
        "similarity": {k: settings["similarity"][k] for k in ("model", "model_package", "alpha")},
    }
    if backend == "nli":
        key["nli"] = {k: entailment["nli"][k] for k in ("model", "max_length")}
    else:
        llm = settings["judge_llm"]
        key["judge"] = {"backend": llm["backend"], "model": model_identity(llm),
                        "window_words": entailment["llm_judge"]["window_words"],
                        "prompt": settings["judge_prompt"].sha}
        if answer_words(llm) != ("Yes", "No"):
            # only other words enter the key: verdicts judged before the setting existed stay
            key["judge"]["answer_words"] = list(answer_words(llm))
    return settings_key(key)[:16]


def semantic_descriptions(lake: Lake):
    """The checked descriptions of other entities, which semantic texts were written from."""
    if not lake.exists("semantic_description_checks"):
        return None
    checked = lake.read("semantic_description_checks")
    if "description" not in checked.columns:  # checks of an older version: the next generate redoes them
        return None
    return checked.select("evidence_id", "description")


def judge_engine_name(settings: dict) -> str:
    """The models a quality worker runs, as errors and progress lines name them."""
    entailment = settings["entailment"]
    if entailment["backend"] == "nli":
        judge = f"NLI model {entailment['nli']['model']}"
    else:
        judge = f"LLM judge {engine_name(settings['judge_llm'])}"
    return f"{judge} and embedding model {settings['similarity']['model']}"


def run_quality(spark: SparkSession, lake: Lake, cfg: Config, report: bool = True) -> QualityReport | None:
    """Check what has no current verdict; ``report=False`` (generation's checks between its
    passes) skips the counting of the report, three Spark jobs nobody reads there."""
    settings = resolved_settings(cfg)
    inputs = stage.qc_inputs(lake.read("evidence"), lake.read("claims"), lake.read("conflicts"),
                             results_key(settings), semantic_descriptions(lake),
                             lake.read("entities").select("id", "aliases"))
    if lake.exists("evidence_qc") and lake.read("evidence_qc").columns != stage.QC_COLUMNS:
        # Verdicts of an older misbench (other columns, other rules): a derived table, redone.
        log.info("quality: evidence_qc has the columns of an older version; checking every text again")
        # with what a killed run of it left: recover_chunk must not merge old columns back
        for table in ("evidence_qc", *staged_tables("evidence_qc")):
            lake.drop(table)
    recover_chunk(lake, "evidence_qc", "evidence_id")
    queue = inputs
    if lake.exists("evidence_qc"):
        queue = inputs.join(lake.read("evidence_qc").select("evidence_id", "qc_key"),
                            ["evidence_id", "qc_key"], "left_anti")
    lake.write(queue, "quality_queue")
    queue = lake.read("quality_queue")
    total = lake.row_count("quality_queue")
    checked = 0
    run_started = dt.datetime.now(dt.timezone.utc)
    for chunk in run_chunks(lake, queue, total, stage.check_batches(settings), stage.QC_SCHEMA,
                            "evidence_qc", "evidence_id", int(settings["commit_rows"]),
                            int(settings["tasks"]), float(settings["gpus_per_task"] or 0),
                            label="quality", engine=judge_engine_name(settings),
                            progress_every_s=float(settings["progress_seconds"])):
        checked += chunk["rows"]
    current = lake.read("evidence_qc").join(inputs.select("evidence_id", "qc_key"),
                                            ["evidence_id", "qc_key"], "left_semi")
    lake.write(stage.quality_stats(current), "quality_stats")
    if not report:
        return None
    stats = lake.read("quality_stats").groupBy("step", "filter").agg(
        F.sum("rows_in").alias("rows_in"), F.sum("rows_dropped").alias("dropped")).orderBy("step").collect()
    verdicts = current.agg(
        F.sum(F.col("passed").cast("long")).alias("passed"),
        # Distinct engine loads among the rows this run checked.
        F.countDistinct(F.when(F.col("checked_at") >= F.lit(run_started), F.col("load_id"))).alias("loads"),
    ).first()
    return QualityReport(
        evidence=inputs.count(),
        checked=checked,
        passed=int(verdicts["passed"] or 0),
        dropped_by_filter={row["filter"]: int(row["dropped"]) for row in stats},
        model_loads=int(verdicts["loads"]),
    )
