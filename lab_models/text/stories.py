"""The "stories" corpus: a seeded language of short English stories (with Chinese translations) where context decides.

What it is
----------
A toy language built so that the labels a probe or a fill-in-the-blank test asks for are decided by the context, not
by the word itself. In the "synthetic" corpus (lab_models/text/synthetic.py) a word's tag is its identity, so an
untrained network separates the tags as well as a trained one; here the same form is a noun in one place and a verb
in another, a verb agrees with a subject that stands several words away, a pronoun or "the NOUN" points to one of two
characters introduced earlier, story order matters, and a quantifier and a negation decide which way an entailment
goes. `story_dataset(seed, n_sentences)` returns `StoryData`: labelled sentences (`StoryExample`) grouped into
stories, entailment pairs (`StoryPair`), order pairs, next-sentence pairs, fill-in-the-blank items (`StoryBlank`) and
English/Chinese sentence pairs. `parse_sentence` is the grammar check: it parses a sentence of the language (agreement
included) and gives back its tags, or None. Everything is deterministic from the seed (one `random.Random(seed)` per
stream, never the global generator).

What it follows and how it deviates
-----------------------------------
It follows the generated languages that test what models learn from context: agreement across "attractors"
(Linzen, Dupoux and Goldberg 2016, "Assessing the Ability of LSTMs to Learn Syntax-Sensitive Dependencies", TACL),
monotonicity and quantifier scope in entailment (the MED and HELP datasets of Yanaka et al. 2019), sentence order as
in ALBERT's sentence-order prediction, and word classes that only the context tells apart. It deviates from natural
language on purpose: one clause per sentence, one tense, a lexicon of about 150 words, and lexical choices that are
only loosely sensible ("a judge guards some trains").

The grammar
-----------
A *story* has 2 to 4 sentences and two characters of one topic, one singular and one plural. The first sentence
introduces both, the first as subject ("a" or "some"/"two") and the second as object; every later sentence is about
one of them, by pronoun ("it", "he", "she", "they") or by "the NOUN", and its object is either the other character
("the NOUNS") or a new thing. A third of the stories end with a general statement with a quantifier ("every NOUN",
"no NOUN", "some NOUNS").

    SENTENCE -> SUBJECT VERB_PHRASE OBJECT [PLACE] "."
    SUBJECT  -> PRONOUN | ("every" | "no") [ADJ] NOUN_SG | DET_n [ADJ] NOUN_n [MODIFIER]
    MODIFIER -> ("near" | "behind" | "with") DET_m [ADJ] NOUN_m         the attractor: its number m is drawn freely
              | "that" VERB_n DET_m [ADJ] NOUN_m                        (a relative clause agrees with its head)
    VERB_PHRASE -> VERB_n | ("does" | "do")_n "not" VERB_BASE             (no negation after "no NOUN")
    OBJECT   -> DET_m [ADJ] NOUN_m
    PLACE    -> ("in" | "on" | "at") "the" PLACE_NOUN
    DET_SG   -> "a" | "the" | "this"          DET_PL -> "some" | "two" | "the" | "these"

The verb agrees in number (n) with its subject's head noun, never with the attractor in between: "the cat near the
ducks chases a ball", "the cats that chase a duck do not see the dogs". Forms such as "cook(s)", "guard(s)",
"judge(s)", "coach(es)", "watch(es)", "drink(s)", "plant(s)", "train(s)", "paint(s)" and "book(s)" are nouns and verbs
(`AMBIGUOUS_FORMS`): "the cooks cook the fish" (NOUN VERB), "the cook cooks some drinks" (NOUN VERB NOUN).

The Chinese translation follows the same derivation in Chinese order: the modifier comes before its noun with 的
("那些鸭子旁边的猫", "看见球的猫"), the place before the verb, 都 after a subject with "every", 没有 for "no";
plural determiners are 一些 (some), 两 + classifier (two), 那些 (the), 这些 (these); pronouns 他/她/它 and
他们/她们/它们.

The labels (all computed from the derivation)
---------------------------------------------
Per token of a sentence (`StoryExample`):
* `tags`, from `TAGS`: DET (determiners and the quantifiers), ADJ, NOUN, PRON, VERB, AUX ("does"/"do"), NEG ("not"),
  PREP, REL ("that"), PUNCT.
* `roles`, from `ROLES`: SUBJ, MOD (the modifier between the subject's noun and its verb), VERB, OBJ, PLACE, PUNCT.
* `subject_number`: "SG" or "PL" on the words of a MODIFIER but a relative clause's verb (the number the coming verb
  must agree with, which the attractor's words do not show), else "-".
* `antecedent`: on a reference to a story character after the first sentence (a pronoun, or the noun of "the NOUN"),
  "FIRST" (the character introduced as the first sentence's subject) or "SECOND" (its object), else "-".
Per story: the sentences in order; `order_pairs` (two consecutive sentences, in order or swapped) and
`next_sentence_pairs` (the next sentence or one from another story).
`StoryPair` (premise, hypothesis, label from `ENTAILMENT_LABELS`): one edit of a premise "QUANTIFIER [ADJ] NOUN
[does not] VERB a [ADJ] THING" (quantifier "the", "every", "no" or "some"), labelled by monotonicity
(`entailment_label`). The subject's noun (the restrictor) is upward monotone after "the" and "some" (dropping an
adjective keeps the premise true) and downward after "every" and "no" (adding one does); the object (the scope) is
upward after "the", "every" and "some" and downward after "no", and a negation flips it. An edit in the allowed
direction is an entailment, the other way neutral. Flipping the negation contradicts after "the" and is neutral
after "some" ("some cats see a ball" and "some cats do not see a ball" can both be true); swapping "every" and "no"
(or "some" and "no") contradicts. "every NOUN does not VERB" (two readings) is never generated. E.g. "every cat sees
a red ball" entails "every small cat sees a red ball" and "every cat sees a ball"; "no cat sees a ball" entails "no
cat sees a red ball"; "the cat does not see a red ball" -> "the cat does not see a ball" is neutral.
`StoryBlank`: a word to fill from context, the whole story around it. "reference": the noun of a "the NOUN" that
refers to a character (decided by the story and by the number of the verb), "agreement": the verb after a modifier
(decided by the subject's number; any verb or auxiliary of that number counts, `finite_number`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from lab_models.messages import LabError
from lab_models.text.synthetic import NextSentencePair, StoryCollection  # the stories' shared methods and pairs

TAGS = ("DET", "ADJ", "NOUN", "PRON", "VERB", "AUX", "NEG", "PREP", "REL", "PUNCT")
ROLES = ("SUBJ", "MOD", "VERB", "OBJ", "PLACE", "PUNCT")
NUMBERS = ("SG", "PL")
ANTECEDENTS = ("FIRST", "SECOND")
ENTAILMENT_LABELS = ("entailment", "contradiction", "neutral")
TOPICS = ("animals", "kitchen", "city", "school")
BLANK_KINDS = ("reference", "agreement")
NO_LABEL = "-"


# ----------------------------------------------------------------------------------------------------------- lexicon
@dataclass(frozen=True)
class _Noun:
    singular: str
    plural: str
    chinese: str
    classifier: str  # the Chinese measure word after 一/两/这/每
    pronoun: str  # "he", "she" or "it"

    def form(self, number: str) -> str:
        return self.singular if number == "SG" else self.plural


@dataclass(frozen=True)
class _Verb:
    third_person: str
    base: str
    chinese: str
    negator: str  # 不 for states and habits, 没 for verbs of perceiving or finding
    takes_characters: bool  # whether its object may be a person or an animal (a story's other character)
    topics: tuple[str, ...] = TOPICS

    def form(self, number: str) -> str:
        return self.third_person if number == "SG" else self.base


@dataclass(frozen=True)
class _Place:
    preposition: str
    english: str
    chinese: str  # the whole Chinese phrase, e.g. 在公园里


@dataclass(frozen=True)
class _Topic:
    characters: tuple[_Noun, ...]
    things: tuple[_Noun, ...]
    places: tuple[_Place, ...]


def _nouns(spec: str) -> tuple[_Noun, ...]:
    """'cat cats 猫 只 it, fish fish 鱼 条 it' -> two nouns."""
    return tuple(_Noun(*item.split()) for item in spec.split(","))


_TOPICS: dict[str, _Topic] = {
    "animals": _Topic(
        characters=_nouns("cat cats 猫 只 it, dog dogs 狗 只 it, duck ducks 鸭子 只 it, horse horses 马 匹 it,"
                          " rabbit rabbits 兔子 只 it"),
        things=_nouns("ball balls 球 个 it, bone bones 骨头 根 it, fish fish 鱼 条 it, plant plants 植物 棵 it,"
                      " stick sticks 树枝 根 it"),
        places=(_Place("in", "park", "在公园里"), _Place("on", "farm", "在农场上")),
    ),
    "kitchen": _Topic(
        characters=_nouns("cook cooks 厨师 位 he, girl girls 女孩 个 she, boy boys 男孩 个 he,"
                          " waiter waiters 服务员 位 she, baker bakers 面包师 位 she"),
        things=_nouns("drink drinks 饮料 杯 it, cake cakes 蛋糕 块 it, pie pies 馅饼 个 it, soup soups 汤 碗 it,"
                      " fish fish 鱼 条 it"),
        places=(_Place("in", "kitchen", "在厨房里"), _Place("at", "market", "在市场上")),
    ),
    "city": _Topic(
        characters=_nouns("guard guards 保安 名 he, driver drivers 司机 位 she, judge judges 法官 位 she,"
                          " doctor doctors 医生 位 he, tourist tourists 游客 位 she"),
        things=_nouns("train trains 火车 列 it, watch watches 手表 块 it, car cars 汽车 辆 it, map maps 地图 张 it,"
                      " ticket tickets 票 张 it"),
        places=(_Place("on", "street", "在街上"), _Place("at", "station", "在车站里")),
    ),
    "school": _Topic(
        characters=_nouns("teacher teachers 老师 位 she, student students 学生 个 he, coach coaches 教练 位 he,"
                          " writer writers 作家 位 she, pupil pupils 小学生 个 he"),
        things=_nouns("book books 书 本 it, paint paints 颜料 盒 it, pen pens 笔 支 it, letter letters 信 封 it,"
                      " picture pictures 画 幅 it"),
        places=(_Place("in", "classroom", "在教室里"), _Place("in", "library", "在图书馆里")),
    ),
}

_VERBS: tuple[_Verb, ...] = (
    _Verb("sees", "see", "看见", "没", True),
    _Verb("likes", "like", "喜欢", "不", True),
    _Verb("finds", "find", "找到", "没", True),
    _Verb("watches", "watch", "看着", "没", True),
    _Verb("hates", "hate", "讨厌", "不", True),
    _Verb("wants", "want", "想要", "不", False),
    _Verb("carries", "carry", "拿着", "没", False),
    _Verb("chases", "chase", "追", "不", True, ("animals",)),
    _Verb("trains", "train", "训练", "不", True, ("animals", "school")),
    _Verb("eats", "eat", "吃", "不", False, ("animals", "kitchen")),
    _Verb("plants", "plant", "种", "不", False, ("animals", "kitchen")),
    _Verb("cooks", "cook", "做", "不", False, ("kitchen",)),
    _Verb("drinks", "drink", "喝", "不", False, ("kitchen",)),
    _Verb("guards", "guard", "守护", "不", True, ("city",)),
    _Verb("judges", "judge", "评判", "不", True, ("city", "school")),
    _Verb("books", "book", "预订", "不", False, ("city",)),
    _Verb("coaches", "coach", "指导", "不", True, ("school",)),
    _Verb("paints", "paint", "画", "不", False, ("school",)),
    _Verb("reads", "read", "读", "不", False, ("school",)),
)

_ADJECTIVES: dict[str, str] = {"big": "大", "small": "小", "red": "红", "tall": "高", "new": "新",
                               "happy": "快乐", "sad": "难过", "clean": "干净"}
_MODIFIER_PREPOSITIONS: dict[str, str] = {"near": "旁边", "behind": "后面", "with": "身边"}
_DETERMINERS: dict[str, tuple[str, ...]] = {"SG": ("a", "the", "this"), "PL": ("some", "two", "the", "these")}
_QUANTIFIERS = ("every", "no", "some")  # "some" is also the plural indefinite determiner
_PRONOUNS_CHINESE = {"he": "他", "she": "她", "it": "它"}
_PLURAL_PRONOUN = "they"
PRONOUNS = ("he", "she", "it", _PLURAL_PRONOUN)


def _all_nouns() -> tuple[_Noun, ...]:
    seen: dict[str, _Noun] = {}
    for topic in _TOPICS.values():
        for noun in topic.characters + topic.things:
            seen.setdefault(noun.singular, noun)
    return tuple(seen.values())


NOUN_NUMBER: dict[str, frozenset[str]] = {}  # form -> the numbers it can have as a noun ("fish": SG and PL)
for _noun in _all_nouns():
    for _number in NUMBERS:
        NOUN_NUMBER[_noun.form(_number)] = NOUN_NUMBER.get(_noun.form(_number), frozenset()) | {_number}
VERB_NUMBER: dict[str, str] = {verb.form(number): number for verb in _VERBS for number in NUMBERS}
VERB_BASES: frozenset[str] = frozenset(verb.base for verb in _VERBS)
PLACE_WORDS: dict[str, frozenset[str]] = {}  # place noun -> its prepositions
for _topic in _TOPICS.values():
    for _place in _topic.places:
        PLACE_WORDS[_place.english] = PLACE_WORDS.get(_place.english, frozenset()) | {_place.preposition}
AMBIGUOUS_FORMS: frozenset[str] = frozenset(NOUN_NUMBER) & frozenset(VERB_NUMBER)
ADJECTIVES: tuple[str, ...] = tuple(_ADJECTIVES)


def vocabulary() -> tuple[str, ...]:
    """Every English word the language can produce, sorted."""
    words = set(NOUN_NUMBER) | set(VERB_NUMBER) | set(PLACE_WORDS) | set(_ADJECTIVES) | set(_MODIFIER_PREPOSITIONS)
    words |= {word for determiners in _DETERMINERS.values() for word in determiners} | set(_QUANTIFIERS)
    words |= set(PRONOUNS) | {"does", "do", "not", "that", "in", "on", "at", "."}
    return tuple(sorted(words))


# --------------------------------------------------------------------------------------------------- derivations
@dataclass(frozen=True)
class _Word:
    text: str
    tag: str
    role: str
    subject_number: str = NO_LABEL
    antecedent: str = NO_LABEL


@dataclass(frozen=True)
class _NounPhrase:
    noun: _Noun
    number: str  # "SG" or "PL"
    determiner: str | None  # a determiner or quantifier; None: the noun is replaced by its pronoun
    adjective: str | None = None
    modifier: "_Modifier | None" = None
    antecedent: str = NO_LABEL  # FIRST/SECOND when the phrase refers back to a story character

    def pronoun(self) -> str:
        return self.noun.pronoun if self.number == "SG" else _PLURAL_PRONOUN

    def words(self, role: str) -> list[_Word]:
        if self.determiner is None:
            return [_Word(self.pronoun(), "PRON", role, antecedent=self.antecedent)]
        words = [_Word(self.determiner, "DET", role)]
        if self.adjective is not None:
            words.append(_Word(self.adjective, "ADJ", role))
        words.append(_Word(self.noun.form(self.number), "NOUN", role, antecedent=self.antecedent))
        if self.modifier is not None:
            # The relative clause's own verb shows the head's number by its form, so it carries no such label.
            words += [word if word.tag == "VERB" else replace(word, subject_number=self.number)
                      for word in self.modifier.words(self.number)]
        return words

    def chinese(self) -> str:
        if self.determiner is None:
            pronoun = _PRONOUNS_CHINESE[self.noun.pronoun]
            return pronoun if self.number == "SG" else pronoun + "们"
        prefix = {"a": "一" + self.noun.classifier, "this": "这" + self.noun.classifier,
                  "two": "两" + self.noun.classifier, "every": "每" + self.noun.classifier, "no": "没有",
                  "some": "一些", "these": "这些"}.get(self.determiner, "")
        if self.determiner == "the" and self.number == "PL":
            prefix = "那些"
        adjective = ""
        if self.adjective is not None:
            chinese = _ADJECTIVES[self.adjective]
            adjective = chinese + ("" if len(chinese) == 1 else "的")
        modifier = self.modifier.chinese() if self.modifier is not None else ""
        return modifier + prefix + adjective + self.noun.chinese


@dataclass(frozen=True)
class _Modifier:
    """Between a subject's noun and its verb: "near the ducks" (preposition set) or "that sees a ball" (verb set)."""
    preposition: str | None
    verb: _Verb | None
    noun_phrase: _NounPhrase

    def words(self, head_number: str) -> list[_Word]:
        if self.preposition is not None:
            first = [_Word(self.preposition, "PREP", "MOD")]
        else:
            first = [_Word("that", "REL", "MOD"), _Word(self.verb.form(head_number), "VERB", "MOD")]
        return first + self.noun_phrase.words("MOD")

    def chinese(self) -> str:
        if self.preposition is not None:
            return self.noun_phrase.chinese() + _MODIFIER_PREPOSITIONS[self.preposition] + "的"
        return self.verb.chinese + self.noun_phrase.chinese() + "的"


@dataclass(frozen=True)
class _Clause:
    topic: str
    subject: _NounPhrase
    verb: _Verb
    negated: bool
    object: _NounPhrase
    place: _Place | None

    def words(self) -> list[_Word]:
        words = self.subject.words("SUBJ")
        number = self.subject.number
        if self.negated:
            words += [_Word("does" if number == "SG" else "do", "AUX", "VERB"), _Word("not", "NEG", "VERB"),
                      _Word(self.verb.base, "VERB", "VERB")]
        else:
            words.append(_Word(self.verb.form(number), "VERB", "VERB"))
        words += self.object.words("OBJ")
        if self.place is not None:
            words += [_Word(self.place.preposition, "PREP", "PLACE"), _Word("the", "DET", "PLACE"),
                      _Word(self.place.english, "NOUN", "PLACE")]
        return words + [_Word(".", "PUNCT", "PUNCT")]

    def english(self) -> str:
        return " ".join(word.text for word in self.words())

    def chinese(self) -> str:
        parts = [self.subject.chinese()]
        if self.place is not None:
            parts.append(self.place.chinese)
        if self.subject.determiner == "every":
            parts.append("都")
        if self.negated:
            parts.append(self.verb.negator)
        return "".join(parts + [self.verb.chinese, self.object.chinese(), "。"])


# ------------------------------------------------------------------------------------------------- public records
@dataclass(frozen=True)
class StoryExample:
    english: str  # "a cat near the ducks chases some dogs ."
    chinese: str  # "那些鸭子旁边的一只猫追一些狗。"
    tokens: tuple[str, ...]  # the English words; the final "." is a token
    tags: tuple[str, ...]  # one of TAGS per token
    roles: tuple[str, ...]  # one of ROLES per token
    subject_number: tuple[str, ...]  # SG/PL on the words of a modifier, else "-"
    antecedent: tuple[str, ...]  # FIRST/SECOND on a reference to a story character, else "-"
    topic: str  # one of TOPICS


@dataclass(frozen=True)
class StoryPair:
    premise: str
    hypothesis: str
    label: str  # one of ENTAILMENT_LABELS


@dataclass(frozen=True)
class OrderPair:
    first: str
    second: str
    in_order: bool  # True: `second` follows `first` in their story; False: the two are swapped


@dataclass(frozen=True)
class StoryBlank:
    """A word to fill from context: `story` with its word number `position` (counted over the story's words) hidden.

    `answer` is the hidden word; for an "agreement" blank any verb whose number is `number` is right.
    """
    kind: str  # one of BLANK_KINDS
    story: tuple[str, ...]  # the story's words
    position: int
    answer: str
    number: str  # the number the answer must have (SG/PL)

    def words_before(self) -> tuple[str, ...]:
        return self.story[:self.position]

    def words_after(self) -> tuple[str, ...]:
        return self.story[self.position + 1:]

    def is_right(self, word: str) -> bool:
        if self.kind == "agreement":
            return finite_number(word) == self.number
        return word == self.answer


@dataclass(frozen=True)
class StoryData(StoryCollection):  # stories(), parallel_pairs(), documents(), next_sentence_pairs()
    seed: int
    examples: tuple[StoryExample, ...]
    story_ids: tuple[int, ...]  # the story each example belongs to (consecutive examples share a story)
    pairs: tuple[StoryPair, ...]

    def order_pairs(self, seed: int | None = None) -> tuple[OrderPair, ...]:
        """Every two consecutive sentences of a story, half in order and half swapped (sentence-order prediction)."""
        rng = random.Random(f"order/{self.seed if seed is None else seed}")
        pairs = []
        for story in self.stories():
            for first, following in zip(story, story[1:]):
                in_order = rng.random() < 0.5
                pairs.append(OrderPair(first.english, following.english, True) if in_order
                             else OrderPair(following.english, first.english, False))
        return tuple(pairs)

    def blanks(self, kind: str) -> tuple[StoryBlank, ...]:
        """Every blank of `kind` ("reference" or "agreement") in the stories, in order."""
        if kind not in BLANK_KINDS:
            raise LabError("unknown blank kind {kind!r}; choose one of {kinds}", kind=kind,
                           kinds=", ".join(BLANK_KINDS))
        return tuple(blank for story in self.stories() for blank in story_blanks(story) if blank.kind == kind)


def story_blanks(story: tuple[StoryExample, ...]) -> tuple[StoryBlank, ...]:
    """The blanks of one story: the noun of each "the NOUN" reference to a character, and each verb after a modifier.

    >>> data = story_dataset(0, 40)
    >>> all(blank.story[blank.position] == blank.answer for story in data.stories() for blank in story_blanks(story))
    True
    """
    words = tuple(token for example in story for token in example.tokens)
    blanks, offset = [], 0
    for example in story:
        subject_number = _subject_number(example)
        for index, (token, tag, role) in enumerate(zip(example.tokens, example.tags, example.roles)):
            previous_role = example.roles[index - 1] if index else None
            if tag == "NOUN" and example.antecedent[index] != NO_LABEL:
                (number,) = NOUN_NUMBER[token]  # a character's singular and plural differ
                blanks.append(StoryBlank("reference", words, offset + index, token, number))
            elif role == "VERB" and tag in ("VERB", "AUX") and previous_role == "MOD":
                blanks.append(StoryBlank("agreement", words, offset + index, token, subject_number))
        offset += len(example.tokens)
    return tuple(blanks)


def finite_number(word: str) -> str | None:
    """The number a finite verb or auxiliary agrees with ("sees" and "does": SG, "see" and "do": PL), else None."""
    return {"does": "SG", "do": "PL"}.get(word) or VERB_NUMBER.get(word)


def _subject_number(example: StoryExample) -> str:
    for token, tag, role in zip(example.tokens, example.tags, example.roles):
        if role == "VERB" and tag in ("VERB", "AUX"):
            return finite_number(token)
    raise AssertionError("every sentence has a verb")  # pragma: no cover


# ----------------------------------------------------------------------------------------------------- sampling
def _other(number: str) -> str:
    return "PL" if number == "SG" else "SG"


def _adjective(rng: random.Random, probability: float) -> str | None:
    return rng.choice(ADJECTIVES) if rng.random() < probability else None


def _modifier(rng: random.Random, topic: _Topic, head_number: str) -> _Modifier:
    number = rng.choice(NUMBERS)  # the attractor's number is drawn freely: half the time it differs from the head's
    noun = rng.choice(topic.characters + topic.things)
    phrase = _NounPhrase(noun, number, rng.choice(_DETERMINERS[number]), _adjective(rng, 0.2))
    if rng.random() < 0.6:
        return _Modifier(rng.choice(tuple(_MODIFIER_PREPOSITIONS)), None, phrase)
    verbs = [verb for verb in _VERBS if verb.takes_characters]
    return _Modifier(None, rng.choice(verbs), phrase)


def _verb(rng: random.Random, topic_name: str, takes_characters: bool) -> _Verb:
    return rng.choice([verb for verb in _VERBS
                       if topic_name in verb.topics and (verb.takes_characters or not takes_characters)])


def _thing(rng: random.Random, topic: _Topic) -> _NounPhrase:
    number = rng.choice(NUMBERS)
    return _NounPhrase(rng.choice(topic.things), number, rng.choice(_DETERMINERS[number]), _adjective(rng, 0.4))


def _story(rng: random.Random, length: int) -> list[_Clause]:
    topic_name = rng.choice(TOPICS)
    topic = _TOPICS[topic_name]
    first, second = rng.sample(topic.characters, 2)
    first_number = rng.choice(NUMBERS)
    numbers = {"FIRST": first_number, "SECOND": _other(first_number)}
    nouns = {"FIRST": first, "SECOND": second}
    introduce = {"SG": ("a",), "PL": ("some", "two")}
    subject = _NounPhrase(first, first_number, rng.choice(introduce[first_number]), _adjective(rng, 0.3))
    if rng.random() < 0.35:
        subject = replace(subject, modifier=_modifier(rng, topic, first_number))
    obj = _NounPhrase(second, numbers["SECOND"], rng.choice(introduce[numbers["SECOND"]]), _adjective(rng, 0.3))
    clauses = [_Clause(topic_name, subject, _verb(rng, topic_name, True), rng.random() < 0.15, obj, None)]
    generic = length > 2 and rng.random() < 0.33
    for _ in range(length - 1 - generic):
        who = rng.choice(ANTECEDENTS)
        other = "SECOND" if who == "FIRST" else "FIRST"
        if rng.random() < 0.4:
            subject = _NounPhrase(nouns[who], numbers[who], None, antecedent=who)
        else:
            subject = _NounPhrase(nouns[who], numbers[who], "the", antecedent=who)
            if rng.random() < 0.4:
                subject = replace(subject, modifier=_modifier(rng, topic, numbers[who]))
        if rng.random() < 0.4:
            obj = _NounPhrase(nouns[other], numbers[other], "the", antecedent=other)
            verb = _verb(rng, topic_name, True)
        else:
            obj = _thing(rng, topic)
            verb = _verb(rng, topic_name, False)
        place = rng.choice(topic.places) if rng.random() < 0.3 else None
        clauses.append(_Clause(topic_name, subject, verb, rng.random() < 0.2, obj, place))
    if generic:
        clauses.append(_quantified_clause(rng, topic_name))
    return clauses


def _quantified_clause(rng: random.Random, topic_name: str, quantifiers=_QUANTIFIERS,
                       adjective_probability: float = 0.3) -> _Clause:
    """"QUANTIFIER [ADJ] NOUN [does not] VERB a [ADJ] THING": negated only after "the" and "some", since "every cat
    does not see a ball" has two readings."""
    topic = _TOPICS[topic_name]
    quantifier = rng.choice(quantifiers)
    number = "PL" if quantifier == "some" else "SG"
    subject = _NounPhrase(rng.choice(topic.characters), number, quantifier, _adjective(rng, adjective_probability))
    obj = _NounPhrase(rng.choice(topic.things), "SG", "a", _adjective(rng, adjective_probability))
    negated = quantifier in ("the", "some") and rng.random() < 0.25
    return _Clause(topic_name, subject, _verb(rng, topic_name, False), negated, obj, None)


def _example(clause: _Clause) -> StoryExample:
    words = clause.words()
    return StoryExample(
        english=clause.english(), chinese=clause.chinese(), tokens=tuple(word.text for word in words),
        tags=tuple(word.tag for word in words), roles=tuple(word.role for word in words),
        subject_number=tuple(word.subject_number for word in words),
        antecedent=tuple(word.antecedent for word in words), topic=clause.topic)


# ------------------------------------------------------------------------------------------ entailment by monotonicity
_RESTRICTOR_UPWARD = {"the": True, "some": True, "every": False, "no": False}
_SCOPE_UPWARD = {"the": True, "some": True, "every": True, "no": False}


def entailment_label(quantifier: str, negated: bool, edit: str) -> str:
    """The label of a hypothesis made by one `edit` of a premise "QUANTIFIER [ADJ] NOUN [does not] VERB a [ADJ] NOUN".

    `edit` is one of `EDITS`. Dropping an adjective generalises, so it keeps the premise true where the position is
    upward monotone; adding one specialises, so it does where the position is downward monotone. Flipping the
    negation contradicts after "the" and is neutral after "some"; swapping "every" and "no", or "some" and "no",
    contradicts (the lab's nouns always name someone).

    >>> entailment_label("every", False, "add_subject_adjective"), entailment_label("no", False, "add_object_adjective")
    ('entailment', 'entailment')
    >>> entailment_label("the", True, "drop_object_adjective"), entailment_label("some", False, "flip_negation")
    ('neutral', 'neutral')
    """
    if edit == "flip_negation":
        return "neutral" if quantifier == "some" else "contradiction"
    if edit == "swap_quantifier":
        return "contradiction"
    direction, position = edit.split("_")[:2]
    upward = _RESTRICTOR_UPWARD[quantifier] if position == "subject" else _SCOPE_UPWARD[quantifier] != negated
    return "entailment" if (direction == "drop") == upward else "neutral"


EDITS = ("drop_subject_adjective", "add_subject_adjective", "drop_object_adjective", "add_object_adjective",
         "flip_negation", "swap_quantifier")
_SWAPPED = {"every": "no", "no": "every", "some": "no"}


def _entailment_pair(rng: random.Random) -> StoryPair:
    premise = _quantified_clause(rng, rng.choice(TOPICS), ("the", "every", "no", "some"), adjective_probability=0.5)
    quantifier = premise.subject.determiner
    draw = rng.random()
    if quantifier in ("the", "some") and draw < 0.3:
        edit = "flip_negation"
        hypothesis = replace(premise, negated=not premise.negated)
    elif quantifier in _SWAPPED and not premise.negated and draw > 0.85:
        edit = "swap_quantifier"
        swapped = _SWAPPED[quantifier]
        number = "PL" if swapped == "some" else "SG"
        hypothesis = replace(premise, subject=replace(premise.subject, determiner=swapped, number=number))
    else:
        field = rng.choice(("subject", "object"))
        phrase = getattr(premise, field)
        edit = ("drop_" if phrase.adjective is not None else "add_") + field + "_adjective"
        adjective = None if phrase.adjective is not None else rng.choice(ADJECTIVES)
        hypothesis = replace(premise, **{field: replace(phrase, adjective=adjective)})
    return StoryPair(premise.english(), hypothesis.english(), entailment_label(quantifier, premise.negated, edit))


def story_dataset(seed: int = 0, n_sentences: int = 8000) -> StoryData:
    """Generate `n_sentences` labelled sentences in stories of 2 to 4 (the last may be cut short) and as many
    entailment pairs. Example: `story_dataset(0, 3).examples[0].english` is the same string on every run and machine.
    """
    if isinstance(n_sentences, bool) or not isinstance(n_sentences, int) or n_sentences < 1:
        raise LabError("n_sentences must be a positive whole number, got {n_sentences!r}", n_sentences=n_sentences)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabError("seed must be a whole number, got {seed!r}", seed=seed)
    rng = random.Random(seed)
    clauses: list[_Clause] = []
    story_ids: list[int] = []
    story_id = 0
    while len(clauses) < n_sentences:
        story = _story(rng, rng.randint(2, 4))[:n_sentences - len(clauses)]
        clauses += story
        story_ids += [story_id] * len(story)
        story_id += 1
    pair_rng = random.Random(f"entailment/{seed}")  # a separate stream: changing pairs never changes sentences
    return StoryData(seed=seed, examples=tuple(_example(clause) for clause in clauses), story_ids=tuple(story_ids),
                     pairs=tuple(_entailment_pair(pair_rng) for _ in clauses))


# ------------------------------------------------------------------------------------------------ the grammar check
@dataclass(frozen=True)
class SentenceParse:
    tags: tuple[str, ...]
    roles: tuple[str, ...]
    subject_number: str  # the number the verb agrees with


def parse_sentence(sentence) -> SentenceParse | None:
    """The parse of one sentence of the language (a string, or its words), or None when it is not one.

    The check is syntactic and includes agreement: determiner and noun, subject and verb (across a modifier), a
    relative clause's verb and its head; it does not check which verbs suit which topic. The final "." is required.

    >>> parse_sentence("the cooks near a dog cook some fish .").tags
    ('DET', 'NOUN', 'PREP', 'DET', 'NOUN', 'VERB', 'DET', 'NOUN', 'PUNCT')
    >>> parse_sentence("the cook near the dogs cook some fish .") is None  # the verb agrees with the dogs
    True
    """
    tokens = tuple(sentence.split()) if isinstance(sentence, str) else tuple(sentence)
    for subject in _subjects(tokens):
        tags, roles, number, index, quantifier = subject
        verb_phrase = _verb_phrase(tokens, index, number, allow_negation=quantifier != "no")
        if verb_phrase is None:
            continue
        verb_tags, index = verb_phrase
        tags, roles = tags + verb_tags, roles + ("VERB",) * len(verb_tags)
        obj = _plain_noun_phrase(tokens, index)
        if obj is None:
            continue
        object_tags, _, index = obj
        tags, roles = tags + object_tags, roles + ("OBJ",) * len(object_tags)
        if index + 3 < len(tokens) and tokens[index + 1] == "the" and tokens[index] in PLACE_WORDS.get(
                tokens[index + 2], ()):
            tags, roles, index = tags + ("PREP", "DET", "NOUN"), roles + ("PLACE",) * 3, index + 3
        if index == len(tokens) - 1 and tokens[index] == ".":
            return SentenceParse(tags + ("PUNCT",), roles + ("PUNCT",), number)
    return None


def grammatical(sentence) -> bool:
    """Whether `sentence` is a sentence of the language (see `parse_sentence`)."""
    return parse_sentence(sentence) is not None


def _plain_noun_phrase(tokens, index):
    """DET_n [ADJ] NOUN_n at `index`: (tags, number, next index), or None."""
    if index >= len(tokens):
        return None
    determiner = tokens[index]
    numbers = {number for number, words in _DETERMINERS.items() if determiner in words}
    tags, index = ("DET",), index + 1
    if index < len(tokens) and tokens[index] in _ADJECTIVES:
        tags, index = tags + ("ADJ",), index + 1
    if not numbers or index >= len(tokens):
        return None
    numbers &= NOUN_NUMBER.get(tokens[index], frozenset())
    if not numbers:
        return None
    number = "SG" if numbers == {"SG"} else "PL" if numbers == {"PL"} else "SG|PL"
    return tags + ("NOUN",), number, index + 1


def _agrees(number: str, wanted: str) -> bool:
    return wanted in number.split("|")


def _subjects(tokens):
    """Every way the sentence can start with a subject: (tags, roles, number, next index, quantifier)."""
    if not tokens:
        return
    first = tokens[0]
    if first in PRONOUNS:
        yield ("PRON",), ("SUBJ",), "PL" if first == _PLURAL_PRONOUN else "SG", 1, None
        return
    if first in ("every", "no"):
        index, tags = 1, ("DET",)
        if index < len(tokens) and tokens[index] in _ADJECTIVES:
            index, tags = index + 1, tags + ("ADJ",)
        if index < len(tokens) and "SG" in NOUN_NUMBER.get(tokens[index], ()):
            yield tags + ("NOUN",), ("SUBJ",) * (len(tags) + 1), "SG", index + 1, first
        return
    head = _plain_noun_phrase(tokens, 0)
    if head is None:
        return
    head_tags, head_numbers, index = head
    for number in head_numbers.split("|"):
        yield head_tags, ("SUBJ",) * len(head_tags), number, index, tokens[0]
        modifier = _modifier_at(tokens, index, number)
        if modifier is not None:
            modifier_tags, after = modifier
            yield (head_tags + modifier_tags, ("SUBJ",) * len(head_tags) + ("MOD",) * len(modifier_tags), number,
                   after, tokens[0])


def _modifier_at(tokens, index, head_number):
    if index >= len(tokens):
        return None
    if tokens[index] in _MODIFIER_PREPOSITIONS:
        phrase = _plain_noun_phrase(tokens, index + 1)
        return None if phrase is None else (("PREP",) + phrase[0], phrase[2])
    if tokens[index] == "that" and index + 1 < len(tokens) and VERB_NUMBER.get(tokens[index + 1]) == head_number:
        phrase = _plain_noun_phrase(tokens, index + 2)
        return None if phrase is None else (("REL", "VERB") + phrase[0], phrase[2])
    return None


def _verb_phrase(tokens, index, number, allow_negation: bool):
    if index >= len(tokens):
        return None
    word = tokens[index]
    if word in ("does", "do"):
        auxiliary_number = "SG" if word == "does" else "PL"
        if (allow_negation and auxiliary_number == number and index + 2 < len(tokens) and tokens[index + 1] == "not"
                and tokens[index + 2] in VERB_BASES):
            return ("AUX", "NEG", "VERB"), index + 3
        return None
    if VERB_NUMBER.get(word) == number:
        return ("VERB",), index + 1
    return None
