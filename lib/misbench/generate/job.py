"""The generation job: claims + conflicts -> semantic_descriptions, evidence, generation_runs.

Resumable and idempotent: requests are keyed by model, rendered prompt and sampling
parameters; each pass generates only rows that are missing, or failed with attempts left, in
chunks of ``generate.commit_rows`` rows, each committed before the next starts. A run killed
at any point loses at most the chunk in flight; finished rows are never generated again.
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from misbench.chunked import recover_chunk, run_chunks, work_table
from misbench.config import Config, ConfigError
from misbench.generate import stage
from misbench.lake import Lake
from misbench.llm import SamplingParams, engine_name, model_identity
from misbench.prompts import load_prompt, prompt_wording, prompts_dir
from misbench.quality import checks
from misbench.quality.job import run_quality
from misbench.styles import ENTRY_PROMPTS, prompt_names, rewrite_styles, style_prompt

log = logging.getLogger(__name__)

GENERATION_RUNS_SCHEMA = (
    "run_id string, pass string, target string, backend string, model string, rows long, "
    "failed long, tokens_in long, tokens_out long, wall_s double, worker_s double, "
    "started_at timestamp"
)


@dataclass(frozen=True)
class GenerateReport:
    claims: int
    generated: int
    failed: int
    slots: int  # (claim, kind, style) slots of the claims
    slots_passed: int  # holding a text that passed quality control
    slots_passed_first_attempt: int  # ... at the first attempt (before regeneration)
    model_loads: int


class Generator:
    """Runs request sets through the configured LLM, chunk by chunk, into lake tables."""

    def __init__(self, spark: SparkSession, lake: Lake, cfg: Config, scope: str = "", command: str = "generate"):
        """``scope``: what names this generator's work tables apart from those of other
        commands running at once (evaluate's: its model, answer mode and source);
        ``command``: the one it runs for, named with the pass in a model's errors."""
        self.spark, self.lake = spark, lake
        self.scope, self.command = scope, command
        self.llm = cfg.get("llm")
        self.settings = cfg.get("generate")
        self.run_id = uuid.uuid4().hex[:12]
        self.generated = 0
        self.failed = 0

    def run(self, name: str, requests: DataFrame, target: str, params: SamplingParams,
            min_words: int | None = None) -> int:
        """Generate what ``requests`` still lacks into ``target``; returns the rows to do.
        ``min_words``: a shorter reply is a failure (default generate.min_words)."""
        settings = self.settings
        # this pass's own work tables: evaluate's RtD steps for two models may run at once
        scope = f"{self.scope} {name} {model_identity(self.llm)}".strip()
        queue_table = work_table(f"generation_queue_{target}", scope)
        recover_chunk(self.lake, target, "evidence_id", scope)
        done = self.lake.read(target).select("evidence_id", "error", "attempts") if self.lake.exists(target) else None
        self.lake.write(stage.pending_requests(requests, done, int(settings["max_attempts"])), queue_table)
        queue = self.lake.read(queue_table)
        total = self.lake.row_count(queue_table)
        if total == 0:
            log.info("generate %s: nothing to do", name)
            return 0
        produce = stage.generate_batches(
            self.llm, params.__dict__, settings["refusal_patterns"], int(min_words or settings["min_words"]),
            settings.get("preamble_pattern"), f"{self.command} {name}",
        )
        started = time.perf_counter()
        totals = {"rows": 0, "failed": 0, "tokens_in": 0, "tokens_out": 0, "worker_s": 0.0}
        sums = {"failed": F.sum(F.col("error").isNotNull().cast("long")), "tokens_in": F.sum("tokens_in"),
                "tokens_out": F.sum("tokens_out"), "worker_s": F.sum("latency_s")}
        for summary in run_chunks(self.lake, queue, total, produce, stage.GENERATED_SCHEMA, target,
                                  "evidence_id", int(settings["commit_rows"]), int(settings["tasks"]),
                                  float(settings["gpus_per_task"] or 0), label=f"generate {name}",
                                  engine=engine_name(self.llm), units_column="tokens_out", unit="tokens",
                                  progress_every_s=float(settings["progress_seconds"]), totals=sums,
                                  scope=scope):
            for key in totals:
                totals[key] += summary[key] or 0
        self.generated += totals["rows"]
        self.failed += totals["failed"]
        record = self.spark.createDataFrame([(
            self.run_id, name, target, self.llm["backend"], model_identity(self.llm),
            int(totals["rows"]), int(totals["failed"]), int(totals["tokens_in"]),
            int(totals["tokens_out"]), time.perf_counter() - started, float(totals["worker_s"]),
            dt.datetime.now(dt.timezone.utc),
        )], GENERATION_RUNS_SCHEMA)
        self.lake.write(record, "generation_runs", mode="append")
        return total


def write_params(cfg: Config) -> SamplingParams:
    """Sampling of the entries and rewrites. ``max_tokens: null`` follows the target length:
    room for the longest text quality control accepts (``target_words`` x
    ``quality.completeness.max_words_ratio`` words at ``generate.tokens_per_word``), so a text
    of an accepted length is never cut off."""
    settings = cfg.get("generate")
    sampling = dict(settings["sampling"])
    if not sampling.get("max_tokens"):
        words = int(settings["target_words"]) * float(cfg.get("quality.completeness.max_words_ratio"))
        sampling["max_tokens"] = math.ceil(words * float(settings["tokens_per_word"]))
    return SamplingParams(**sampling)


def description_check_settings(cfg: Config) -> dict:
    """generate.description_check with the talk-about-the-task patterns of quality.content."""
    return {**cfg.get("generate.description_check"), "meta_patterns": cfg.get("quality.content.meta_patterns")}


def _all_rounds(build: Callable[[SamplingParams], DataFrame], params: SamplingParams, rounds: int) -> DataFrame:
    """The requests of every round (round r: seed + r), each with its ``round``."""
    frames = [build(replace(params, seed=params.seed + r)).withColumn("round", F.lit(r)) for r in range(rounds)]
    return functools.reduce(DataFrame.unionByName, frames)


def _verdicts(lake: Lake) -> DataFrame | None:
    return lake.read("evidence_qc").select("evidence_id", "passed") if lake.exists("evidence_qc") else None


def generation_prompts(cfg: Config) -> tuple[tuple[str, ...], dict]:
    """(``generate.styles`` checked, every prompt generation renders by name, the rewrite
    prompts included); a ConfigError naming the setting where a style is misnamed or has no
    prompt file."""
    rewrites = rewrite_styles(cfg.get("generate.styles"))
    missing = [style for style in rewrites if not (prompts_dir() / f"{style_prompt(style)}.txt").is_file()]
    if missing:
        raise ConfigError(f"generate.styles names {missing[0]!r}, which has no prompt file "
                          f"prompts/{style_prompt(missing[0])}.txt")
    return rewrites, {name: load_prompt(name) for name in prompt_names(rewrites)}


def run_generate(spark: SparkSession, lake: Lake, cfg: Config, limit: int | None = None) -> GenerateReport:
    """Descriptions, then entries, then style rewrites of the entries that passed quality
    control; every text is checked (``misbench quality``) right after its pass, and a slot
    whose text failed is requested again with the next seed, up to ``generate.rounds``.

    Each pass's requests of all rounds are stored first (``generation_requests_<pass>``):
    only rows among them count as this run's texts, so texts of another model, prompt or
    an older conflict never fill a slot."""
    from misbench.claims.job import require_one_false_object

    rewrites, prompts = generation_prompts(cfg)  # a misnamed style stops the command before any work
    require_one_false_object(lake, "generate")
    settings = cfg.get("generate")
    model = model_identity(cfg.get("llm"))
    rounds = max(1, int(settings["rounds"]))
    claims = lake.read("claims")
    if limit:
        claims = claims.orderBy("claim_id").limit(int(limit))
    lake.write(claims, "generation_claims")  # a fixed set for the three passes
    claims = lake.read("generation_claims")
    conflicts = lake.read("conflicts").join(claims.select("claim_id"), "claim_id", "left_semi")
    describe = SamplingParams(**settings["description_sampling"])
    write = write_params(cfg)
    generator = Generator(spark, lake, cfg)
    run_started = dt.datetime.now(dt.timezone.utc)

    def stored(name: str, requests: DataFrame) -> DataFrame:
        lake.write(requests, f"generation_requests_{name}")
        return lake.read(f"generation_requests_{name}")

    def round_requests(requests: DataFrame, round_index: int) -> DataFrame:
        return requests.where(F.col("round") == round_index).drop("round")

    def among(table: str, requests: DataFrame) -> DataFrame:
        return lake.read(table).join(requests.select("evidence_id"), "evidence_id", "left_semi")

    # 1. Descriptions of the other entity, until each claim has one that passes its check.
    description_settings = description_check_settings(cfg)
    description_grams = checks.prompt_ngrams(prompt_wording([prompts["semantic_description"]]),
                                             int(description_settings["echo_ngram_words"]))
    semantic_claims = claims.join(conflicts.where(F.col("kind") == "semantic").select("claim_id"), "claim_id", "left_semi")
    described = stored("descriptions", _all_rounds(
        lambda params: stage.description_requests(semantic_claims, conflicts, prompts, model, params.key()),
        describe, rounds))

    def description_checks(current_only: bool = True) -> DataFrame | None:
        """The checks of this run's descriptions, or of every description of these claims
        (older prompts' too, so the table shows the verdict of the rules in force)."""
        if not lake.exists("semantic_descriptions"):
            return None
        rows = among("semantic_descriptions", described) if current_only else \
            lake.read("semantic_descriptions").join(claims.select("claim_id"), "claim_id", "left_semi")
        return stage.description_checks(rows, claims, conflicts, description_settings, description_grams,
                                        lake.read("entities").select("id", "aliases"))

    for round_index in range(rounds):
        checked = description_checks()
        requests = round_requests(described, round_index)
        if checked is not None:
            requests = requests.join(checked.where("passed").select("claim_id"), "claim_id", "left_anti")
        # No early stop: a rerun after a kill in round 2 finds round 1 done and goes on.
        generator.run(f"descriptions round {round_index + 1}", requests, "semantic_descriptions",
                      replace(describe, seed=describe.seed + round_index), int(description_settings["min_words"]))
    checked = description_checks(current_only=False)
    if checked is not None:
        if lake.exists("semantic_description_checks") and \
                lake.read("semantic_description_checks").columns != stage.DESCRIPTION_CHECK_COLUMNS:
            log.info("generate: semantic_description_checks has the columns of an older version; checked again")
            lake.drop("semantic_description_checks")
        lake.upsert(checked, "semantic_description_checks", ["evidence_id"])
    good_descriptions = spark.createDataFrame(
        [], "claim_id string, evidence_id string, description string, description_sentence string") \
        if checked is None else \
        stage.chosen_descriptions(among("semantic_description_checks", described))

    entry_hashes = [prompts[name].sha for name in ENTRY_PROMPTS.values()]
    style_hashes = [prompts[style_prompt(style)].sha for style in rewrites]

    def passing(requests: DataFrame, hashes) -> DataFrame | None:
        verdicts = _verdicts(lake)
        if verdicts is None or not lake.exists("evidence"):
            return None
        return stage.passing_texts(among("evidence", requests), verdicts, model, hashes)

    # 2. Encyclopedia entries, checked after each round; failed slots get the next seed.
    entries = stored("entries", _all_rounds(
        lambda params: stage.entry_requests(claims, conflicts, good_descriptions, prompts,
                                            int(settings["target_words"]), model, params.key()),
        write, rounds))
    if lake.exists("evidence"):
        run_quality(spark, lake, cfg, report=False)  # verdicts current for the settings in force
    for round_index in range(rounds):
        requests = round_requests(entries, round_index)
        passed = passing(entries, entry_hashes)
        if passed is not None:
            requests = requests.join(passed.select("claim_id", "kind"), ["claim_id", "kind"], "left_anti")
        if generator.run(f"entries round {round_index + 1}", requests, "evidence",
                         replace(write, seed=write.seed + round_index)):
            run_quality(spark, lake, cfg, report=False)

    # 3. Style rewrites of the entries that passed, checked the same way.
    sources = passing(entries, entry_hashes)
    if sources is None:
        sources = spark.createDataFrame([], "claim_id string, hop int, kind string, evidence_id string, text string")
    styles = stored("styles", _all_rounds(
        lambda params: stage.style_requests(sources, prompts, rewrites, model, params.key()), write, rounds))
    for round_index in range(rounds):
        requests = round_requests(styles, round_index)
        passed = passing(styles, style_hashes)
        if passed is not None:
            requests = requests.join(passed.select("claim_id", "kind", "style"),
                                     ["claim_id", "kind", "style"], "left_anti")
        if generator.run(f"styles round {round_index + 1}", requests, "evidence",
                         replace(write, seed=write.seed + round_index)):
            run_quality(spark, lake, cfg, report=False)

    # 4. Which slots hold a passing text: these claims' rows replaced, others kept.
    verdicts = _verdicts(lake)
    slots = None
    if verdicts is not None:
        mine = among("evidence", entries.select("evidence_id").unionByName(styles.select("evidence_id")))
        slots = stage.evidence_slots(claims, conflicts, mine, verdicts, model, entry_hashes + style_hashes,
                                     rewrites)
        if lake.exists("evidence_slots"):
            others = lake.read("evidence_slots").join(claims.select("claim_id"), "claim_id", "left_anti")
            slots = slots.unionByName(others)
        lake.write(slots, "evidence_slots")
        slots = lake.read("evidence_slots").join(claims.select("claim_id"), "claim_id", "left_semi")
    coverage = slots.agg(
        F.count("*").alias("slots"), F.sum(F.col("passed").cast("long")).alias("passed"),
        F.sum(F.col("first_attempt_passed").cast("long")).alias("first"),
    ).first() if slots is not None else None
    produced = lake.read("evidence").where(F.col("generated_at") >= F.lit(run_started)) \
        if lake.exists("evidence") else None
    return GenerateReport(
        claims=claims.count(),
        generated=generator.generated,
        failed=generator.failed,
        slots=int(coverage["slots"] or 0) if coverage else 0,
        slots_passed=int(coverage["passed"] or 0) if coverage else 0,
        slots_passed_first_attempt=int(coverage["first"] or 0) if coverage else 0,
        model_loads=produced.select("load_id").distinct().count() if produced is not None else 0,
    )
