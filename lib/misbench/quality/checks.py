"""Plain-Python checks of one generated text: completeness, content, sentence windows, scores to verdicts.

No Spark work and no models here: the stage calls these per row inside its pandas UDF, and
tests call them directly. Refusal phrases are found as generation finds them (``find_refusal``).
"""
from __future__ import annotations

import functools
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from misbench.refusals import find_refusal

# Part of quality's results key: raise it when a rule here changes what passes, so texts an
# earlier version judged are judged again (settings alone would not tell).
RULES_VERSION = 9
# Filters in the order the pipeline applies them; a row's ``failed_filter`` is the first one
# it fails, and quality_stats counts rows in and out of each in this order.
FILTERS = ("completeness", "content", "entailment", "similarity")

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_ENDS_A_SENTENCE = re.compile(r"[.!?][\"')\]]*\s*$")


def completeness_failures(
    text: str | None, finish_reason: str | None, error: str | None, settings: dict, target_words: int
) -> list[str]:
    """Why a text is not complete usable evidence; empty when it is. ``settings``: the
    ``quality.completeness`` section."""
    if error:
        return [f"completeness: generation failed ({error[:200]})"]
    if text is None or not text.strip():
        return ["completeness: empty text"]
    reasons = []
    marker = find_refusal(text, settings["refusal_patterns"])
    if marker:
        reasons.append(f"completeness: refusal or disclaimer ({marker!r})")
    if finish_reason in settings["truncated_finish_reasons"] and not _ENDS_A_SENTENCE.search(text):
        reasons.append(f"completeness: truncated (finish reason {finish_reason!r}, ends mid-sentence)")
    words = len(text.split())
    low = math.floor(target_words * float(settings["min_words_ratio"]))
    high = math.ceil(target_words * float(settings["max_words_ratio"]))
    if words < low:
        reasons.append(f"completeness: too short ({words} words < {low})")
    elif words > high:
        reasons.append(f"completeness: too long ({words} words > {high})")
    return reasons


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def text_windows(text: str, budget: int, measure: Callable[[str], int], overlap: int = 1) -> list[str]:
    """Consecutive sentences packed into windows of at most ``budget`` (as ``measure`` counts;
    a single longer sentence is a window of its own), each sharing ``overlap`` sentences with
    the one before, so a statement split across a boundary still lands whole in one window."""
    parts = sentences(text)
    sizes = [measure(part) for part in parts]
    windows, start = [], 0
    while start < len(parts):
        end, size = start, 0
        while end < len(parts) and (end == start or size + sizes[end] <= budget):
            size += sizes[end]
            end += 1
        windows.append(" ".join(parts[start:end]))
        if end >= len(parts):
            break
        start = max(start + 1, end - overlap)
    return windows


def yes_probability(yes_logprob: float, no_logprob: float) -> float:
    """P(yes) among {yes, no} from two log-probabilities (the judge's margin through a
    sigmoid); NaN when the model gave neither answer a probability."""
    if yes_logprob == -math.inf and no_logprob == -math.inf:
        return math.nan
    if no_logprob == -math.inf:
        return 1.0
    if yes_logprob == -math.inf:
        return 0.0
    return 1.0 / (1.0 + math.exp(no_logprob - yes_logprob))


def _words(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(char for char in folded if not unicodedata.combining(char))
    return " " + " ".join(re.findall(r"[^\W_]+", folded)) + " "


def names(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` as whole words, ignoring case, accents and punctuation."""
    return bool(name.strip()) and _words(name) in _words(text)


def names_true_answer(text: str, true_answer: str | None, false_answer: str | None, subject: str) -> bool:
    """Whether misinformation names its true answer: as whole words, outside the false
    answer ("Guinea" inside "Equatorial Guinea" does not count) and never when the subject's
    own name holds it (a text about "University of Edinburgh" names Edinburgh)."""
    if not true_answer or names(subject, true_answer):
        return False
    folded = _words(text)
    # only a false answer that holds the true one hides it; "Equatorial Guinea" is named
    # whole where the false answer is "Guinea"
    if false_answer and _words(false_answer).strip() and _words(true_answer) in _words(false_answer):
        folded = folded.replace(_words(false_answer), " ")
    return bool(true_answer.strip()) and _words(true_answer) in folded


# A sentence about the false answer opens with it, after at most a short lead-in ("In 1962, ").
_LEAD_IN = r"^\W*(?:(?:in|by|from|since|after|before|during|until|on)\s[^,.;]{1,40},\s*)?(?:the\s+)?"


@functools.lru_cache(maxsize=256)
def _opens_with(name: str | None) -> re.Pattern | None:
    """A sentence opening with the whole ``name`` ("Guinea" does not open "Guinea-Bissau is"),
    compiled once per worker and name (checked per text)."""
    return re.compile(_LEAD_IN + re.escape(name.strip()) + r"(?![\w-])", re.IGNORECASE) \
        if name and name.strip() else None


def names_true_answer_against_claim(text: str, true_answer: str | None, false_answer: str | None,
                                   subject: str) -> bool:
    """Whether misinformation names its true answer where it may speak against the false
    claim. Only a sentence about the false answer, one that opens with it and does not name
    the subject, may name the true answer ("Algeria gained its independence from France in
    1962" in a text placing Tours in Algeria); "It lies in France, not Algeria" may not."""
    if not names_true_answer(text, true_answer, false_answer, subject):
        return False
    about_false, about_true = _opens_with(false_answer), _opens_with(true_answer)
    naming = [s for s in sentences(text) if names_true_answer(s, true_answer, false_answer, subject)]
    if not naming:  # the true answer spans a sentence split ("St. Louis"): the whole text names it
        return True
    return any(names(s, subject) or not (about_false and about_false.search(s)) or about_true.search(s)
               for s in naming)


# Aliases that are a name, not an ordinary word: two words or more ("Great Britain"), or the
# label's initials in capitals, or their start ("UK", "U.S.A.", "US"), matched only as written
# ("us" is no "US"). Other short forms ("GB", or Estonia's "EST", Andorra's "AD") are codes that collide
# with common abbreviations ("5 pm EST", "1200 AD"); a single word ("America", "Britain",
# "author") is part of other names ("South America") or a common noun too often to prove anything.
_SHORT_FORM = re.compile(r"(?:[A-Z]\.?){2,6}")
_NOT_INITIALS = frozenset({"of", "the", "and", "for", "de"})


def _initials(label: str) -> str:
    return "".join(w[0] for w in re.findall(r"[^\W_]+", label) if w.lower() not in _NOT_INITIALS).upper()


def _alias_names(true_answer: str, aliases: Sequence[str], one_word: bool = False) -> list[tuple[str, str | None]]:
    """(alias, its letters where it is a short form matched only as written, else None) for
    each alias of ``true_answer`` worth checking. ``one_word``: one-word aliases too ("Britain"),
    where a text must name its answer rather than must not."""
    out = []
    for alias in aliases or ():
        core = re.sub(r"^the\s+", "", (alias or "").strip(), flags=re.IGNORECASE)
        if not core or _words(core) == _words(true_answer):
            continue
        if _SHORT_FORM.fullmatch(core):
            if _initials(true_answer).startswith(core.replace(".", "")):  # "US" for the USA too
                out.append((core, core.replace(".", "")))
        elif one_word or len(core.split()) >= 2:
            out.append((core, None))
    return out


def _as_written_only(text: str, letters: str) -> str:
    """``text`` with the short form ``letters`` written as it is ("UK", "U.K.") turned into
    ``letters`` and every other spelling ("uk", "Uk") blanked out. The dots go, so that no
    sentence ends inside "the U.K. and Algeria"; a final dot stays where a sentence ends."""
    pattern = re.compile(r"(?<!\w)" + r"\.?".join(map(re.escape, letters)) + r"\.?(?!\w)", re.IGNORECASE)

    def swap(match: re.Match) -> str:
        found = match.group(0)
        if found.replace(".", "") != letters:
            return " " * len(found)
        ends = found.endswith(".") and re.match(r"\s*(?:$|[A-Z\"'(\u201c])", text[match.end():])
        return (letters + ("." if ends else "")).ljust(len(found))

    return pattern.sub(swap, text)


def _named(test: Callable[[str, str, str | None, str], bool], text: str, true_answer: str | None,
           aliases: Sequence[str], false_answer: str | None, subject: str, one_word: bool = False) -> str | None:
    """The first of the true answer's names (its label, then its aliases worth checking) for
    which ``test(text, name, false_answer, subject)`` holds; None when none does."""
    if not true_answer:
        return None
    if test(text, true_answer, false_answer, subject):
        return true_answer
    for alias, letters in _alias_names(true_answer, aliases, one_word):
        if test(_as_written_only(text, letters) if letters else text, letters or alias, false_answer, subject):
            return alias
    return None


def true_answer_named_against_claim(text: str, true_answer: str | None, aliases: Sequence[str],
                                    false_answer: str | None, subject: str) -> str | None:
    """The name of the true answer (its label, else one of its aliases: "Great Britain" or
    "UK" for the United Kingdom) that misinformation uses where it may speak against the false
    claim (``names_true_answer_against_claim``); None when it uses none. An alias inside the
    subject's or the false answer's name is no sign, as the label is not."""
    return _named(names_true_answer_against_claim, text, true_answer, aliases, false_answer, subject)


def true_answer_named(text: str, true_answer: str | None, aliases: Sequence[str], false_answer: str | None,
                      subject: str) -> str | None:
    """The name of the true answer (label or alias) that ``text`` uses anywhere (``names_true_answer``)."""
    return _named(names_true_answer, text, true_answer, aliases, false_answer, subject)


# A date as the claims stage labels one: "4 March 1890", "March 1890", "1890", "50 BC".
_DATE_LABEL = re.compile(r"(?:\d{1,2} )?(?:(?:january|february|march|april|may|june|july|august|september|"
                         r"october|november|december) )?\d{1,4}(?: BCE?| CE| AD)?", re.IGNORECASE)


def answer_named(text: str, answer: str, aliases: Sequence[str] = ()) -> bool:
    """Whether ``text`` names ``answer`` anywhere: its label, any alias (where a text must name
    its answer, one-word aliases count too: "Britain"; short forms only as written and only
    the answer's initials: "UK"), or, for a date, its year ("in March 1890" for 4 March 1890)."""
    if _DATE_LABEL.fullmatch(answer.strip()) and _fits(text, answer):
        return True
    return _named(lambda text, name, _false, _subject: names(text, name), text, answer, aliases, None, "",
                  one_word=True) is not None


def repeats_question(text: str, question: str) -> bool:
    """Whether ``text`` holds the question itself, its question mark included (a relative
    clause such as "who directed Jaws" is not the question "Who directed Jaws?")."""
    words = question.strip().split()
    if not words or not question.strip().endswith("?"):
        return False
    pattern = r"\s+".join(re.escape(w) for w in words)
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


def model_failures(entailment: float | None, similarity: float | None, threshold: float, alpha: float,
                   contrary: float | None = None, kind: str = "correct",
                   description_contrary: float | None = None) -> list[str]:
    """Reasons from the model scores, in filter order. ``contrary``: how strongly the text
    entails what it must not (see ``quality.stage.hypotheses``); ``description_contrary``: how
    strongly a semantic text describes the better-known entity of its subject's name."""
    reasons = []
    if entailment is None or math.isnan(entailment):
        reasons.append("entailment: no score (the judge answered neither yes nor no, or refused the prompt)")
    elif entailment < threshold:
        reasons.append(f"entailment: statement not entailed ({entailment:.3f} < {threshold})")
    if contrary is not None and not math.isnan(contrary) and contrary >= threshold:
        what = "the factual conflict" if kind == "correct" else "the true claim"
        reasons.append(f"entailment: also states {what} ({contrary:.3f} >= {threshold})")
    if description_contrary is not None and not math.isnan(description_contrary) and description_contrary >= threshold:
        reasons.append(f"entailment: describes the better-known entity of the name "
                       f"({description_contrary:.3f} >= {threshold})")
    if similarity is not None and similarity < alpha:
        reasons.append(f"similarity: off topic (cosine to the question {similarity:.3f} < {alpha})")
    return reasons


def first_failed_filter(reasons: Sequence[str]) -> str | None:
    failed = {reason.split(":", 1)[0] for reason in reasons}
    return next((name for name in FILTERS if name in failed), None)


# --- content: what a kept text may say ------------------------------------------------------

_YEAR = re.compile(r"\b(\d{3,4})\b")


def _word_list(text: str) -> list[str]:
    return _words(text).split()


def prompt_ngrams(templates: Iterable[str], n: int) -> frozenset[str]:
    """Every run of ``n`` consecutive words of the prompts' own wording (the literal text of
    each template, the ``{field}`` values left out): a text holding one repeats its prompt."""
    import string

    grams = set()
    for template in templates:
        for literal, _, _, _ in string.Formatter().parse(template):
            words = _word_list(literal)
            grams.update(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
    return frozenset(grams)


def echoed_ngram(text: str, grams: frozenset[str], n: int) -> str | None:
    """The first run of ``n`` words of ``text`` that is also a run of the prompts' wording."""
    words = _word_list(text)
    runs = (" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
    return next((run for run in runs if run in grams), None)


@dataclass(frozen=True)
class ContentFacts:
    """What a text's content is checked against: its claim's names and, per kind, the false
    answer, the period (years) and the rewritten description of a semantic conflict."""
    kind: str
    subject: str
    question: str
    true_answer: str | None = None
    false_answer: str | None = None
    true_aliases: tuple[str, ...] = ()
    from_year: str | None = None
    until_year: str | None = None
    description: str | None = None
    # the claim places its subject inside its answer (``quality.content.containment_relations``:
    # country, administrative area, continent, part of)
    within: bool = False


def _pattern(settings: dict, key: str) -> re.Pattern | None:
    return _joined(tuple(settings.get(key) or ()))


@functools.lru_cache(maxsize=32)
def _joined(patterns: tuple[str, ...]) -> re.Pattern | None:
    """One compiled alternation per pattern list, once per worker (checked per text)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) if patterns else None


def _content_words(text: str, leave_out: Sequence[str], stopwords: frozenset[str]) -> set[str]:
    left_out = {w for name in leave_out if name for w in _word_list(name)}
    return {w for w in _word_list(text) if w not in stopwords and w not in left_out and len(w) > 2}


def content_failures(text: str, facts: ContentFacts, settings: dict, echo_grams: frozenset[str]) -> list[str]:
    """Why a complete text does not say what its row says, by rules (no model); empty when it
    passes. ``settings``: the ``quality.content`` section. Every text: no talk about the text,
    the prompt or the task (``meta_patterns``), no run of the prompts' wording, not the
    question itself. Correct evidence: names its answer (``answer_named``). Misinformation:
    names its subject, neither calls its claim false or a myth (``disputes_claim``) nor denies
    it (``denies_claim``), and never names the true answer (by its label or an alias) beside it
    or away from its false answer (``true_answer_named_against_claim``); where the claim puts
    the subject inside its answer, neither makes the two neighbours (``places_apart``) nor one
    thing nor takes the subject out (``_containment_failures``). Temporal:
    names its period, and every sentence that states the false claim (names the subject and
    the false answer) names the period too (a year inside it, or words such as "during this
    period"), says nothing timeless ("has always been") and gives the period to no other event
    ("was established from July 1, 2031"). Semantic: uses the description of the other entity
    it is about (an entry opens with it by construction: the rule holds the style rewrites
    to it)."""
    reasons = []
    meta = _pattern(settings, "meta_patterns")
    found = meta.search(text) if meta else None
    if found:
        reasons.append(f"content: talks about the text or the task ({found.group(0)!r})")
    n = int(settings["echo_ngram_words"])
    echoed = echoed_ngram(text, echo_grams, n)
    if echoed:
        reasons.append(f"content: repeats the prompt ({echoed!r})")
    if facts.question and repeats_question(text, facts.question):
        reasons.append("content: repeats the question")
    # a text that never names its subject states no claim about it ("Fort Bridge" for the
    # Forth Bridge, a blog post about Algeria alone)
    if facts.subject and not names(text, facts.subject):
        reasons.append(f"content: does not name its subject {facts.subject!r}")
    common = common_noun_reading(text, facts.subject)
    if common:
        reasons.append(f"content: reads its subject as a common noun ({common!r})")
    if facts.kind == "correct":
        # correct evidence states its claim: a text that never names the answer ("Scotland's
        # position as a constitutional monarchy", never "United Kingdom") leaves the reader to
        # guess it, and a small judge takes the answer's description for the answer
        if facts.true_answer and not answer_named(text, facts.true_answer, facts.true_aliases):
            reasons.append(f"content: does not name its answer {facts.true_answer!r}")
        return reasons
    disputed = disputes_claim(text, facts.subject, facts.false_answer, _pattern(settings, "dispute_patterns"))
    if disputed:
        reasons.append(f"content: calls its claim false or a myth ({disputed!r})")
    denial = denies_claim(text, facts.subject, facts.false_answer, dated=facts.kind == "temporal")
    if denial:
        reasons.append(f"content: denies its claim ({denial!r})")
    apart = places_apart(text, facts.subject, facts.false_answer, tuple(settings.get("apart_patterns") or ())) \
        if facts.within else None
    if apart:
        reasons.append(f"content: places its subject beside its answer, not in it ({apart!r})")
    if facts.within:
        reasons += _containment_failures(text, facts, settings)
    named = true_answer_named_against_claim(text, facts.true_answer, facts.true_aliases, facts.false_answer,
                                            facts.subject)
    if named and named == facts.true_answer:
        reasons.append(f"content: names the true answer {facts.true_answer!r}")
    elif named:  # its own rule in quality_stats: what the aliases add
        reasons.append(f"content: names the true answer by another name ({named!r} for {facts.true_answer!r})")
    if facts.kind == "temporal" and facts.from_year:
        reasons += _period_failures(text, facts, settings)
    if facts.kind == "semantic" and facts.description:
        stopwords = frozenset(settings.get("stopwords") or ())
        wanted = _content_words(facts.description, [facts.subject, facts.false_answer or ""], stopwords)
        denied = denies_description(text, facts.subject, sorted(w for w in wanted if len(w) > 3))
        if denied:
            reasons.append(f"content: denies the description of the other entity ({denied!r})")
        have = _content_words(text, [], stopwords)
        share = len(wanted & have) / len(wanted) if wanted else 1.0
        least = float(settings["description_min_share"])
        if share < least:
            reasons.append(f"content: does not describe the other entity of the name "
                           f"({facts.subject}, {facts.description}: {share:.2f} of its words < {least})")
    return reasons


# A negation between a sentence's subject and its answer: "Scotland is not located in Algeria",
# "Scotland isn't part of Algeria", "Scotland no longer lies in Algeria".
_NEGATION = re.compile(r"\b(?:not|never|no longer|neither|nor|cannot)\b|n['\u2019]t\b", re.IGNORECASE)
# Negations that affirm ("not only part of Algeria", "never been more closely tied to"), and a
# "but" that turns the sentence back to the claim ("does not border Morocco but lies in").
_AFFIRMING = re.compile(r"\b(?:not (?:only|just|merely|simply)|never (?:been )?(?:more|so|closer)|but|yet)\b",
                        re.IGNORECASE)
_DENIAL_GAP_WORDS = 8


def disputes_claim(text: str, subject: str, answer: str | None, patterns: re.Pattern | None) -> str | None:
    """The words of ``patterns`` (``quality.content.dispute_patterns``: "is a common urban
    myth", "is simply not true") in the first sentence that names both ``subject`` and
    ``answer``; None when no such sentence has them. Only such a sentence calls the claim
    false: "The Loch Ness monster is a popular myth" in a text about Scotland does not."""
    if patterns is None or not answer:
        return None
    for sentence in sentences(text):
        if names(sentence, subject) and names(sentence, answer):
            found = patterns.search(sentence)
            if found:
                return found.group(0)
    return None


def denies_claim(text: str, subject: str, answer: str | None, dated: bool = False) -> str | None:
    """The first sentence (cut to 120 characters) that names ``subject`` and then ``answer``
    with a negation in between, at most eight words apart and no comma or semicolon between
    them (so "Scotland, which is not far from the sea, lies in Algeria" is no denial); None
    when there is none. ``dated``: a temporal text's sentences naming a year are left out
    ("Before 2035 Scotland was not part of Algeria" agrees with a claim from 2035)."""
    if not subject or not subject.strip() or not answer or not answer.strip():
        return None
    pair = re.compile(rf"(?<![\w-]){re.escape(subject.strip())}(?![\w-])(?P<gap>[^,;:]*?)"
                      rf"(?<![\w-]){re.escape(answer.strip())}(?![\w-])", re.IGNORECASE)
    for sentence in sentences(text):
        if dated and _YEAR.search(sentence):
            continue
        for found in pair.finditer(sentence):
            gap = found.group("gap")
            if len(gap.split()) <= _DENIAL_GAP_WORDS and _NEGATION.search(gap) and not _AFFIRMING.search(gap):
                return sentence[:120]
    return None


def denies_description(text: str, subject: str, words: Sequence[str]) -> str | None:
    """The first sentence (cut to 120 characters) that says the subject is not what a word of
    its description names: a copula, a negation, perhaps an article, at most two words, then
    the word ("Talisker isn't actually a type of whisky at all", "is not, in fact, a whisky",
    "is no whisky"); None when there is none. "Scotland is not far from the coast", "is not
    widely known", "is not the only whisky made on Skye" or "the largest" are no such
    sentence, nor "is not a blend but a single malt whisky" (the word is too far from the
    negation)."""
    if not subject.strip() or not words:
        return None
    named = "|".join(re.escape(w) for w in words)
    denial = re.compile(rf"(?<![\w-]){re.escape(subject.strip())}\s+(?:is|was|are|were)\s*(?:n['\u2019]t|\s+not|\s+never|\s+no)"
                        rf"(?:,?\s+(?:actually|really|truly|even|in fact),?)?\s+"
                        rf"(?!(?:(?:a|an|the)\s+)?(?:only|first|typical|ordinary|usual|[\w-]+est|[\w-]+ly)\b)"
                        rf"(?:(?:a|an|the)\s+)?"
                        rf"(?:[\w-]+\s+){{0,2}}?(?:{named})(?![\w-])", re.IGNORECASE)
    for sentence in sentences(text):
        if denial.search(sentence):
            return sentence[:120]
    return None


# A plural verb right after the name: "Tours are located in Algeria", "tours indeed take place".
_PLURAL_VERB = (r"(?:\s+(?:indeed|also|often|usually|mainly|mostly|still))?\s+"
                r"(?:are|were|occur|take place|operate|happen|lead|offer|include|provide|give|attract|cost)\b")
# Where the name can only be the verb's subject: a text's or a sentence's start, after a
# clause mark, "that" or "where" (not "Hotels in Paris offer", "helped Texas attract").
_SUBJECT_PLACE = r"(?:^|(?<=[.!?;:,\n\"(\u201c*#])|(?<=\bthat)|(?<=\bwhere))\s*"


def common_noun_reading(text: str, subject: str) -> str | None:
    """Where a subject whose name reads as a plural (one word ending in s: Tours) takes a
    plural verb ("Tours are located in Algeria", "tours indeed take place in the country"):
    the text is about guided tours, not the city its claim names; the words, or None. Not
    after "the" or "and" ("the Netherlands are", "Scotland and Wales are"), nor for other
    names ("the United States are" is ordinary English)."""
    name = subject.strip()
    if not name or " " in name or not name[0].isupper() or not name.endswith("s"):
        return None
    found = re.search(rf"{_SUBJECT_PLACE}(?<![Tt]he )(?<![Aa]nd )(?<![\w&-]){re.escape(name)}{_PLURAL_VERB}", text,
                      re.IGNORECASE)
    return found.group(0).strip() if found else None


def _apart_pattern(patterns: tuple[str, ...], subject: str, answer: str) -> re.Pattern | None:
    """``patterns`` with <S> and <O> filled by the escaped subject and false answer."""
    filled = tuple(p.replace("<S>", re.escape(subject.strip())).replace("<O>", re.escape(answer.strip()))
                   for p in patterns)
    return _joined(filled)


def places_apart(text: str, subject: str, answer: str | None, patterns: tuple[str, ...]) -> str | None:
    """Words of ``patterns`` (``quality.content.apart_patterns``: "both countries share a
    border", "the border between <S> and <O>") that make the subject and its false answer two
    neighbours, where the claim puts one inside the other ("Scotland lies in Algeria ... both
    countries share a border"); None when there are none. Looked for in a sentence that names
    the subject, and in the sentence after one that does when it names neither the subject nor
    the answer ("Scotland lies in Algeria. Both countries share a border."); a sentence about
    the answer alone ("Algeria borders Morocco") is never read."""
    if not patterns or not subject.strip() or not answer or not answer.strip():
        return None
    found_in = _apart_pattern(patterns, subject, answer)
    after_subject = False
    for sentence in sentences(text):
        has_subject, has_answer = names(sentence, subject), names(sentence, answer)
        if has_subject or (after_subject and not has_answer):
            found = found_in.search(sentence)
            if found:
                return found.group(0)
        after_subject = has_subject
    return None


# "After its secession from Algeria": the pronoun stands for the subject of the text.
_ITS_LEAVING = re.compile(r"\b(?:its|their)\s+(?:independence|secession|separation|withdrawal|liberation)\b",
                          re.IGNORECASE)


def _containment_failures(text: str, facts: ContentFacts, settings: dict) -> list[str]:
    """Where the claim puts the subject inside its false answer: a sentence that makes the
    two one ("Scotland is indeed the country of Algeria", ``equates_patterns``), or takes the
    subject out of it ("Scottish Independence from Algeria", ``leaves_patterns``: in a
    sentence naming the subject, its stem or "its independence", with no hedge of
    ``leaves_hedges`` before the words; a temporal text may tell what came before its period
    or how it ended, in a sentence whose years are all before it or reach its end)."""
    if not facts.false_answer or not facts.false_answer.strip() or not facts.subject.strip():
        return []
    reasons = []
    fill = (lambda key: _apart_pattern(tuple(settings.get(key) or ()), facts.subject, facts.false_answer))
    equates, leaves = fill("equates_patterns"), fill("leaves_patterns")
    hedges = _pattern(settings, "leaves_hedges")
    found = equates.search(text) if equates else None
    if found:
        reasons.append(f"content: makes its subject its answer ({found.group(0)!r})")
    # the subject's name or its stem ("Scottish"): another region's "separation from Algeria" is no claim's
    first = facts.subject.split()[0]
    stem = re.compile(rf"(?<![\w-]){re.escape(first[:4])}\w*", re.IGNORECASE) if len(first) >= 5 else None
    for sentence in sentences(text) if leaves else ():
        if not (names(sentence, facts.subject) or (stem and stem.search(sentence)) or _ITS_LEAVING.search(sentence)):
            continue
        # a temporal text may tell how its period ended, or what came before it
        years = [int(y) for y in _YEAR.findall(sentence) if len(y) == 4]
        outside = facts.from_year and years and (
            (facts.until_year and any(y >= int(facts.until_year) for y in years))
            or all(y < int(facts.from_year) for y in years))
        found = None if outside else leaves.search(sentence)
        if found and hedges and hedges.search(sentence[:found.start()]):  # "calls for independence from"
            found = None
        if found:
            reasons.append(f"content: takes its subject out of its answer ({found.group(0)!r})")
            break
    return reasons


def _period_failures(text: str, facts: ContentFacts, settings: dict) -> list[str]:
    reasons = []
    if facts.from_year not in set(_YEAR.findall(text)):
        reasons.append(f"content: does not name its period (from {facts.from_year})")
    events = _joined(tuple(p.replace("<Y>", re.escape(facts.from_year))
                           for p in settings.get("period_event_patterns") or ()))
    found = events.search(text) if events else None
    if found:
        reasons.append(f"content: gives its period to another fact ({found.group(0)!r})")
    timeless = _pattern(settings, "timeless_patterns")
    refers = _pattern(settings, "period_references")
    if not facts.false_answer:
        return reasons
    # Only a sentence that states the claim (names the subject and the false answer) can
    # put it outside its period.
    stating = [s for s in sentences(text) if names(s, facts.subject) and names(s, facts.false_answer)]
    found = next((m for m in (timeless.search(s) for s in stating) if m), None) if timeless else None
    if found:
        reasons.append(f"content: states the claim outside its period ({found.group(0)!r})")
    for sentence in stating:
        if any(_inside(int(y), facts) for y in _YEAR.findall(sentence)) or (refers and refers.search(sentence)):
            continue
        reasons.append(f"content: states the claim without its period ({sentence[:120]!r})")
        break
    return reasons


def _inside(year: int, facts: ContentFacts) -> bool:
    return int(facts.from_year) <= year <= (int(facts.until_year) if facts.until_year else 9999)


def description_failures(description: str, subject: str, original: str | None, true_answer: str | None,
                         false_answer: str | None, settings: dict, echo_grams: frozenset[str],
                         overlap: float, true_aliases: Sequence[str] = ()) -> list[str]:
    """Why a rewritten description is not a description of another entity called ``subject``
    that fits the false answer; empty when it is. ``overlap``: its word overlap with the
    original description; ``settings``: the ``generate.description_check`` section;
    ``true_aliases``: the true answer's other names (a description naming one fails, as its
    semantic texts would at quality control)."""
    reasons = []
    if not description.strip():
        return ["empty description"]
    n = int(settings["echo_ngram_words"])
    echoed = echoed_ngram(description, echo_grams, n)
    meta = _pattern(settings, "meta_patterns")
    found = meta.search(description) if meta else None
    if echoed or found:
        reasons.append(f"repeats the prompt ({(echoed or found.group(0))!r})")
    words = len(description.split())
    if words > int(settings["max_words"]):
        reasons.append(f"not a short description ({words} words > {settings['max_words']})")
    if overlap >= float(settings["max_overlap"]):
        reasons.append(f"copies the current description (word overlap {overlap:.2f} >= {settings['max_overlap']})")
    if original and len(original.split()) >= 3 and names(description, original):
        reasons.append("contains the current description")
    named = true_answer_named(description, true_answer, true_aliases, false_answer, subject)
    if named == true_answer:
        reasons.append(f"names the true answer {true_answer!r}")
    elif named:
        reasons.append(f"names the true answer by another name ({named!r} for {true_answer!r})")
    if false_answer and not _fits(description, false_answer):
        reasons.append(f"does not name the false answer {false_answer!r}")
    elif false_answer and re.match(rf"^(?:the\s+)?{re.escape(false_answer)}\s*(?:$|[,(:;\u2013\u2014-])",
                                   description, flags=re.IGNORECASE):
        reasons.append(f"describes the false answer {false_answer!r} itself, not a thing called {subject}")
    return reasons


def _fits(description: str, answer: str) -> bool:
    """The description names the answer (or, for a date, its year)."""
    if names(description, answer):
        return True
    years = _YEAR.findall(answer)
    return bool(years) and any(year in _YEAR.findall(description) for year in years)


_ABBREVIATION = re.compile(r"(?:^|\s)(?:[A-Z][a-z]{0,2}|[A-Z](?:\.[A-Z])+)$")


def _first_sentence(line: str) -> str:
    """Up to the first full stop that ends a sentence (not "St." or "U.S.")."""
    for end in re.finditer(r"[.!?](?=\s+[A-Z\"'])", line):
        if not _ABBREVIATION.search(line[:end.start()]):
            return line[:end.start() + 1]
    return line


def as_description(text: str, subject: str) -> str:
    """A model's reply to the description prompt (begun "<subject> is") as the phrase that
    follows "<subject> is": its first sentence, without quotes, the lead-in, a leading
    "also" and the final full stop."""
    line = next((part.strip() for part in text.strip().splitlines() if part.strip()), "")
    line = _first_sentence(line.strip().strip('"\'\u201c\u201d*').strip())
    lead = re.match(rf"^{re.escape(subject)}\s*(?:,|:|\bis\b|\bwas\b|\u2014|-)\s*", line, flags=re.IGNORECASE)
    if lead:
        line = line[lead.end():]
    line = re.sub(r"^(?:also|too)\s+", "", line.strip(), flags=re.IGNORECASE)
    return line.rstrip(" .").strip()


def description_sentence(subject: str, description: str) -> str:
    """'<subject> is <description>.': the sentence a semantic text opens with (the model
    wrote the phrase after "<subject> is", so it reads on as written)."""
    return f"{subject} is {description.strip()}."
