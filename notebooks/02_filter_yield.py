# Databricks notebook source
# MAGIC %md
# MAGIC # Generation and quality-control yield
# MAGIC How many texts were written, how many survived each quality filter, and how many questions the
# MAGIC benchmark got out of them:
# MAGIC
# MAGIC * `evidence`, `evidence_slots`, `generation_runs` are filled by `misbench generate` (one text per claim,
# MAGIC   kind - correct / factual / temporal / semantic - and style; a slot whose text fails quality control
# MAGIC   is generated again, up to `generate.rounds` rounds);
# MAGIC * `evidence_qc`, `quality_stats` by `misbench quality` (filters in order: completeness, content,
# MAGIC   entailment, similarity; `failed_filter` is the first one a text fails, `reasons` every check it failed);
# MAGIC * `semantic_description_checks` by `misbench generate` (the descriptions of other entities of a subject's
# MAGIC   name that semantic misinformation is written for, with each check's verdict and reasons);
# MAGIC * `bench_stats` by `misbench bench` (questions per setting and kind, claims left out and why, answer
# MAGIC   letters per role).
# MAGIC
# MAGIC Yields are `rows_out / rows_in`; a group with no input shows a null yield, never 0.

# COMMAND ----------
# MAGIC %run ./00_setup

# COMMAND ----------
# MAGIC %md
# MAGIC ## Generation (`evidence`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Texts per kind and style: written, failed, cut off at the token limit, and their length
# MAGIC SELECT kind, style,
# MAGIC        count(*) AS texts,
# MAGIC        count(DISTINCT claim_id) AS claims,
# MAGIC        count_if(error IS NOT NULL) AS failed,
# MAGIC        count_if(finish_reason = 'length') AS cut_at_max_tokens,
# MAGIC        round(avg(tokens_out), 1) AS mean_tokens_out,
# MAGIC        max(attempts) AS max_attempts
# MAGIC FROM evidence
# MAGIC GROUP BY kind, style
# MAGIC ORDER BY kind, style

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Texts per kind, styles side by side (the encyclopedia entry is the wikipedia style)
# MAGIC SELECT kind,
# MAGIC        count(*) AS texts,
# MAGIC        count_if(style = 'wikipedia') AS wikipedia,
# MAGIC        count_if(style = 'news') AS news,
# MAGIC        count_if(style = 'science') AS science,
# MAGIC        count_if(style = 'blog') AS blog,
# MAGIC        count_if(style = 'technical') AS technical,
# MAGIC        count_if(style = 'confident') AS confident,
# MAGIC        count_if(style NOT IN ('wikipedia', 'news', 'science', 'blog', 'technical', 'confident')) AS other_style
# MAGIC FROM evidence
# MAGIC GROUP BY kind
# MAGIC ORDER BY kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Cost of each generation pass
# MAGIC SELECT `pass`, target, backend, model,
# MAGIC        count(*) AS runs,
# MAGIC        sum(`rows`) AS rows_written,
# MAGIC        sum(failed) AS rows_failed,
# MAGIC        sum(tokens_in) AS tokens_in,
# MAGIC        sum(tokens_out) AS tokens_out,
# MAGIC        round(sum(wall_s), 1) AS wall_s,
# MAGIC        round(try_divide(sum(tokens_out), sum(worker_s)), 1) AS tokens_out_per_worker_s,
# MAGIC        max(started_at) AS last_started_at
# MAGIC FROM generation_runs
# MAGIC GROUP BY `pass`, target, backend, model
# MAGIC ORDER BY last_started_at

# COMMAND ----------
# MAGIC %md
# MAGIC ## Slots (`evidence_slots`)
# MAGIC One slot per claim, kind and style: whether any of its texts passed quality control, on the first
# MAGIC attempt or after regeneration.

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Slots passed / not passed per kind and style
# MAGIC SELECT kind, style,
# MAGIC        count(*) AS slots,
# MAGIC        count_if(passed) AS passed,
# MAGIC        count_if(NOT coalesce(passed, false)) AS not_passed,
# MAGIC        count_if(first_attempt_passed) AS first_attempt_passed,
# MAGIC        round(try_divide(count_if(first_attempt_passed), count(*)), 3) AS first_attempt_rate,
# MAGIC        round(try_divide(count_if(passed), count(*)), 3) AS pass_rate,
# MAGIC        round(avg(attempts), 2) AS mean_attempts
# MAGIC FROM evidence_slots
# MAGIC GROUP BY kind, style
# MAGIC ORDER BY kind, style

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Slots per kind and hop (all styles), and what regeneration added
# MAGIC SELECT kind, hop,
# MAGIC        count(*) AS slots,
# MAGIC        count_if(first_attempt_passed) AS first_attempt_passed,
# MAGIC        count_if(passed) AS passed,
# MAGIC        count_if(passed) - count_if(first_attempt_passed) AS passed_after_regeneration,
# MAGIC        count_if(NOT coalesce(passed, false)) AS not_passed,
# MAGIC        round(try_divide(count_if(passed), count(*)), 3) AS pass_rate
# MAGIC FROM evidence_slots
# MAGIC GROUP BY kind, hop
# MAGIC ORDER BY kind, hop

# COMMAND ----------
# MAGIC %md
# MAGIC ## Quality filters (`quality_stats`)
# MAGIC Per filter: rows that reached it (`rows_in`) and rows that passed it (`rows_out`).

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per filter, all kinds and styles
# MAGIC SELECT step, filter,
# MAGIC        sum(rows_in) AS rows_in,
# MAGIC        sum(rows_out) AS rows_out,
# MAGIC        sum(rows_dropped) AS rows_dropped,
# MAGIC        round(try_divide(sum(rows_out), sum(rows_in)), 3) AS yield
# MAGIC FROM quality_stats
# MAGIC GROUP BY step, filter
# MAGIC ORDER BY step

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per filter and kind
# MAGIC SELECT kind, step, filter,
# MAGIC        sum(rows_in) AS rows_in,
# MAGIC        sum(rows_out) AS rows_out,
# MAGIC        sum(rows_dropped) AS rows_dropped,
# MAGIC        round(try_divide(sum(rows_out), sum(rows_in)), 3) AS yield
# MAGIC FROM quality_stats
# MAGIC GROUP BY kind, step, filter
# MAGIC ORDER BY kind, step

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per filter and style
# MAGIC SELECT style, step, filter,
# MAGIC        sum(rows_in) AS rows_in,
# MAGIC        sum(rows_out) AS rows_out,
# MAGIC        sum(rows_dropped) AS rows_dropped,
# MAGIC        round(try_divide(sum(rows_out), sum(rows_in)), 3) AS yield
# MAGIC FROM quality_stats
# MAGIC GROUP BY style, step, filter
# MAGIC ORDER BY style, step

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per filter and hop
# MAGIC SELECT hop, step, filter,
# MAGIC        sum(rows_in) AS rows_in,
# MAGIC        sum(rows_out) AS rows_out,
# MAGIC        sum(rows_dropped) AS rows_dropped,
# MAGIC        round(try_divide(sum(rows_out), sum(rows_in)), 3) AS yield
# MAGIC FROM quality_stats
# MAGIC GROUP BY hop, step, filter
# MAGIC ORDER BY hop, step

# COMMAND ----------
# MAGIC %sql
# MAGIC -- End to end per kind and style: texts checked (first filter's input), texts passing all filters
# MAGIC WITH first_step AS (SELECT min(step) AS step FROM quality_stats)
# MAGIC SELECT q.kind, q.style,
# MAGIC        sum(CASE WHEN q.step = f.step THEN q.rows_in ELSE 0 END) AS texts_checked,
# MAGIC        sum(CASE WHEN q.step = f.step THEN q.rows_in ELSE 0 END) - sum(q.rows_dropped) AS texts_passed,
# MAGIC        round(try_divide(sum(CASE WHEN q.step = f.step THEN q.rows_in ELSE 0 END) - sum(q.rows_dropped),
# MAGIC                         sum(CASE WHEN q.step = f.step THEN q.rows_in ELSE 0 END)), 3) AS yield,
# MAGIC        sum(CASE WHEN q.filter = 'completeness' THEN q.rows_dropped ELSE 0 END) AS dropped_completeness,
# MAGIC        sum(CASE WHEN q.filter = 'content' THEN q.rows_dropped ELSE 0 END) AS dropped_content,
# MAGIC        sum(CASE WHEN q.filter = 'entailment' THEN q.rows_dropped ELSE 0 END) AS dropped_entailment,
# MAGIC        sum(CASE WHEN q.filter = 'similarity' THEN q.rows_dropped ELSE 0 END) AS dropped_similarity
# MAGIC FROM quality_stats q CROSS JOIN first_step f
# MAGIC GROUP BY q.kind, q.style
# MAGIC ORDER BY q.kind, q.style

# COMMAND ----------
# MAGIC %sql
# MAGIC -- What each rule rejected: per filter and kind, the dropped texts that broke the rule
# MAGIC SELECT filter, kind, rule, sum(texts) AS texts
# MAGIC FROM quality_stats LATERAL VIEW explode(dropped_by_rule) r AS rule, texts
# MAGIC GROUP BY filter, kind, rule
# MAGIC ORDER BY filter, kind, texts DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- The other entities semantic misinformation is about: each description with its verdict
# MAGIC SELECT subject, original, description, passed, reasons
# MAGIC FROM semantic_description_checks
# MAGIC ORDER BY subject, generated_at

# COMMAND ----------
# MAGIC %md
# MAGIC ## Why texts failed (`evidence_qc`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Verdicts per kind: passed, or the first filter failed
# MAGIC SELECT kind,
# MAGIC        count(*) AS texts,
# MAGIC        count_if(passed) AS passed,
# MAGIC        count_if(failed_filter = 'completeness') AS failed_completeness,
# MAGIC        count_if(failed_filter = 'content') AS failed_content,
# MAGIC        count_if(failed_filter = 'entailment') AS failed_entailment,
# MAGIC        count_if(failed_filter = 'similarity') AS failed_similarity,
# MAGIC        count_if(NOT coalesce(passed, false)
# MAGIC                 AND failed_filter NOT IN ('completeness', 'content', 'entailment', 'similarity'))
# MAGIC          AS failed_other,
# MAGIC        round(try_divide(count_if(passed), count(*)), 3) AS pass_rate
# MAGIC FROM evidence_qc
# MAGIC GROUP BY kind
# MAGIC ORDER BY kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Failure reasons (the reason text up to its numbers), per filter and kind; a text can fail several checks
# MAGIC SELECT failed_filter, kind,
# MAGIC        trim(regexp_extract(reason, '^([^(]*)', 1)) AS reason,
# MAGIC        count(*) AS texts,
# MAGIC        count(DISTINCT claim_id) AS claims
# MAGIC FROM evidence_qc LATERAL VIEW explode(reasons) r AS reason
# MAGIC GROUP BY failed_filter, kind, trim(regexp_extract(reason, '^([^(]*)', 1))
# MAGIC ORDER BY texts DESC, failed_filter, kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Scores of complete texts per kind (to study a threshold before changing it)
# MAGIC SELECT kind,
# MAGIC        count(*) AS complete_texts,
# MAGIC        round(avg(entailment_score), 3) AS mean_entailment,
# MAGIC        round(avg(CAST(entailed AS INT)), 3) AS entailed_rate,
# MAGIC        round(avg(contrary_score), 3) AS mean_contrary,
# MAGIC        count_if(names_true_answer) AS names_true_answer,
# MAGIC        round(avg(similarity_score), 3) AS mean_similarity,
# MAGIC        round(avg(CAST(on_topic AS INT)), 3) AS on_topic_rate,
# MAGIC        round(avg(text_words), 1) AS mean_words
# MAGIC FROM evidence_qc
# MAGIC WHERE complete
# MAGIC GROUP BY kind
# MAGIC ORDER BY kind

# COMMAND ----------
# MAGIC %md
# MAGIC ## The benchmark (`bench_stats`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Questions per setting (one per claim), and how many the setting shows misinformation of each kind
# MAGIC SELECT source, setting,
# MAGIC        sum(CASE WHEN kind IS NULL THEN `count` ELSE 0 END) AS questions,
# MAGIC        sum(CASE WHEN kind = 'factual' THEN `count` ELSE 0 END) AS with_factual,
# MAGIC        sum(CASE WHEN kind = 'temporal' THEN `count` ELSE 0 END) AS with_temporal,
# MAGIC        sum(CASE WHEN kind = 'semantic' THEN `count` ELSE 0 END) AS with_semantic
# MAGIC FROM bench_stats
# MAGIC WHERE stat = 'questions'
# MAGIC GROUP BY source, setting
# MAGIC ORDER BY source, setting

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Claims left out of a setting (all: of every setting), with the reason; kind null: the whole question
# MAGIC SELECT source, setting, kind, reason, `count` AS claims
# MAGIC FROM bench_stats
# MAGIC WHERE stat = 'left_out'
# MAGIC ORDER BY source, claims DESC, setting, kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Answer letters per role (the true answer, role memory, should spread evenly over A-E)
# MAGIC SELECT source, role,
# MAGIC        sum(CASE WHEN letter = 'A' THEN `count` ELSE 0 END) AS A,
# MAGIC        sum(CASE WHEN letter = 'B' THEN `count` ELSE 0 END) AS B,
# MAGIC        sum(CASE WHEN letter = 'C' THEN `count` ELSE 0 END) AS C,
# MAGIC        sum(CASE WHEN letter = 'D' THEN `count` ELSE 0 END) AS D,
# MAGIC        sum(CASE WHEN letter = 'E' THEN `count` ELSE 0 END) AS E,
# MAGIC        sum(`count`) AS questions
# MAGIC FROM bench_stats
# MAGIC WHERE stat = 'answer_position'
# MAGIC GROUP BY source, role
# MAGIC ORDER BY source, role

# COMMAND ----------
# Plot: slot pass rates per kind (first attempt vs after regeneration) and texts through each filter
import matplotlib.pyplot as plt

slots = spark.sql("""
    SELECT kind, count(*) AS slots,
           try_divide(count_if(first_attempt_passed), count(*)) AS first_attempt,
           try_divide(count_if(passed), count(*)) AS after_regeneration
    FROM evidence_slots GROUP BY kind ORDER BY kind
""").toPandas()
filters = spark.sql("""
    SELECT step, filter, sum(rows_in) AS rows_in, sum(rows_out) AS rows_out
    FROM quality_stats GROUP BY step, filter ORDER BY step
""").toPandas()
if slots.empty and filters.empty:
    print("evidence_slots and quality_stats are empty: run misbench generate and misbench quality first")
else:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.8))
    positions = range(len(slots))
    for offset, column in ((-0.2, "first_attempt"), (0.2, "after_regeneration")):
        values = slots[column].fillna(0).astype(float)
        left.bar([p + offset for p in positions], values, 0.4, label=column.replace("_", " "))
    for p, n in zip(positions, slots["slots"]):
        left.annotate(f"n={int(n)}", (p, 0), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=8)
    left.set_xticks(list(positions), list(slots["kind"]))
    left.set_ylim(0, 1.05)
    left.set_ylabel("slots with a passing text")
    left.set_title("evidence_slots: pass rate per kind", fontsize=10)
    left.legend(fontsize=8)
    labels = [f"{s}. {f}" for s, f in zip(filters["step"], filters["filter"])]
    right.bar([p - 0.2 for p in range(len(filters))], filters["rows_in"], 0.4, label="rows in")
    right.bar([p + 0.2 for p in range(len(filters))], filters["rows_out"], 0.4, label="rows out")
    for p, (i, o) in enumerate(zip(filters["rows_in"], filters["rows_out"])):
        share = f"{o / i:.2f}" if i else "n=0"
        right.annotate(share, (p + 0.2, o), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=8)
    right.set_xticks(list(range(len(filters))), labels)
    right.set_ylabel("texts")
    right.set_title("quality_stats: texts in and out of each filter (label: yield)", fontsize=10)
    right.legend(fontsize=8)
    show(fig)
