"""The generation job: claims + conflicts -> semantic_descriptions, evidence, generation_runs.

Resumable and idempotent: requests are keyed by model, rendered prompt and sampling
parameters; each pass generates only rows that are missing, or failed with attempts left, in
chunks of ``generate.commit_rows`` rows, each committed before the next starts. A run killed
at any point loses at most the chunk in flight; finished rows are never generated again.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from misbench.chunked import recover_chunk, run_chunks
from misbench.config import Config
from misbench.generate import stage
from misbench.lake import Lake
from misbench.llm import SamplingParams
from misbench.prompts import load_prompt

log = logging.getLogger(__name__)

RUNS_SCHEMA = (
    "run_id string, pass string, target string, backend string, model string, rows long, "
    "failed long, tokens_in long, tokens_out long, wall_s double, worker_s double, "
    "started_at timestamp"
)


@dataclass(frozen=True)
class GenerateReport:
    claims: int
    generated: int
    failed: int
    evidence_ok: int
    model_loads: int


def model_identity(llm: dict) -> str:
    """The model name a backend will report, known on the driver without loading it."""
    backend = llm["backend"]
    model = str(llm[backend]["model"])
    if backend == "llama_cpp" and model.endswith(".gguf"):
        return model.rsplit("/", 1)[-1][: -len(".gguf")]
    return model


def engine_name(llm: dict) -> str:
    """How errors and progress lines name the engine: backend and model."""
    return f"{llm['backend']} model {model_identity(llm)}"


class Generator:
    """Runs request sets through the configured LLM, chunk by chunk, into lake tables."""

    def __init__(self, spark: SparkSession, lake: Lake, cfg: Config):
        self.spark, self.lake = spark, lake
        self.llm = cfg.get("llm")
        self.settings = cfg.get("generate")
        self.run_id = uuid.uuid4().hex[:12]
        self.generated = 0
        self.failed = 0

    def run(self, name: str, requests: DataFrame, target: str, params: SamplingParams) -> None:
        settings = self.settings
        recover_chunk(self.lake, target, "evidence_id")
        done = self.lake.read(target).select("evidence_id", "error", "attempts") if self.lake.exists(target) else None
        self.lake.write(stage.pending_requests(requests, done, int(settings["max_attempts"])),
                        f"generation_queue_{target}")
        queue = self.lake.read(f"generation_queue_{target}")
        total = queue.count()
        if total == 0:
            log.info("generate %s: nothing to do", name)
            return
        produce = stage.generate_batches(
            self.llm, params.__dict__, settings["refusal_patterns"], int(settings["min_words"])
        )
        started = time.perf_counter()
        totals = {"rows": 0, "failed": 0, "tokens_in": 0, "tokens_out": 0, "worker_s": 0.0}
        for written in run_chunks(self.lake, queue, total, produce, stage.GENERATED_SCHEMA, target,
                                  "evidence_id", int(settings["commit_rows"]), int(settings["tasks"]),
                                  float(settings["gpus_per_task"] or 0), label=f"generate {name}",
                                  engine=engine_name(self.llm), units_column="tokens_out", unit="tokens",
                                  progress_every_s=float(settings["progress_seconds"])):
            summary = written.agg(
                F.count("*").alias("rows"),
                F.sum(F.col("error").isNotNull().cast("long")).alias("failed"),
                F.sum("tokens_in").alias("tokens_in"), F.sum("tokens_out").alias("tokens_out"),
                F.sum("latency_s").alias("worker_s"),
            ).first()
            for key in totals:
                totals[key] += summary[key] or 0
        self.generated += totals["rows"]
        self.failed += totals["failed"]
        record = self.spark.createDataFrame([(
            self.run_id, name, target, self.llm["backend"], model_identity(self.llm),
            int(totals["rows"]), int(totals["failed"]), int(totals["tokens_in"]),
            int(totals["tokens_out"]), time.perf_counter() - started, float(totals["worker_s"]),
            dt.datetime.now(dt.timezone.utc),
        )], RUNS_SCHEMA)
        self.lake.write(record, "generation_runs", mode="append")


def run_generate(spark: SparkSession, lake: Lake, cfg: Config, limit: int | None = None) -> GenerateReport:
    settings = cfg.get("generate")
    model = model_identity(cfg.get("llm"))
    claims = lake.read("claims")
    if limit:
        claims = claims.orderBy("claim_id").limit(int(limit))
    lake.write(claims, "generation_claims")  # a fixed set for the three passes
    claims = lake.read("generation_claims")
    conflicts = lake.read("conflicts").join(claims.select("claim_id"), "claim_id", "left_semi")
    describe = SamplingParams(**settings["description_sampling"])
    write = SamplingParams(**settings["sampling"])
    generator = Generator(spark, lake, cfg)
    prompts = {name: load_prompt(name) for name in stage.PROMPT_NAMES}

    descriptions = stage.description_requests(claims, conflicts, prompts, model, describe.key())
    generator.run("descriptions", descriptions, "semantic_descriptions", describe)
    current_descriptions = lake.read("semantic_descriptions").join(
        descriptions.select("evidence_id"), "evidence_id", "left_semi"
    ).where(F.col("error").isNull())

    entries = stage.entry_requests(claims, conflicts, current_descriptions, prompts,
                                   int(settings["target_words"]), model, write.key())
    generator.run("entries", entries, "evidence", write)
    current_entries = lake.read("evidence").join(entries.select("evidence_id"), "evidence_id", "left_semi")

    styles = stage.style_requests(current_entries, prompts, model, write.key())
    generator.run("styles", styles, "evidence", write)

    current = lake.read("evidence").join(
        entries.select("evidence_id").unionByName(styles.select("evidence_id")), "evidence_id", "left_semi"
    )
    loads = current.select("load_id").distinct().count()
    return GenerateReport(
        claims=claims.count(),
        generated=generator.generated,
        failed=generator.failed,
        evidence_ok=current.where(F.col("error").isNull()).count(),
        model_loads=loads,
    )
