# Databricks notebook source
# MAGIC %md
# MAGIC # Corpus overview: entities, triples, claims and conflicts
# MAGIC What the benchmark is drawn from, and what was lost on the way:
# MAGIC
# MAGIC * `entities`, `triples`, `ingest_rejects` are filled by `misbench ingest` (the Wikidata dump, parsed;
# MAGIC   lines that could not be used are quarantined in `ingest_rejects` with their reason);
# MAGIC * `claims`, `conflicts`, `claims_stats` are filled by `misbench claims` (one-hop and two-hop claims,
# MAGIC   their factual / temporal / semantic conflicting claims, and per hop, relation and reason how many
# MAGIC   facts became claims or why not).
# MAGIC
# MAGIC On Databricks the tables live in `catalog.schema` (the widgets below, as the jobs' `lake.catalog` /
# MAGIC `lake.schema`); on the embedded default run any query with `misbench sql "..."`, where tables are
# MAGIC referred to by their bare names, as here.

# COMMAND ----------
# MAGIC %run ./00_setup

# COMMAND ----------
# MAGIC %md
# MAGIC ## Table sizes

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Rows per table of the corpus and claims stages
# MAGIC SELECT 'entities' AS table_name, count(*) AS row_count FROM entities
# MAGIC UNION ALL SELECT 'triples', count(*) FROM triples
# MAGIC UNION ALL SELECT 'ingest_rejects', count(*) FROM ingest_rejects
# MAGIC UNION ALL SELECT 'claims', count(*) FROM claims
# MAGIC UNION ALL SELECT 'conflicts', count(*) FROM conflicts
# MAGIC UNION ALL SELECT 'claims_stats', count(*) FROM claims_stats

# COMMAND ----------
# MAGIC %md
# MAGIC ## Entities and triples

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Entities per type, and how many have a label, a description, aliases and types
# MAGIC SELECT type,
# MAGIC        count(*) AS entities,
# MAGIC        count(label) AS with_label,
# MAGIC        count(description) AS with_description,
# MAGIC        count_if(size(coalesce(aliases, array())) > 0) AS with_aliases,
# MAGIC        count_if(size(coalesce(instance_of, array())) > 0) AS with_instance_of,
# MAGIC        round(avg(sitelink_count), 1) AS mean_sitelinks,
# MAGIC        max(sitelink_count) AS max_sitelinks
# MAGIC FROM entities
# MAGIC GROUP BY type
# MAGIC ORDER BY entities DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Statements per value type and rank (somevalue / novalue: "unknown value" / "no value")
# MAGIC SELECT value_type, rank,
# MAGIC        count(*) AS statements,
# MAGIC        count(DISTINCT subject_id) AS subjects,
# MAGIC        count(DISTINCT property) AS properties,
# MAGIC        count(end_time) AS with_end_time,
# MAGIC        count(start_time) AS with_start_time
# MAGIC FROM triples
# MAGIC GROUP BY value_type, rank
# MAGIC ORDER BY value_type, rank

# COMMAND ----------
# MAGIC %sql
# MAGIC -- The most used properties among entity-valued, non-deprecated statements (what claims draw from)
# MAGIC SELECT t.property, any_value(p.label) AS property_label,
# MAGIC        count(*) AS statements,
# MAGIC        count(DISTINCT t.subject_id) AS subjects,
# MAGIC        count(DISTINCT t.object_id) AS objects,
# MAGIC        count_if(o.id IS NULL) AS object_not_ingested,
# MAGIC        count_if(t.end_time IS NOT NULL) AS ended
# MAGIC FROM triples t
# MAGIC LEFT JOIN entities p ON p.id = t.property
# MAGIC LEFT JOIN entities o ON o.id = t.object_id
# MAGIC WHERE t.value_type = 'wikibase-entityid' AND t.rank <> 'deprecated'
# MAGIC GROUP BY t.property
# MAGIC ORDER BY statements DESC
# MAGIC LIMIT 30

# COMMAND ----------
# MAGIC %md
# MAGIC ## Ingest rejects

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Dump lines quarantined by the ingest, by reason (an empty result: nothing was rejected)
# MAGIC SELECT reason,
# MAGIC        count(*) AS lines,
# MAGIC        count(DISTINCT source_file) AS files,
# MAGIC        min(source_file) AS example_file,
# MAGIC        min(line_number) AS first_line,
# MAGIC        any_value(left(raw_head, 120)) AS example_head
# MAGIC FROM ingest_rejects
# MAGIC GROUP BY reason
# MAGIC ORDER BY lines DESC

# COMMAND ----------
# MAGIC %md
# MAGIC ## Claims
# MAGIC One-hop claims come from one statement (`relation` such as `P17`), two-hop claims from a chain through a
# MAGIC bridge entity (`relation` such as `P57/P569`; `relation_kind` compositional or inference).

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Claims per hop, relation kind and source
# MAGIC SELECT hop, relation_kind, source,
# MAGIC        count(*) AS claims,
# MAGIC        count(DISTINCT relation) AS relations,
# MAGIC        count(DISTINCT subject_id) AS subjects,
# MAGIC        count(DISTINCT topic) AS topics,
# MAGIC        count_if(changes_over_time) AS changes_over_time,
# MAGIC        count_if(multi_valued) AS multi_valued
# MAGIC FROM claims
# MAGIC GROUP BY hop, relation_kind, source
# MAGIC ORDER BY hop, relation_kind, source

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Claims per relation (two-hop relations are first/second property), with the property labels
# MAGIC SELECT c.hop, c.relation,
# MAGIC        concat_ws(' / ', any_value(p1.label), any_value(p2.label)) AS relation_label,
# MAGIC        any_value(c.topic) AS topic,
# MAGIC        any_value(c.answer_type) AS answer_type,
# MAGIC        count(*) AS claims,
# MAGIC        count(DISTINCT c.subject_id) AS subjects,
# MAGIC        count(DISTINCT c.object_id) AS answers,
# MAGIC        bool_or(c.changes_over_time) AS changes_over_time,
# MAGIC        bool_or(c.multi_valued) AS multi_valued
# MAGIC FROM claims c
# MAGIC LEFT JOIN entities p1 ON p1.id = try_element_at(split(c.relation, '/'), 1)
# MAGIC LEFT JOIN entities p2 ON p2.id = try_element_at(split(c.relation, '/'), 2)
# MAGIC GROUP BY c.hop, c.relation
# MAGIC ORDER BY claims DESC, c.hop, c.relation

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Claims per topic, one-hop and two-hop side by side
# MAGIC SELECT coalesce(topic, '(none)') AS topic,
# MAGIC        count(*) AS claims,
# MAGIC        count_if(hop = 1) AS one_hop,
# MAGIC        count_if(hop = 2) AS two_hop,
# MAGIC        count(DISTINCT relation) AS relations,
# MAGIC        round(try_divide(count(*), sum(count(*)) OVER ()), 4) AS share
# MAGIC FROM claims
# MAGIC GROUP BY coalesce(topic, '(none)')
# MAGIC ORDER BY claims DESC

# COMMAND ----------
# MAGIC %md
# MAGIC ## Conflicts
# MAGIC Per claim one factual and one semantic conflicting claim, and a temporal one where the relation
# MAGIC changes over time (with a validity period after the reference date).

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Conflicting claims per kind and hop
# MAGIC SELECT k.kind, c.hop,
# MAGIC        count(*) AS conflicts,
# MAGIC        count(DISTINCT k.claim_id) AS claims,
# MAGIC        count(DISTINCT k.object_id) AS distinct_substitutes,
# MAGIC        count(k.irrelevant_id) AS with_irrelevant_option,
# MAGIC        count(k.subject_description) AS with_description_to_rewrite,
# MAGIC        min(k.valid_from) AS earliest_valid_from,
# MAGIC        max(k.valid_until) AS latest_valid_until
# MAGIC FROM conflicts k
# MAGIC JOIN claims c USING (claim_id)
# MAGIC GROUP BY k.kind, c.hop
# MAGIC ORDER BY k.kind, c.hop

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Conflict coverage per topic: claims, and how many have each kind of conflict
# MAGIC SELECT coalesce(c.topic, '(none)') AS topic,
# MAGIC        count(DISTINCT c.claim_id) AS claims,
# MAGIC        count(DISTINCT CASE WHEN k.kind = 'factual' THEN c.claim_id END) AS with_factual,
# MAGIC        count(DISTINCT CASE WHEN k.kind = 'temporal' THEN c.claim_id END) AS with_temporal,
# MAGIC        count(DISTINCT CASE WHEN k.kind = 'semantic' THEN c.claim_id END) AS with_semantic,
# MAGIC        count(DISTINCT CASE WHEN c.changes_over_time THEN c.claim_id END) AS changes_over_time
# MAGIC FROM claims c
# MAGIC LEFT JOIN conflicts k ON k.claim_id = c.claim_id
# MAGIC GROUP BY coalesce(c.topic, '(none)')
# MAGIC ORDER BY claims DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- A few conflicting claims beside their true claim
# MAGIC SELECT c.hop, k.kind, c.statement AS true_statement, k.statement AS conflicting_statement,
# MAGIC        k.irrelevant_label, k.valid_from, k.valid_until
# MAGIC FROM conflicts k
# MAGIC JOIN claims c USING (claim_id)
# MAGIC ORDER BY c.claim_id, k.kind
# MAGIC LIMIT 30

# COMMAND ----------
# MAGIC %md
# MAGIC ## Why facts did not become claims (`claims_stats`)
# MAGIC `kept` counts the claims; every other reason counts facts (one hop) or chains (two hops) left out.
# MAGIC A relation's counts add up to its input.

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Reasons per hop, with their share of the hop's facts
# MAGIC SELECT hop, reason,
# MAGIC        sum(facts) AS facts,
# MAGIC        count(DISTINCT relation) AS relations,
# MAGIC        round(try_divide(sum(facts), sum(sum(facts)) OVER (PARTITION BY hop)), 4) AS share
# MAGIC FROM claims_stats
# MAGIC GROUP BY hop, reason
# MAGIC ORDER BY hop, facts DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Yield per relation: facts in, claims kept, and the main reason for the rest
# MAGIC SELECT s.hop, s.relation,
# MAGIC        any_value(p.label) AS relation_label,
# MAGIC        sum(s.facts) AS facts_in,
# MAGIC        coalesce(sum(s.facts) FILTER (WHERE s.reason = 'kept'), 0) AS kept,
# MAGIC        round(try_divide(coalesce(sum(s.facts) FILTER (WHERE s.reason = 'kept'), 0), sum(s.facts)), 4) AS yield,
# MAGIC        max_by(s.reason, s.facts) FILTER (WHERE s.reason <> 'kept') AS main_reason_left_out
# MAGIC FROM claims_stats s
# MAGIC LEFT JOIN entities p ON p.id = s.relation
# MAGIC GROUP BY s.hop, s.relation
# MAGIC ORDER BY facts_in DESC, s.hop, s.relation

# COMMAND ----------
# Plot: where the facts went, per hop (claims_stats)
import matplotlib.pyplot as plt

stats = spark.sql("""
    SELECT hop, reason, sum(facts) AS facts FROM claims_stats
    GROUP BY hop, reason ORDER BY hop, facts
""").toPandas()
if stats.empty:
    print("claims_stats is empty: run misbench claims first")
else:
    hops = sorted(stats["hop"].unique())
    fig, axes = plt.subplots(1, len(hops), figsize=(6.5 * len(hops), 0.35 * len(stats) + 1.5), squeeze=False)
    for ax, hop in zip(axes[0], hops):
        rows = stats[stats["hop"] == hop]
        colors = ["tab:green" if r == "kept" else "tab:gray" for r in rows["reason"]]
        ax.barh(rows["reason"], rows["facts"], color=colors)
        for y, value in enumerate(rows["facts"]):
            ax.annotate(f"{int(value)}", (value, y), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=8)
        ax.set_title(f"hop {hop}: facts per reason (green: kept as claims)", fontsize=10)
        ax.set_xlabel("facts")
    show(fig)
