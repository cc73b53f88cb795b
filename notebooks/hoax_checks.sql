-- Validity checks over hoax_questions built from the graph: each query counts violations and
-- must give 0. Run one with `misbench sql "<query>"`; tests/hoax/test_hoax.py runs them all on
-- the real slice and on a replicated dump. Three parameters come from the configuration, filled
-- in by `misbench sql` (on Databricks, enter them where the editor asks): :reference_date is
-- claims.reference_date, :functional_premises the relations of conf/hoax.yaml's
-- functional_premises, comma-separated (P19,P20,...), :disjoint_premises its
-- disjoint_premises as relation:via pairs (P47:P30, P26:lifespan). Run the checks with the profile and
-- --set options the stages ran with: the lake does not record them.

-- A false premise that the graph states (any rank, any time), either way round (borders are
-- symmetric, and the stage refuses both): it would not be false.
SELECT count(*) AS premise_stated FROM hoax_questions q WHERE q.source = 'wikidata' AND EXISTS (
  SELECT 1 FROM triples t WHERE t.property = q.premise_property
    AND ((t.subject_id = q.premise_subject AND t.object_id = q.premise_object)
      OR (t.subject_id = q.premise_object AND t.object_id = q.premise_subject)));

-- A premise that holds for the question's subject (any rank, any time): "the capital of X
-- whose head of government is Y" also reads as X's head of government, and is true where Y is.
SELECT count(*) AS premise_true_of_subject FROM hoax_questions q WHERE q.source = 'wikidata'
  AND q.subject_id != q.premise_subject AND EXISTS (
  SELECT 1 FROM triples t WHERE t.property = q.premise_property
    AND ((t.subject_id = q.subject_id AND t.object_id = q.premise_object)
      OR (t.subject_id = q.premise_object AND t.object_id = q.subject_id)));

-- A premise whose subject or object is no entity, or whose property the graph never uses.
SELECT count(*) AS premise_not_real FROM hoax_questions q WHERE q.source = 'wikidata' AND (
  NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = q.premise_subject)
  OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = q.premise_object)
  OR NOT EXISTS (SELECT 1 FROM triples t WHERE t.property = q.premise_property));

-- A premise that contradicts nothing: its statements must be the premise subject's values of
-- the premise property, stated in the graph.
SELECT count(*) AS contradicts_nothing FROM (
  SELECT premise_subject, premise_property, sid FROM hoax_questions
  LATERAL VIEW OUTER explode(contradicted_statement_ids) AS sid WHERE source = 'wikidata') x
WHERE x.sid IS NULL OR NOT EXISTS (
  SELECT 1 FROM triples t WHERE t.statement_id = x.sid AND t.subject_id = x.premise_subject
    AND t.property = x.premise_property);

-- A hop of the question's chain that the graph does not state as a current fact, or, for a
-- hop fixed at a year (hops.at: "the head of state of Stugro in 1994"), as a statement whose
-- start and end years hold that year.
SELECT count(*) AS hop_not_stated FROM (
  SELECT h.* FROM hoax_questions LATERAL VIEW explode(hops) AS h WHERE source = 'wikidata') h
WHERE NOT EXISTS (
  SELECT 1 FROM triples t WHERE t.statement_id = h.statement_id AND t.subject_id = h.subject_id
    AND t.property = h.property AND (t.object_id = h.object_id OR t.value = h.value)
    AND t.rank != 'deprecated'
    AND CASE WHEN h.at IS NULL THEN
          (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
          AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date)
        ELSE coalesce(t.start_time RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$' AND t.end_time RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$'
                      AND CAST(substr(t.start_time, 1, 4) AS INT) <= CAST(h.at AS INT)
                      AND CAST(substr(t.end_time, 1, 4) AS INT) >= CAST(h.at AS INT), false)
        END);

-- A hop whose subject has another current value of that property (or an unknown one): the
-- chain would not single out one entity. For a hop fixed at a year: another value whose
-- period could hold that year (a start or end that is missing or unreadable could).
SELECT count(*) AS hop_not_unique FROM (
  SELECT h.* FROM hoax_questions LATERAL VIEW explode(hops) AS h WHERE source = 'wikidata') h
WHERE (
  SELECT count(DISTINCT CASE WHEN t.value_type IN ('somevalue', 'novalue') THEN t.value_type
                        ELSE coalesce(t.object_id, t.value) END) FROM triples t
  WHERE t.subject_id = h.subject_id AND t.property = h.property AND t.rank != 'deprecated'
    AND CASE WHEN h.at IS NULL THEN
          (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
          AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date)
        ELSE NOT coalesce(t.start_time RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$'
                          AND CAST(substr(t.start_time, 1, 4) AS INT) > CAST(h.at AS INT), false)
          AND NOT coalesce(t.end_time RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$'
                           AND CAST(substr(t.end_time, 1, 4) AS INT) < CAST(h.at AS INT), false)
        END) != 1;

-- Options that repeat (ignoring case and spaces), or "I do not know" not where idk_index says.
SELECT count(*) AS bad_options FROM hoax_questions
WHERE size(array_distinct(transform(options, o -> lower(trim(o))))) != 4
   OR options[idk_index] != 'I do not know'
   OR size(filter(options, o -> o = 'I do not know')) != 1;

-- An option named like the question's subject or its bridge (ignoring case and surrounding
-- spaces; the stage's own rule also ignores accents and punctuation): it would give the
-- question away. (A premise on the second hop describes the answer: its near miss is
-- named like the premise's subject, as it should be.)
SELECT count(*) AS option_names_subject FROM hoax_questions q
LEFT JOIN entities e ON e.id = q.subject_id
LEFT JOIN entities b ON b.id = q.bridge_id
WHERE q.source = 'wikidata'
  AND exists(q.options, o -> lower(trim(o)) IN (lower(trim(e.label)), lower(trim(b.label))));

-- "I do not know" unbalanced: within a reasoning type and asked relation (the groups it is
-- dealt in), its letters differ by more than one question.
SELECT count(*) AS idk_unbalanced FROM (
  SELECT reasoning_type, asked_property, max(n) - min(n) AS spread FROM (
    SELECT g.reasoning_type, g.asked_property, l.letter, count(q.question_id) AS n
    FROM (SELECT DISTINCT reasoning_type, asked_property FROM hoax_questions WHERE source = 'wikidata') g
    CROSS JOIN (SELECT explode(array('A', 'B', 'C', 'D')) AS letter) l
    LEFT JOIN hoax_questions q ON q.source = 'wikidata' AND q.reasoning_type = g.reasoning_type
      AND q.asked_property = g.asked_property AND q.idk_letter = l.letter
    GROUP BY g.reasoning_type, g.asked_property, l.letter)
  GROUP BY reasoning_type, asked_property) WHERE spread > 1;

-- A question without a proof that its premise is false. A functional proof must be on a
-- relation of conf/hoax.yaml's functional_premises and rest on the one current value (not
-- deprecated, not ended, started; no other current value, no unknown one) of the premise
-- subject's premise property, other than the premise's object. A disjointness proof must be
-- on a relation of disjoint_premises and rest on the current values of its `via` property
-- (continents) of the premise subject and object: both have some, none unknown, none shared.
-- A lifespan proof (via lifespan) must rest on their dates of birth and death, one side's
-- death before the other's birth. A missing statement alone proves nothing.
SELECT count(DISTINCT question_id) AS premise_unproven FROM (
  SELECT question_id, premise_subject, premise_property, premise_object, premise_proof.kind AS kind, sid,
    premise_proof.statement_ids AS sids,
    nullif(regexp_extract(:disjoint_premises, concat('(?:^|,)', premise_property, ':([A-Za-z0-9]+)'), 1), '') AS via
  FROM hoax_questions LATERAL VIEW OUTER explode(premise_proof.statement_ids) AS sid WHERE source = 'wikidata') x
WHERE x.kind IS NULL OR x.sid IS NULL
  OR x.kind NOT IN ('functional: the graph records another value', 'disjoint: the graph gives the two no value in common',
                    'lifespan: one died before the other was born')
  OR (x.kind = 'functional: the graph records another value' AND (
    NOT array_contains(split(:functional_premises, ','), x.premise_property)
    OR NOT EXISTS (
      SELECT 1 FROM triples t WHERE t.statement_id = x.sid AND t.subject_id = x.premise_subject
        AND t.property = x.premise_property AND t.object_id != x.premise_object AND t.rank != 'deprecated'
        AND (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
        AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date))
    OR (
      SELECT count(DISTINCT CASE WHEN t.value_type IN ('somevalue', 'novalue') THEN t.value_type
                            ELSE t.object_id END) FROM triples t
      WHERE t.subject_id = x.premise_subject AND t.property = x.premise_property AND t.rank != 'deprecated'
        AND (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
        AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date)) != 1))
  OR (x.kind = 'disjoint: the graph gives the two no value in common' AND (
    x.via IS NULL OR x.via = 'lifespan'
    -- each statement of the proof a current value of `via`, of one of the two sides
    OR NOT EXISTS (
      SELECT 1 FROM triples t WHERE t.statement_id = x.sid AND t.property = x.via AND t.object_id IS NOT NULL
        AND t.subject_id IN (x.premise_subject, x.premise_object) AND t.rank != 'deprecated'
        AND (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
        AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date))
    -- both sides in the proof
    OR NOT EXISTS (
      SELECT 1 FROM triples t WHERE array_contains(x.sids, t.statement_id) AND t.subject_id = x.premise_subject
        AND t.property = x.via)
    OR NOT EXISTS (
      SELECT 1 FROM triples t WHERE array_contains(x.sids, t.statement_id) AND t.subject_id = x.premise_object
        AND t.property = x.via)
    -- no current value in common (the stage also counts the places a value lies in)
    OR EXISTS (
      SELECT 1 FROM triples a JOIN triples b ON a.object_id = b.object_id
      WHERE a.subject_id = x.premise_subject AND b.subject_id = x.premise_object
        AND a.property = x.via AND b.property = x.via
        AND a.rank != 'deprecated'
        AND (a.end_time IS NULL OR (a.end_time != 'somevalue' AND regexp_replace(a.end_time, '~$', '') > :reference_date))
        AND (a.start_time IS NULL OR a.start_time = 'somevalue' OR regexp_replace(a.start_time, '~$', '') <= :reference_date)
        AND b.rank != 'deprecated'
        AND (b.end_time IS NULL OR (b.end_time != 'somevalue' AND regexp_replace(b.end_time, '~$', '') > :reference_date))
        AND (b.start_time IS NULL OR b.start_time = 'somevalue' OR regexp_replace(b.start_time, '~$', '') <= :reference_date))
    -- no current unknown value on either side
    OR EXISTS (
      SELECT 1 FROM triples t WHERE t.subject_id IN (x.premise_subject, x.premise_object)
        AND t.property = x.via AND t.value_type IN ('somevalue', 'novalue') AND t.rank != 'deprecated'
        AND (t.end_time IS NULL OR (t.end_time != 'somevalue' AND regexp_replace(t.end_time, '~$', '') > :reference_date))
        AND (t.start_time IS NULL OR t.start_time = 'somevalue' OR regexp_replace(t.start_time, '~$', '') <= :reference_date))))
  OR (x.kind = 'lifespan: one died before the other was born' AND (
    coalesce(x.via, '') != 'lifespan'
    -- each statement of the proof a date of birth or death of one of the two sides
    OR NOT EXISTS (
      SELECT 1 FROM triples t WHERE t.statement_id = x.sid AND t.property IN ('P569', 'P570')
        AND t.subject_id IN (x.premise_subject, x.premise_object) AND t.rank != 'deprecated')
    -- one side's latest death before the other's earliest birth, in years, a side counting
    -- only where every such statement of it (deprecated ones aside) is a known date of year
    -- precision or finer, as the stage counts it
    OR NOT (coalesce((
        SELECT CASE WHEN count_if(NOT coalesce(t.time_precision >= 9 AND t.value RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$', false)) = 0 THEN max(CAST(substr(t.value, 1, 4) AS INT)) END
        FROM triples t WHERE t.subject_id = x.premise_object AND t.property = 'P570' AND t.rank != 'deprecated') < (
        SELECT CASE WHEN count_if(NOT coalesce(t.time_precision >= 9 AND t.value RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$', false)) = 0 THEN min(CAST(substr(t.value, 1, 4) AS INT)) END
        FROM triples t WHERE t.subject_id = x.premise_subject AND t.property = 'P569' AND t.rank != 'deprecated'), false)
      OR coalesce((
        SELECT CASE WHEN count_if(NOT coalesce(t.time_precision >= 9 AND t.value RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$', false)) = 0 THEN max(CAST(substr(t.value, 1, 4) AS INT)) END
        FROM triples t WHERE t.subject_id = x.premise_subject AND t.property = 'P570' AND t.rank != 'deprecated') < (
        SELECT CASE WHEN count_if(NOT coalesce(t.time_precision >= 9 AND t.value RLIKE '^[0-9]{4}(-[0-9]{2}){0,2}$', false)) = 0 THEN min(CAST(substr(t.value, 1, 4) AS INT)) END
        FROM triples t WHERE t.subject_id = x.premise_object AND t.property = 'P569' AND t.rank != 'deprecated'), false))));

-- An intersection whose first fact's object also meets the second condition (any rank, any
-- time): it would be both, and the question would have an answer.
SELECT count(*) AS intersection_both FROM hoax_questions q WHERE q.source = 'wikidata'
  AND q.pattern = 'intersection' AND EXISTS (
  SELECT 1 FROM triples t WHERE t.subject_id = q.hops[1].subject_id AND t.property = q.hops[1].property
    AND t.object_id = q.hops[0].object_id);

-- A comparison whose two dates fall in one year: its option "both in the same year" would be true.
SELECT count(*) AS comparison_tie FROM hoax_questions q WHERE q.source = 'wikidata'
  AND q.pattern = 'comparison'
  AND regexp_extract(q.hops[1].value, '^-?[0-9]+', 0) = regexp_extract(q.hops[3].value, '^-?[0-9]+', 0);
