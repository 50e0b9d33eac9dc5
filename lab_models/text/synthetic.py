"""The "synthetic" corpus: a small seeded grammar of English sentences with Chinese translations and labels.

What it is
----------
A toy world small enough for a tiny model to learn on a CPU in minutes, and regular enough that every label is decided
by the grammar itself, so a reader can check what a model got right. `synthetic_dataset(seed, n_sentences)` returns
`SyntheticData`: labelled sentences (`SyntheticExample`), entailment pairs (`SyntheticPair`), parallel English/Chinese
pairs and next-sentence pairs. Everything is deterministic from the seed: all randomness flows through one
`random.Random(seed)`, never the global generator.

What it follows and how it deviates
-----------------------------------
It follows the classic uses of small generated languages for probing models (a fixed lexicon, a context-free template,
labels computed from the derivation). It deviates from natural language on purpose: every sentence is one clause,
there are no plurals or tenses, and lexical choices are only loosely sensible ("a cat fears a blue stick" is fine).

The grammar
-----------
A *story* is 2 to 4 consecutive sentences about one topic and one protagonist (an agent noun of that topic). The first
sentence introduces the protagonist with a determiner; later sentences refer back with "the NOUN" or a pronoun
("it", "he", "she"), so consecutive sentences share a topic and a referent.

    SENTENCE  -> SUBJECT VERB_PHRASE OBJECT [ADVERB] [PLACE] "."
    SUBJECT   -> DET [ADJ] AGENT_NOUN | PRONOUN                (pronouns only after a story's first sentence)
    VERB_PHRASE -> VERB_3SG | "does" "not" VERB_BASE           (about one sentence in five is negated)
    OBJECT    -> DET [ADJ] OBJECT_NOUN
    PLACE     -> PREP "the" PLACE_NOUN                         (e.g. "in the park", "at the market")
    DET       -> "the" | "a" | "this" | "that" | "my" | "your"

Negated sentences never take an adverb. Nouns, verbs and places belong to a topic; some verbs (e.g. "eats", "reads")
only appear with their topics, the rest with all of them.

The Chinese translation is built from the same derivation, with Chinese word order:

    SUBJECT [在 PLACE 里/上/边] [ADVERB地] [不/没] VERB OBJECT 。

A determiner becomes: "the" -> nothing, "a" -> 一 + classifier, "this" -> 这 + classifier, "that" -> 那 + classifier,
"my" -> 我的, "your" -> 你的. A one-character adjective attaches directly to the noun (小猫); a longer one takes 的
(美丽的猫). Example: "the small cat sees a red ball ." -> "小猫看见一个红球。".

The labels
----------
* `tokens`: the English words, split on spaces; the final "." is a token.
* `tags`: one per token, from `TAGS`: DET (determiner), ADJ (adjective), NOUN (noun), PRON (pronoun), VERB (main verb),
  AUX ("does" in a negation), NEG ("not"), ADV (adverb), PREP (preposition), PUNCT (the final ".").
* `roles` (`phrase_roles(tags)`), one per token, from `ROLES`: the phrase of the derivation the word sits in:
  SUBJ (the subject noun phrase or pronoun), VERB ("does not" and the verb), OBJ (the object noun phrase), ADV,
  PLACE (the preposition, "the" and the place noun), PUNCT. Unlike `tags`, which the word alone decides (every word
  of the lexicon but "cook" has one tag), a role needs the context: "the" and the adjectives are SUBJ, OBJ or PLACE
  by where they stand (a chunking-like label, the contextual probe of lab_models/inference/probing.py).
* `sentiment`, one of `SENTIMENT_LABELS`: add up the polarity (+1, 0 or -1, from `SENTIMENT_LEXICON`) of every
  adjective, the verb and the adverb; negation ("does not") multiplies the verb's polarity by -1. A positive sum is
  "positive", a negative sum "negative", zero "neutral". E.g. "the happy dog likes a ball ." scores +2 ("positive"),
  "the dog does not like a ball ." -1 ("negative").
* `topic`, one of `TOPICS`: the topic the story was drawn from; every noun belongs to exactly one topic (`NOUN_TOPICS`).
* `SyntheticPair.label`, one of `ENTAILMENT_LABELS`, for a premise (a sentence of the corpus, with its subject made
  definite: "the NOUN") and a hypothesis:
    - "entailment": for an affirmative premise, the hypothesis drops one or more modifiers (adjectives, adverb, place);
      for a negated premise it adds one (an adjective on an indefinite object, or a place), since negation reverses
      which direction is safe ("the cat does not see a ball" entails "the cat does not see a red ball").
    - "contradiction": the hypothesis flips the negation (an affirmative premise loses its adverb when negated).
    - "neutral": the hypothesis names a different object of the same topic, or (affirmative premises) adds a modifier
      the premise does not mention.
* `NextSentencePair.is_next`: True when `second` is the sentence that follows `first` in the same story, False when
  `second` is a sentence drawn from a different story.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from lab_models.messages import LabError

TAGS = ("DET", "ADJ", "NOUN", "PRON", "VERB", "AUX", "NEG", "ADV", "PREP", "PUNCT")
ROLES = ("SUBJ", "VERB", "OBJ", "ADV", "PLACE", "PUNCT")
SENTIMENT_LABELS = ("negative", "neutral", "positive")
ENTAILMENT_LABELS = ("entailment", "contradiction", "neutral")
TOPICS = ("animals", "food", "city", "school", "sports")


# ----------------------------------------------------------------------------------------------------------- lexicon
@dataclass(frozen=True)
class _Noun:
    english: str
    chinese: str
    classifier: str  # the Chinese measure word used after 一/这/那
    pronoun: str = "it"  # only agents are referred back to


@dataclass(frozen=True)
class _Place:
    preposition: str
    english: str
    chinese: str  # the whole Chinese phrase, e.g. 在公园里


@dataclass(frozen=True)
class _Topic:
    agents: tuple[_Noun, ...]
    objects: tuple[_Noun, ...]
    places: tuple[_Place, ...]


@dataclass(frozen=True)
class _Verb:
    third_person: str
    base: str
    chinese: str
    negator: str  # 不 for states and habits, 没 for verbs of perceiving or achieving
    polarity: int
    topics: tuple[str, ...] = TOPICS


@dataclass(frozen=True)
class _Word:
    english: str
    chinese: str
    polarity: int = 0


def _nouns(spec: str) -> tuple[_Noun, ...]:
    """'cat 猫 只 it, dog 狗 只' -> two nouns (pronoun defaults to 'it')."""
    return tuple(_Noun(*item.split()) for item in spec.split(","))


def _places(*items: tuple[str, str, str]) -> tuple[_Place, ...]:
    return tuple(_Place(*item) for item in items)


_TOPICS: dict[str, _Topic] = {
    "animals": _Topic(
        agents=_nouns("cat 猫 只, dog 狗 只, bird 鸟 只, horse 马 匹, rabbit 兔子 只, tiger 老虎 只, monkey 猴子 只,"
                      " duck 鸭子 只"),
        objects=_nouns("ball 球 个, bone 骨头 根, carrot 胡萝卜 根, stick 树枝 根, mouse 老鼠 只, nest 鸟窝 个,"
                       " worm 虫子 条, leaf 叶子 片, fish 鱼 条, feather 羽毛 根"),
        places=_places(("in", "park", "在公园里"), ("in", "forest", "在森林里"), ("on", "farm", "在农场上"),
                       ("at", "zoo", "在动物园里"), ("by", "river", "在河边")),
    ),
    "food": _Topic(
        agents=_nouns("cook 厨师 位 he, child 孩子 个 she, farmer 农民 位 he, girl 女孩 个 she, boy 男孩 个 he,"
                      " waiter 服务员 位 he, baker 面包师 位 she, guest 客人 位 she"),
        objects=_nouns("apple 苹果 个, soup 汤 碗, bread 面包 块, cake 蛋糕 块, dumpling 饺子 个, egg 鸡蛋 个,"
                       " orange 橙子 个, banana 香蕉 根, pie 馅饼 个, sandwich 三明治 个"),
        places=_places(("in", "kitchen", "在厨房里"), ("at", "market", "在市场上"),
                       ("in", "restaurant", "在饭馆里"), ("in", "garden", "在花园里")),
    ),
    "city": _Topic(
        agents=_nouns("driver 司机 位 he, officer 警察 位 she, doctor 医生 位 she, worker 工人 位 he,"
                      " tourist 游客 位 she, man 男人 个 he, woman 女人 个 she, artist 艺术家 位 he"),
        objects=_nouns("bus 公共汽车 辆, car 汽车 辆, bike 自行车 辆, bridge 桥 座, building 大楼 座, map 地图 张,"
                       " ticket 票 张, shop 商店 家, lamp 路灯 盏, taxi 出租车 辆"),
        places=_places(("on", "street", "在街上"), ("at", "station", "在车站里"), ("in", "city", "在城市里"),
                       ("near", "hospital", "在医院边")),
    ),
    "school": _Topic(
        agents=_nouns("student 学生 个 he, teacher 老师 位 she, classmate 同学 个 she, principal 校长 位 he,"
                      " librarian 图书管理员 位 she, pupil 小学生 个 he, tutor 辅导员 位 she, writer 作家 位 he"),
        objects=_nouns("book 书 本, pen 笔 支, letter 信 封, lesson 课 节, desk 桌子 张, picture 画 幅, poem 诗 首,"
                       " story 故事 个, song 歌 首, computer 电脑 台"),
        places=_places(("in", "classroom", "在教室里"), ("in", "library", "在图书馆里"),
                       ("at", "school", "在学校里"), ("in", "hall", "在礼堂里")),
    ),
    "sports": _Topic(
        agents=_nouns("player 球员 名 he, coach 教练 位 she, runner 跑步者 名 she, swimmer 游泳者 名 he,"
                      " referee 裁判 名 he, fan 球迷 个 she, captain 队长 名 he, goalkeeper 守门员 名 she"),
        objects=_nouns("game 比赛 场, medal 奖牌 枚, shoe 鞋 只, net 网 张, trophy 奖杯 座, racket 球拍 个,"
                       " whistle 哨子 个, helmet 头盔 个, flag 旗子 面, glove 手套 只"),
        places=_places(("on", "field", "在球场上"), ("in", "gym", "在体育馆里"), ("at", "pool", "在游泳池边"),
                       ("at", "stadium", "在体育场里")),
    ),
}

_VERBS: tuple[_Verb, ...] = (
    _Verb("sees", "see", "看见", "没", 0),
    _Verb("finds", "find", "找到", "没", 0),
    _Verb("wants", "want", "想要", "不", 0),
    _Verb("needs", "need", "需要", "不", 0),
    _Verb("carries", "carry", "拿着", "没", 0),
    _Verb("watches", "watch", "看", "不", 0),
    _Verb("likes", "like", "喜欢", "不", 1),
    _Verb("loves", "love", "爱", "不", 1),
    _Verb("enjoys", "enjoy", "享受", "不", 1),
    _Verb("admires", "admire", "欣赏", "不", 1),
    _Verb("hates", "hate", "讨厌", "不", -1),
    _Verb("fears", "fear", "害怕", "不", -1),
    _Verb("ignores", "ignore", "忽视", "不", -1),
    _Verb("breaks", "break", "打破", "没", -1),
    _Verb("chases", "chase", "追", "不", 0, ("animals",)),
    _Verb("bites", "bite", "咬", "没", -1, ("animals",)),
    _Verb("eats", "eat", "吃", "不", 0, ("animals", "food")),
    _Verb("cooks", "cook", "做", "不", 0, ("food",)),
    _Verb("buys", "buy", "买", "不", 0, ("food", "city", "sports")),
    _Verb("sells", "sell", "卖", "不", 0, ("food", "city")),
    _Verb("drives", "drive", "开", "不", 0, ("city",)),
    _Verb("reads", "read", "读", "不", 0, ("school",)),
    _Verb("writes", "write", "写", "不", 0, ("school",)),
    _Verb("draws", "draw", "画", "不", 0, ("school",)),
    _Verb("wins", "win", "赢得", "没", 1, ("sports",)),
    _Verb("loses", "lose", "输掉", "没", -1, ("sports",)),
    _Verb("throws", "throw", "扔", "没", 0, ("sports", "animals")),
)

_ADJECTIVES: tuple[_Word, ...] = (
    _Word("big", "大"), _Word("small", "小"), _Word("red", "红"), _Word("blue", "蓝"), _Word("green", "绿"),
    _Word("white", "白"), _Word("black", "黑"), _Word("old", "老"), _Word("new", "新"), _Word("round", "圆"),
    _Word("good", "好", 1), _Word("happy", "快乐", 1), _Word("beautiful", "美丽", 1), _Word("clean", "干净", 1),
    _Word("friendly", "友好", 1), _Word("lovely", "可爱", 1),
    _Word("bad", "坏", -1), _Word("dirty", "脏", -1), _Word("ugly", "丑陋", -1), _Word("angry", "生气", -1),
    _Word("terrible", "糟糕", -1), _Word("broken", "破", -1),
)

_ADVERBS: tuple[_Word, ...] = (
    _Word("quickly", "很快地"), _Word("slowly", "慢慢地"), _Word("carefully", "小心地"), _Word("quietly", "安静地"),
    _Word("happily", "高兴地", 1), _Word("eagerly", "热情地", 1), _Word("sadly", "难过地", -1),
    _Word("angrily", "生气地", -1),
)

_DETERMINERS_CHINESE = {"the": "", "a": "一", "this": "这", "that": "那", "my": "我的", "your": "你的"}
_PRONOUNS_CHINESE = {"it": "它", "he": "他", "she": "她"}
DETERMINERS = tuple(_DETERMINERS_CHINESE)
PRONOUNS = tuple(_PRONOUNS_CHINESE)

# Public lookup tables, so tests and readers can recompute every label from the words alone.
SENTIMENT_LEXICON: dict[str, int] = {
    **{adjective.english: adjective.polarity for adjective in _ADJECTIVES},
    **{adverb.english: adverb.polarity for adverb in _ADVERBS},
    **{verb.third_person: verb.polarity for verb in _VERBS},
    **{verb.base: verb.polarity for verb in _VERBS},
}
NOUN_TOPICS: dict[str, str] = {
    noun: topic_name
    for topic_name, topic in _TOPICS.items()
    for noun in [agent.english for agent in topic.agents] + [thing.english for thing in topic.objects]
    + [place.english for place in topic.places]
}


def vocabulary() -> tuple[str, ...]:
    """Every English word the grammar can produce, sorted."""
    words = set(DETERMINERS) | set(PRONOUNS) | set(SENTIMENT_LEXICON) | set(NOUN_TOPICS) | {"does", "not", "."}
    words |= {place.preposition for topic in _TOPICS.values() for place in topic.places}
    return tuple(sorted(words))


# --------------------------------------------------------------------------------------------------- derivations
@dataclass(frozen=True)
class _NounPhrase:
    noun: _Noun
    determiner: str | None  # None means the noun is replaced by its pronoun
    adjective: _Word | None = None

    def english(self) -> list[tuple[str, str]]:
        if self.determiner is None:
            return [(self.noun.pronoun, "PRON")]
        words = [(self.determiner, "DET")]
        if self.adjective is not None:
            words.append((self.adjective.english, "ADJ"))
        return words + [(self.noun.english, "NOUN")]

    def chinese(self) -> str:
        if self.determiner is None:
            return _PRONOUNS_CHINESE[self.noun.pronoun]
        prefix = _DETERMINERS_CHINESE[self.determiner]
        if self.determiner in ("a", "this", "that"):
            prefix += self.noun.classifier
        adjective = ""
        if self.adjective is not None:
            adjective = self.adjective.chinese + ("" if len(self.adjective.chinese) == 1 else "的")
        return prefix + adjective + self.noun.chinese


@dataclass(frozen=True)
class _Clause:
    topic: str
    subject: _NounPhrase
    verb: _Verb
    negated: bool
    object: _NounPhrase
    adverb: _Word | None
    place: _Place | None

    def english_words(self) -> list[tuple[str, str]]:
        words = self.subject.english()
        if self.negated:
            words += [("does", "AUX"), ("not", "NEG"), (self.verb.base, "VERB")]
        else:
            words.append((self.verb.third_person, "VERB"))
        words += self.object.english()
        if self.adverb is not None:
            words.append((self.adverb.english, "ADV"))
        if self.place is not None:
            words += [(self.place.preposition, "PREP"), ("the", "DET"), (self.place.english, "NOUN")]
        return words + [(".", "PUNCT")]

    def english(self) -> str:
        return " ".join(word for word, _ in self.english_words())

    def chinese(self) -> str:
        parts = [self.subject.chinese()]
        if self.place is not None:
            parts.append(self.place.chinese)
        if self.adverb is not None:
            parts.append(self.adverb.chinese)
        if self.negated:
            parts.append(self.verb.negator)
        parts += [self.verb.chinese, self.object.chinese(), "。"]
        return "".join(parts)

    def sentiment(self) -> str:
        score = self.verb.polarity * (-1 if self.negated else 1)
        for modifier in (self.subject.adjective, self.object.adjective, self.adverb):
            if modifier is not None:
                score += modifier.polarity
        return SENTIMENT_LABELS[(score > 0) - (score < 0) + 1]


# ------------------------------------------------------------------------------------------------- public records
@dataclass(frozen=True)
class SyntheticExample:
    english: str  # "the small cat sees a red ball ."
    chinese: str  # "小猫看见一个红球。"
    tokens: tuple[str, ...]  # the English words
    tags: tuple[str, ...]  # one of TAGS per token
    sentiment: str  # one of SENTIMENT_LABELS
    topic: str  # one of TOPICS


    @property
    def roles(self) -> tuple[str, ...]:
        """The phrase of each token (`phrase_roles` of its tags)."""
        return phrase_roles(self.tags)


def phrase_roles(tags) -> tuple[str, ...]:
    """The role (one of `ROLES`) of each word of a sentence of the grammar, from its tags: the words before the
    verb phrase are the subject, AUX/NEG/VERB the verb phrase, then the object up to an adverb, a preposition
    (the place phrase runs to the end) or the full stop.

    >>> phrase_roles(("DET", "ADJ", "NOUN", "AUX", "NEG", "VERB", "DET", "NOUN", "PREP", "DET", "NOUN", "PUNCT"))
    ('SUBJ', 'SUBJ', 'SUBJ', 'VERB', 'VERB', 'VERB', 'OBJ', 'OBJ', 'PLACE', 'PLACE', 'PLACE', 'PUNCT')
    >>> phrase_roles(("PRON", "VERB", "DET", "NOUN", "ADV", "PUNCT"))
    ('SUBJ', 'VERB', 'OBJ', 'OBJ', 'ADV', 'PUNCT')
    """
    roles, phrase = [], "SUBJ"
    for tag in tags:
        if tag in ("AUX", "NEG", "VERB"):
            phrase = "VERB"
        elif phrase == "VERB":
            phrase = "OBJ"
        if tag == "ADV":
            phrase = "ADV"
        elif tag == "PREP":
            phrase = "PLACE"
        roles.append("PUNCT" if tag == "PUNCT" else phrase)
    return tuple(roles)


@dataclass(frozen=True)
class SyntheticPair:
    premise: str
    hypothesis: str
    label: str  # one of ENTAILMENT_LABELS


@dataclass(frozen=True)
class NextSentencePair:
    first: str
    second: str
    is_next: bool  # True: `second` follows `first` in its story; False: `second` comes from another story


class StoryCollection:
    """What a seeded language's stories give, for a frozen dataclass with `seed`, `examples` (each with `english` and
    `chinese`) and `story_ids` (the story each example belongs to; consecutive examples share a story): SyntheticData
    here and StoryData (lab_models/text/stories.py)."""

    def parallel_pairs(self) -> tuple[tuple[str, str], ...]:
        """(english, chinese) for every sentence, e.g. ("the small cat sees a red ball .", "小猫看见一个红球。")."""
        return tuple((example.english, example.chinese) for example in self.examples)

    def stories(self) -> tuple[tuple, ...]:
        """The examples grouped into their stories, in order."""
        grouped: list[list] = []
        previous = None
        for story_id, example in zip(self.story_ids, self.examples):
            if story_id != previous:
                grouped.append([])
                previous = story_id
            grouped[-1].append(example)
        return tuple(tuple(story) for story in grouped)

    def next_sentence_pairs(self, seed: int | None = None) -> tuple[NextSentencePair, ...]:
        """One pair per sentence that has a successor in its story: half the true next sentence, half a random one.

        The random sentence always comes from a different story. `seed` defaults to the dataset's seed.
        """
        rng = random.Random(f"next-sentence/{self.seed if seed is None else seed}")
        stories = self.stories()
        if len(stories) < 2:
            return ()
        pairs = []
        for story_index, story in enumerate(stories):
            for first, following in zip(story, story[1:]):
                if rng.random() < 0.5:
                    pairs.append(NextSentencePair(first.english, following.english, True))
                else:
                    other = rng.randrange(len(stories) - 1)
                    other += other >= story_index  # skip the current story
                    pairs.append(NextSentencePair(first.english, rng.choice(stories[other]).english, False))
        return tuple(pairs)

    def documents(self) -> tuple[str, ...]:
        """Each story as an English document followed by its Chinese translation as the next document."""
        documents = []
        for story in self.stories():
            documents.append(" ".join(example.english for example in story))
            documents.append("".join(example.chinese for example in story))
        return tuple(documents)


@dataclass(frozen=True)
class SyntheticData(StoryCollection):
    seed: int
    examples: tuple[SyntheticExample, ...]
    story_ids: tuple[int, ...]  # the story each example belongs to (consecutive examples share a story)
    pairs: tuple[SyntheticPair, ...]


# ----------------------------------------------------------------------------------------------------- sampling
def _sample_noun_phrase(rng: random.Random, noun: _Noun, adjective_probability: float) -> _NounPhrase:
    adjective = rng.choice(_ADJECTIVES) if rng.random() < adjective_probability else None
    return _NounPhrase(noun, rng.choice(DETERMINERS), adjective)


def _sample_clause(rng: random.Random, topic_name: str, protagonist: _Noun, first_in_story: bool) -> _Clause:
    topic = _TOPICS[topic_name]
    if first_in_story:
        subject = _sample_noun_phrase(rng, protagonist, 0.5)
    elif rng.random() < 0.5:
        subject = _NounPhrase(protagonist, None)  # a pronoun refers back to the protagonist
    else:
        subject = _NounPhrase(protagonist, "the")
    negated = rng.random() < 0.2
    verb = rng.choice([verb for verb in _VERBS if topic_name in verb.topics])
    obj = _sample_noun_phrase(rng, rng.choice(topic.objects), 0.6)
    adverb = rng.choice(_ADVERBS) if not negated and rng.random() < 0.3 else None
    place = rng.choice(topic.places) if rng.random() < 0.4 else None
    return _Clause(topic_name, subject, verb, negated, obj, adverb, place)


def _example(clause: _Clause) -> SyntheticExample:
    words = clause.english_words()
    return SyntheticExample(
        english=clause.english(),
        chinese=clause.chinese(),
        tokens=tuple(word for word, _ in words),
        tags=tuple(tag for _, tag in words),
        sentiment=clause.sentiment(),
        topic=clause.topic,
    )


def _definite(clause: _Clause) -> _Clause:
    """The clause with its subject as 'the [ADJ] NOUN', so that premise and hypothesis talk about the same referent."""
    return replace(clause, subject=replace(clause.subject, determiner="the"))


def _entailment_pair(rng: random.Random, premise: _Clause) -> _Clause | None:
    if not premise.negated:  # upward monotone: dropping modifiers keeps the sentence true
        droppable = [name for name in ("subject_adjective", "object_adjective", "adverb", "place")
                     if _modifier(premise, name) is not None]
        if not droppable:
            return None
        dropped = rng.sample(droppable, rng.randint(1, len(droppable)))
        hypothesis = premise
        for name in dropped:
            hypothesis = _without(hypothesis, name)
        return hypothesis
    # downward monotone under negation: adding restrictions keeps the sentence true
    options = []
    if premise.object.adjective is None and premise.object.determiner == "a":
        options.append("object_adjective")
    if premise.place is None:
        options.append("place")
    if not options:
        return None
    if rng.choice(options) == "object_adjective":
        return replace(premise, object=replace(premise.object, adjective=rng.choice(_ADJECTIVES)))
    return replace(premise, place=rng.choice(_TOPICS[premise.topic].places))


def _contradiction_pair(rng: random.Random, premise: _Clause) -> _Clause:
    if premise.negated:
        return replace(premise, negated=False)
    return replace(premise, negated=True, adverb=None)


def _neutral_pair(rng: random.Random, premise: _Clause) -> _Clause:
    if not premise.negated and premise.adverb is None and rng.random() < 0.5:
        return replace(premise, adverb=rng.choice(_ADVERBS))  # adds information the premise does not give
    others = [noun for noun in _TOPICS[premise.topic].objects if noun != premise.object.noun]
    return replace(premise, object=replace(premise.object, noun=rng.choice(others)))


def _modifier(clause: _Clause, name: str):
    return {"subject_adjective": clause.subject.adjective, "object_adjective": clause.object.adjective,
            "adverb": clause.adverb, "place": clause.place}[name]


def _without(clause: _Clause, name: str) -> _Clause:
    if name == "subject_adjective":
        return replace(clause, subject=replace(clause.subject, adjective=None))
    if name == "object_adjective":
        return replace(clause, object=replace(clause.object, adjective=None))
    return replace(clause, **{name: None})


def _sample_pair(rng: random.Random, clause: _Clause) -> SyntheticPair:
    premise = _definite(clause)
    labels = list(ENTAILMENT_LABELS)
    rng.shuffle(labels)
    for label in labels:
        if label == "entailment":
            hypothesis = _entailment_pair(rng, premise)
        elif label == "contradiction":
            hypothesis = _contradiction_pair(rng, premise)
        else:
            hypothesis = _neutral_pair(rng, premise)
        if hypothesis is not None:
            return SyntheticPair(premise.english(), hypothesis.english(), label)
    raise AssertionError("contradiction is always possible")  # pragma: no cover


def synthetic_dataset(seed: int = 0, n_sentences: int = 8000) -> SyntheticData:
    """Generate `n_sentences` labelled sentences (in stories of 2 to 4; the last may be cut short) and one pair each.

    Example: `synthetic_dataset(0, 3).examples[0].english` is the same string on every run and machine.
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
        topic_name = rng.choice(TOPICS)
        protagonist = rng.choice(_TOPICS[topic_name].agents)
        for position in range(min(rng.randint(2, 4), n_sentences - len(clauses))):
            clauses.append(_sample_clause(rng, topic_name, protagonist, first_in_story=position == 0))
            story_ids.append(story_id)
        story_id += 1
    pair_rng = random.Random(f"entailment/{seed}")  # separate stream: changing pairs never changes sentences
    return SyntheticData(
        seed=seed,
        examples=tuple(_example(clause) for clause in clauses),
        story_ids=tuple(story_ids),
        pairs=tuple(_sample_pair(pair_rng, clause) for clause in clauses),
    )
