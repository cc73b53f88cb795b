"""What the hoax stage may walk and how it words and labels it: conf/hoax.yaml with the
relation templates of conf/relations.yaml, validated at start (errors name the file)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from misbench.claims.relations import load_relations
from misbench.config import ConfigError, conf_dir, load_yaml

REASONING_TYPES = ("bridge entity", "temporal", "geographical", "intersection", "comparison")
FALSE_PREMISE_TYPES = ("entity", "property", "event", "scope")
ANSWER_TYPES = ("person", "location", "event", "number", "common noun")
# Part-of relations (located in, part of, contains, country, has part): a false premise object
# linked to the true value by one is no false object (born in Westminster, not London).
CONTAINMENT = ("P131", "P361", "P150", "P17", "P527")
# Of those, the ones whose object lies inside the subject (a country contains its regions).
CONTAINS = ("P150", "P527")
# The one that only ends a chain of part-of links: most entities state a country, so a walk
# through it would fan out over every entity of a country.
COUNTRY = "P17"
CATEGORIES = ("food", "sports", "geography", "education", "history", "entertainment", "religion",
              "science & technology", "arts & literature", "holidays & leisure")


@dataclass(frozen=True)
class AskedRelation:
    """A relation the question may ask about (second hop) or use as a false premise."""
    relation: str
    question: str | None  # with <S>; None: premise only
    statement: str  # with <S> and <O>
    clause: str | None  # restrictive clause with <O> ("who is married to <O>"), None: never a premise
    answer_type: str
    topic: str
    multi_valued: bool


@dataclass(frozen=True)
class Comparison:
    """A comparison question over a date relation: which of two entities comes first."""
    relation: str
    question: str  # with <A> and <B>: the two descriptions
    tie: str  # the option that both come at once (false: their years differ)
    dated: str  # with <O>, the date: "born <O>" (the explanation's "Alfred Satie (born 1827)")


@dataclass(frozen=True)
class DisjointPremise:
    """A proof for a premise on an open list: the bridge and the premise's object each have
    current values of ``via``, all known, and none in common; or, with ``via`` LIFESPAN, one
    died before the other was born."""
    via: str  # the property whose values set the two apart (P30, continent), or LIFESPAN
    explanation: str  # with <S> (bridge), <O> (premise object), <A> and <B> (their values)


# A disjointness by dates of birth and death (P569, P570) instead of a property's values.
LIFESPAN = "lifespan"


@dataclass(frozen=True)
class HoaxSpec:
    bridges: dict[str, str]
    relations: dict[str, AskedRelation]
    date_questions: dict[str, str]
    functional_premises: dict[str, str]  # relation -> why it holds one value at a time
    untyped_object_classes: dict[str, str]  # relation answer type -> class of a true object without one
    geographical_topics: list[str]
    false_premise_types: dict[str, str]  # relation answer type -> premise type
    answer_type_classes: dict[str, str]  # class id -> answer type
    answer_type_relations: dict[str, str]  # relation answer type -> answer type
    categories_by_class: dict[str, str]  # class id -> category (the answer's classes, then the subject's)
    categories_by_relation: dict[str, str]
    categories_by_topic: dict[str, str]
    default_category: str
    country_relations: list[str]
    country_classes: list[str]
    type_nouns: dict[str, str] = field(default_factory=dict)
    premise_words: dict[str, list[str]] = field(default_factory=dict)  # premise relation -> words a rewording keeps
    # premise relation -> {property: objects ([] any)}: who may stand in as its false object
    premise_object_roles: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    comparisons: dict[str, Comparison] = field(default_factory=dict)  # date relation -> its comparison
    comparison_share: float = 0.0  # of the chosen date questions, the share asked as comparisons
    intersection_question: str = ""  # with <T> (the noun), <A> and <B> (the two conditions)
    intersection_share: float = 0.0  # of the conditions on a one-value relation, the share asked
    dated_bridges: list[str] = field(default_factory=list)  # bridge relations also asked at a past year
    dated_role: str = "<R> in <Y>"  # a dated bridge's phrase: <R> the bridge's, <Y> the year
    # premise relation -> the disjointness that proves it false (open lists: shares a border with)
    disjoint_premises: dict[str, DisjointPremise] = field(default_factory=dict)
    disjoint_candidates: int = 8  # false objects searched per such premise before the disjointness filter
    # premises on the second hop: <T> the answer's noun, <C> the premise clause, <A> its phrase; "": none
    second_hop_question: str = ""

    @property
    def premise_relations(self) -> list[str]:
        return sorted(r for r, spec in self.relations.items() if spec.clause)

    @property
    def properties(self) -> list[str]:
        """Every property the stage reads facts of."""
        roles = {prop for role in self.premise_object_roles.values() for prop in role}
        vias = {d.via for d in self.disjoint_premises.values()} - {LIFESPAN}
        if any(d.via == LIFESPAN for d in self.disjoint_premises.values()):
            vias |= {"P569", "P570"}
        return sorted(set(self.relations) | set(self.bridges) | set(self.date_questions) | set(self.country_relations)
                      | set(CONTAINMENT) | roles | vias)


def _clause(statement: str, override: str | None) -> str | None:
    if override:
        return override
    if statement.startswith("<S> ") and statement.count("<O>") == 1:
        return "that " + statement[len("<S> "):].rstrip(".")
    return None


# Words of a premise clause that name no relation: "that shares a border with <O>" keeps
# "shares" and "border".
CLAUSE_FUNCTION_WORDS = frozenset(
    ("that who whose which is are was were be been has have had the a an of with to in on at by for from "
     "as or out after right first its their his her").split())


def _premise_words(path: Path, asked: dict[str, AskedRelation], listed: dict) -> dict[str, list[str]]:
    """Per premise relation, the words a rewording of its question must keep one of: the
    relation's own list in hoax.yaml, else the words of its clause."""
    for relation, words in listed.items():
        if relation not in asked or not asked[relation].clause:
            raise ConfigError(f"{path}: premise_words: {relation} is no premise relation")
        if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
            raise ConfigError(f"{path}: premise_words: {relation} needs a list of words")
        clause = f" {asked[relation].clause.lower()} "
        if not any(f" {w.strip().lower()} " in clause for w in words):
            raise ConfigError(f"{path}: premise_words: {relation} lists none of the words of its clause "
                              f"'{asked[relation].clause}': the template question itself would be refused")
    out = {}
    for relation, spec in asked.items():
        if not spec.clause:
            continue
        own = [w for w in spec.clause.replace("<O>", " ").lower().split() if w not in CLAUSE_FUNCTION_WORDS]
        if not own and relation not in listed:
            raise ConfigError(f"{path}: premise relation {relation}'s clause '{spec.clause}' has no word that "
                              "names the relation: list its words in premise_words")
        out[relation] = [str(w).strip().lower() for w in listed.get(relation) or own]
    return out


def _object_roles(path: Path, functional: dict[str, str], listed: dict) -> dict[str, dict[str, list[str]]]:
    """premise_object_roles: per functional premise relation, the facts (property, and the
    objects it must have, none for any) of which a false object of the fallback pool holds one."""
    out: dict[str, dict[str, list[str]]] = {}
    if not isinstance(listed, dict):
        raise ConfigError(f"{path}: premise_object_roles needs relations such as P6: {{P106: [Q82955]}}")
    for relation, roles in listed.items():
        relation = str(relation)
        if relation not in functional:
            raise ConfigError(f"{path}: premise_object_roles: {relation} is no functional premise relation")
        if not isinstance(roles, dict) or not roles:
            raise ConfigError(f"{path}: premise_object_roles: {relation} needs properties such as {{P106: [Q82955]}}")
        out[relation] = {}
        for prop, objects in roles.items():
            objects = [] if objects is None else objects
            if not re.fullmatch(r"P\d+", str(prop)):
                raise ConfigError(f"{path}: premise_object_roles: {relation}.{prop} is no property id such as P106")
            if not isinstance(objects, list) or not all(isinstance(o, str) and re.fullmatch(r"Q\d+", o)
                                                        for o in objects):
                raise ConfigError(f"{path}: premise_object_roles: {relation}.{prop} needs a list of item ids "
                                  "such as [Q82955] ([] for any value)")
            out[relation][str(prop)] = list(objects)
    return out


def _disjoint(path: Path, asked: dict[str, AskedRelation], functional: dict[str, str], listed,
              candidates) -> tuple[dict[str, DisjointPremise], int]:
    """disjoint_premises: per open-list premise relation, the property whose values must not
    overlap and the explanation's wording; disjoint_candidates: false objects searched each."""
    out = {}
    if not isinstance(listed, dict):
        raise ConfigError(f"{path}: disjoint_premises needs relations such as "
                          "P47: {via: P30, explanation: 'The graph puts <S> in <A> and <O> in <B> ...'}")
    for relation, item in listed.items():
        relation = str(relation)
        if relation not in asked or not asked[relation].clause:
            raise ConfigError(f"{path}: disjoint_premises: {relation} is no premise relation")
        if relation in functional:
            raise ConfigError(f"{path}: disjoint_premises: {relation} is a functional premise already")
        via = str(item.get("via", "")) if isinstance(item, dict) else ""
        explanation = item.get("explanation") if isinstance(item, dict) else None
        if not re.fullmatch(r"P\d+", via) and via != LIFESPAN:
            raise ConfigError(f"{path}: disjoint_premises: {relation} needs via, a property id such as P30, "
                              f"or {LIFESPAN}")
        if not isinstance(explanation, str) or not all(slot in explanation for slot in ("<S>", "<O>", "<A>", "<B>")):
            raise ConfigError(f"{path}: disjoint_premises: {relation} needs an explanation with <S>, <O>, <A> and <B>")
        out[relation] = DisjointPremise(via, explanation)
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 3:
        raise ConfigError(f"{path}: disjoint_candidates must be a whole number of at least 3, not {candidates!r}")
    return out, candidates


def _comparisons(path: Path, date_questions: dict, listed) -> tuple[dict[str, Comparison], float]:
    """comparisons: the share of date questions asked as comparisons, and per date relation
    its question (<A>, <B>), the tie option and the date's wording (<O>)."""
    if not listed:
        return {}, 0.0
    if not isinstance(listed, dict) or not isinstance(listed.get("questions"), dict):
        raise ConfigError(f"{path}: comparisons needs share and questions such as "
                          "{P569: {question: 'Who was born first, <A> or <B>?', tie: ..., dated: 'born <O>'}}")
    share = _share(path, "comparisons", listed.get("share", 0.0))
    out = {}
    for relation, item in listed["questions"].items():
        relation = str(relation)
        if relation not in date_questions:
            raise ConfigError(f"{path}: comparisons.questions: {relation} is not one of date_questions")
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k].strip()
                                                 for k in ("question", "tie", "dated")):
            raise ConfigError(f"{path}: comparisons.questions: {relation} needs question, tie and dated texts")
        if "<A>" not in item["question"] or "<B>" not in item["question"] or "<O>" not in item["dated"]:
            raise ConfigError(f"{path}: comparisons.questions: {relation} needs <A> and <B> in its question "
                              "and <O> in dated")
        out[relation] = Comparison(relation, item["question"], item["tie"], item["dated"])
    return out, float(share)


def _share(path: Path, section: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{path}: {section}.share must be a number from 0 to 1, not {value!r}")
    return float(value)


def _intersections(path: Path, listed) -> tuple[str, float]:
    """intersections: the question (<T>, <A>, <B>) and the share of one-value conditions asked."""
    if not listed:
        return "", 0.0
    question = listed.get("question") if isinstance(listed, dict) else None
    if not isinstance(question, str) or not all(slot in question for slot in ("<T>", "<A>", "<B>")):
        raise ConfigError(f"{path}: intersections needs a question with <T>, <A> and <B> "
                          "(\"Which <T> is both <A> and <B>?\") and a share")
    return question, _share(path, "intersections", listed.get("share", 0.0))


def _second_hop(path: Path, listed) -> str:
    """second_hop: the question of a premise on the entity the chain ends at (<T>, <C>, <A>)."""
    if not listed:
        return ""
    question = listed.get("question") if isinstance(listed, dict) else None
    if not isinstance(question, str) or not all(slot in question for slot in ("<T>", "<C>", "<A>")):
        raise ConfigError(f"{path}: second_hop needs a question with <T>, <C> and <A> (\"Which <T> <C> is <A>?\")")
    return question


def _dated_bridges(path: Path, bridges: dict, listed) -> tuple[list[str], str]:
    """dated_bridges: the bridge relations also asked at a past year, and the phrase (<R>, <Y>)."""
    if not listed:
        return [], "<R> in <Y>"
    relations = listed.get("relations") if isinstance(listed, dict) else None
    role = listed.get("role", "<R> in <Y>") if isinstance(listed, dict) else None
    if not isinstance(relations, list) or not isinstance(role, str) or "<R>" not in role or "<Y>" not in role:
        raise ConfigError(f"{path}: dated_bridges needs relations (a list of bridge relations) and a role "
                          "with <R> and <Y> (\"<R> in <Y>\")")
    unknown = [str(r) for r in relations if str(r) not in bridges]
    if unknown:
        raise ConfigError(f"{path}: dated_bridges: {', '.join(unknown)} not among bridges")
    return [str(r) for r in relations], role


def load_spec(path: Path | None = None) -> HoaxSpec:
    path = path or conf_dir() / "hoax.yaml"
    data = load_yaml(path)
    relations, _ = load_relations()
    clauses = data.get("premise_clauses") or {}
    asked: dict[str, AskedRelation] = {}
    excluded = set(data.get("premise_exclude") or [])
    for relation in relations:
        clause = None if relation.relation in excluded else _clause(relation.statement, clauses.get(relation.relation))
        asked[relation.relation] = AskedRelation(
            relation.relation, relation.question, relation.statement, clause,
            relation.answer_type, relation.topic, relation.multi_valued)
    for relation, extra in (data.get("extra_premise_relations") or {}).items():
        clause = clauses.get(relation)
        if not clause or "<O>" not in clause:
            raise ConfigError(f"{path}: extra premise relation {relation} needs a premise clause with <O>")
        statement = "<S> " + clause.split(" ", 1)[1] + "."
        asked[relation] = AskedRelation(relation, None, statement, clause, str(extra["answer_type"]),
                                        str(extra["topic"]), True)
    for relation, role in (data.get("bridges") or {}).items():
        if "<S>" not in role:
            raise ConfigError(f"{path}: bridge {relation} needs <S> in '{role}'")
    for relation, question in (data.get("date_questions") or {}).items():
        if "<S>" not in question:
            raise ConfigError(f"{path}: date question {relation} needs <S> in '{question}'")
    if "min_known_values" in data:
        raise ConfigError(f"{path}: min_known_values is gone: a premise needs a proof (functional_premises)")
    functional = {str(k): str(v) for k, v in (data.get("functional_premises") or {}).items()}
    for relation in functional:
        if relation not in asked or not asked[relation].clause:
            raise ConfigError(f"{path}: functional premise {relation} is no premise relation "
                              "(it needs a premise clause, and must not be in premise_exclude)")
        if asked[relation].multi_valued:  # relations.yaml's multi_valued, or an extra premise relation
            raise ConfigError(f"{path}: functional premise {relation} usually has several values: "
                              "a missing one proves nothing")
    premise_types = {}
    for premise_type, answer_types in (data.get("false_premise_types") or {}).items():
        if premise_type not in FALSE_PREMISE_TYPES:
            raise ConfigError(f"{path}: false premise type '{premise_type}' is not one of {FALSE_PREMISE_TYPES}")
        premise_types.update({a: premise_type for a in answer_types})
    def inverted(section: str, allowed) -> dict[str, str]:
        out = {}
        for label, keys in (data.get(section) or {}).items():
            if label not in allowed:
                raise ConfigError(f"{path}: {section}: '{label}' is not one of {allowed}")
            out.update({k: label for k in keys})
        return out
    categories = data.get("categories") or {}
    for value in list((categories.get("by_relation") or {}).values()) + list((categories.get("by_topic") or {}).values()) \
            + list(categories.get("by_class") or {}) + [categories.get("default", "history")]:
        if value not in CATEGORIES:
            raise ConfigError(f"{path}: category '{value}' is not one of the paper's ten: {CATEGORIES}")
    by_class: dict[str, str] = {}
    for category, classes in (categories.get("by_class") or {}).items():
        if not isinstance(classes, list) or not all(isinstance(c, str) and c.startswith("Q") for c in classes):
            raise ConfigError(f"{path}: categories.by_class: {category} needs a list of class ids such as [Q2095]")
        for cls in classes:
            if by_class.setdefault(str(cls), category) != category:
                raise ConfigError(f"{path}: categories.by_class: {cls} is under both '{by_class[str(cls)]}' "
                                  f"and '{category}'")
    comparisons, comparison_share = _comparisons(path, data.get("date_questions") or {}, data.get("comparisons"))
    intersection_question, intersection_share = _intersections(path, data.get("intersections"))
    dated_bridges, dated_role = _dated_bridges(path, data.get("bridges") or {}, data.get("dated_bridges"))
    disjoint, disjoint_candidates = _disjoint(path, asked, functional, data.get("disjoint_premises") or {},
                                              data.get("disjoint_candidates", 8))
    if intersection_share and not set(data.get("bridges") or {}) & set(functional):
        raise ConfigError(f"{path}: intersections need a bridge relation that is a functional premise")
    return HoaxSpec(
        bridges=dict(data.get("bridges") or {}), relations=asked,
        date_questions=dict(data.get("date_questions") or {}),
        functional_premises=functional,
        untyped_object_classes={str(k): str(v) for k, v in (data.get("untyped_object_classes") or {}).items()},
        geographical_topics=list(data.get("geographical_topics") or []),
        false_premise_types=premise_types,
        answer_type_classes=inverted("answer_type_classes", ANSWER_TYPES),
        answer_type_relations=inverted("answer_type_relations", ANSWER_TYPES),
        categories_by_class=by_class,
        categories_by_relation=dict(categories.get("by_relation") or {}),
        categories_by_topic=dict(categories.get("by_topic") or {}),
        default_category=str(categories.get("default", "history")),
        country_relations=list(data.get("country_relations") or []),
        country_classes=list(data.get("country_classes") or []),
        type_nouns=dict(data.get("type_nouns") or {}),
        premise_words=_premise_words(path, asked, {str(k): v for k, v in (data.get("premise_words") or {}).items()}),
        premise_object_roles=_object_roles(path, functional, data.get("premise_object_roles") or {}),
        comparisons=comparisons, comparison_share=comparison_share,
        intersection_question=intersection_question, intersection_share=intersection_share,
        dated_bridges=dated_bridges, dated_role=dated_role,
        disjoint_premises=disjoint, disjoint_candidates=disjoint_candidates,
        second_hop_question=_second_hop(path, data.get("second_hop")),
    )
