"""Labelled tasks for fine-tuning: the built-in ones from the synthetic corpus, and a user's CSV file.

    load_task("topic")                          -> Task: 5-way sentence classification
    csv_task("reviews.csv", "text", "label")    -> Task: one label per row of a CSV file
    encode_words(tokenizer, words, tags)        -> token ids with the tags on each word's first sub-word piece

A `Task` holds its `kind` ("sequence": one label per text, "pair": one label per text pair, "token": one label per
word), its `label_names`, and two splits of `TaskExample`s. Labels are indices into `label_names`; a token task's
label is a tuple with one tag index per word of `text.split(" ")`.

The built-in tasks (`TASKS`), all from `synthetic_dataset(seed=0, n_sentences=8000)`, the data of the "synthetic"
corpus (lab_models/text/synthetic.py explains how every label follows from the grammar):

    name        kind      labels                                                    examples (train / validation)
    sentiment   sequence  negative, neutral, positive                               one per sentence
    topic       sequence  animals, food, city, school, sports                       one per sentence
    entailment  pair      entailment, contradiction, neutral                        one premise/hypothesis per sentence
    tagging     token     DET ADJ NOUN PRON VERB AUX NEG ADV PREP PUNCT (per word)  one per sentence

Two more come from the "stories" language (lab_models/text/stories.py), whose labels only the context decides, with
the splits of its context tasks (lab_models/text/story_tasks.py: training pairs from the stories corpus's training
stories, validation pairs from its validation stories and from stories of a second seed):

    scope        pair     entailment, contradiction, neutral   quantifier and negation scope (a bag of words: 0.46)
    story_order  pair     swapped, in order                    two consecutive sentences of a story

Splits. A sentence (and the entailment pair made from it) is in the validation split exactly when its story is in the
validation split of the "synthetic" corpus (the same hash of the story's text, lab_models/text/corpora.py), about 5% of
the stories. So the validation sentences of a fine-tuning are ones that a run pretrained on the synthetic corpus never
saw, and the split is the same on every machine and every call. The training sentences were seen, unlabelled, in
pretraining: the usual situation of a pretrained model meeting its downstream task's text.

Tagging alignment follows BERT (Devlin et al. 2019, §5.3, the CoNLL-2003 NER setup): each word is labelled on its
first sub-word piece, and the other pieces carry IGNORE_INDEX (no loss, not scored). Worked example (a WordPiece
vocabulary in which "cat" and "sat" split in two):

    words        the    cat         sat         .
    tags         DET    NOUN        VERB        PUNCT
    pieces       the    c   ##at    s   ##at    .
    labels       DET    NOUN  -     VERB  -     PUNCT        (- = IGNORE_INDEX)

Pieces are matched to words through the tokenizer's character offsets (a piece belongs to the word whose characters
it covers; a piece that covers only the space before a word, such as SentencePiece's lone "▁", belongs to the word
after it), so the rule works for all four tokenizer kinds, whatever their pre-tokenizer does with punctuation.

CSV files (`csv_task`): the first row is the header; the delimiter is whichever of `, ; TAB |` the header uses most
(as corpus uploads). Rows whose text (or pair text) or label is empty are skipped. Labels are the distinct label
values, sorted (numerically when they are all numbers). The split is by a hash of each row's text (20% validation),
so duplicates never straddle the split. Errors are ValueErrors a person can act on: a missing file, a binary or
non-UTF-8 file, a missing column, fewer than 2 classes, fewer than `MIN_CSV_ROWS` usable rows.
"""
from __future__ import annotations

import csv
import functools
import io
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX
from lab_models.text.corpus_files import csv_delimiter, decode_text, max_upload_bytes
from lab_models.text.corpora import split_train_validation
from lab_models.text.story_tasks import TASK_LABELS as STORY_TASK_LABELS
from lab_models.text.story_tasks import context_tasks
from lab_models.text.synthetic import ENTAILMENT_LABELS, SENTIMENT_LABELS, TAGS, TOPICS, synthetic_dataset

logger = logging.getLogger(__name__)


TASK_KINDS = ("sequence", "pair", "token")
STORY_ORDER_LABELS = STORY_TASK_LABELS["order"]  # ("swapped", "in order")
STORY_TASKS = {"scope": "entailment", "story_order": "order"}  # built-in task -> its stories context task
MIN_CSV_ROWS = 10  # fewer rows cannot make a training split and a validation split worth a number
MAX_CSV_CLASSES = 200  # more distinct labels than this almost always means the wrong column was picked
CSV_VALIDATION_FRACTION = 0.2
SYNTHETIC_SEED = 0  # the synthetic corpus's seed and size (lab_models/text/corpora.py: _load_synthetic)
SYNTHETIC_SENTENCES = 8000


@dataclass(frozen=True)
class TaskSpec:
    """A built-in task, before its examples are built (cheap: for menus)."""

    name: str
    kind: str
    title: str
    label_names: tuple[str, ...]
    description: Message


TASKS: dict[str, TaskSpec] = {
    "sentiment": TaskSpec("sentiment", "sequence", "Sentiment (3-way)", SENTIMENT_LABELS,
                          Message("Is the sentence negative, neutral or positive? The polarity of its adjectives, "
                                  "verb and adverb, with 'does not' flipping the verb.")),
    "topic": TaskSpec("topic", "sequence", "Topic (5-way)", TOPICS,
                      Message("Which of 5 topics is the sentence about? Every noun belongs to one topic.")),
    "entailment": TaskSpec("entailment", "pair", "Entailment (sentence pairs, 3-way)", ENTAILMENT_LABELS,
                           Message("Does the premise entail the hypothesis, contradict it, or neither? Dropping a "
                                   "modifier keeps an affirmative sentence true; negation reverses the direction.")),
    "tagging": TaskSpec("tagging", "token", "Word tagging (10 tags)", TAGS,
                        Message("A part-of-speech-like tag for every word, predicted on its first sub-word piece.")),
    "scope": TaskSpec("scope", "pair", "Quantifier scope (stories, sentence pairs, 3-way)", ENTAILMENT_LABELS,
                      Message("The stories language's entailment: every, no, some and the, with and without 'not'; "
                              "whether adding or dropping an adjective keeps the premise true depends on the "
                              "quantifier and the negation, so a bag of words scores near chance.")),
    "story_order": TaskSpec("story_order", "pair", "Story order (stories, sentence pairs, 2-way)", STORY_ORDER_LABELS,
                            Message("Are two consecutive sentences of a story in order, or swapped? A character is "
                                    "introduced ('a cat') before it is referred to ('the cat', 'it').")),
}


@dataclass(frozen=True)
class TaskExample:
    """One labelled example. `label`: a class index (sequence, pair) or one tag index per word (token)."""

    text: str
    label: int | tuple[int, ...]
    text_pair: str | None = None

    @property
    def words(self) -> list[str]:
        """The words a token task labels: the text split on single spaces."""
        return self.text.split(" ")


@dataclass(frozen=True)
class Task:
    """A labelled task with a training and a validation split."""

    name: str  # "topic", or "csv:<file name>"
    kind: str  # one of TASK_KINDS
    label_names: tuple[str, ...]
    train: tuple[TaskExample, ...]
    validation: tuple[TaskExample, ...]
    title: str = ""
    description: Message | str = ""
    source: str = "synthetic"  # "synthetic", "stories" or the CSV file's absolute path

    def __post_init__(self):
        if self.kind not in TASK_KINDS:
            raise LabError("task kind must be one of {task_kinds}, got {kind!r}",
                           task_kinds=', '.join(TASK_KINDS), kind=self.kind)
        if len(self.label_names) < 2:
            raise LabError("task {name!r} needs at least 2 labels, got {label_names}",
                           name=self.name, label_names=list(self.label_names))
        if not self.train or not self.validation:
            raise LabError("task {name!r} needs examples in both splits (train {n_train}, "
                           "validation {n_validation})",
                           name=self.name, n_train=len(self.train), n_validation=len(self.validation))

    @property
    def n_labels(self) -> int:
        return len(self.label_names)

    @property
    def slug(self) -> str:
        """The task's name as a folder-name piece: "topic", "csv-reviews"."""
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.name.replace(":", "-")).strip("-._")[:60] or "task"

    def label_counts(self, split: str = "train") -> dict[str, int]:
        """How often each label occurs in a split (a token task counts words). Every label is listed, 0 included."""
        counts = Counter(_labels_of(self._split(split)))
        return {name: counts.get(i, 0) for i, name in enumerate(self.label_names)}

    def majority_baseline(self) -> float:
        """The validation accuracy of always predicting the most frequent training label (words, for tagging)."""
        train = Counter(_labels_of(self.train))
        majority = max(range(self.n_labels), key=lambda i: (train.get(i, 0), -i))
        validation = _labels_of(self.validation)
        return sum(1 for label in validation if label == majority) / max(1, len(validation))

    def summary(self) -> dict:
        """JSON-able facts for config.json and the UI."""
        return {"name": self.name, "kind": self.kind, "title": self.title, "source": self.source,
                "label_names": list(self.label_names), "train_examples": len(self.train),
                "validation_examples": len(self.validation), "train_label_counts": self.label_counts("train"),
                "validation_label_counts": self.label_counts("validation"),
                "majority_baseline": self.majority_baseline()}

    def _split(self, split: str) -> tuple[TaskExample, ...]:
        if split not in ("train", "validation"):
            raise LabError("split must be 'train' or 'validation', got {split!r}", split=split)
        return self.train if split == "train" else self.validation


def _labels_of(examples) -> list[int]:
    out: list[int] = []
    for example in examples:
        if isinstance(example.label, tuple):
            out.extend(example.label)
        else:
            out.append(example.label)
    return out


# ------------------------------------------------------------------------------------------------ built-in tasks
def load_task(name: str) -> Task:
    """A built-in task by name (see TASKS). ValueError for an unknown name."""
    if not isinstance(name, str) or name not in TASKS:
        raise LabError("unknown task {name!r}: choose one of {tasks} (or a CSV file with csv_task)",
                       name=name, tasks=', '.join(TASKS))
    return _builtin_task(name)


@functools.lru_cache(maxsize=len(TASKS))
def _builtin_task(name: str) -> Task:
    spec = TASKS[name]
    if name in STORY_TASKS:
        return _story_task(spec)
    data, in_validation = _synthetic_split()
    index = {label: i for i, label in enumerate(spec.label_names)}
    examples: list[TaskExample] = []
    for i, example in enumerate(data.examples):
        if name == "sentiment":
            examples.append(TaskExample(example.english, index[example.sentiment]))
        elif name == "topic":
            examples.append(TaskExample(example.english, index[example.topic]))
        elif name == "entailment":
            pair = data.pairs[i]
            examples.append(TaskExample(pair.premise, index[pair.label], text_pair=pair.hypothesis))
        else:  # tagging
            examples.append(TaskExample(" ".join(example.tokens), tuple(index[tag] for tag in example.tags)))
    train = tuple(e for e, held in zip(examples, in_validation) if not held)
    validation = tuple(e for e, held in zip(examples, in_validation) if held)
    return Task(name=name, kind=spec.kind, label_names=spec.label_names, train=train, validation=validation,
                title=spec.title, description=spec.description, source="synthetic")


def _story_task(spec: TaskSpec) -> Task:
    """A task of the stories language: the pairs of its context task (lab_models/text/story_tasks.py), training
    pairs from the stories corpus's training split, validation pairs from its validation split and another seed."""
    task = context_tasks()[STORY_TASKS[spec.name]]
    index = {label: i for i, label in enumerate(spec.label_names)}

    def examples(items):
        return tuple(TaskExample(item.first, index[item.label], text_pair=item.second) for item in items)
    return Task(name=spec.name, kind=spec.kind, label_names=spec.label_names, train=examples(task.train),
                validation=examples(task.validation), title=spec.title, description=spec.description,
                source="stories")


@functools.lru_cache(maxsize=1)
def _synthetic_split():
    """The synthetic data and, per sentence, whether its story is in the synthetic corpus's validation split."""
    data = synthetic_dataset(seed=SYNTHETIC_SEED, n_sentences=SYNTHETIC_SENTENCES)
    stories = data.stories()
    texts = tuple(" ".join(example.english for example in story) for story in stories)
    _, validation_stories = split_train_validation(texts)  # the same call as corpora._load_synthetic
    held_out = set(validation_stories)
    return data, tuple(text in held_out for text, story in zip(texts, stories) for _ in story)


# ------------------------------------------------------------------------------------------------ CSV tasks
def csv_task(path, text_column: str, label_column: str, text_pair_column: str | None = None) -> Task:
    """A sequence task (or a pair task, with `text_pair_column`) from a CSV file with a header row.

    ValueError with what to do for: no such file, a file that is binary, not UTF-8 or too big, a CSV syntax error, a
    column that is not in the header, fewer than MIN_CSV_ROWS usable rows, fewer than 2 or more than MAX_CSV_CLASSES
    distinct labels.
    """
    path = Path(os.fspath(path)).expanduser()
    if not path.exists():
        raise LabError("no CSV file at {path}: check the path", path=path)
    if not path.is_file():
        raise LabError("{path} is a folder, not a CSV file", path=path)
    size = path.stat().st_size
    cap = max_upload_bytes()
    if size > cap:
        raise LabError("{name} is {megabytes:.1f} MB, more than the {cap_megabytes:.0f} MB limit "
                       "(PRETRAINING_LAB_MAX_UPLOAD_MB); use a smaller sample of the rows",
                       name=path.name, megabytes=size / 2**20, cap_megabytes=cap / 2**20)
    text = decode_text(path.read_bytes(), path.name)  # empty, binary, UTF-16 and non-UTF-8 files raise here
    header, rows = read_csv_rows(text, path.name)
    columns = [("text_column", text_column), ("label_column", label_column)]
    if text_pair_column is not None:
        columns.append(("text_pair_column", text_pair_column))
    for argument, column in columns:
        if not isinstance(column, str) or not column.strip():
            raise LabError("{argument} must name a column of {name}; its columns are {header}",
                           argument=argument, name=path.name, header=', '.join(header))
        if column.strip() not in header:
            raise LabError("{name} has no column {column!r} ({argument}); its columns are "
                           "{header}", name=path.name, column=column, argument=argument, header=', '.join(header))
    names = [column.strip() for _, column in columns]
    if len(set(names)) != len(names):
        raise LabError("the text, label and pair columns must be different columns, got {names}",
                       names=', '.join(names))
    text_column, label_column = names[0], names[1]
    pair_column = names[2] if text_pair_column is not None else None

    kept: list[tuple[str, str | None, str]] = []
    skipped = 0
    for row in rows:
        value = (row.get(text_column) or "").strip()
        pair = (row.get(pair_column) or "").strip() if pair_column else None
        label = (row.get(label_column) or "").strip()
        if not value or not label or (pair_column and not pair):
            skipped += 1
            continue
        kept.append((" ".join(value.split()), " ".join(pair.split()) if pair is not None else None, label))
    if skipped:
        logger.info("%s: skipped %d rows with an empty text or label", path.name, skipped)
    if len(kept) < MIN_CSV_ROWS:
        raise LabError("{name} has {n_kept} usable rows (a text and a label"
                       "{pair_part}); fine-tuning needs at least {min_csv_rows}",
                       name=path.name, n_kept=len(kept), pair_part=Message(" and a pair text") if pair_column else '',
                       min_csv_rows=MIN_CSV_ROWS)
    label_names = _sorted_labels({label for _, _, label in kept})
    if len(label_names) < 2:
        raise LabError("column {label_column!r} of {name} has only one label ({first_label!r}); a "
                       "classifier needs at least 2 classes",
                       label_column=label_column, name=path.name, first_label=label_names[0])
    if len(label_names) > MAX_CSV_CLASSES:
        raise LabError("column {label_column!r} of {name} has {n_label_names} distinct values; is it "
                       "really the label column? At most {max_csv_classes} classes are supported",
                       label_column=label_column, name=path.name, n_label_names=len(label_names),
                       max_csv_classes=MAX_CSV_CLASSES)
    index = {name: i for i, name in enumerate(label_names)}
    examples = [TaskExample(value, index[label], text_pair=pair) for value, pair, label in kept]
    keys = [_split_key(e) for e in examples]
    _, validation_keys = split_train_validation(keys, validation_fraction=CSV_VALIDATION_FRACTION,
                                                salt="finetune-csv")
    held_out = set(validation_keys)
    train = tuple(e for e, key in zip(examples, keys) if key not in held_out)
    validation = tuple(e for e, key in zip(examples, keys) if key in held_out)
    if not train or not validation:
        raise LabError("{name} has too few different texts to split into training and validation rows; "
                       "add more rows", name=path.name)
    kind = "pair" if pair_column else "sequence"
    title = f"{path.name}: {label_column} from {text_column}" + (f" + {pair_column}" if pair_column else "")
    description = Message("{n_rows} rows of {name}, {n_classes} classes", n_rows=len(kept), name=path.name,
                          n_classes=len(label_names))
    return Task(name=f"csv:{path.name}", kind=kind, label_names=label_names, train=train, validation=validation,
                title=title, description=description, source=str(path.resolve()))


def _split_key(example: TaskExample) -> str:
    return example.text if example.text_pair is None else f"{example.text}\x1f{example.text_pair}"


def read_csv_rows(text: str, file_name: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=csv_delimiter(text), strict=True)
    try:
        header = next(reader, None)
        if not header:
            raise LabError("{file_name} has no header row; the first row must name the columns", file_name=file_name)
        names = [name.strip() or f"column{i + 1}" for i, name in enumerate(header)]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise LabError("{file_name}: the header repeats the column name(s) {repeated}; give every "
                           "column a different name", file_name=file_name, repeated=', '.join(repeated))
        rows = [dict(zip(names, cells)) for cells in reader if any(cell.strip() for cell in cells)]
    except csv.Error as error:
        raise LabError("{file_name}: CSV error on line {line}: {error}; check the quoting on that "
                       "line", file_name=file_name, line=reader.line_num, error=error) from None
    if not rows:
        raise LabError("{file_name} has a header but no rows", file_name=file_name)
    return names, rows


def _sorted_labels(labels: set[str]) -> tuple[str, ...]:
    """Numeric labels in numeric order ("2" before "10"), others alphabetically."""
    try:
        return tuple(sorted(labels, key=float))
    except ValueError:
        return tuple(sorted(labels))


# ------------------------------------------------------------------------------------------------ alignment
def first_piece_labels(offsets: list[tuple[int, int]], words: list[str], labels) -> list[int]:
    """One label per token: a word's label on its first piece, IGNORE_INDEX elsewhere.

    offsets: each token's (start, end) characters in `" ".join(words)`; labels: one per word.

    >>> first_piece_labels([(0, 3), (4, 5), (5, 7), (8, 9), (9, 11), (12, 13)],
    ...                    ["the", "cat", "sat", "."], [0, 2, 4, 9])
    [0, 2, -100, 4, -100, 9]
    """
    if len(words) != len(labels):
        raise LabError("need one label per word, got {n_labels} labels for {n_words} words",
                       n_labels=len(labels), n_words=len(words))
    char_word: list[int] = []  # the word of each character of " ".join(words), -1 on the spaces
    starts: list[int] = []
    for i, word in enumerate(words):
        if i:
            char_word.append(-1)
        starts.append(len(char_word))
        char_word.extend([i] * len(word))
    out: list[int] = []
    labelled: set[int] = set()
    for start, end in offsets:
        word = next((char_word[c] for c in range(max(0, start), min(end, len(char_word))) if char_word[c] >= 0), None)
        if word is None and end > start:  # only spaces: the piece stands for the space before the next word
            word = next((i for i, s in enumerate(starts) if s >= end), None)
        if word is None or word in labelled:
            out.append(IGNORE_INDEX)
        else:
            labelled.add(word)
            out.append(int(labels[word]))
    return out


def encode_words(tokenizer, words: list[str], labels) -> tuple[list[int], list[int]]:
    """Token ids of `" ".join(words)` and one label per token (first sub-word piece of each word; see the module
    docstring). The text is encoded as one string, the way the pretraining data was, without the tokenizer's own
    framing (the caller frames it: lab_models/text/framing.py)."""
    encoding = tokenizer.encode(" ".join(words), add_special_tokens=False)
    return list(encoding.ids), first_piece_labels(list(encoding.offsets), list(words), list(labels))
