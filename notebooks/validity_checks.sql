-- Validity checks over the claims tables: each query counts violations and must give 0.
-- Run one with `misbench sql "<query>"`; tests/claims/test_validity_sql.py runs them all on
-- the real slice and on a replicated dump. :reference_date is claims.reference_date, filled in
-- by `misbench sql` (on Databricks, enter it where the editor asks).

-- An option sharing a name with the true answer (label or alias) or with the other option.
SELECT count(*) AS clashes FROM conflicts k JOIN claims c USING (claim_id)
LEFT JOIN entities t ON t.id = c.object_id
WHERE lower(k.object_label) IN (lower(c.object_label), lower(k.irrelevant_label))
   OR lower(k.irrelevant_label) = lower(c.object_label)
   OR exists(coalesce(t.aliases, array()), a -> lower(a) IN (lower(k.object_label), lower(k.irrelevant_label)));

-- A subject as its own substitute or distractor.
SELECT count(*) AS self_options FROM conflicts k JOIN claims c USING (claim_id)
WHERE c.subject_id IN (k.object_id, k.irrelevant_id);

-- A one-hop claim with no current statement behind it (every matching statement ended or is to come).
SELECT count(*) AS ended_facts FROM claims c WHERE c.hop = 1 AND NOT EXISTS (
  SELECT 1 FROM triples t WHERE t.subject_id = c.subject_id AND t.property = c.relation
    AND t.object_id = c.object_id AND t.rank != 'deprecated'
    AND (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
    AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date));

-- A one-hop claim whose subject and relation also have an "unknown value" / "no value" statement.
SELECT count(*) AS unknown_beside FROM claims c WHERE c.hop = 1 AND EXISTS (
  SELECT 1 FROM triples t WHERE t.subject_id = c.subject_id AND t.property = c.relation
    AND t.value_type IN ('somevalue', 'novalue') AND t.rank != 'deprecated');

-- A temporal conflict for a relation that does not change.
SELECT count(*) AS temporal_unchanging FROM conflicts k JOIN claims c USING (claim_id)
WHERE k.kind = 'temporal' AND NOT c.changes_over_time;

-- A claim whose conflicts name more than one false object or irrelevant option (one question
-- per claim: its factual, temporal and semantic misinformation share the false answer).
SELECT count(*) AS claims_with_several_false_objects FROM (
  SELECT claim_id FROM conflicts GROUP BY claim_id
  HAVING count(DISTINCT coalesce(object_id, object_label)) > 1
      OR count(DISTINCT coalesce(irrelevant_id, irrelevant_label)) > 1);

-- A question that contains its answer (whole words, case ignored).
SELECT count(*) AS answer_in_question FROM claims c
WHERE concat(' ', lower(regexp_replace(c.question, '[^\\p{L}\\p{N}]+', ' ')), ' ')
      LIKE concat('% ', trim(lower(regexp_replace(c.object_label, '[^\\p{L}\\p{N}]+', ' '))), ' %');
