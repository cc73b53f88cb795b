"""The paper's metrics (MisBench, Appendix F.1) over eval_responses, with their n.

- ``accuracy`` (probe): share of questions answered with the memory option. A question so
  answered is *Memory* for that model, any other answer (unparsed too) *Unknown*.
- ``success_rate`` (detection, desc, rtd): share of misinformation passages called
  misinformation. ``false_alarm_rate``: share of correct passages called misinformation.
- ``memorization_ratio`` (single, style): MR = Rc / (Rc + Rm) on the model's Memory questions,
  Rc and Rm the shares answered with the memory and the misinformation option.
- ``tendcm`` (pair): TendCM = (Rc - Rm) / (Rc + Rm), in [-1, 1]; 1 = always the correct
  evidence's answer. (The official code computes it with the opposite sign.) The paper
  reports it with prior knowledge (Figure 5: the ``memory = 'memory'`` rows) and without
  (Figure 15: ``memory = 'unknown'``); the rows without a memory breakdown pool both.
- ``memory_answer_rate`` / ``misinformation_answer_rate`` (Rc, Rm), ``memory_option_probability``
  (mean probability of the memory option among the options, log-prob answering only) and
  ``memory_option_probability_when_chosen`` (the same over answers that chose it: Figure 7),
  ``unparsed_rate`` (every setting), ``error_rate`` (answers the engine failed to give) and
  ``top_letter_share`` (share of read answers on the most chosen letter: position bias).

Rates share a denominator: Rc / (Rc + Rm) = c / (c + m) in counts. A metric whose
denominator is empty is null with n = 0, never 0. Unparsed answers stay in every
denominator except MR's and TendCM's (they chose neither option) and are reported apart.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from misbench.bench.stage import LETTERS

DIMENSIONS = ("kind", "hop", "style", "topic", "memory")
# Breakdowns written to eval_metrics: the paper's tables and figures, and each dimension alone.
BREAKDOWNS: tuple[tuple[str, ...], ...] = (
    (), ("kind",), ("hop",), ("style",), ("topic",), ("memory",), ("kind", "hop"), ("kind", "memory"),
    ("hop", "memory"), ("kind", "hop", "memory"), ("style", "hop"), ("style", "kind"), ("style", "memory"),
    ("style", "kind", "hop"),  # Table 4's base: detection of the encyclopedia entries by kind and hop
)
METRICS_SCHEMA = (
    "evaluation_id string, model string, answer_mode string, source string, setting string, metric string, "
    "value double, n long, items long, kind string, hop int, style string, topic string, memory string, "
    "mlflow_run_id string, computed_at timestamp, country string, category string, reasoning_type string, "
    "answer_type string, false_premise_type string, runs int, value_spread double"
)
# The MultiHoax breakdowns (hoax-evaluate); null on MisBench rows.
HOAX_DIMENSIONS = ("country", "category", "reasoning_type", "answer_type", "false_premise_type")


def memorization_ratio(memory_answers: int, misinformation_answers: int) -> float | None:
    """MR = Rc / (Rc + Rm); None when neither option was chosen."""
    total = memory_answers + misinformation_answers
    return memory_answers / total if total else None


def tendcm(correct_answers: int, misinformation_answers: int) -> float | None:
    """TendCM = (Rc - Rm) / (Rc + Rm); None when neither option was chosen."""
    total = correct_answers + misinformation_answers
    return (correct_answers - misinformation_answers) / total if total else None


def with_memory(responses: DataFrame, probe: DataFrame) -> DataFrame:
    """``memory`` per response: ``memory`` / ``unknown`` by the same model's probe answer to the
    same question (joined by model, answer mode, question id and run, never by position);
    ``no_probe`` where the probe has no answer for it."""
    keys = ["model", "answer_mode", "question_id"] + (["run"] if "run" in responses.columns else [])
    known = probe.where((F.col("setting") == "probe") & F.col("error").isNull()).select(
        *keys,
        F.when(F.col("chosen_role") == "memory", F.lit("memory")).otherwise(F.lit("unknown")).alias("probe_memory"))
    known = known.dropDuplicates(keys)
    return responses.join(known, keys, "left") \
        .withColumn("memory", F.coalesce("probe_memory", F.lit("no_probe"))).drop("probe_memory")


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def _ratio(numerator: Column, denominator: Column) -> Column:
    return F.when(denominator > 0, numerator.cast("double") / denominator).otherwise(F.lit(None).cast("double"))


def _metric(name: str, value: Column, n: Column) -> Column:
    return F.struct(F.lit(name).alias("metric"), value.cast("double").alias("value"), n.cast("long").alias("n"))


def _setting_metrics(setting: str) -> list[Column]:
    """(metric, value, n) structs for one setting, over the aggregated counts."""
    items, unparsed = F.col("items"), F.col("unparsed")
    top_letter = F.greatest(*[F.col(f"letter_{letter}") for letter in LETTERS])
    out = [_metric("unparsed_rate", _ratio(unparsed, items), items),
           # position bias: the share of answers on the most chosen letter (options are in a
           # seeded order, so a model that reads them lands near 1 / options)
           _metric("top_letter_share", _ratio(top_letter, items - unparsed), items - unparsed),
           _metric("error_rate", _ratio(F.col("errors"), F.col("all_rows")), F.col("all_rows"))]
    c, m = F.col("c"), F.col("m")
    if setting == "probe":
        out.append(_metric("accuracy", _ratio(c, items), items))
    elif setting in ("detection", "desc", "rtd"):
        out.append(_metric("success_rate", _ratio(F.col("flagged_wrong"), F.col("wrong")), F.col("wrong")))
        out.append(_metric("false_alarm_rate", _ratio(F.col("flagged_right"), F.col("right")), F.col("right")))
    else:
        out.append(_metric("memory_answer_rate", _ratio(c, items), items))
        out.append(_metric("misinformation_answer_rate", _ratio(m, items), items))
        out.append(_metric("memory_option_probability", _ratio(F.col("p_memory_sum"), F.col("p_memory_n")),
                           F.col("p_memory_n")))
        # Figure 7: how sure the model is of the right option when it picks it
        out.append(_metric("memory_option_probability_when_chosen",
                           _ratio(F.col("p_right_sum"), F.col("p_right_n")), F.col("p_right_n")))
        if setting in ("single", "style"):
            mc, mm = F.col("c_known"), F.col("m_known")
            out.append(_metric("memorization_ratio", _ratio(mc, mc + mm), mc + mm))
        if setting == "pair":
            out.append(_metric("tendcm", _ratio(c - m, c + m), c + m))
    return out


def compute_metrics(responses: DataFrame, settings: Sequence[str],
                    breakdowns: Sequence[Sequence[str]] = BREAKDOWNS) -> DataFrame:
    """eval_metrics rows (without run ids) for ``responses`` that carry ``memory``
    (``with_memory``). Breakdown columns left null mean "all". One aggregation over grouping
    sets (one pass over the responses, whatever the number of breakdowns)."""
    answered = F.col("error").isNull()
    role = F.col("chosen_role")
    counts = [
        F.count("*").alias("all_rows"),
        _count(answered).alias("items"),
        _count(~answered).alias("errors"),
        _count(answered & F.col("unparsed")).alias("unparsed"),
        _count(answered & (role == "memory")).alias("c"),
        _count(answered & (role == "misinformation")).alias("m"),
        _count(answered & (role == "memory") & (F.col("memory") == "memory")).alias("c_known"),
        _count(answered & (role == "misinformation") & (F.col("memory") == "memory")).alias("m_known"),
        _count(answered & (F.col("kind") != "correct")).alias("wrong"),
        _count(answered & (F.col("kind") != "correct") & (role == "misinformation")).alias("flagged_wrong"),
        _count(answered & (F.col("kind") == "correct")).alias("right"),
        _count(answered & (F.col("kind") == "correct") & (role == "misinformation")).alias("flagged_right"),
        F.sum(F.when(answered, F.col("role_probabilities").getItem("memory"))).alias("p_memory_sum"),
        F.count(F.when(answered, F.col("role_probabilities").getItem("memory"))).alias("p_memory_n"),
        F.sum(F.when(answered & (role == "memory"), F.col("role_probabilities").getItem("memory")))
        .alias("p_right_sum"),
        F.count(F.when(answered & (role == "memory"), F.col("role_probabilities").getItem("memory")))
        .alias("p_right_n"),
        *[_count(answered & (F.col("chosen_letter") == letter)).alias(f"letter_{letter}") for letter in LETTERS],
        *[F.grouping(d).alias(f"_all_{d}") for d in DIMENSIONS],
    ]
    keys = ["model", "answer_mode", "setting"] + (["run"] if "run" in responses.columns else [])
    rows = responses.where(F.col("setting").isin(list(settings)))
    grouped = rows.groupingSets([[*keys, *dims] for dims in breakdowns], *keys, *DIMENSIONS).agg(*counts)
    # A breakdown by a dimension a row does not have (the style of a probe) is no breakdown.
    grouped = grouped.where(~F.exists(F.array(*[(F.col(f"_all_{d}") == 0) & F.col(d).isNull() for d in DIMENSIONS]),
                                      lambda missing: missing))
    per_setting = None
    for setting in settings:
        structs = F.array(*_setting_metrics(setting))
        per_setting = F.when(F.col("setting") == setting, structs) if per_setting is None \
            else per_setting.when(F.col("setting") == setting, structs)
    return grouped.select(*keys, "items", *DIMENSIONS, *[f"_all_{d}" for d in DIMENSIONS],
                          F.explode(per_setting).alias("m")).select(
        *keys, "m.metric", "m.value", "m.n", "items",
        *[F.when(F.col(f"_all_{d}") == 0, F.col(d)).cast("int" if d == "hop" else "string").alias(d)
          for d in DIMENSIONS])


def over_runs(per_run: DataFrame) -> DataFrame:
    """Metrics of several runs (``evaluate.runs``, a ``run`` column) as the paper reports
    them: ``value`` the mean over the runs that have one, ``value_spread`` its sample standard
    deviation (null with one run), ``runs`` how many runs had a value, ``n`` and ``items``
    summed over the runs (the answers the mean rests on; n / runs per run). Without a ``run``
    column: one run."""
    if "run" not in per_run.columns:
        per_run = per_run.withColumn("run", F.lit(0))
    keys = [c for c in per_run.columns if c not in ("run", "value", "n", "items")]
    # null breakdown columns group together, as they should ("all")
    return per_run.groupBy(*keys).agg(
        F.avg("value").alias("value"), F.stddev_samp("value").alias("value_spread"),
        F.count("value").cast("int").alias("runs"), F.sum("n").cast("long").alias("n"),
        F.sum("items").cast("long").alias("items"))
