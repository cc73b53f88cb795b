"""A seeded synthetic Wikidata JSON dump of any size, shaped like the real one.

    python benchmarks/synthetic_dump.py --entities N --seed S --out FILE(.json | .json.bz2 | .json.gz)
    python benchmarks/synthetic_dump.py --next-version-of DUMP --changed 0.01 [--added A] [--removed R] --out FILE

or, from Python, ``write_dump(path, entities, seed)`` (returns a small dict of counts).

Same line format as the real dump (``[``, one entity JSON per line ending with ``,`` except
the last, ``]``), and the same entity structure that ``misbench.ingest.parse`` reads: labels,
descriptions and aliases (English and a few other languages), sitelinks, claims with
statement ids, ranks (preferred / normal / deprecated), main snaks of every kind (value,
``somevalue``, ``novalue``) with wikibase-entityid, time, quantity, string, monolingualtext and
globecoordinate values and their datatypes, qualifiers (P580 start, P582 end, P585 point in
time) and references. Property entities for the properties used come first.

What the graph holds (N entities in all, exactly):
- classes (``Q5`` human, ``Q515`` city, ``Q6256`` country, ... where conf/hoax.yaml names a
  real class, synthetic ids for the others) and properties;
- value entities the statements point at: countries, continents, languages, occupations,
  genres, awards, religions, parties, time zones, currencies, offices, military ranks and
  branches, fields, sports, leagues, international organisations, academies, degrees, record
  labels, series. Their number grows like sqrt(N) (with floors, so small dumps still offer
  same-type substitutes); countries as N/500 between 20 and 200;
- the bulk, interleaved in a fixed 100-slot pattern: people 38%, taxa 13%, scholarly
  articles 14%, films 7%, songs and albums 6%, books 5%, cities 6%, regions 1%, companies 4%,
  universities 1%, sports teams 2%, venues 1%, elections 1%, sports seasons 1%.

Shape, on purpose like the real dump:
- skewed objects (Zipf-like): a few countries hold most citizenships and locations, English
  is the language of nearly every scholarly article, a few occupations, genres, cities and
  directors take a large share of the statements, so joins on object ids are skewed;
- several values per (subject, relation) at realistic rates: people with two occupations,
  two citizenships (sometimes one preferred), co-directors, several cast members, authors,
  awards, borders;
- history: ended statements (P582 in the past: former spouses, citizenships, capitals,
  heads of state and government, mayors, coaches, chairs, employers, teams, parties), some
  deprecated statements, some unknown (``somevalue``) and absent (``novalue``) values, a few
  objects with no English label or missing from the dump;
- two-hop chains: families in blocks of six (grandparents, parents, children, in-laws),
  films -> directors / composers -> birth places and dates, books -> authors, songs ->
  performers, cities -> countries -> capitals, companies -> chairs, scientists -> doctoral
  advisors -> employers, countries -> heads of state.

Deterministic (the same N and seed give the same bytes; every choice is a hash of the seed
and the entity's position, so relations between entities agree without remembering them) and
streaming (one entity in memory at a time: 10^6 entities or more in constant memory).
"""
from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import math
import random
import sys
import time
from pathlib import Path

import orjson

M64 = (1 << 64) - 1
REFERENCE_YEAR = 2025  # nothing ends or happens after this (claims.reference_date is 2026-01-01)
ID_BASE = 20_000_000  # generated items are Q20000000 + position: clear of every class id below
SYNTHETIC_CLASS_BASE = 19_000_000
GREGORIAN = "http://www.wikidata.org/entity/Q1985727"
EARTH = "http://www.wikidata.org/entity/Q2"
LANGS = ("en", "de", "fr", "es", "it", "nl")
WIKIS = ("enwiki", "dewiki", "frwiki", "eswiki", "itwiki", "nlwiki", "plwiki", "ruwiki", "jawiki", "zhwiki",
         "ptwiki", "svwiki", "arwiki", "fawiki", "ukwiki", "cawiki", "viwiki", "kowiki", "fiwiki", "nowiki")

# --------------------------------------------------------------------------------------------
# hashing: every cross-entity choice is a pure function of (seed, tag, index)
# --------------------------------------------------------------------------------------------


def _mix(x: int) -> int:
    """splitmix64's finaliser."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class _Hash:
    def __init__(self, seed: int):
        self.base = _mix(seed & M64)

    def h(self, tag: int, i: int) -> int:
        return _mix(self.base ^ _mix((tag << 40) ^ i))

    def u(self, tag: int, i: int) -> float:
        return self.h(tag, i) / 18446744073709551616.0


def _zipf(u: float, n: int, s: float = 1.0) -> int:
    """Rank 0..n-1 with P(rank r) roughly proportional to 1/(r+1)^s (continuous inverse CDF)."""
    if n <= 1:
        return 0
    if abs(s - 1.0) < 1e-9:
        r = math.exp(u * math.log(n + 1)) - 1.0
    else:
        a = 1.0 - s
        r = ((((n + 1) ** a - 1.0) * u + 1.0) ** (1.0 / a)) - 1.0
    return min(n - 1, int(r))


# tags of cross-entity hashes
(T_ENTITY, T_FAMILY, T_FAMYEAR, T_MARRY, T_DIVORCE, T_BIRTH, T_GIVEN, T_CITY_REGION, T_REGION_COUNTRY,
 T_TZ, T_NOLABEL, T_DEAD, T_SOVEREIGN, T_LEAGUE_SPORT, T_TITLE, T_MISSING, T_GENDER_X, T_DEATHY) = range(1, 19)

# --------------------------------------------------------------------------------------------
# names: unique per position (bijective syllable numbering), so labels never collide by chance
# --------------------------------------------------------------------------------------------

_SYLLABLES = tuple(c + v for c in ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr",
                                   "gr", "kr", "st", "tr") for v in ("a", "e", "i", "o", "u"))  # 100, CV/CCV
_MALE = ("Adam", "Boris", "Carlos", "David", "Emil", "Felix", "Georg", "Hugo", "Ivan", "Jonas", "Karl", "Luca",
         "Marek", "Nils", "Oskar", "Pavel", "Rafael", "Samuel", "Tomas", "Viktor", "Walter", "Yusuf", "Anton", "Bruno",
         "Dario", "Elias", "Filip", "Henrik", "Igor", "Jakob", "Kenji", "Leon", "Mateo", "Omar", "Pedro", "Ruben")
_FEMALE = ("Anna", "Beatriz", "Clara", "Dora", "Elena", "Fatima", "Greta", "Hana", "Ines", "Julia", "Katja", "Lena",
           "Maria", "Nadia", "Olga", "Paula", "Rosa", "Sofia", "Tereza", "Vera", "Wanda", "Yara", "Alma", "Bianca",
           "Carmen", "Daria", "Eva", "Flora", "Helga", "Irina", "Jana", "Kira", "Lucia", "Mira", "Nora", "Petra")
_NOUNS = ("River", "Night", "Garden", "Empire", "Letters", "Winter", "Harbor", "Road", "Mirror", "Stone", "Voyage",
          "Island", "Silence", "Crown", "Tide", "Lantern", "Orchard", "Frontier", "Echo", "Summer")
_COMMON_TITLES = ("Homecoming", "The Return", "Crossroads", "Awakening", "Legacy", "Outsider", "Reunion", "Paradise")


def _word(n: int) -> str:
    """A pronounceable word for n >= 0, different for every n (at least two syllables).

    n in base 100 (bijective: one digit string per n), each digit shifted by its place and
    the digits before it (invertible, so still one word per n) so that neighbouring numbers
    do not share their leading syllables."""
    base = len(_SYLLABLES)
    n += base
    digits = []
    while n:
        n, digit = divmod(n, base)
        digits.append(digit)
    digits.reverse()
    out, carry = [], 0
    for place, digit in enumerate(reversed(digits)):  # least significant first
        carry = (digit + 37 * place + 13 * carry + 11) % base
        out.append(_SYLLABLES[carry])
    return "".join(out).capitalize()


def _name(number: int) -> str:
    """The name word of a generated entity (unique: one per position in the file)."""
    return _word(number - ID_BASE)


# --------------------------------------------------------------------------------------------
# vocabulary: properties, classes, value kinds, the bulk pattern
# --------------------------------------------------------------------------------------------

PROPERTIES = {  # id: (English label, datatype)
    "P17": ("country", "wikibase-item"), "P19": ("place of birth", "wikibase-item"),
    "P20": ("place of death", "wikibase-item"), "P21": ("sex or gender", "wikibase-item"),
    "P22": ("father", "wikibase-item"), "P25": ("mother", "wikibase-item"), "P26": ("spouse", "wikibase-item"),
    "P27": ("country of citizenship", "wikibase-item"), "P30": ("continent", "wikibase-item"),
    "P31": ("instance of", "wikibase-item"), "P35": ("head of state", "wikibase-item"),
    "P36": ("capital", "wikibase-item"), "P37": ("official language", "wikibase-item"),
    "P38": ("currency", "wikibase-item"), "P39": ("position held", "wikibase-item"),
    "P40": ("child", "wikibase-item"), "P47": ("shares border with", "wikibase-item"),
    "P50": ("author", "wikibase-item"), "P54": ("member of sports team", "wikibase-item"),
    "P57": ("director", "wikibase-item"), "P69": ("educated at", "wikibase-item"),
    "P86": ("composer", "wikibase-item"), "P101": ("field of work", "wikibase-item"),
    "P102": ("member of political party", "wikibase-item"), "P105": ("taxon rank", "wikibase-item"),
    "P106": ("occupation", "wikibase-item"), "P108": ("employer", "wikibase-item"),
    "P115": ("home venue", "wikibase-item"), "P118": ("league", "wikibase-item"),
    "P127": ("owned by", "wikibase-item"), "P131": ("located in the administrative territorial entity", "wikibase-item"),
    "P136": ("genre", "wikibase-item"), "P138": ("named after", "wikibase-item"),
    "P140": ("religion or worldview", "wikibase-item"), "P159": ("headquarters location", "wikibase-item"),
    "P161": ("cast member", "wikibase-item"), "P166": ("award received", "wikibase-item"),
    "P171": ("parent taxon", "wikibase-item"), "P175": ("performer", "wikibase-item"),
    "P179": ("part of the series", "wikibase-item"), "P184": ("doctoral advisor", "wikibase-item"),
    "P190": ("twinned administrative body", "wikibase-item"), "P241": ("military branch", "wikibase-item"),
    "P248": ("stated in", "wikibase-item"), "P264": ("record label", "wikibase-item"),
    "P272": ("production company", "wikibase-item"), "P279": ("subclass of", "wikibase-item"),
    "P286": ("head coach", "wikibase-item"), "P361": ("part of", "wikibase-item"),
    "P364": ("original language of film or TV show", "wikibase-item"),
    "P407": ("language of work or name", "wikibase-item"), "P410": ("military rank", "wikibase-item"),
    "P421": ("located in time zone", "wikibase-item"), "P463": ("member of", "wikibase-item"),
    "P488": ("chairperson", "wikibase-item"), "P495": ("country of origin", "wikibase-item"),
    "P512": ("academic degree", "wikibase-item"), "P541": ("office contested", "wikibase-item"),
    "P551": ("residence", "wikibase-item"), "P641": ("sport", "wikibase-item"),
    "P664": ("organizer", "wikibase-item"), "P710": ("participant", "wikibase-item"),
    "P750": ("distributed by", "wikibase-item"), "P937": ("work location", "wikibase-item"),
    "P1344": ("participant in", "wikibase-item"), "P1346": ("winner", "wikibase-item"),
    "P1923": ("participating team", "wikibase-item"), "P2632": ("place of detention", "wikibase-item"),
    "P3373": ("sibling", "wikibase-item"), "P3450": ("sports season of league or competition", "wikibase-item"),
    "P155": ("follows", "wikibase-item"), "P6": ("head of government", "wikibase-item"),
    "P569": ("date of birth", "time"), "P570": ("date of death", "time"), "P571": ("inception", "time"),
    "P577": ("publication date", "time"), "P580": ("start time", "time"), "P582": ("end time", "time"),
    "P585": ("point in time", "time"), "P1082": ("population", "quantity"), "P1083": ("maximum capacity", "quantity"),
    "P1128": ("employees", "quantity"), "P2044": ("elevation above sea level", "quantity"),
    "P2047": ("duration", "quantity"), "P625": ("coordinate location", "globe-coordinate"),
    "P1476": ("title", "monolingualtext"), "P1448": ("official name", "monolingualtext"),
    "P1843": ("taxon common name", "monolingualtext"), "P18": ("image", "commonsMedia"),
    "P214": ("VIAF ID", "external-id"), "P213": ("ISNI", "external-id"), "P646": ("Freebase ID", "external-id"),
    "P345": ("IMDb ID", "external-id"), "P356": ("DOI", "external-id"), "P212": ("ISBN-13", "external-id"),
    "P297": ("ISO 3166-1 alpha-2 code", "external-id"), "P225": ("taxon name", "string"),
    "P2093": ("author name string", "string"), "P281": ("postal code", "string"), "P856": ("official website", "url"),
}

# Classes: real ids where conf/hoax.yaml names the class, synthetic ids (19000000 + k) elsewhere.
CLASSES = [  # key, id or None (synthetic), label
    ("human", "Q5", "human"), ("city", "Q515", "city"), ("country", "Q6256", "country"),
    ("sovereign", "Q3624078", "sovereign state"), ("film", "Q11424", "film"), ("song", "Q7366", "song"),
    ("album", "Q482994", "album"), ("book", "Q571", "book"), ("company", "Q4830453", "business"),
    ("university", "Q3918", "university"), ("season", "Q27020041", "sports season"),
    ("party", "Q7278", "political party"), ("taxon", "Q16521", "taxon"),
    ("article", None, "scholarly article"), ("region", None, "first-level administrative division"),
    ("continent", None, "continent"), ("language", None, "language"), ("occupation", None, "occupation"),
    ("film_genre", None, "film genre"), ("music_genre", None, "music genre"),
    ("literary_genre", None, "literary genre"), ("award", None, "award"), ("religion", None, "religion"),
    ("time_zone", None, "time zone"), ("currency", None, "currency"), ("position", None, "public office"),
    ("military_rank", None, "military rank"), ("military_branch", None, "military branch"),
    ("field", None, "academic discipline"), ("sport", None, "sport"), ("league", None, "sports league"),
    ("intl_org", None, "international organization"), ("academy", None, "academy of sciences"),
    ("degree", None, "academic degree"), ("record_label", None, "record label"),
    ("film_series", None, "film series"), ("book_series", None, "book series"), ("team", None, "sports team"),
    ("venue", None, "stadium"), ("election", None, "election"), ("gender", None, "sex or gender"),
    ("taxon_rank", None, "taxonomic rank"), ("database", None, "database"),
]

# Value kinds: key, class key, factor c (count ~ c * sqrt(N)), floor, cap, label suffix, description.
VALUE_KINDS = [
    ("gender", "gender", 0, 2, 2, "", "sex or gender"),
    ("taxon_rank", "taxon_rank", 0, 3, 3, "", "taxonomic rank"),
    ("database", "database", 0, 5, 5, " Database", "online database"),
    ("continent", "continent", 0, 6, 6, "", "continent"),
    ("country", "country", None, 20, 200, "ia", "country"),
    ("language", "language", 0.3, 20, 7000, "ish", "language"),
    ("occupation", "occupation", 0.5, 40, 20000, "", "occupation"),
    ("film_genre", "film_genre", 0.1, 15, 2000, " film", "film genre"),
    ("music_genre", "music_genre", 0.1, 15, 2000, " music", "music genre"),
    ("literary_genre", "literary_genre", 0.05, 10, 1000, " fiction", "literary genre"),
    ("award", "award", 0.3, 20, 30000, " Prize", "award"),
    ("religion", "religion", 0.03, 10, 60, "ism", "religion"),
    ("party", "party", 0.2, 20, 10000, " Party", "political party"),
    ("time_zone", "time_zone", 0.02, 12, 40, " Time", "time zone"),
    ("currency", "currency", 0.1, 12, 180, " dollar", "currency"),
    ("position", "position", 0.2, 20, 20000, " Chancellor", "public office"),
    ("military_rank", "military_rank", 0.03, 10, 60, " Marshal", "military rank"),
    ("military_branch", "military_branch", 0.05, 10, 300, " Guard", "military branch"),
    ("field", "field", 0.2, 20, 5000, "ology", "academic discipline"),
    ("sport", "sport", 0.03, 10, 120, "ball", "sport"),
    ("league", "league", 0.1, 10, 3000, " League", "sports league"),
    ("intl_org", "intl_org", 0.03, 10, 300, " Union", "international organization"),
    ("academy", "academy", 0.05, 8, 500, " Academy", "academy of sciences"),
    ("degree", "degree", 0.02, 8, 40, " Degree", "academic degree"),
    ("record_label", "record_label", 0.1, 10, 5000, " Records", "record label"),
    ("film_series", "film_series", 0.1, 10, 5000, " saga", "film series"),
    ("book_series", "book_series", 0.1, 10, 5000, " chronicles", "book series"),
]

BULK = [  # kind, slots out of 100
    ("person", 38), ("taxon", 13), ("article", 14), ("film", 7), ("song", 3), ("album", 3), ("book", 5),
    ("city", 6), ("region", 1), ("company", 4), ("university", 1), ("team", 2), ("venue", 1), ("election", 1),
    ("season", 1),
]
assert sum(n for _, n in BULK) == 100


def _pattern() -> list[str]:
    """The 100 slots, interleaved (largest remainder spread) so every stretch of the file mixes kinds."""
    slots = []
    credit = {kind: 0.0 for kind, _ in BULK}
    for _ in range(100):
        for kind, share in BULK:
            credit[kind] += share / 100
        kind = max(credit, key=lambda k: credit[k])
        credit[kind] -= 1
        slots.append(kind)
    return slots


# person roles by index mod 20
ROLE = (["director", "actor", "actor", "singer", "writer", "composer", "athlete", "athlete", "politician",
         "scientist", "scientist", "military"] + ["other"] * 8)
ROLE_OCCUPATION = {"actor": 0, "singer": 1, "writer": 2, "director": 3, "athlete": 4, "politician": 5,
                   "composer": 6, "scientist": 7, "military": 8}
OCCUPATION_NAMES = ("actor", "singer", "writer", "film director", "association football player", "politician",
                    "composer", "researcher", "military officer", "painter", "journalist", "lawyer", "teacher",
                    "engineer", "physician", "architect", "photographer", "economist", "poet", "historian")


class Layout:
    """Where each kind of entity lives in the file, and the ids of the k-th entity of a kind."""

    def __init__(self, entities: int):
        self.n = entities
        root = math.sqrt(entities)
        self.properties = sorted(PROPERTIES, key=lambda p: int(p[1:]))
        self.class_ids = {}
        synthetic = 0
        for key, qid, _ in CLASSES:
            if qid is None:
                synthetic += 1
                qid = f"Q{SYNTHETIC_CLASS_BASE + synthetic}"
            self.class_ids[key] = qid
        self.value_counts = {}
        for kind, _, factor, floor, cap, _, _ in VALUE_KINDS:
            if kind == "country":
                count = entities // 500
            else:
                count = int(factor * root) if factor else floor
            self.value_counts[kind] = max(floor, min(cap, count))
        position = len(self.properties) + len(CLASSES)
        self.value_start = {}
        for kind, *_ in VALUE_KINDS:
            self.value_start[kind] = position
            position += self.value_counts[kind]
        self.bulk_start = position
        self.bulk = entities - position
        if self.bulk < 1000:
            raise ValueError(f"--entities {entities} is too small: at least {position + 1000}")
        self.pattern = _pattern()
        self.slots = {kind: [i for i, k in enumerate(self.pattern) if k == kind] for kind, _ in BULK}
        full, rest = divmod(self.bulk, 100)
        self.counts = dict(self.value_counts)
        for kind, share in BULK:
            self.counts[kind] = full * share + sum(1 for s in self.slots[kind] if s < rest)
        self.fixed = len(self.properties) + len(CLASSES)

    def number(self, kind: str, k: int) -> int:
        """Numeric id of the k-th entity of a value or bulk kind."""
        if kind in self.value_start:
            return ID_BASE + self.value_start[kind] + k
        slots = self.slots[kind]
        t = (k // len(slots)) * 100 + slots[k % len(slots)]
        return ID_BASE + self.bulk_start + t

    def kind_at(self, position: int) -> tuple[str, int]:
        """(kind, k) of the entity at a file position (values and bulk only)."""
        if position >= self.bulk_start:
            t = position - self.bulk_start
            kind = self.pattern[t % 100]
            slots = self.slots[kind]
            return kind, (t // 100) * len(slots) + slots.index(t % 100)
        for kind, *_ in reversed(VALUE_KINDS):
            if position >= self.value_start[kind]:
                return kind, position - self.value_start[kind]
        raise ValueError(position)


# --------------------------------------------------------------------------------------------
# the graph: every entity built from (seed, position), cross-references by pure functions
# --------------------------------------------------------------------------------------------


def _time(year: int, month: int = 1, day: int = 1, precision: int = 11) -> dict:
    sign = "-" if year < 0 else "+"
    if precision < 11:
        day = 0
    if precision < 10:
        month = 0
    return {"time": f"{sign}{abs(year):04d}-{month:02d}-{day:02d}T00:00:00Z", "timezone": 0, "before": 0,
            "after": 0, "precision": precision, "calendarmodel": GREGORIAN}


class Graph:
    def __init__(self, entities: int, seed: int):
        self.layout = Layout(entities)
        self.hash = _Hash(seed)
        self.seed = seed
        c = self.layout.counts
        self.persons = c["person"]
        self.role_count = {role: sum(1 for k in range(self.persons % 20) if ROLE[k] == role)
                           + (self.persons // 20) * ROLE.count(role) for role in set(ROLE)}
        self.role_slots = {role: [i for i, r in enumerate(ROLE) if r == role] for role in set(ROLE)}
        self.statements = 0
        self.entity_valued = 0

    # ---- cross-entity functions ------------------------------------------------------------

    def q(self, kind: str, k: int) -> int:
        return self.layout.number(kind, k)

    def person_of_role(self, role: str, k: int) -> int:
        """Person index (0..persons-1) of the k-th person with a role."""
        slots = self.role_slots[role]
        return (k // len(slots)) * 20 + slots[k % len(slots)]

    def pick_role(self, role: str, u: float, s: float = 1.0) -> int:
        return self.person_of_role(role, _zipf(u, self.role_count[role], s))

    def family(self, k: int) -> bool:
        block = k // 6
        return (block + 1) * 6 <= self.persons and self.hash.u(T_FAMILY, block) < 0.2

    def birth_year(self, k: int) -> int:
        if self.family(k):
            base = 1850 + int(self.hash.u(T_FAMYEAR, k // 6) * 110)
            jitter = int(self.hash.u(T_BIRTH, k) * 5) - 2
            return base + (0, 0, 27, 26, 55, 57)[k % 6] + jitter
        u = self.hash.u(T_BIRTH, k)
        if u < 0.01:
            return 100 + int(u * 100 * 1500)  # a few born between 100 and 1600
        return 2005 - int(((u - 0.01) / 0.99) ** 2 * 205)  # mostly the last century

    def death_year(self, k: int) -> int | None:
        born = self.birth_year(k)
        u = self.hash.u(T_DEATHY, k)
        died = born + 30 + int(u * 65)
        if died > REFERENCE_YEAR or (born > 1950 and u > 0.05):
            return None
        return died

    def person_label(self, k: int) -> str:
        if self.family(k):
            block = k // 6
            family = _name(self.q("person", 6 * block))
            names = _MALE if k % 2 == 0 else _FEMALE
            given = names[(self.hash.h(T_GIVEN, block) + (k % 6) * 7) % len(names)]
        else:
            family = _name(self.q("person", k))
            names = _MALE if k % 2 == 0 else _FEMALE
            given = names[self.hash.h(T_GIVEN, k) % len(names)]
        return f"{given} {family}"

    def spouse(self, k: int) -> tuple[int, int, int | None] | None:
        """(spouse, start year, end year or None) of person k, symmetric."""
        if self.family(k):
            pos = k % 6
            if pos in (0, 1, 2, 3):
                partner = k ^ 1
                start = max(self.birth_year(k), self.birth_year(partner)) + 22
                return partner, start, None
            return None
        pair = k // 2
        partner = k ^ 1
        if partner >= self.persons or self.hash.u(T_MARRY, pair) >= 0.25:
            return None
        start = max(self.birth_year(k), self.birth_year(partner)) + 20 + int(self.hash.u(T_DIVORCE, pair) * 15)
        if start > REFERENCE_YEAR - 1:
            return None
        end = None
        if self.hash.u(T_DIVORCE, pair) < 0.2:
            end = min(REFERENCE_YEAR - 1, start + 1 + int(self.hash.u(T_DIVORCE, pair + 7) * 20))
        return partner, start, end

    def country_of_region(self, r: int) -> int:
        countries = self.layout.counts["country"]
        if r < countries:
            return r
        return _zipf(self.hash.u(T_REGION_COUNTRY, r), countries, 1.0)

    def region_of_city(self, j: int) -> int:
        countries = self.layout.counts["country"]
        if j < countries and j < self.layout.counts["region"]:
            return j  # the capital of country j lies in region j, which lies in country j
        return _zipf(self.hash.u(T_CITY_REGION, j), self.layout.counts["region"], 0.9)

    def country_of_city(self, j: int) -> int:
        return self.country_of_region(self.region_of_city(j))

    def time_zone(self, country: int) -> int:
        return _zipf(self.hash.u(T_TZ, country), self.layout.counts["time_zone"], 1.0)

    def has_label(self, number: int) -> bool:
        return self.hash.u(T_NOLABEL, number) >= 0.005

    def city_label(self, j: int) -> str:
        return _name(self.q("city", j))

    # ---- output ----------------------------------------------------------------------------

    def entity(self, position: int) -> dict:
        layout = self.layout
        if position < len(layout.properties):
            return self._property(layout.properties[position])
        if position < layout.fixed:
            key, qid, label = CLASSES[position - len(layout.properties)]
            return self._class(key, label, position)
        kind, k = layout.kind_at(position)
        e = _Entity(self, ID_BASE + position)
        if kind in layout.value_start:
            self._value(e, kind, k)
        else:
            getattr(self, f"_{kind}")(e, k)
        return e.done()

    def _property(self, pid: str) -> dict:
        label, datatype = PROPERTIES[pid]
        return {"type": "property", "datatype": datatype, "id": pid,
                "labels": {"en": {"language": "en", "value": label}},
                "descriptions": {"en": {"language": "en", "value": f"Wikidata property: {label}"}},
                "aliases": {}, "claims": {}}

    def _class(self, key: str, label: str, position: int) -> dict:
        qid = self.layout.class_ids[key]
        e = _Entity(self, int(qid[1:]), qid=qid, position=position)
        e.names(label, f"class of {label} entities", sitelinks=12, always_labelled=True)
        return e.done()

    def _value(self, e: "_Entity", kind: str, k: int) -> None:
        spec = next(v for v in VALUE_KINDS if v[0] == kind)
        _, class_key, _, _, _, suffix, description = spec
        rng = e.rng
        if kind == "gender":
            label = ("male", "female")[k]
        elif kind == "taxon_rank":
            label = ("species", "genus", "family")[k]
        elif kind == "occupation" and k < len(OCCUPATION_NAMES):
            label = OCCUPATION_NAMES[k]
        else:
            label = _name(e.number) + suffix
        sitelinks = max(0, int(60 / (k + 1) ** 0.6) - rng.randrange(3))
        e.names(label, description, sitelinks=sitelinks, alias=rng.random() < 0.15)
        e.item("P31", self.layout.class_ids[class_key])
        if kind in ("occupation", "film_genre", "music_genre", "field") and k > 10 and rng.random() < 0.2:
            e.item("P279", f"Q{self.q(kind, rng.randrange(k))}")  # a broader one: a link, never a substitute
        if kind in ("party", "league", "academy", "award"):
            e.item("P17", self.country_q(_zipf(rng.random(), self.layout.counts["country"])))
        if kind == "league":
            e.item("P641", f"Q{self.q('sport', self.league_sport(k))}")
        if kind == "country":
            self._country(e, k)

    def league_sport(self, league: int) -> int:
        return _zipf(self.hash.u(T_LEAGUE_SPORT, league), self.layout.counts["sport"], 1.0)

    def country_q(self, c: int) -> str:
        return f"Q{self.q('country', c)}"

    def city_q(self, j: int) -> str:
        return f"Q{self.q('city', j)}"

    def person_q(self, k: int) -> str:
        return f"Q{self.q('person', k)}"

    def zipf_q(self, kind: str, rng: random.Random, s: float = 1.0) -> str:
        return f"Q{self.q(kind, _zipf(rng.random(), self.layout.counts[kind], s))}"

    def uniform_q(self, kind: str, rng: random.Random, below: int | None = None) -> str:
        n = self.layout.counts[kind] if below is None else below
        return f"Q{self.q(kind, rng.randrange(max(1, n)))}"

    def _history(self, e: "_Entity", prop: str, current: str, former: str | None, rng: random.Random,
                 since: int) -> None:
        """A current value (with a start time) and possibly a former one that ended."""
        if former is not None and former != current:
            start = since + rng.randrange(1, 20)
            end = min(REFERENCE_YEAR - 1, start + rng.randrange(1, 15))
            e.item(prop, former, quals={"P580": _time(start, 1, 1, 9), "P582": _time(end, 1, 1, 9)})
            since = end
        e.item(prop, current, quals={"P580": _time(min(REFERENCE_YEAR - 1, since + rng.randrange(0, 5)),
                                                    rng.randrange(1, 13), rng.randrange(1, 29), 11)})

    # ---- value kinds with more to say ------------------------------------------------------

    def _country(self, e: "_Entity", c: int) -> None:
        rng, h = e.rng, self.hash
        n = self.layout.counts["country"]
        if h.u(T_SOVEREIGN, c) < 0.6:
            e.item("P31", self.layout.class_ids["sovereign"])
        capital = self.city_q(c)
        if rng.random() < 0.08:
            former = self.city_q(rng.randrange(self.layout.counts["city"]))
            if former != capital:
                e.item("P36", former, quals={"P582": _time(1800 + rng.randrange(200), 1, 1, 9)})
        e.item("P36", capital)
        e.item("P37", self.zipf_q("language", rng, 1.1))
        if rng.random() < 0.25:
            e.item("P37", self.zipf_q("language", rng, 1.1))
        if rng.random() < 0.06:
            e.item("P38", self.zipf_q("currency", rng), quals={"P582": _time(1990 + rng.randrange(20), 1, 1, 9)})
        e.item("P38", self.zipf_q("currency", rng, 1.2))
        e.item("P30", f"Q{self.q('continent', c % 6 if rng.random() < 0.9 else rng.randrange(6))}")
        since = 1950 + rng.randrange(60)
        for prop in ("P35", "P6"):
            former = self.person_q(self.pick_role("politician", rng.random(), 0.5)) if rng.random() < 0.6 else None
            self._history(e, prop, self.person_q(self.pick_role("politician", rng.random(), 0.5)), former, rng, since)
        if n >= 5:
            for step in (-2, -1, 1, 2):
                e.item("P47", self.country_q((c + step) % n))
        e.item("P421", f"Q{self.q('time_zone', self.time_zone(c))}")
        if rng.random() < 0.2:
            e.item("P421", self.zipf_q("time_zone", rng))
        for _ in range(rng.randrange(0, 4)):
            e.item("P463", self.zipf_q("intl_org", rng))
        e.quantity("P1082", rng.randrange(100_000, 300_000_000), point=REFERENCE_YEAR - rng.randrange(10))
        e.coordinate(rng)
        e.string("P297", _word(c)[:2].upper(), "external-id")
        e.monolingual("P1448", f"Republic of {e.label}" if e.label else "Republic")
        e.date("P571", _time(1200 + rng.randrange(800), 1, 1, 9))

    # ---- bulk kinds ------------------------------------------------------------------------

    def _person(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        role = ROLE[k % 20]
        born, died = self.birth_year(k), self.death_year(k)
        occupation = ROLE_OCCUPATION.get(role)
        occupations = self.layout.counts["occupation"]
        if occupation is None:
            occupation = 9 + _zipf(rng.random(), occupations - 9, 1.0)
        label = self.person_label(k)
        years = f"{born}-{died}" if died else f"born {born}"
        e.names(label, f"{OCCUPATION_NAMES[occupation] if occupation < len(OCCUPATION_NAMES) else 'person'} ({years})",
                sitelinks=min(40, int(rng.paretovariate(1.3)) - 1), alias=rng.random() < 0.1,
                alias_text=f"{label.split()[0][0]}. {label.split()[1]}")
        e.item("P31", "Q5")
        e.item("P21", f"Q{self.q('gender', k % 2)}")
        e.birth_date("P569", born, rng, deprecated_twin=rng.random() < 0.02)
        if died is not None:
            if rng.random() < 0.02:
                e.unknown("P570", "somevalue", "time")
            else:
                e.birth_date("P570", died, rng)
        if rng.random() < 0.85:
            e.item("P19", f"Q{self.q('city', _zipf(rng.random(), self.layout.counts['city'], 1.0))}")
        if died is not None and rng.random() < 0.6:
            e.item("P20", f"Q{self.q('city', _zipf(rng.random(), self.layout.counts['city'], 1.0))}")
        # citizenship: skewed to a few countries; some with two, some with a former one
        countries = self.layout.counts["country"]
        u = rng.random()
        if u < 0.92:
            first = _zipf(rng.random(), countries, 1.0)
            if u < 0.04:
                former = _zipf(rng.random(), countries, 1.0)
                if former != first:
                    e.item("P27", self.country_q(former),
                           quals={"P582": _time(max(born + 1, min(REFERENCE_YEAR - 1, born + rng.randrange(5, 40))), 1, 1, 9)})
            second = _zipf(rng.random(), countries, 1.0) if u > 0.85 else None
            if second is not None and second != first:
                preferred = u > 0.885
                e.item("P27", self.country_q(first), rank="preferred" if preferred else "normal")
                e.item("P27", self.country_q(second))
            else:
                e.item("P27", self.country_q(first))
            if rng.random() < 0.01:
                e.item("P27", self.country_q(rng.randrange(countries)), rank="deprecated")
        e.item("P106", f"Q{self.q('occupation', occupation)}")
        if rng.random() < 0.5:
            extra = 9 + _zipf(rng.random(), occupations - 9, 1.0)
            if extra != occupation:
                e.item("P106", f"Q{self.q('occupation', extra)}")
        if rng.random() < 0.45:
            e.item("P69", self.zipf_q("university", rng, 0.9))
            if rng.random() < 0.2:
                e.item("P69", self.zipf_q("university", rng, 0.9))
        if rng.random() < 0.3 and born > 1850:
            employer_kind = "university" if role == "scientist" else "company"
            former = self.zipf_q(employer_kind, rng, 0.9) if rng.random() < 0.4 else None
            self._history(e, "P108", self.zipf_q(employer_kind, rng, 0.9), former, rng, born + 22)
        if rng.random() < (0.3 if role in ("actor", "director", "scientist", "writer") else 0.06):
            for _ in range(rng.randrange(1, 4)):
                e.item("P166", self.zipf_q("award", rng, 1.0),
                       quals={"P585": _time(min(REFERENCE_YEAR - 1, born + rng.randrange(20, 70)), 1, 1, 9)})
        spouse = self.spouse(k)
        if spouse is not None:
            partner, start, end = spouse
            quals = {"P580": _time(start, 1, 1, 9)}
            if end is not None:
                quals["P582"] = _time(end, 1, 1, 9)
            e.item("P26", self.person_q(partner), quals=quals)
        elif rng.random() < 0.005:
            e.unknown("P26", "novalue")
        if self.family(k):
            block, pos = 6 * (k // 6), k % 6
            if pos in (0, 1):
                e.item("P40", self.person_q(block + 2))
            elif pos == 2:
                e.item("P22", self.person_q(block + 0))
                e.item("P25", self.person_q(block + 1))
            if pos in (2, 3):
                e.item("P40", self.person_q(block + 4))
                e.item("P40", self.person_q(block + 5))
            if pos in (4, 5):
                e.item("P22", self.person_q(block + 2))
                e.item("P25", self.person_q(block + 3))
                e.item("P3373", self.person_q(block + (9 - pos)))
        elif rng.random() < 0.01:
            e.unknown("P22", "somevalue")
        if role == "politician" or rng.random() < 0.03:
            former = self.zipf_q("party", rng, 1.0) if rng.random() < 0.2 else None
            self._history(e, "P102", self.zipf_q("party", rng, 1.0), former, rng, born + 20)
        if role == "politician":
            for _ in range(rng.randrange(1, 4)):
                start = min(REFERENCE_YEAR - 2, born + 25 + rng.randrange(40))
                e.item("P39", self.zipf_q("position", rng),
                       quals={"P580": _time(start, 1, 1, 9), "P582": _time(start + 1 + rng.randrange(8), 1, 1, 9)}
                       if rng.random() < 0.7 else {"P580": _time(start, 1, 1, 9)})
        if rng.random() < 0.08:
            e.item("P140", self.zipf_q("religion", rng, 1.2))
        if role == "athlete":
            teams = rng.randrange(1, 5)
            year = born + 17
            for index in range(teams):
                quals = {"P580": _time(min(year, REFERENCE_YEAR - 1), 1, 1, 9)}
                year += rng.randrange(1, 6)
                if index < teams - 1 or rng.random() < 0.5:
                    quals["P582"] = _time(min(year, REFERENCE_YEAR - 1), 1, 1, 9)
                e.item("P54", self.zipf_q("team", rng, 0.8), quals=quals)
            e.item("P641", self.zipf_q("sport", rng, 1.0))
            if rng.random() < 0.3:
                e.item("P1344", self.uniform_q("season", rng))
        if role == "scientist":
            e.item("P101", self.zipf_q("field", rng, 1.0))
            if rng.random() < 0.3:
                e.item("P101", self.zipf_q("field", rng, 1.0))
            rank = (k // 20) * 2 + (k % 20 - 9)
            if rank > 0 and rng.random() < 0.5:
                advisor = _zipf(rng.random(), rank, 0.8)
                e.item("P184", self.person_q(self.person_of_role("scientist", advisor)))
            if rng.random() < 0.2:
                e.item("P463", self.zipf_q("academy", rng))
            if rng.random() < 0.4:
                e.item("P512", self.zipf_q("degree", rng))
        if role == "military":
            e.item("P410", self.zipf_q("military_rank", rng))
            e.item("P241", self.zipf_q("military_branch", rng))
        if rng.random() < 0.08:
            e.item("P551", self.zipf_q("city", rng))
        if rng.random() < 0.08:
            e.item("P937", self.zipf_q("city", rng))
        if rng.random() < 0.005:
            e.item("P2632", self.zipf_q("city", rng))
        e.external_ids(rng, (("P214", 0.6), ("P213", 0.2), ("P646", 0.3)))
        if rng.random() < 0.2:
            e.string("P18", f"{label.replace(' ', '_')}_{rng.randrange(1000)}.jpg", "commonsMedia")

    def _work_title(self, e: "_Entity", k: int, kind: str) -> str:
        if self.hash.u(T_TITLE, e.number) < 0.02:
            return _COMMON_TITLES[self.hash.h(T_TITLE, e.number) % len(_COMMON_TITLES)]  # remakes, namesakes
        return f"{_name(e.number)} {_NOUNS[self.hash.h(T_TITLE, e.number) % len(_NOUNS)]}"

    def _film(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        title = self._work_title(e, k, "film")
        year = 1920 + int(rng.random() ** 0.5 * 105)
        e.names(title, f"{year} film", sitelinks=min(30, int(rng.paretovariate(1.5)) - 1))
        e.item("P31", "Q11424")
        e.item("P57", self.person_q(self.pick_role("director", rng.random(), 1.0)))
        if rng.random() < 0.08:
            e.item("P57", self.person_q(self.pick_role("director", rng.random(), 1.0)))
        for _ in range(rng.randrange(2, 7)):
            e.item("P161", self.person_q(self.pick_role("actor", rng.random(), 0.9)))
        e.item("P136", self.zipf_q("film_genre", rng, 1.0))
        if rng.random() < 0.4:
            e.item("P136", self.zipf_q("film_genre", rng, 1.0))
        e.item("P495", self.zipf_q("country", rng, 1.1))
        if rng.random() < 0.07:
            e.item("P495", self.zipf_q("country", rng, 1.1))
        e.item("P364", self.zipf_q("language", rng, 1.2))
        if rng.random() < 0.6:
            e.item("P272", self.zipf_q("company", rng, 1.0))
        if rng.random() < 0.5:
            e.item("P86", self.person_q(self.pick_role("composer", rng.random(), 1.0)))
        if rng.random() < 0.3:
            e.item("P750", self.zipf_q("company", rng, 1.0))
        e.date("P577", _time(year, rng.randrange(1, 13), rng.randrange(1, 29), 11 if rng.random() < 0.7 else 9))
        if rng.random() < 0.08:
            e.item("P179", self.zipf_q("film_series", rng))
            if k > 0:
                e.item("P155", f"Q{self.q('film', k - 1)}")
        e.quantity("P2047", rng.randrange(70, 200), unit="Q7727")
        e.monolingual("P1476", title)
        e.external_ids(rng, (("P345", 0.8), ("P646", 0.3)))

    def _song(self, e: "_Entity", k: int, album: bool = False) -> None:
        rng = e.rng
        title = self._work_title(e, k, "song")
        year = 1950 + int(rng.random() ** 0.5 * 75)
        e.names(title, f"{year} {'album' if album else 'song'}", sitelinks=min(20, int(rng.paretovariate(1.6)) - 1))
        e.item("P31", "Q482994" if album else "Q7366")
        e.item("P175", self.person_q(self.pick_role("singer", rng.random(), 1.0)))
        if rng.random() < 0.05:
            e.item("P175", self.person_q(self.pick_role("singer", rng.random(), 1.0)))
        e.item("P136", self.zipf_q("music_genre", rng, 1.0))
        e.item("P495", self.zipf_q("country", rng, 1.1))
        e.date("P577", _time(year, rng.randrange(1, 13), rng.randrange(1, 29), 11 if rng.random() < 0.6 else 9))
        e.item("P264", self.zipf_q("record_label", rng, 1.0))
        if not album:
            e.item("P407", self.zipf_q("language", rng, 1.3))
            if rng.random() < 0.3:
                e.item("P86", self.person_q(self.pick_role("composer", rng.random(), 1.0)))
            if rng.random() < 0.5:
                e.item("P361", f"Q{self.q('album', rng.randrange(self.layout.counts['album']))}")

    def _album(self, e: "_Entity", k: int) -> None:
        self._song(e, k, album=True)

    def _book(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        title = self._work_title(e, k, "book")
        year = 1800 + int(rng.random() ** 0.4 * 225)
        e.names(title, f"{year} novel", sitelinks=min(20, int(rng.paretovariate(1.6)) - 1))
        e.item("P31", "Q571")
        e.item("P50", self.person_q(self.pick_role("writer", rng.random(), 1.0)))
        if rng.random() < 0.05:
            e.item("P50", self.person_q(self.pick_role("writer", rng.random(), 1.0)))
        e.item("P136", self.zipf_q("literary_genre", rng, 1.0))
        e.item("P407", self.zipf_q("language", rng, 1.3))
        e.item("P495", self.zipf_q("country", rng, 1.1))
        e.date("P577", _time(year, 1, 1, 9))
        if rng.random() < 0.08:
            e.item("P179", self.zipf_q("book_series", rng))
            if k > 0:
                e.item("P155", f"Q{self.q('book', k - 1)}")
        e.monolingual("P1476", title)
        e.external_ids(rng, (("P212", 0.7),))

    def _article(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        field = _word(rng.randrange(10_000))
        title = f"On the {_NOUNS[rng.randrange(len(_NOUNS))].lower()} of {_name(e.number)} in {field}"
        year = 1950 + int(rng.random() ** 0.3 * 75)
        e.names(title, f"scholarly article published in {year}", sitelinks=0, languages=1)
        e.item("P31", self.layout.class_ids["article"])
        for _ in range(rng.randrange(1, 4)):
            e.item("P50", self.person_q(self.pick_role("scientist", rng.random(), 0.9)))
        for _ in range(rng.randrange(0, 6)):
            e.string("P2093", f"{_FEMALE[rng.randrange(len(_FEMALE))][0]}. {_word(rng.randrange(1_000_000))}", "string")
        # English for nearly all: one language object holds a large share of all statements
        e.item("P407", self.zipf_q("language", rng, 1.1) if rng.random() < 0.08 else f"Q{self.q('language', 0)}")
        e.monolingual("P1476", title)
        e.date("P577", _time(year, rng.randrange(1, 13), rng.randrange(1, 29), 11))
        e.string("P356", f"10.{1000 + rng.randrange(9000)}/{e.qid.lower()}", "external-id")

    def _city(self, e: "_Entity", j: int) -> None:
        rng = e.rng
        country = self.country_of_city(j)
        e.names(self.city_label(j), f"city in {_name(self.q('country', country))}ia",
                sitelinks=min(60, int(80 / (j + 1) ** 0.5) + rng.randrange(3)), alias=rng.random() < 0.1,
                alias_text=f"Old {self.city_label(j)}")
        e.item("P31", "Q515")
        if rng.random() < 0.01:
            former = self.country_q(_zipf(rng.random(), self.layout.counts["country"]))
            if former != self.country_q(country):
                e.item("P17", former, quals={"P582": _time(1900 + rng.randrange(100), 1, 1, 9)})
        e.item("P17", self.country_q(country))
        if rng.random() < 0.005:
            e.item("P17", self.country_q(rng.randrange(self.layout.counts["country"])), rank="deprecated")
        e.item("P131", f"Q{self.q('region', self.region_of_city(j))}")
        e.item("P421", f"Q{self.q('time_zone', self.time_zone(country))}")
        if rng.random() < 0.25:
            former = self.person_q(self.pick_role("politician", rng.random(), 0.3)) if rng.random() < 0.5 else None
            self._history(e, "P6", self.person_q(self.pick_role("politician", rng.random(), 0.3)), former, rng,
                          1990 + rng.randrange(25))
        if rng.random() < 0.06:
            e.item("P190", self.city_q(rng.randrange(self.layout.counts["city"])))
        if rng.random() < 0.03:
            e.item("P138", self.person_q(rng.randrange(self.persons)))
        e.quantity("P1082", int(rng.paretovariate(1.1) * 5000), point=REFERENCE_YEAR - rng.randrange(15))
        e.coordinate(rng)
        e.quantity("P2044", rng.randrange(0, 2500), unit="Q11573")
        e.string("P281", f"{rng.randrange(10000, 99999)}", "string")

    def _region(self, e: "_Entity", r: int) -> None:
        rng = e.rng
        country = self.country_q(self.country_of_region(r))
        e.names(_name(e.number) + " Province", "first-level administrative division", sitelinks=rng.randrange(15))
        e.item("P31", self.layout.class_ids["region"])
        e.item("P17", country)
        e.item("P131", country)
        e.coordinate(rng)

    def _organisation(self, e: "_Entity", label: str, description: str, class_q: str) -> int:
        rng = e.rng
        city = _zipf(rng.random(), self.layout.counts["city"], 1.0)
        e.names(label, description, sitelinks=min(30, int(rng.paretovariate(1.4)) - 1), alias=rng.random() < 0.2,
                alias_text="".join(word[0] for word in label.split()).upper() + "C")
        e.item("P31", class_q)
        e.item("P17", self.country_q(self.country_of_city(city)))
        return city

    def _company(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        city = self._organisation(e, f"{_name(e.number)} Group", "company", "Q4830453")
        e.item("P159", self.city_q(city))
        if k > 0 and rng.random() < 0.15:
            e.item("P127", f"Q{self.q('company', _zipf(rng.random(), k, 1.0))}")
        if rng.random() < 0.3:
            former = self.person_q(self.pick_role("other", rng.random(), 0.5)) if rng.random() < 0.3 else None
            self._history(e, "P488", self.person_q(self.pick_role("other", rng.random(), 0.5)), former, rng, 1980)
        e.date("P571", _time(1850 + rng.randrange(170), 1, 1, 9))
        e.quantity("P1128", int(rng.paretovariate(1.0) * 20), point=REFERENCE_YEAR - 1)
        if rng.random() < 0.5:
            e.string("P856", f"https://www.{_name(e.number).lower()}.example/", "url")

    def _university(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        city = self._organisation(e, f"University of {_name(e.number)}", "university", "Q3918")
        e.item("P131", self.city_q(city))
        if rng.random() < 0.3:
            former = self.person_q(self.pick_role("scientist", rng.random(), 0.5)) if rng.random() < 0.3 else None
            self._history(e, "P488", self.person_q(self.pick_role("scientist", rng.random(), 0.5)), former, rng, 1990)
        e.date("P571", _time(1100 + rng.randrange(900), 1, 1, 9))

    def _team(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        city = self._organisation(e, f"{_name(e.number)} FC", "sports team", self.layout.class_ids["team"])
        league = _zipf(rng.random(), self.layout.counts["league"], 1.0)
        e.item("P118", f"Q{self.q('league', league)}")
        e.item("P641", f"Q{self.q('sport', self.league_sport(league))}")
        e.item("P159", self.city_q(city))
        e.item("P115", self.uniform_q("venue", rng))
        if rng.random() < 0.6:
            former = self.person_q(self.pick_role("athlete", rng.random(), 0.5)) if rng.random() < 0.5 else None
            self._history(e, "P286", self.person_q(self.pick_role("athlete", rng.random(), 0.5)), former, rng, 2000)
        e.date("P571", _time(1870 + rng.randrange(150), 1, 1, 9))

    def _venue(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        city = self._organisation(e, f"{_name(e.number)} Arena", "stadium", self.layout.class_ids["venue"])
        e.item("P131", self.city_q(city))
        if rng.random() < 0.2:
            e.item("P127", self.zipf_q("company", rng, 1.0))
        e.quantity("P1083", rng.randrange(2000, 90000))
        e.coordinate(rng)

    def _election(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        country = _zipf(rng.random(), self.layout.counts["country"], 1.0)
        year = 1900 + rng.randrange(REFERENCE_YEAR - 1900)
        e.names(f"{year} {_name(e.number)} election", f"election in {year}", sitelinks=rng.randrange(5))
        e.item("P31", self.layout.class_ids["election"])
        e.item("P17", self.country_q(country))
        e.item("P541", self.zipf_q("position", rng))
        e.item("P1346", self.person_q(self.pick_role("politician", rng.random(), 0.7)))
        for _ in range(rng.randrange(2, 5)):
            e.item("P710", self.person_q(self.pick_role("politician", rng.random(), 0.7)))
        e.date("P585", _time(year, rng.randrange(1, 13), rng.randrange(1, 29), 11))

    def _season(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        league = _zipf(rng.random(), self.layout.counts["league"], 1.0)
        year = 1950 + rng.randrange(REFERENCE_YEAR - 1950)
        e.names(f"{year}-{(year + 1) % 100:02d} {_name(e.number)} season", f"sports season {year}",
                sitelinks=rng.randrange(4))
        e.item("P31", "Q27020041")
        e.item("P3450", f"Q{self.q('league', league)}")
        e.item("P664", f"Q{self.q('league', league)}")
        e.item("P1346", self.zipf_q("team", rng, 0.8))
        for _ in range(rng.randrange(4, 9)):
            e.item("P1923", self.zipf_q("team", rng, 0.8))
        e.item("P17", self.zipf_q("country", rng, 1.0))
        e.date("P580", _time(year, 8, 1, 10))
        e.date("P582", _time(year + 1, 5, 1, 10))

    def _taxon(self, e: "_Entity", k: int) -> None:
        rng = e.rng
        name = f"{_name(e.number)} {_word(rng.randrange(100_000)).lower()}"
        e.names(name, "species of insect", sitelinks=min(20, int(rng.paretovariate(2.0)) - 1), languages=1)
        e.item("P31", "Q16521")
        e.item("P105", f"Q{self.q('taxon_rank', 0 if rng.random() < 0.8 else rng.randrange(3))}")
        if k > 0:
            e.item("P171", f"Q{self.q('taxon', _zipf(rng.random(), k, 1.0))}")
        e.string("P225", name, "string")
        if rng.random() < 0.3:
            e.monolingual("P1843", f"common {_word(rng.randrange(100_000)).lower()}")
        e.external_ids(rng, (("P646", 0.2),))


class _Entity:
    """One entity being built; statements are added in property order of first use."""

    __slots__ = ("graph", "number", "qid", "rng", "claims", "label", "doc")

    def __init__(self, graph: Graph, number: int, qid: str | None = None, position: int | None = None):
        self.graph = graph
        self.number = number
        self.qid = qid or f"Q{number}"
        self.rng = random.Random(graph.hash.h(T_ENTITY, number if position is None else position))
        self.claims: dict[str, list] = {}
        self.label = None
        self.doc = {"type": "item", "id": self.qid}

    def names(self, label: str, description: str, sitelinks: int = 0, alias: bool = False,
              alias_text: str | None = None, languages: int = 3, always_labelled: bool = False) -> None:
        if always_labelled or self.graph.has_label(self.number):
            self.label = label
            labels = {lang: {"language": lang, "value": label} for lang in LANGS[:languages]}
        else:  # a few items have labels only in other languages
            labels = {lang: {"language": lang, "value": label} for lang in LANGS[1:1 + languages]}
        self.doc["labels"] = labels
        self.doc["descriptions"] = {"en": {"language": "en", "value": description}}
        self.doc["aliases"] = ({"en": [{"language": "en", "value": alias_text or f"{label} ({description})"}]}
                               if alias else {})
        self.doc["sitelinks"] = {wiki: {"site": wiki, "title": label, "badges": []}
                                 for wiki in WIKIS[:max(0, sitelinks)]}

    def _statement(self, prop: str, mainsnak: dict, rank: str = "normal", quals: dict | None = None) -> None:
        rng = self.rng
        statement = {"mainsnak": mainsnak, "type": "statement"}
        if quals:
            statement["qualifiers"] = {
                q: [{"snaktype": "value", "property": q, "hash": "%040x" % rng.getrandbits(160),
                     "datavalue": {"value": value, "type": "time"}, "datatype": "time"}]
                for q, value in quals.items()}
            statement["qualifiers-order"] = list(quals)
        bits = rng.getrandbits(128)
        statement["id"] = (f"{self.qid}${bits >> 96:08X}-{(bits >> 80) & 0xFFFF:04X}-{(bits >> 64) & 0xFFFF:04X}-"
                           f"{(bits >> 48) & 0xFFFF:04X}-{bits & 0xFFFFFFFFFFFF:012X}")
        statement["rank"] = rank
        if rng.random() < 0.35:
            database = self.graph.q("database", rng.randrange(5))
            statement["references"] = [{
                "hash": "%040x" % rng.getrandbits(160),
                "snaks": {"P248": [{"snaktype": "value", "property": "P248", "datavalue": {
                    "value": {"entity-type": "item", "numeric-id": database, "id": f"Q{database}"},
                    "type": "wikibase-entityid"}, "datatype": "wikibase-item"}]},
                "snaks-order": ["P248"]}]
        self.claims.setdefault(prop, []).append(statement)
        self.graph.statements += 1

    def item(self, prop: str, qid: str, rank: str = "normal", quals: dict | None = None) -> None:
        if prop != "P31" and self.graph.hash.u(T_MISSING, self.graph.statements) < 0.0005:
            qid = f"Q{ID_BASE + self.graph.layout.n + 1 + self.rng.randrange(1000)}"  # dangling: not in the dump
        self._statement(prop, {"snaktype": "value", "property": prop, "datavalue": {
            "value": {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid},
            "type": "wikibase-entityid"}, "datatype": "wikibase-item"}, rank, quals)
        self.graph.entity_valued += 1

    def unknown(self, prop: str, snaktype: str, datatype: str = "wikibase-item") -> None:
        self._statement(prop, {"snaktype": snaktype, "property": prop, "datatype": datatype})

    def date(self, prop: str, value: dict, rank: str = "normal") -> None:
        self._statement(prop, {"snaktype": "value", "property": prop,
                               "datavalue": {"value": value, "type": "time"}, "datatype": "time"}, rank)

    def birth_date(self, prop: str, year: int, rng: random.Random, deprecated_twin: bool = False) -> None:
        u = rng.random()
        if year < 1600:
            precision = 7 if u < 0.3 else 9
        else:
            precision = 11 if u < 0.8 else (9 if u < 0.95 else 10)
        value = _time(year, rng.randrange(1, 13), rng.randrange(1, 29), precision)
        if deprecated_twin:
            self.date(prop, _time(year + rng.choice((-1, 1)), rng.randrange(1, 13), rng.randrange(1, 29), precision),
                      rank="deprecated")
        self.date(prop, value)

    def quantity(self, prop: str, amount: int, unit: str | None = None, point: int | None = None) -> None:
        value = {"amount": f"+{amount}", "unit": f"http://www.wikidata.org/entity/{unit}" if unit else "1"}
        quals = {"P585": _time(point, 1, 1, 9)} if point else None
        self._statement(prop, {"snaktype": "value", "property": prop,
                               "datavalue": {"value": value, "type": "quantity"}, "datatype": "quantity"},
                        quals=quals)

    def string(self, prop: str, text: str, datatype: str) -> None:
        self._statement(prop, {"snaktype": "value", "property": prop,
                               "datavalue": {"value": text, "type": "string"}, "datatype": datatype})

    def monolingual(self, prop: str, text: str) -> None:
        self._statement(prop, {"snaktype": "value", "property": prop, "datavalue": {
            "value": {"text": text, "language": "en"}, "type": "monolingualtext"}, "datatype": "monolingualtext"})

    def coordinate(self, rng: random.Random) -> None:
        value = {"latitude": round(rng.uniform(-60, 70), 4), "longitude": round(rng.uniform(-180, 180), 4),
                 "altitude": None, "precision": 0.0001, "globe": EARTH}
        self._statement("P625", {"snaktype": "value", "property": "P625",
                                 "datavalue": {"value": value, "type": "globecoordinate"},
                                 "datatype": "globe-coordinate"})

    def external_ids(self, rng: random.Random, props) -> None:
        for prop, rate in props:
            if rng.random() < rate:
                self.string(prop, f"{rng.getrandbits(40):d}", "external-id")

    def done(self) -> dict:
        if "labels" not in self.doc:
            self.names(_word(self.number), "", 0)
        self.doc["claims"] = self.claims
        return self.doc


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


def _open(path: Path, name: str):
    """(stream to write, underlying file or None) for ``path``, compressed as ``name`` says."""
    name = name.lower()
    Path(path).parent.mkdir(parents=True, exist_ok=True)  # e.g. benchmarks/out/ of a fresh checkout
    raw = open(path, "wb", buffering=1 << 20)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw, "wb", compresslevel=9), raw
    if name.endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0), raw
    if not name.endswith(".json"):
        raw.close()
        raise ValueError(f"{name}: the dump must end in .json, .json.bz2 or .json.gz")
    return raw, None


def write_dump(path, entities: int, seed: int = 0, progress: bool = False) -> dict:
    """Write a dump of exactly ``entities`` entities; returns counts: entities, statements
    (every main snak, unknown values included), entity_valued, json_bytes (uncompressed),
    file_bytes, and entities per kind."""
    path = Path(path)
    graph = Graph(entities, seed)
    tmp = path.with_name(path.name + ".partial")
    out, raw = _open(tmp, path.name)
    written = 0
    started = time.perf_counter()
    chunk: list[bytes] = [b"[\n"]
    size = 2
    try:
        for position in range(entities):
            line = orjson.dumps(graph.entity(position))
            line += b"\n" if position == entities - 1 else b",\n"
            chunk.append(line)
            size += len(line)
            if size >= 1 << 20:
                data = b"".join(chunk)
                out.write(data)
                written += len(data)
                chunk, size = [], 0
            if progress and position and position % 100_000 == 0:
                print(f"  {position} entities, {(written + size) / 1e6:.0f} MB, "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        chunk.append(b"]\n")
        data = b"".join(chunk)
        out.write(data)
        written += len(data)
    finally:
        out.close()
        if raw is not None:
            raw.close()
    tmp.replace(path)
    counts = {"entities": entities, "statements": graph.statements, "entity_valued": graph.entity_valued,
              "json_bytes": written, "file_bytes": path.stat().st_size}
    counts["by_kind"] = {kind: graph.layout.counts[kind] for kind in ("person", "film", "book", "song", "album",
                                                                     "article", "taxon", "city", "region", "country",
                                                                     "company", "university", "team")}
    return counts


def _read_lines(path: Path):
    name = path.name.lower()
    if name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


# Class structure stays: changing instance_of / subclass_of would change whole types at once.
_KEPT_PROPERTIES = {"P31", "P279"}


def write_next_version(source, out, changed: float = 0.01, added: float = 0.0, removed: float = 0.0,
                       seed: int = 0) -> dict:
    """Write ``out``: the dump ``source`` a week later. Of its entity-valued statements (the
    facts claims are made of; instance_of and subclass_of aside), a share ``changed`` points at
    another object (one the same property holds on an entity before it, so of the same type),
    a share ``removed`` is gone, and for a share ``added`` the entity gains a second value of
    that property. Deterministic in ``seed``; returns the counts of facts, changed, added and
    removed."""
    source, out = Path(source), Path(out)
    recent: dict[str, list[str]] = {}  # property -> the last objects seen, for type-alike values
    counts = {"facts": 0, "changed": 0, "added": 0, "removed": 0}
    tmp = out.with_name(out.name + ".partial")
    stream, raw = _open(tmp, out.name)
    try:
        with _read_lines(source) as lines:
            stream.write(b"[\n")
            pending = None  # one entity behind, so the last one is written without a comma
            for line in lines:
                line = line.strip().rstrip(b",")
                if line in (b"[", b"]", b""):
                    continue
                if pending is not None:
                    stream.write(pending + b",\n")
                entity = orjson.loads(line)
                _edit_facts(entity, recent, counts, seed, changed, added, removed)
                pending = orjson.dumps(entity)
            if pending is not None:
                stream.write(pending + b"\n")
            stream.write(b"]\n")
    finally:
        stream.close()
        if raw is not None:
            raw.close()
    tmp.replace(out)
    return counts


def _edit_facts(entity: dict, recent: dict, counts: dict, seed: int, changed: float, added: float,
                removed: float) -> None:
    for prop, statements in (entity.get("claims") or {}).items():
        if prop in _KEPT_PROPERTIES:
            continue
        kept = []
        for statement in statements:
            snak = statement.get("mainsnak", {})
            value = (snak.get("datavalue") or {}).get("value")
            if snak.get("snaktype") != "value" or not isinstance(value, dict) or "id" not in value:
                kept.append(statement)
                continue
            counts["facts"] += 1
            key = statement.get("id", "")
            u = _unit(seed, key, "edit")
            others = [q for q in recent.get(prop, []) if q != value["id"]]
            if u < removed:
                counts["removed"] += 1
                continue
            recent.setdefault(prop, []).append(value["id"])
            del recent[prop][:-8]
            if u < removed + changed and others:
                _point_at(value, others[int(_unit(seed, key, "to") * len(others))])
                counts["changed"] += 1
            kept.append(statement)
            if removed + changed <= u < removed + changed + added and others:
                extra = orjson.loads(orjson.dumps(statement))
                extra["id"] = key + "-added"
                _point_at(extra["mainsnak"]["datavalue"]["value"], others[int(_unit(seed, extra["id"], "to") * len(others))])
                kept.append(extra)
                counts["added"] += 1
        statements[:] = kept


def _point_at(value: dict, qid: str) -> None:
    value["id"] = qid
    if "numeric-id" in value:
        value["numeric-id"] = int(qid[1:])


def _unit(seed: int, key: str, tag: str) -> float:
    digest = hashlib.sha256(f"{seed}|{key}|{tag}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, help="entities in the dump (at least about 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="file to write: .json, .json.bz2 or .json.gz")
    parser.add_argument("--next-version-of", metavar="DUMP",
                        help="instead: write DUMP a week later, with --changed / --added / --removed shares of "
                             "its entity-valued facts edited")
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--added", type=float, default=0.0)
    parser.add_argument("--removed", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.next_version_of:
        counts = write_next_version(args.next_version_of, args.out, args.changed, args.added, args.removed, args.seed)
        print(f"{args.out}: {counts['facts']} entity-valued facts, {counts['changed']} changed, "
              f"{counts['added']} added, {counts['removed']} removed")
        return 0
    if args.entities is None:
        parser.error("--entities is required (or --next-version-of)")
    started = time.perf_counter()
    counts = write_dump(args.out, args.entities, args.seed, progress=True)
    seconds = time.perf_counter() - started
    print(f"{args.out}: {counts['entities']} entities, {counts['statements']} statements "
          f"({counts['entity_valued']} entity-valued), {counts['json_bytes'] / 1e6:.1f} MB JSON, "
          f"{counts['file_bytes'] / 1e6:.1f} MB on disk, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
