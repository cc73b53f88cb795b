"""`misbench hoax` and `import-hoax` on real Spark and Delta tables: questions from the real
slice and from a replicated dump pass the SQL checks of notebooks/hoax_checks.sql (which find
a planted true premise), options are distinct with "I do not know" balanced over A-D, every
candidate is counted with its reason, reruns change nothing, and the MultiHoax sample file
imports with its rejects."""
import bz2
import json
import re

import pytest
from pyspark.sql import functions as F

from misbench.cli import main
from misbench.config import ConfigError
from misbench.hoax import spec as hoax_spec
from misbench.hoax.answers import answer_schema, json_verdict
from misbench.hoax.job import run_hoax, run_hoax_import
from misbench.hoax.stage import (
    IDK, LETTERS, PREMISE_TRUE_OF_SUBJECT, PROOF_DISJOINT, PROOF_FUNCTIONAL, PROOF_LIFESPAN, SECOND_HOP, hoax_questions,
    options_problems,
)
from misbench.ingest.job import run_ingest
from misbench.lake import DeltaRsLake
from tests.conftest import PROJECT, SLICE_JSON, check_counts, copy_lake, require_slice

pytestmark = pytest.mark.slow  # hoax jobs over lakes built from the real slice

CHECKS = PROJECT / "notebooks" / "hoax_checks.sql"
SAMPLE = PROJECT / "tests" / "data" / "multihoax-release-sample.jsonl"
_ID = re.compile(r'^\{"type":"item","id":"Q(\d+)"')
ROMAN = ["", " II", " III", " IV", " V"]


def violations(spark, lake, cfg, **parameters):
    return check_counts(spark, lake, cfg, CHECKS, **parameters)


def replicated_dump(path, copies):
    """The slice ``copies`` times with fresh entity ids and, from the second copy on, English
    labels with a numeral ("Forth Bridge II"): copies of one name would make every question
    ambiguous. Statements still point at the first copy's objects."""
    lines = [line for line in SLICE_JSON.read_text(encoding="utf-8").split("\n") if line.startswith("{")]
    with bz2.open(path, "wt", encoding="utf-8") as out:
        out.write("[\n")
        for copy in range(copies):
            for line in lines:
                entity = json.loads(line.rstrip(","))
                entity["id"] = f"Q{int(entity['id'][1:]) + copy * 10_000_000}"
                if copy and "en" in entity.get("labels", {}):
                    entity["labels"]["en"]["value"] += ROMAN[copy]
                out.write(json.dumps(entity, ensure_ascii=False) + ",\n")
        out.write("]\n")
    return path


@pytest.fixture(scope="module")
def hoax_lake(spark, cfg, bench_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("hoax") / "lake"
    lake = copy_lake(spark, bench_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}"])
    report = run_hoax(spark, lake, run_cfg)
    return lake, run_cfg, report


def test_questions_from_the_real_slice_pass_every_check(spark, hoax_lake):
    lake, run_cfg, report = hoax_lake
    questions = lake.read("hoax_questions").where("source = 'wikidata'").collect()
    assert report.questions == len(questions) >= 3
    assert violations(spark, lake, run_cfg) == dict.fromkeys(
        ["premise_stated", "premise_true_of_subject", "premise_not_real", "contradicts_nothing", "hop_not_stated", "hop_not_unique",
         "bad_options", "option_names_subject", "idk_unbalanced", "premise_unproven", "intersection_both",
         "comparison_tie"], 0)
    functional, disjoint = hoax_spec.load_spec().functional_premises, hoax_spec.load_spec().disjoint_premises
    for q in questions:
        assert options_problems(q.options, q.idk_index) == []
        assert q.options[q.idk_index] == IDK and q.idk_letter == LETTERS[q.idk_index]
        assert q.option_roles.count("idk") == 1 and q.option_roles.count("near_miss") == 1
        assert set(q.option_roles) <= {"idk", "near_miss", "context", "distractor"}
        assert q.reasoning_type in hoax_spec.REASONING_TYPES
        assert q.false_premise_type in hoax_spec.FALSE_PREMISE_TYPES
        assert q.answer_type in hoax_spec.ANSWER_TYPES and q.category in hoax_spec.CATEGORIES
        assert q.country and len(q.hops) == 2 and q.hops[0].object_id == q.hops[1].subject_id
        # the premise describes the bridge, or (a premise on the second hop) the entity asked for
        assert q.premise_subject == (q.hops[1].object_id if q.pattern == SECOND_HOP else q.bridge_id)
        # The question names the premise's object and never its near miss; the explanation
        # says what is false and what the graph records instead.
        assert q.premise_object_label in q.question and q.near_miss not in q.question
        assert f"It is not true that {q.premise_statement[:-1]}" in q.explanation and IDK in q.explanation
        # proven false by the graph: a one-value relation whose single current value is another,
        # or (a shared border) two countries on different continents
        if q.premise_proof.kind in (PROOF_DISJOINT, PROOF_LIFESPAN):
            assert q.premise_property in disjoint and len(q.premise_proof.statement_ids) >= 2
            assert ("no continent in common" if q.premise_proof.kind == PROOF_DISJOINT
                    else "never lived at the same time") in q.explanation
            continue
        assert q.premise_property in functional and f"({functional[q.premise_property]})" in q.explanation
        assert q.premise_proof.kind == PROOF_FUNCTIONAL
        assert q.premise_proof.statement_ids == q.contradicted_statement_ids and len(q.contradicted_statement_ids) == 1
    forth = next(q for q in questions if "Forth Bridge" in q.question)
    # the graph's one current head of government of the United Kingdom is outside the slice
    # (no label): the false object is another person the slice names
    assert forth.question == ("What is the capital of the country where Forth Bridge lies whose head of "
                              "government is George Washington?")
    assert re.search(r"The graph records Q\d+ \(no label in this dump\) instead \(one head of government "
                     r"at a time\)\.", forth.explanation), forth.explanation
    assert forth.near_miss == "London" and forth.country == "United Kingdom" and forth.false_premise_type == "entity"
    assert (forth.reasoning_type, forth.answer_type, forth.category) == ("geographical", "location", "geography")
    # no composer or encyclopedist heads a government: a false object from the fallback pool
    # (no value of its relation anywhere in the graph) of a relation with
    # hoax.premise_object_roles holds one of its roles (George Washington, Sebastián Piñera)
    roles = hoax_spec.load_spec().premise_object_roles
    facts = lake.read("triples").where(F.col("object_id").isNotNull()).collect()
    holders = {relation: {f.subject_id for f in facts if f.property in role and f.object_id in (role[f.property]
                                                                                                 or [f.object_id])}
               for relation, role in roles.items()}
    values = {(f.property, f.object_id) for f in facts}
    fallback = [q for q in questions if q.premise_property in roles
                and (q.premise_property, q.premise_object) not in values]
    assert fallback and all(q.premise_object in holders[q.premise_property] for q in fallback)


def test_idk_is_balanced_and_every_candidate_is_counted(hoax_lake):
    lake, _, report = hoax_lake
    questions = lake.read("hoax_questions").where("source = 'wikidata'")
    groups = questions.select("reasoning_type", "asked_property").distinct().count()
    spread = report.idk_positions
    assert sum(spread.values()) == report.questions and max(spread.values()) - min(spread.values()) <= groups
    rows = lake.read("hoax_stats").where("source = 'wikidata'").collect()
    stats = {r.reason: r.candidates for r in rows if r.pattern == "bridge"}
    kept = [r.candidates for r in rows if r.reason in ("kept", "kept: asked as a comparison")]
    assert sum(kept) == report.questions
    # the slice has chains whose answer has no label, premises on a hop's own relation (the
    # country's country) and premises with no false object of their type
    assert {"answer has no label", "no false object of the right type",
            "premise relation is a hop's relation"} <= set(stats)
    # "shares a border with Belgium", absent from the graph, is no proof: borders are an open list
    assert stats["no proof: the relation is an open list, where a missing statement proves nothing"] > 0
    assert sum(r.candidates for r in rows) == sum(report.rejected.values()) + report.questions


def test_no_premise_tried_is_refused():
    with pytest.raises(ValueError, match="premises_tried_per_chain must be at least 1"):
        hoax_questions(None, None, None, None, seed=0, tried_per_chain=0)


def test_a_planted_true_premise_a_repeated_option_and_giveaways_are_found(spark, hoax_lake, tmp_path):
    lake = copy_lake(spark, hoax_lake[0].location("hoax_questions").rsplit("/", 1)[0], tmp_path / "lake")
    questions = lake.read("hoax_questions")
    first = questions.orderBy("question_id").first()
    # the value its proof rests on: the premise becomes true, and its proof no proof
    true_object = lake.read("triples").where(F.col("statement_id") == first.premise_proof.statement_ids[0]).first().object_id
    planted = questions.withColumn(
        "premise_object", F.when(F.col("question_id") == first.question_id, F.lit(true_object))
        .otherwise(F.col("premise_object"))) \
        .withColumn("options", F.when(F.col("question_id") == first.question_id,
                                      F.array_repeat(F.col("options")[0], 4)).otherwise(F.col("options")))
    # A second question with a distractor named like its bridge.
    second = questions.where(F.col("question_id") != first.question_id).orderBy("question_id").first()
    bridge_label = lake.read("entities").where(F.col("id") == second.bridge_id).first().label
    slot = (second.idk_index + 1) % 4
    planted = planted.withColumn("options", F.when(
        F.col("question_id") == second.question_id,
        F.array(*[F.lit(bridge_label.upper()) if i == slot else F.col("options")[i] for i in range(4)]))
        .otherwise(F.col("options")))
    # A third with a distractor named like its subject, with spaces around.
    third = questions.where(~F.col("question_id").isin(first.question_id, second.question_id)) \
        .orderBy("question_id").first()
    subject_label = lake.read("entities").where(F.col("id") == third.subject_id).first().label
    slot = (third.idk_index + 1) % 4
    planted = planted.withColumn("options", F.when(
        F.col("question_id") == third.question_id,
        F.array(*[F.lit(f"  {subject_label} ") if i == slot else F.col("options")[i] for i in range(4)]))
        .otherwise(F.col("options")))
    # the second's premise without its proof
    planted = planted.withColumn("premise_proof", F.when(F.col("question_id") == second.question_id, F.lit(None))
                                 .otherwise(F.col("premise_proof")))
    # the first's first hop, a current fact without a period, said to hold in 1500
    planted = planted.withColumn("hops", F.when(
        F.col("question_id") == first.question_id,
        F.transform("hops", lambda hop, i: F.when(i == 0, hop.withField("at", F.lit("1500"))).otherwise(hop)))
        .otherwise(F.col("hops")))
    lake.write(planted.localCheckpoint(), "hoax_questions", partition_by=["source"])
    # the third's premise stated of its subject: its description then also reads as true
    triples = lake.read("triples")
    of_subject = triples.where(F.col("statement_id") == third.premise_proof.statement_ids[0]) \
        .withColumn("statement_id", F.lit("planted")).withColumn("subject_id", F.lit(third.subject_id)) \
        .withColumn("object_id", F.lit(third.premise_object))
    lake.write(triples.unionByName(of_subject).localCheckpoint(), "triples", partition_by=["value_type"])
    found = violations(spark, lake, hoax_lake[1])
    assert found["premise_stated"] == 1 and found["bad_options"] == 1 and found["option_names_subject"] == 2
    assert found["premise_true_of_subject"] == 1
    assert found["premise_unproven"] == 2
    assert found["hop_not_stated"] == 1
    # the proofs rest on the configured functional relations: with none of theirs, none holds
    no_functional = violations(spark, lake, hoax_lake[1], functional_premises="P0", disjoint_premises="")
    assert no_functional["premise_unproven"] == questions.where("source = 'wikidata'").count()


def test_a_rewording_that_drops_the_premise_relation_is_refused(spark, hoax_lake, tmp_path):
    """A rewording that keeps every name but turns the premise's relation into another ("whose
    capital is X" into "that is near X") states another premise: refused and counted; a
    rewording that keeps it replaces the template question. Replies from the fake backend."""
    lake, run_cfg, _ = hoax_lake
    spec = hoax_spec.load_spec()

    def names_relation(text, prop):
        return any(re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE) for w in spec.premise_words[prop])

    dropped = kept = None
    # bridge questions: the option rewords those only (a second-hop question keeps its template)
    for q in lake.read("hoax_questions").where("source = 'wikidata' AND pattern = 'bridge'").orderBy("question_id").collect():
        phrase = spec.relations[q.premise_property].clause.split("<O>")[0].split(" ", 1)[1].strip()
        other = re.sub(rf"\b(that|who|whose) {re.escape(phrase)} ", "that is near ", q.template_question)
        if dropped is None and other != q.template_question and not names_relation(other, q.premise_property):
            dropped = (q, other)
        elif kept is None:
            kept = q
    assert dropped and kept, "the slice's questions name their premise's relation in its clause"
    replies = {dropped[0].template_question: dropped[1], kept.template_question: "Tell me: " + kept.template_question}
    root = tmp_path / "lake"
    at = copy_lake(spark, lake.location("hoax_questions").rsplit("/", 1)[0], root)
    run_hoax(spark, at, run_cfg.with_overrides([f"lake.root={root}", "hoax.reword.enabled=true", "llm.backend=fake",
                                                f"llm.fake.replies={json.dumps(replies)}"]))
    stats = {r.reason: r.candidates for r in at.read("hoax_stats").where("pattern = 'reword'").collect()}
    assert stats["rewording dropped the premise's relation"] == 1 and stats["kept"] == 1
    rows = {r.question_id: r for r in at.read("hoax_questions").where("source = 'wikidata'").collect()}
    assert rows[dropped[0].question_id].question == dropped[0].question and not rows[dropped[0].question_id].reworded
    assert rows[kept.question_id].question == "Tell me: " + kept.template_question and rows[kept.question_id].reworded


def test_the_papers_countries_option_keeps_only_their_questions_and_counts_the_rest(spark, hoax_lake, tmp_path):
    """hoax.countries keeps the questions of the listed countries (by id), the same questions
    as without it, and counts every kept premise of the other chains in hoax_stats. The last
    run is also the rerun test: on a lake whose questions the run before replaced with none,
    it gives back every question as the first run wrote it, word for word and option order."""
    from misbench.hoax.stage import OUTSIDE_COUNTRIES

    lake, run_cfg, report = hoax_lake
    every = {r.question_id: r for r in lake.read("hoax_questions").where("source = 'wikidata'").collect()}
    countries = {q.country for q in every.values()}
    ids = {r.label: r.id for r in lake.read("entities").where(F.col("label").isin(sorted(countries))).collect()}
    copy = copy_lake(spark, run_cfg.get("lake.root"), tmp_path / "lake")

    def narrowed(listed: str):
        done = run_hoax(spark, copy, run_cfg.with_overrides([f"lake.root={copy.root}", f"hoax.countries={listed}"]))
        return done, {r.question_id: r for r in copy.read("hoax_questions").where("source = 'wikidata'").collect()}

    # the slice's questions are all of one country: France (Q142) keeps none of them
    outside = {ids[c] for c in countries} - {"Q142"}
    assert outside, "the slice's questions are French: choose another country for this test"
    done, kept = narrowed("[Q142]")
    assert not kept and done.questions == 0
    assert done.rejected[OUTSIDE_COUNTRIES] + done.rejected.get(f"intersection: {OUTSIDE_COUNTRIES}", 0) == \
        report.questions + report.rejected.get("another premise chosen for the chain", 0)
    # their own countries keep every question as it was
    done, kept = narrowed("[" + ", ".join(sorted(outside)) + "]")
    assert set(kept) == set(every) and done.questions == report.questions and OUTSIDE_COUNTRIES not in done.rejected
    assert all(kept[i].question == every[i].question and kept[i].options == every[i].options for i in kept)
    with pytest.raises(ConfigError, match="hoax.countries must be null or a list of country ids"):
        run_hoax(spark, copy, run_cfg.with_overrides([f"lake.root={copy.root}", "hoax.countries=[France]"]))


def test_replicated_dump_scales_the_questions_and_keeps_them_valid(spark, cfg, tmp_path):
    require_slice()
    root = tmp_path / "lake"
    run_cfg = cfg.with_overrides([f"lake.root={root}"])
    lake = DeltaRsLake(spark, root=str(root))
    run_ingest(spark, lake, run_cfg, [str(replicated_dump(tmp_path / "replicated.json.bz2", 3))])
    report = run_hoax(spark, lake, run_cfg)
    assert report.questions >= 9  # the slice's 3 chains, once per copy of their subjects
    assert all(v == 0 for v in violations(spark, lake, run_cfg).values())
    assert max(report.idk_positions.values()) - min(report.idk_positions.values()) <= 1


def test_import_reads_the_paper_examples_and_rejects_with_reasons(spark, cfg, tmp_path):
    root = tmp_path / "lake"
    lake = DeltaRsLake(spark, root=str(root))
    run_cfg = cfg.with_overrides([f"lake.root={root}"])
    report = run_hoax_import(spark, lake, run_cfg, [str(SAMPLE)], "multihoax-sample")
    assert (report.records, report.questions, report.rejects) == (8, 4, 4)
    questions = {r.question[:30]: r for r in lake.read("hoax_questions").collect()}
    nemati = next(q for k, q in questions.items() if k.startswith("Which Iranian wrestler"))
    assert nemati.options[nemati.idk_index] == IDK and nemati.country == "Iran"
    assert (nemati.category, nemati.false_premise_type, nemati.answer_type, nemati.reasoning_type) == \
        ("sports", "event", "person", "temporal")
    cyrus = next(q for k, q in questions.items() if k.startswith("Who was the son"))
    assert cyrus.idk_index == 2 and cyrus.reasoning_type == "bridge entity"  # option_a..d, mhq_type
    rejects = {r.line: r.reason for r in lake.read("hoax_import_rejects").collect()}
    assert rejects[5] == "repeated question" and rejects[6] == "no single 'I do not know' option"
    assert rejects[7] == "missing explanation" and rejects[8].startswith("not JSON")
    again = run_hoax_import(spark, lake, run_cfg, [str(SAMPLE)], "multihoax-sample")
    assert again.questions == lake.read("hoax_questions").count() == 4
    assert main(["import-hoax", str(SAMPLE), "--name", "wikidata", "--lake", str(root)]) == 2


def test_json_answers_are_read_by_their_schema():
    options = ["London", "Berlin", IDK, "Poznań"]
    schema = answer_schema()
    assert json_verdict('{"answer": "I do not know", "explanation": "No such country."}', options, schema) == ("valid", 2)
    assert json_verdict('```json\n{"answer": "C", "explanation": "x"}\n```', options, schema) == ("valid", 2)
    assert json_verdict('{"answer": "london", "explanation": "x"}', options, schema) == ("valid", 0)
    assert json_verdict('{"answer": "London"', options, schema) == ("invalid json", None)
    assert json_verdict('{"answer": "London"}', options, schema) == ("schema violation", None)
    assert json_verdict('{"answer": "London", "explanation": "x", "confidence": 1}', options, schema)[0] == \
        "schema violation"
    assert json_verdict('{"answer": "Paris", "explanation": "x"}', options, schema) == ("not an option", None)
    assert json_verdict("London", options, schema) == ("invalid json", None)


def test_a_judge_reply_is_read_as_its_word_and_nothing_else():
    from misbench.evaluate.stage import parse_choice

    assert parse_choice("Yes", ["Yes", "No"]) == "Yes" and parse_choice(" no. ", ["Yes", "No"]) == "No"
    assert parse_choice("Yes, it names the premise.", ["Yes", "No"]) is None
    assert parse_choice("Yes or no", ["Yes", "No"]) is None


def test_option_rules():
    assert options_problems(["a", "b", IDK, "c"], 2) == []
    assert options_problems(["a", "A ", IDK, "c"], 2) == ["options repeat"]
    assert options_problems(["a", "b", "c", IDK], 1) == ["'I do not know' is not at idk_index"]
    assert options_problems(["a", IDK, "c"], 1) == ["3 options, not 4"]


def test_a_premise_stated_the_other_way_round_or_of_the_subject_is_not_false(spark, cfg, hoax_lake, tmp_path):
    """A premise is checked in both directions (borders, spouses and twin towns are
    symmetric), and of the subject too: once the graph states a question's premise the other
    way round, or of the subject its clause could also describe, the question is no hoax.
    Planted deprecated: stated in any rank counts, and the false objects' pools (current
    statements) stay as they were, so the same candidates come back to be refused."""
    root = tmp_path / "lake"
    lake = copy_lake(spark, hoax_lake[1].get("lake.root"), root)
    question = lake.read("hoax_questions").where("source = 'wikidata'").orderBy("question_id").first()
    triples = lake.read("triples")
    reversed_premise = triples.where(F.col("statement_id") == question.premise_proof.statement_ids[0]) \
        .withColumn("statement_id", F.lit("planted")).withColumn("subject_id", F.lit(question.premise_object)) \
        .withColumn("object_id", F.lit(question.premise_subject)).withColumn("rank", F.lit("deprecated")) \
        .withColumn("property", F.lit(question.premise_property))
    # and another's premise stated of its subject: "the country where X lies whose head of
    # government is Y" would also read as X's, which Y then is
    other = lake.read("hoax_questions").where(f"source = 'wikidata' AND premise_object != '{question.premise_object}'") \
        .orderBy("question_id").first()
    of_subject = triples.where(F.col("statement_id") == other.premise_proof.statement_ids[0]) \
        .withColumn("statement_id", F.lit("planted-2")).withColumn("subject_id", F.lit(other.subject_id)) \
        .withColumn("object_id", F.lit(other.premise_object)).withColumn("rank", F.lit("deprecated")) \
        .withColumn("property", F.lit(other.premise_property))
    lake.write(triples.unionByName(reversed_premise).unionByName(of_subject).localCheckpoint(), "triples",
               partition_by=["value_type"])
    report = run_hoax(spark, lake, cfg.with_overrides([f"lake.root={root}"]))
    questions = lake.read("hoax_questions").where("source = 'wikidata'").collect()
    asked = {(q.subject_id, q.premise_subject, q.premise_property, q.premise_object) for q in questions}
    assert (question.subject_id, question.premise_subject, question.premise_property, question.premise_object) not in asked
    assert (other.subject_id, other.premise_subject, other.premise_property, other.premise_object) not in asked
    assert report.rejected.get("premise is stated in the graph", 0) >= 1
    assert report.rejected.get(PREMISE_TRUE_OF_SUBJECT, 0) >= 1


def test_chain_options_share_the_second_hop_search_and_drop_the_subjects_name(spark):
    """Options are searched once per second hop and shared by its chains; a chain whose
    subject is named like one of them loses that one and keeps four others, in the same order."""
    from misbench.hoax.stage import _chain_options

    ranked = [("Paris", "near_miss", 0.0), ("Lyon", "distractor", 2.1), ("Nice", "distractor", 2.2),
              ("Lille", "distractor", 2.3), ("Metz", "distractor", 3.1)]
    by_answer = spark.createDataFrame(
        [("Q142", "P36", option, role, priority, option.lower(), rank)
         for rank, (option, role, priority) in enumerate(ranked, start=1)],
        "bridge_id string, second string, option string, role string, priority double, name string, rank int")
    chains = spark.createDataFrame([("c1", "Q142", "P36", "Alice"), ("c2", "Q142", "P36", "Lyon"),
                                    ("c3", "Q183", "P36", "Bob"), ("c4", "Q142", "P30", "Carol")],
                                   "chain_id string, bridge_id string, second string, subject_label string")
    rows = _chain_options(chains, by_answer).collect()
    options = {}
    for row in rows:
        options.setdefault(row.chain_id, []).append((row.priority, row.option))
    assert [o for _, o in sorted(options["c1"])] == ["Paris", "Lyon", "Nice", "Lille"]
    assert [o for _, o in sorted(options["c2"])] == ["Paris", "Nice", "Lille", "Metz"]
    assert "c3" not in options and "c4" not in options  # none searched for their second hop: none invented
