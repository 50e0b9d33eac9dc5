"""The context tasks of the "stories" language, split as its corpus is, and the trivial baselines beside each.

    context_tasks(seed=0) -> {name: ContextTask}: the items of every task, train and validation
    baseline_table(seed=0) -> pandas.DataFrame, one row per task: the trivial baselines' validation accuracy

A model's score on a context task means something only beside what needs no context. For every task this module
computes the baselines that the issue of a fair comparison names, on the validation stories (the "stories" corpus's
validation split: a run pretrained on the corpus never saw them) with every count taken on the training stories:

    majority        always the training split's most frequent label (or answer)
    word identity   per word, its most frequent training label (a word task), the most frequent answer of the
                    blank's kind (a blank: the unigram model), or naive Bayes over the two sentences' words, each
                    marked with its side (a pair task: a bag of words)
    bigram          the most frequent answer after the previous word (blanks only; unseen: the unigram's answer)
    trigram         the same after the previous two words (blanks only; unseen: the bigram's answer)
    both sides      the most frequent answer between the previous and the next word (blanks only)

The random-init control (the run's architecture, never trained) belongs to the probes
(lab_models/inference/probing.py): it needs a model. A task on which word identity scores above
`CONTEXT_THRESHOLD` (0.6) is reported but does not count as a context task.

The tasks (lab_models/text/stories.py defines every label):

    task             unit       labels / answer                         items
    ambiguous_tags   word       NOUN VERB                               every occurrence of a form that is both a
                                                                        noun and a verb, balanced per form (as many
                                                                        noun as verb uses of each), so that the form
                                                                        alone says nothing
    antecedent       word       FIRST SECOND                            pronouns and "the NOUN" references
    subject_number   word       SG PL                                   the words of a modifier (attractor)
    reference        blank      the noun of a "the NOUN" reference      scored exactly
    reference_span   span       the two words "the NOUN" of the same    scored exactly (the span-infilling families;
                                references, hidden whole                a row of baseline_table, not a task of its own)
    agreement        blank      the verb after a modifier               any verb of the subject's number is right
    entailment       pair       entailment contradiction neutral        one per sentence
    order            pair       in order / swapped                      two consecutive sentences of a story
    next_sentence    pair       next / random                           a sentence and the next or a random one

Deviations: the baselines are counts and naive Bayes, not trained networks: the floor a network must clear, not the
best that its embedding layer alone could do (the probes' embedding layer, layer 0, is that).
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

from lab_models.text.corpora import split_train_validation
from lab_models.text.stories import (AMBIGUOUS_FORMS, ANTECEDENTS, ENTAILMENT_LABELS, NO_LABEL, NUMBERS,
                                     StoryBlank, StoryData, StoryExample, story_blanks, story_dataset)

STORIES_SEED = 0  # the "stories" corpus's seed and size (lab_models/text/corpora.py: _load_stories)
STORIES_SENTENCES = 8000
HELD_OUT_SEED = 1  # more validation stories, from a seed the corpus was not drawn from
HELD_OUT_SENTENCES = 3000
CONTEXT_THRESHOLD = 0.6
WORD_TASKS = ("ambiguous_tags", "antecedent", "subject_number")
BLANK_TASKS = ("reference", "agreement")
PAIR_TASKS = ("entailment", "order", "next_sentence")
TASK_LABELS: dict[str, tuple[str, ...]] = {"ambiguous_tags": ("NOUN", "VERB"), "antecedent": ANTECEDENTS,
                                           "subject_number": NUMBERS, "entailment": ENTAILMENT_LABELS,
                                           "order": ("swapped", "in order"), "next_sentence": ("random", "next")}


@dataclass(frozen=True)
class WordItem:
    words: tuple[str, ...]  # the story's words (every sentence, in order)
    position: int  # the labelled word's index in `words`
    label: str

    @property
    def word(self) -> str:
        return self.words[self.position]


@dataclass(frozen=True)
class PairItem:
    first: str
    second: str
    label: str


@dataclass(frozen=True)
class ContextTask:
    name: str
    unit: str  # "word", "blank" or "pair"
    train: tuple
    validation: tuple


def story_split(seed: int = STORIES_SEED, n_sentences: int = STORIES_SENTENCES):
    """(data, the indices of the training stories, of the validation stories), split by the hash of each story's
    English text, as the corpus is."""
    data = story_dataset(seed=seed, n_sentences=n_sentences)
    texts = [" ".join(example.english for example in story) for story in data.stories()]
    _, validation_texts = split_train_validation(texts)
    in_validation = set(validation_texts)
    validation = tuple(index for index, text in enumerate(texts) if text in in_validation)
    train = tuple(index for index, text in enumerate(texts) if text not in in_validation)
    return data, train, validation


def _word_items(stories, story_indices, task: str) -> tuple[WordItem, ...]:
    items = []
    for story_index in story_indices:
        story = stories[story_index]
        words = tuple(token for example in story for token in example.tokens)
        offset = 0
        for example in story:
            for position in range(len(example.tokens)):
                label = _word_label(example, position, task)
                if label is not None:
                    items.append(WordItem(words, offset + position, label))
            offset += len(example.tokens)
    if task == "ambiguous_tags":
        items = _balanced_per_form(items)
    return tuple(items)


def _word_label(example: StoryExample, position: int, task: str) -> str | None:
    if task == "ambiguous_tags":
        tag = example.tags[position]
        return tag if example.tokens[position] in AMBIGUOUS_FORMS and tag in ("NOUN", "VERB") else None
    label = (example.antecedent if task == "antecedent" else example.subject_number)[position]
    return None if label == NO_LABEL else label


def _balanced_per_form(items: list[WordItem]) -> list[WordItem]:
    """The first k noun and the first k verb uses of each form, k the rarer use's count, in corpus order."""
    by_form: dict[str, Counter] = defaultdict(Counter)
    for item in items:
        by_form[item.word][item.label] += 1
    quota = {form: min(counts["NOUN"], counts["VERB"]) for form, counts in by_form.items()}
    taken: Counter = Counter()
    kept = []
    for item in items:
        key = (item.word, item.label)
        if taken[key] < quota[key[0]]:
            taken[key] += 1
            kept.append(item)
    return kept


def _pair_items(data: StoryData, story_indices, task: str) -> tuple[PairItem, ...]:
    """The pairs of `task` drawn from the stories `story_indices` (indices into `data.stories()`; every pair belongs
    to the story of its first sentence: one entailment pair per sentence, one order or next-sentence pair per
    sentence with a successor)."""
    if task == "entailment":  # data.story_ids count the stories from 0, in order: a story's id is its index
        items = [PairItem(pair.premise, pair.hypothesis, pair.label) for pair in data.pairs]
        owners = list(data.story_ids)
    else:
        pairs = data.order_pairs() if task == "order" else data.next_sentence_pairs()
        owners = [index for index, story in enumerate(data.stories()) for _ in story[1:]]
        flag = "in_order" if task == "order" else "is_next"
        items = [PairItem(pair.first, pair.second, TASK_LABELS[task][getattr(pair, flag)]) for pair in pairs]
    chosen = set(story_indices)
    return tuple(item for owner, item in zip(owners, items) if owner in chosen)


def _blank_items(stories, story_indices, kind: str) -> tuple[StoryBlank, ...]:
    return tuple(blank for index in story_indices for blank in story_blanks(stories[index]) if blank.kind == kind)


def _items(data: StoryData, story_indices, name: str) -> tuple:
    if name in WORD_TASKS:
        return _word_items(data.stories(), story_indices, name)
    if name in BLANK_TASKS:
        return _blank_items(data.stories(), story_indices, name)
    return _pair_items(data, story_indices, name)


@lru_cache(maxsize=4)
def context_tasks(seed: int = STORIES_SEED, n_sentences: int = STORIES_SENTENCES) -> dict[str, ContextTask]:
    """Every context task of the language: its items in the corpus's training stories, and in its validation
    stories followed by the stories of `HELD_OUT_SEED` that are not in the corpus's training split (a bigger
    held-out set than the corpus's 5%: tighter intervals)."""
    data, train_indices, validation_indices = story_split(seed, n_sentences)
    held_out = story_dataset(seed=HELD_OUT_SEED if seed != HELD_OUT_SEED else seed + 1,
                             n_sentences=HELD_OUT_SENTENCES)
    training_texts = {" ".join(example.english for example in data.stories()[index]) for index in train_indices}
    held_out_indices = [index for index, story in enumerate(held_out.stories())
                        if " ".join(example.english for example in story) not in training_texts]
    tasks: dict[str, ContextTask] = {}
    for name in WORD_TASKS + BLANK_TASKS + PAIR_TASKS:
        unit = "word" if name in WORD_TASKS else "blank" if name in BLANK_TASKS else "pair"
        validation = _items(data, validation_indices, name) + _items(held_out, held_out_indices, name)
        if name == "ambiguous_tags":  # balanced per form over the whole validation set
            validation = tuple(_balanced_per_form(list(validation)))
        tasks[name] = ContextTask(name, unit, _items(data, train_indices, name), validation)
    return tasks


# ------------------------------------------------------------------------------------------------------ baselines
def _accuracy(predictions, items, right) -> float:
    return sum(right(item, guess) for item, guess in zip(items, predictions)) / max(len(items), 1)


def _most_frequent(counter: Counter) -> str:
    # ties go to the alphabetically first answer, so the baseline does not depend on the order of the counts
    return min(counter.items(), key=lambda item: (-item[1], item[0]))[0]


def word_baselines(task: ContextTask) -> dict[str, float]:
    """majority and word identity for a word task."""
    majority = _most_frequent(Counter(item.label for item in task.train))
    by_word: dict[str, Counter] = defaultdict(Counter)
    for item in task.train:
        by_word[item.word][item.label] += 1
    identity = [_most_frequent(by_word[item.word]) if item.word in by_word else majority
                for item in task.validation]

    def right(item, guess):
        return item.label == guess
    return {"majority": _accuracy([majority] * len(task.validation), task.validation, right),
            "word_identity": _accuracy(identity, task.validation, right)}


def _context_key(blank: StoryBlank, before: int, after: int) -> tuple[str, ...]:
    words = ("<s>",) * before + blank.story + ("</s>",) * after
    position = blank.position + before
    return words[position - before:position] + words[position + 1:position + 1 + after]


def blank_baselines(task: ContextTask) -> dict[str, float]:
    """The unigram (majority and word identity alike), bigram, trigram and both-sides n-gram answers of a blank task."""
    def right(item: StoryBlank, guess: str) -> bool:
        return item.is_right(guess)

    unigram = _most_frequent(Counter(blank.answer for blank in task.train))
    scores = {"majority": _accuracy([unigram] * len(task.validation), task.validation, right)}
    scores["word_identity"] = scores["majority"]  # a blank's own word is hidden: word identity is the unigram
    for name, before, after in (("bigram", 1, 0), ("trigram", 2, 0), ("both_sides", 1, 1)):
        table: dict[tuple, Counter] = defaultdict(Counter)
        for blank in task.train:
            table[_context_key(blank, before, after)][blank.answer] += 1
        backoff: dict[tuple, Counter] = defaultdict(Counter)
        for blank in task.train:
            backoff[_context_key(blank, 1, 0)][blank.answer] += 1
        guesses = []
        for blank in task.validation:
            key = _context_key(blank, before, after)
            if key in table:
                guesses.append(_most_frequent(table[key]))
            else:
                shorter = _context_key(blank, 1, 0)
                guesses.append(_most_frequent(backoff[shorter]) if shorter in backoff else unigram)
        scores[name] = _accuracy(guesses, task.validation, right)
    return scores


def pair_baselines(task: ContextTask) -> dict[str, float]:
    """majority and a bag of words (multinomial naive Bayes, add-one smoothing, each word marked with its side)."""
    label_counts = Counter(item.label for item in task.train)
    majority = _most_frequent(label_counts)
    word_counts: dict[str, Counter] = defaultdict(Counter)
    for item in task.train:
        word_counts[item.label].update(_side_words(item))
    vocabulary = {word for counts in word_counts.values() for word in counts}
    totals = {label: sum(counts.values()) for label, counts in word_counts.items()}

    def predict(item: PairItem) -> str:
        def score(label):
            prior = math.log(label_counts[label] / len(task.train))
            return prior + sum(math.log((word_counts[label][word] + 1) / (totals[label] + len(vocabulary)))
                               for word in _side_words(item))
        return max(sorted(label_counts), key=score)

    def right(item, guess):
        return item.label == guess
    return {"majority": _accuracy([majority] * len(task.validation), task.validation, right),
            "word_identity": _accuracy([predict(item) for item in task.validation], task.validation, right)}


def _side_words(item: PairItem) -> list[str]:
    return [f"1:{word}" for word in item.first.split()] + [f"2:{word}" for word in item.second.split()]


def _span_key(blank: StoryBlank, before: int, after: int) -> tuple[str, ...]:
    """The words around the two-word span "the NOUN" of a reference blank (the noun at blank.position)."""
    words = ("<s>",) * before + blank.story + ("</s>",) * after
    start, end = blank.position - 1 + before, blank.position + 1 + before  # the span is words[start:end]
    return words[start - before:start] + words[end:end + after]


def span_baselines(task: ContextTask) -> dict[str, float]:
    """The n-gram answers to the two-word span "the NOUN" of every reference blank, hidden whole (what the
    span-infilling families fill): the most frequent span (majority; word identity alike: nothing of the span is
    shown), and the most frequent span after the previous word (bigram), the previous two (trigram), or between the
    previous and the next word (both sides), each backing off to the bigram's answer, then to the majority's. Every
    span starts with "the", so a span is right when its noun is.

    >>> scores = span_baselines(context_tasks()["reference"])
    >>> {name: round(value, 3) for name, value in sorted(scores.items())}
    {'bigram': 0.042, 'both_sides': 0.071, 'majority': 0.024, 'trigram': 0.281, 'word_identity': 0.024}
    """
    def right(item: StoryBlank, guess: str) -> bool:
        return item.is_right(guess)

    unigram = _most_frequent(Counter(blank.answer for blank in task.train))
    scores = {"majority": _accuracy([unigram] * len(task.validation), task.validation, right)}
    scores["word_identity"] = scores["majority"]
    backoff: dict[tuple, Counter] = defaultdict(Counter)
    for blank in task.train:
        backoff[_span_key(blank, 1, 0)][blank.answer] += 1
    for name, before, after in (("bigram", 1, 0), ("trigram", 2, 0), ("both_sides", 1, 1)):
        table: dict[tuple, Counter] = defaultdict(Counter)
        for blank in task.train:
            table[_span_key(blank, before, after)][blank.answer] += 1
        guesses = []
        for blank in task.validation:
            key, shorter = _span_key(blank, before, after), _span_key(blank, 1, 0)
            guesses.append(_most_frequent(table[key]) if key in table else
                           _most_frequent(backoff[shorter]) if shorter in backoff else unigram)
        scores[name] = _accuracy(guesses, task.validation, right)
    return scores


BASELINES = ("majority", "word_identity", "bigram", "trigram", "both_sides")
SPAN_TASK = "reference_span"  # baseline_table's row for the span "the NOUN" of the reference blanks


def baseline_table(seed: int = STORIES_SEED, n_sentences: int = STORIES_SENTENCES) -> pd.DataFrame:
    """One row per context task (and SPAN_TASK, the reference blanks' two-word spans, after "reference"): unit,
    validation items, each trivial baseline's accuracy (NaN where it does not apply), the best of them, and whether
    the task counts as a context task (word identity <= CONTEXT_THRESHOLD)."""
    rows = []
    for name, task in context_tasks(seed, n_sentences).items():
        baselines = {"word": word_baselines, "blank": blank_baselines, "pair": pair_baselines}[task.unit](task)
        rows.append({"task": name, "unit": task.unit, "train_items": len(task.train),
                     "validation_items": len(task.validation),
                     **{baseline: baselines.get(baseline, float("nan")) for baseline in BASELINES},
                     "best_baseline": max(baselines.values()),
                     "context_task": baselines["word_identity"] <= CONTEXT_THRESHOLD})
        if name == "reference":
            spans = span_baselines(task)
            rows.append({"task": SPAN_TASK, "unit": "span", "train_items": len(task.train),
                         "validation_items": len(task.validation), **spans, "best_baseline": max(spans.values()),
                         "context_task": spans["word_identity"] <= CONTEXT_THRESHOLD})
    return pd.DataFrame(rows)
