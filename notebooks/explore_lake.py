# Databricks notebook source
# MAGIC %md
# MAGIC # Exploring the misbench lake
# MAGIC Queries an analyst runs after `misbench ingest`. On Databricks the tables are
# MAGIC `catalog.schema.table` (profile `databricks`); on the embedded default run the same SQL
# MAGIC with `misbench sql "..."`, where tables are referred to by their bare names.

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
