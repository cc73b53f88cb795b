# Databricks notebook source
# MAGIC %md
# MAGIC # Exploring the misbench lake
# MAGIC Queries an analyst runs after `misbench ingest` and later stages. On Databricks the tables are
# MAGIC `catalog.schema.table` (profile `databricks`); on the embedded default run the same SQL
# MAGIC with `misbench sql "..."`, where tables are referred to by their bare names.

# COMMAND ----------
# MAGIC %run ./00_setup

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Entities with the most statements
# MAGIC SELECT e.id, e.label, count(*) AS statements
# MAGIC FROM triples t JOIN entities e ON e.id = t.subject_id
# MAGIC GROUP BY e.id, e.label ORDER BY statements DESC LIMIT 20

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Entity-valued statements per property (what the claims stage draws from)
# MAGIC SELECT property, count(*) AS n FROM triples
# MAGIC WHERE value_type = 'wikibase-entityid' AND rank <> 'deprecated'
# MAGIC GROUP BY property ORDER BY n DESC LIMIT 30

# COMMAND ----------
# MAGIC %sql
# MAGIC -- What was quarantined, and why
# MAGIC SELECT reason, count(*) AS lines, min(source_file) AS example_file, min(line_number) AS first_line
# MAGIC FROM ingest_rejects GROUP BY reason ORDER BY lines DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Quality control: texts in and out of each filter, per kind (after `misbench quality`)
# MAGIC SELECT step, filter, kind, sum(rows_in) AS rows_in, sum(rows_out) AS rows_out, sum(rows_dropped) AS dropped
# MAGIC FROM quality_stats GROUP BY step, filter, kind ORDER BY kind, step

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Why texts were dropped (the reason text up to its numbers)
# MAGIC SELECT failed_filter, regexp_extract(reason, '^([^(]*)', 1) AS reason, count(*) AS texts
# MAGIC FROM evidence_qc LATERAL VIEW explode(reasons) r AS reason
# MAGIC GROUP BY failed_filter, regexp_extract(reason, '^([^(]*)', 1) ORDER BY texts DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- How a stricter entailment threshold would change the pass rate, per style
# MAGIC SELECT style, count(*) AS complete_texts,
# MAGIC        avg(CAST(entailment_score >= 0.5 AS INT)) AS pass_at_0_5,
# MAGIC        avg(CAST(entailment_score >= 0.8 AS INT)) AS pass_at_0_8,
# MAGIC        avg(similarity_score) AS mean_similarity
# MAGIC FROM evidence_qc WHERE complete GROUP BY style ORDER BY style
