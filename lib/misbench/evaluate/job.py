"""The evaluation job: questions + bench_texts -> eval_responses, eval_metrics, MLflow runs.

Per model (``--model``, several per call): build the items of the chosen settings, run RtD's
steps where asked (key entity, its description, reconstructed evidence), answer every item
that has no answer yet for that model, answer mode and rendered prompt (committed chunk by
chunk, so a kill loses at most the chunk in flight and a rerun asks only what is missing),
then compute the paper's metrics and record one MLflow run with a nested run per setting.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from misbench.chunked import work_table
from misbench.bench.stage import require_one_question_per_claim
from misbench.claims.job import entity_labels
from misbench.config import Config, ConfigError
from misbench.evaluate import metrics as metric_rules
from misbench.evaluate import run as evaluation_run
from misbench.evaluate import stage
from misbench.generate.job import Generator
from misbench.lake import Lake
from misbench.llm import SamplingParams, answer_words, model_identity
from misbench.prompts import load_prompt
from misbench.ids import seeded_hash, stable_id
from misbench.versions import VERSION_COLUMNS, as_of, resolve_version

log = logging.getLogger(__name__)

BACKENDS = ("llama_cpp", "vllm", "openai", "fake")


@dataclass
class ModelReport:
    model: str
    backend: str
    answer_mode: str
    items: int
    answered_now: int
    unparsed: int
    mlflow_run_id: str
    headline: dict = field(default_factory=dict)  # setting -> (metric, value, n)


def model_config(cfg: Config, spec: str | None) -> Config:
    """The config for one ``--model``: ``backend:model`` or a model of the configured backend."""
    if not spec:
        return cfg
    backend, _, model = spec.partition(":")
    if not model or backend not in BACKENDS:
        backend, model = cfg.get("llm.backend"), spec
    return cfg.with_overrides([f"llm.backend={backend}", f"llm.{backend}.model={model}"])


def answer_mode(cfg: Config) -> tuple[str, bool]:
    """(mode, fallback): ``auto`` is log-probs where the backend gives them, else a generated
    reply read by the strict parse (per item: a server without log-probs, or a reply that
    starts with none of the letters)."""
    mode = str(cfg.get("evaluate.answer_mode"))
    if mode == "auto":
        return "logprobs", True
    if mode not in ("logprobs", "generate"):
        raise ConfigError(f"evaluate.answer_mode '{mode}' is not one of auto, logprobs, generate")
    return mode, False


def stratified_sample(questions: DataFrame, size: int, seed: int) -> DataFrame:
    """About ``size`` questions keeping each relation's share (at least one question per
    relation), picked by a seeded hash: the same sample on every run."""
    total = questions.count()
    if total <= size:
        return questions
    from pyspark.sql import Window

    stratum = Window.partitionBy("relation")
    ranked = questions.withColumn("_rank", F.row_number().over(stratum.orderBy(seeded_hash(F.col("question_id"), seed)))) \
        .withColumn("_size", F.count("*").over(stratum))
    keep = F.greatest(F.lit(1), F.round(F.col("_size") * F.lit(size / total)))
    return ranked.where(F.col("_rank") <= keep).drop("_rank", "_size")


class Evaluation:
    """One ``misbench evaluate`` call for one model."""

    def __init__(self, spark: SparkSession, lake: Lake, cfg: Config, source: str, settings: list[str],
                 version: str | None = None):
        self.spark, self.lake, self.cfg = spark, lake, cfg
        self.source, self.settings = source, settings
        self.version = version  # the benchmark version (versions.resolve_version)
        self.options = cfg.get("evaluate")
        self.seed = int(self.options["seed"])
        self.llm = cfg.get("llm")
        self.model = model_identity(self.llm)
        self.mode, self.fallback = answer_mode(cfg)
        # names this evaluation's work tables apart from another running at once
        self.work_scope = f"evaluate {self.model} {self.mode} {self.source}"
        # by setting (the prompt each setting renders), and RtD's step prompts by name
        self.rtd_coverage: dict | None = None  # passages, named, described, reconstructed
        runs = self.options.get("runs")
        self.runs = int(1 if runs is None else runs)
        if self.runs < 1:
            raise ConfigError(f"evaluate.runs must be 1 or more, not {self.runs}")
        self.rtd_last_step = str(self.options["rtd"]["last_step"])
        if self.rtd_last_step not in stage.RTD_LAST_STEPS:
            raise ConfigError(f"evaluate.rtd.last_step '{self.rtd_last_step}' is not one of "
                              f"{', '.join(stage.RTD_LAST_STEPS)}")
        # evaluate.prompts: another prompt file per setting (the paper profile's wording)
        chosen = dict(self.options.get("prompts") or {})
        unknown = sorted(set(chosen) - set(stage.CHOICE_SETTINGS) - {"detection", "desc"})
        if unknown:
            raise ConfigError(f"evaluate.prompts: no setting {unknown} takes a prompt of its own "
                              f"(known: {', '.join([*stage.CHOICE_SETTINGS, 'detection', 'desc'])})")
        self.prompts = {**{setting: load_prompt(chosen.get(setting, name)) for setting, name in stage.PROMPTS.items()},
                        "rtd": load_prompt(stage.RTD_LAST_STEPS[self.rtd_last_step]),
                        **{name: load_prompt(name) for name in stage.RTD_PROMPTS}}

    # -- items ---------------------------------------------------------------------------
    def questions(self) -> DataFrame:
        questions = as_of(self.lake, self.lake.read("questions").where(F.col("source") == self.source), self.version)
        require_one_question_per_claim(questions, "evaluate")
        limit = self.options.get("limit")
        if limit:
            questions = questions.orderBy("question_id").limit(int(limit))
        if self.llm["backend"] == "openai" and self.options.get("api_sample"):
            # an endpoint misbench did not start may be a paid API: it answers a sample
            log.info("evaluate: %s answers a sample of at most %s questions stratified by relation "
                     "(evaluate.api_sample; 0: every question)", self.llm["openai"]["base_url"],
                     self.options["api_sample"])
            questions = stratified_sample(questions, int(self.options["api_sample"]), self.seed)
        return questions

    def items(self, questions: DataFrame, texts: DataFrame) -> DataFrame:
        """Every setting's items, once per run (``evaluate.runs``; run 0 shows the stored
        option orders, each later run its own). RtD's steps do not depend on the run: they
        are generated once."""
        yes, no = answer_words(self.llm)
        frames = []
        choice = [s for s in self.settings if s in stage.CHOICE_SETTINGS]
        entities = references = None
        if "desc" in self.settings or "rtd" in self.settings:
            entities, references = self.rtd_steps(
                stage.detection_passages(questions, texts, styles=[stage.ENTRY_STYLE]))
        for run in range(self.runs):
            dealt = stage.dealt_for_run(questions, run, self.seed)
            if choice:
                frames.append(stage.choice_items(dealt, texts, self.prompts).where(F.col("setting").isin(choice)))
            if "detection" in self.settings:
                frames.append(stage.detection_items(stage.detection_passages(dealt, texts),
                                                    self.prompts, self.seed, yes, no))
            if entities is None:
                continue
            entries = stage.detection_passages(dealt, texts, styles=[stage.ENTRY_STYLE])
            if "desc" in self.settings:
                frames.append(stage.desc_items(entries, entities, self.prompts, self.seed, yes, no))
            if "rtd" in self.settings and self.rtd_last_step == "compare":
                frames.append(stage.rtd_compare_items(entries, references, self.prompts, self.seed))
            elif "rtd" in self.settings:
                frames.append(stage.rtd_items(entries, references, self.prompts, self.seed, yes, no))
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    def rtd_steps(self, entries: DataFrame) -> tuple[DataFrame, DataFrame]:
        """RtD's first steps for the encyclopedia entries: the model names the passage's key
        entity; the entity is found in ``entities`` (label or alias) for its description; the
        model writes evidence about it from that description. Outputs in ``rtd_steps``
        (generations) and ``rtd_entities`` (per model and passage: extracted name, entity,
        description, whether it is the claim's subject)."""
        rtd = self.options["rtd"]
        step_cfg = self.cfg.with_overrides(["generate.min_words=1", f"generate.commit_rows={self.options['commit_rows']}"])
        generator = Generator(self.spark, self.lake, step_cfg, scope=self.work_scope, command="evaluate")
        greedy = dict(temperature=0.0, top_p=1.0, seed=self.seed, min_tokens=0)
        naming = SamplingParams(max_tokens=int(rtd["entity_max_tokens"]), **greedy)
        requests = stage.step_requests(entries, self.prompts["rtd_entity"], {"passage": "passage"}, "rtd_entity",
                                       self.model, naming.key())
        entity_table = work_table("rtd_requests_entity", self.work_scope)
        self.lake.write(requests, entity_table)
        requests = self.lake.read(entity_table)
        generator.run("rtd key entity", requests, "rtd_steps", naming)
        named = self.lake.read("rtd_steps").join(requests.select("evidence_id"), "evidence_id", "left_semi") \
            .where(F.col("error").isNull()) \
            .select(F.col("source_evidence_id").alias("passage_id"), "claim_id",
                    stage.entity_name(F.col("text")).alias("extracted"))
        resolved = stage.resolve_entities(named, entity_labels(self.lake), self.lake.read("claims"))
        resolved = self.described_over_sparql(resolved) \
            .withColumn("model", F.lit(self.model)) \
            .withColumn("entity_key", stable_id(F.lit(self.model), F.col("passage_id")))
        self.lake.upsert(resolved, "rtd_entities", ["entity_key"])
        entities = self.lake.read("rtd_entities").where(F.col("model") == self.model) \
            .join(entries.select("passage_id"), "passage_id", "left_semi")
        words = int(rtd["reconstruct_words"])
        writing = SamplingParams(max_tokens=math.ceil(words * float(self.cfg.get("generate.tokens_per_word")) * 1.5),
                                 **greedy)
        sources = entries.select("passage_id", "claim_id", "hop", "kind").join(
            entities.select("passage_id", "entity", F.coalesce("description", F.lit("(no description found)"))
                            .alias("description")), "passage_id").withColumn("words", F.lit(words))
        rebuild = stage.step_requests(sources, self.prompts["rtd_reconstruct"],
                                      {"entity": "entity", "description": "description", "words": "words"},
                                      "rtd_reconstruct", self.model, writing.key())
        rebuild_table = work_table("rtd_requests_reconstruct", self.work_scope)
        self.lake.write(rebuild, rebuild_table)
        rebuild = self.lake.read(rebuild_table)
        generator.run("rtd reconstruction", rebuild, "rtd_steps", writing)
        references = self.lake.read("rtd_steps").join(rebuild.select("evidence_id"), "evidence_id", "left_semi") \
            .where(F.col("error").isNull()) \
            .select(F.col("source_evidence_id").alias("passage_id"), F.col("text").alias("reference")) \
            .join(entities.select("passage_id", "entity"), "passage_id")
        self.rtd_coverage = entries.select(
            F.count("*").alias("passages")).join(entities.agg(
                F.count("*").alias("named"), F.count("description").alias("described")), how="cross") \
            .join(references.agg(F.count("*").alias("reconstructed")), how="cross").first().asDict()
        return entities.select("passage_id", "entity", "description"), references

    def described_over_sparql(self, resolved: DataFrame) -> DataFrame:
        """Where the dump has no description for a resolved entity, the SPARQL endpoint's
        (``claims.enrich``, when enabled; answers cached in ``entity_enrichment``)."""
        settings = self.cfg.get("claims.enrich")
        if not settings.get("enabled"):
            return resolved
        from misbench.claims.enrich import ENRICHMENT_SCHEMA, enrich_batches

        wanted = resolved.where(F.col("entity_id").isNotNull() & F.col("description").isNull()) \
            .select(F.col("entity_id").alias("id")).distinct()
        if self.lake.exists("entity_enrichment"):
            wanted = wanted.join(self.lake.read("entity_enrichment").where(F.col("found").isNotNull())
                                 .select("id"), "id", "left_anti")
        if wanted.count():
            fetched = wanted.repartition(int(settings["parallelism"])).mapInArrow(
                enrich_batches(settings, self.cfg.get("ingest.languages")[0]), ENRICHMENT_SCHEMA)
            self.lake.upsert(fetched, "entity_enrichment", ["id"])
        if not self.lake.exists("entity_enrichment"):
            return resolved
        found = self.lake.read("entity_enrichment").where(F.col("found")) \
            .select(F.col("id").alias("entity_id"), F.col("description").alias("fetched"))
        return resolved.join(found, "entity_id", "left") \
            .withColumn("description", F.coalesce("description", "fetched")).drop("fetched")

    # -- answers ---------------------------------------------------------------------------
    def answer(self, items: DataFrame, run_id: str) -> tuple[int, DataFrame]:
        """Answer what is not answered yet; returns (rows answered now, this call's responses)."""
        produce = stage.answer_batches(self.llm, self.mode, dict(self.options["generate_sampling"]), run_id,
                                       self.fallback)
        return evaluation_run.answer_items(self.lake, self.options, self.llm, self.model, self.mode, items,
                                           produce, source=self.source)


def coverage_rows(spark: SparkSession, evaluation: "Evaluation", evaluation_id: str, source: str,
                  runs: dict, now) -> DataFrame:
    """RtD's steps as eval_metrics rows: passages whose key entity has no description (+Desc
    and RtD then work without outside knowledge) and passages left out of +Desc / RtD because
    a step failed, each out of the passages tried."""
    coverage = evaluation.rtd_coverage
    rows = []
    if coverage is not None:
        passages = int(coverage["passages"])
        share = (lambda k: (k / passages) if passages else None)  # noqa: E731
        for setting, metric, count in (
                ("desc", "without_description", passages - int(coverage["described"])),
                ("desc", "left_out_failed_step", passages - int(coverage["named"])),
                ("rtd", "without_description", passages - int(coverage["described"])),
                ("rtd", "left_out_failed_step", passages - int(coverage["reconstructed"]))):
            if setting in runs:
                rows.append((evaluation_id, evaluation.model, evaluation.mode, source, setting, metric,
                             share(count), passages, passages, None, None, None, None, None, runs[setting], now,
                             None, None, None, None, None, 1, None))
    frame = spark.createDataFrame(rows, metric_rules.METRICS_SCHEMA)
    return frame.withColumn("metric_id", evaluation_run.metric_id())


def run_evaluate(spark: SparkSession, lake: Lake, cfg: Config, models: list[str] | None = None,
                 settings: list[str] | None = None, source: str = "wikidata",
                 version: str | None = None) -> list[ModelReport]:
    import mlflow

    from misbench.evaluate import figures, tracking

    for table in ("questions", "bench_texts"):
        if not lake.exists(table):
            raise FileNotFoundError(f"table '{table}' does not exist: run misbench bench (or import-misbench) first")
    settings = list(settings or cfg.get("evaluate.settings"))
    unknown = sorted(set(settings) - set(stage.SETTINGS))
    if unknown:
        raise ConfigError(f"unknown settings {unknown}; known: {', '.join(stage.SETTINGS)}")
    if "probe" not in settings:
        settings.insert(0, "probe")  # Memory / Unknown come from it
    version = resolve_version(lake, version, source)
    if as_of(lake, lake.read("questions").where(F.col("source") == source), version).isEmpty():
        raise ValueError(f"no questions for source '{source}'" + (f" in version {version}" if version else "")
                         + " (see bench_stats for why claims were left out)")
    tracking.close_abandoned_runs(tracking.open_experiment(cfg))
    reports = []
    for spec in models or [None]:
        model_cfg = model_config(cfg, spec)
        evaluation = Evaluation(spark, lake, model_cfg, source, settings, version)
        questions = evaluation.questions()
        texts = as_of(lake, lake.read("bench_texts").where(F.col("source") == source), version)
        with evaluation_run.parent_run("evaluate", evaluation.model, source, {
                "model": evaluation.model, "backend": evaluation.llm["backend"], "answer_mode": evaluation.mode,
                "seed": evaluation.seed, "source": source, "settings": ",".join(settings), "runs": evaluation.runs,
                "benchmark_version": version or "not recorded",
                "temperature": 0.0, "sampling": SamplingParams(**evaluation.options["generate_sampling"]).key(),
                **{f"prompt.{key}": f"{prompt.name}:{prompt.sha}" for key, prompt in sorted(evaluation.prompts.items())},
            }) as (parent, evaluation_id):
            tracking.log_tables_as_inputs(lake, ["questions", "bench_texts", "claims", "conflicts", "evidence_qc"])
            items = evaluation.items(questions, texts)
            answered, responses = evaluation.answer(items, parent.info.run_id)
            responses = metric_rules.with_memory(responses, responses).cache()
            computed = metric_rules.over_runs(metric_rules.compute_metrics(responses, settings)).cache()
            setting_runs = evaluation_run.log_setting_runs(computed, settings)
            now = dt.datetime.now(dt.timezone.utc)
            rows = computed.select(
                F.lit(evaluation_id).alias("evaluation_id"), "model", "answer_mode", F.lit(source).alias("source"),
                "setting", "metric", "value", "n", "items", "kind", "hop", "style", "topic", "memory",
                evaluation_run.run_id_of_setting(setting_runs).alias("mlflow_run_id"), F.lit(now).alias("computed_at"),
                *[F.lit(None).cast("string").alias(d) for d in metric_rules.HOAX_DIMENSIONS],
                "runs", "value_spread",
            ).withColumn("metric_id", evaluation_run.metric_id())
            rows = rows.unionByName(coverage_rows(spark, evaluation, evaluation_id, source, setting_runs, now))
            published = evaluation_run.publish(
                lake, rows, evaluation_id=evaluation_id, model=evaluation.model, mode=evaluation.mode, source=source,
                hoax=False, settings=settings, stats_table="bench_stats", per_item=responses,
                per_item_artifact="eval_responses.parquet", benchmark_version=version)
            for name, draw in figures.FIGURES.items():
                figure = draw(published.metrics, evaluation.model)
                if figure is not None:
                    mlflow.log_figure(figure, name)
            per_item = published.per_item
            figure = figures.memory_logprob_by_style(per_item, evaluation.model)
            if figure is not None:
                mlflow.log_figure(figure, "memory_logprob_by_style.png")
            responses.unpersist()
            computed.unpersist()
        reports.append(ModelReport(
            model=evaluation.model, backend=evaluation.llm["backend"], answer_mode=evaluation.mode,
            items=len(per_item), answered_now=answered, unparsed=int(per_item["unparsed"].fillna(False).sum()),
            mlflow_run_id=parent.info.run_id, headline=published.headline))
    return reports


def run_export(spark: SparkSession, lake: Lake, cfg: Config, fmt: str, out, source: str,
               version: str | None = None) -> str:
    """Write the question set of ``source`` in benchmark ``version`` (None: the latest) as ``hf``
    or as ``lm-eval`` tasks in evaluation's own prompts; a line saying what was written."""
    from pathlib import Path

    from misbench.bench import exports

    out = Path(out)
    version = resolve_version(lake, version, source)
    questions = as_of(lake, lake.read("questions").where(F.col("source") == source), version) \
        .drop(*VERSION_COLUMNS)
    require_one_question_per_claim(questions, "export")
    texts = as_of(lake, lake.read("bench_texts").where(F.col("source") == source), version).drop(*VERSION_COLUMNS)
    named = f" of benchmark version {version}" if version else ""
    if fmt == "hf":
        rows = exports.export_hf(questions, texts, out, name=f"misbench-{source}", styles=cfg.get("generate.styles"))
        return (f"export: {rows} questions{named} -> {out / 'data' / 'test.parquet'} "
                f"with dataset card {out / 'README.md'}")
    if fmt == "lm-eval":
        prompts = {setting: load_prompt(name) for setting, name in stage.PROMPTS.items()}
        items = stage.choice_items(questions, texts, prompts)
        tasks = exports.export_lm_eval(items, out)
        return (f"export: lm-eval tasks {', '.join(tasks)} (group misbench){named} -> {out}; "
                f"run with --include_path {out}")
    raise ValueError(f"--format '{fmt}' is not one of hf, lm-eval")
