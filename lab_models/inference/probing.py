"""Linear probes of every layer of a frozen run: where does each kind of knowledge sit?

    probe_layers(run_dir, task="tags", seed=0) -> pandas.DataFrame, one row per (stream, layer):
        stream, layer (0 = embeddings), depth (0.0 to 1.0), accuracy, majority, control, layer_name, selectivity

It follows Liu et al. 2019 ("Linguistic Knowledge and Transferability of Contextual Representations", NAACL) and
Tenney et al. 2019 ("BERT Rediscovers the Classical NLP Pipeline", ACL): the model is frozen, every layer's vectors
are read, and a linear classifier trained on each layer alone says how linearly that layer encodes a label. The
control is Hewitt and Liang 2019's ("Designing and Interpreting Probes with Control Tasks", EMNLP) point that a
probe's accuracy also measures what a random network already separates; of their two controls this module uses the
**random-init control** (not the control task): the same probe, on the same sentences, on the run's architecture
built with the run's own seed and never trained (`build_model(..., seed=init_seed(seed))`, the exact step-0 model
of the run). `selectivity` = accuracy - control: what training put there.

The tasks: four from the synthetic corpus's grammar (lab_models/text/synthetic.py decides every label) and three
from the stories language (lab_models/text/stories.py), whose labels only the context decides:

    task            unit       labels                                              the vector probed
    tags            word       DET ADJ NOUN PRON VERB AUX NEG ADV PREP PUNCT       the word's first sub-word piece (not a
                                                                                   lone "▁": `first_content_pieces`)
    roles           word       SUBJ VERB OBJ ADV PLACE PUNCT (the phrase)          the word's first sub-word piece
    topic           sentence   animals food city school sports                     the mean of the layer over the tokens
    sentiment       sentence   negative neutral positive                           the mean of the layer over the tokens
    ambiguous_tags  word       NOUN VERB, on forms that are both ("cooks")         the word's first piece, in its story
    antecedent      word       FIRST SECOND: the character a reference points to   the same
    subject_number  word       SG PL: the number the verb after a modifier needs   the same

`tags` is the part-of-speech probe of the papers; in the synthetic grammar the word alone decides it (every word but
"cook" has one tag), so even the embedding layer and the random-init control separate it. `roles` (a chunking-like
label: the same "the" is subject, object or place by where it stands; the word alone decides 88% of them) needs some
context. The three stories tasks need it all: their items are chosen so that a word's identity scores about 0.5
(lab_models/text/story_tasks.py prints the baselines), and each story is read whole, so that a reference can look
back to the sentence that introduced its character.

Data: `TRAIN_SENTENCES` sentences of the built-in tasks' training split and `VALIDATION_SENTENCES` of their
validation split (lab_models/text/tasks.py: stories a run pretrained on the synthetic corpus never saw), drawn
with torch.Generator(seed); for the stories tasks, `TRAIN_STORIES` and `VALIDATION_STORIES` stories holding the
context tasks' items (training: the stories corpus's training split; validation: its validation split and stories
of another seed), each word labelled for the tasks that label it. Each sentence is encoded with the run's tokenizer without framing tokens, as in
pretraining, and read in batches of equal-length rows (no padding) through
lab_models/inference/representations.py `stream_layers`, which knows every family's streams (encoder and decoder for
MASS and T5, XLNet and MPNet's content stream, ELMo's layers and its scalar mix, CoVe's MT-LSTM layers and
[embedding; CoVe], ULMFiT's LSTMs, CVT's BiLSTMs).

The probe: multinomial logistic regression on the layer's vectors standardised with the training split's mean and
standard deviation, weights from zero, fitted full-batch by L-BFGS (at most `MAX_ITERATIONS`, an L2 penalty of
`WEIGHT_DECAY`), so the same features always give the same probe; `accuracy` is on the validation sentences. The
probes of every layer (and of the control's) are independent but fitted in one L-BFGS run over their summed losses
(`fit_linear_probes`): the same optimum each, a tenth of the Python overhead.
`majority` is the validation accuracy of always answering the training split's most frequent label.

Cache: the features (both models', every stream and layer, float16) are computed once per run and language and
stored in the run folder, `probe-features.safetensors` (`probe-features-stories.safetensors` for the stories),
written to a temporary name and renamed, keyed by the weights file, its modification time, the seed and the sample
sizes: a second `probe_layers` (any task of the same language: they share the texts) trains probes only, in well
under a second per layer. New weights (a run still training) give new
features.

Deviations from the papers: a toy grammar instead of the Penn Treebank and the papers' 16 tasks, hundreds of
sentences instead of tens of thousands, one probe per layer without the scalar mix Tenney et al. learn, L-BFGS
instead of their SGD, and the random-init control instead of Hewitt and Liang's control task. The features are
stored as float16 (halving the cache; a linear probe does not feel the rounding).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_bytes
from lab_models.inference.loading import TrainedRun, load_run, weights_file
from lab_models.inference.representations import stream_layers, token_limit
from lab_models.models.family import build_model
from lab_models.text.story_tasks import TASK_LABELS as STORY_TASK_LABELS
from lab_models.text.story_tasks import WORD_TASKS as STORY_WORD_TASKS
from lab_models.text.story_tasks import context_tasks
from lab_models.text.synthetic import ROLES, SENTIMENT_LABELS, TAGS, TOPICS, phrase_roles
from lab_models.text.tasks import load_task
from lab_models.training.engine import init_seed

logger = logging.getLogger(__name__)

# task -> (unit, the language its texts come from)
PROBE_TASKS: dict[str, tuple[str, str]] = {"tags": ("word", "synthetic"), "roles": ("word", "synthetic"),
                                            "topic": ("sentence", "synthetic"), "sentiment": ("sentence", "synthetic"),
                                            **{task: ("word", "stories") for task in STORY_WORD_TASKS}}
LANGUAGES = ("synthetic", "stories")
PROBE_COLUMNS = ["stream", "layer", "depth", "accuracy", "majority", "control", "layer_name", "selectivity"]
TRAIN_SENTENCES = 400  # ~3,500 words: the tags and roles probes' training words
VALIDATION_SENTENCES = 300  # ~2,700 words of unseen stories: accuracy to about +-1%
TRAIN_STORIES = 400  # the stories language's probes: ~400 labelled words per task to train on
VALIDATION_STORIES = 400  # ~400 labelled words per task held out: accuracy to about +-2.5%
BATCH_ROWS = 64  # equal-length rows per forward pass
WEIGHT_DECAY = 1e-3  # L2 on the probe's weights (standardised features): keeps a 512-wide probe on 400 sentences sane
MAX_ITERATIONS = 100  # L-BFGS iterations of the joint fit: the accuracies move by < 0.2 points beyond 60
FEATURES_FILE = "probe-features.safetensors"  # the synthetic language's; the stories': STORY_FEATURES_FILE
STORY_FEATURES_FILE = "probe-features-stories.safetensors"
FEATURES_VERSION = 2  # bump when the features change, so cached ones are recomputed (2: no lone "▁")
MAX_SEED = 2**31 - 1


# ------------------------------------------------------------------------------------------------ the probe
@dataclass(frozen=True)
class LinearProbe:
    """A fitted probe: standardisation (mean, std: (D,)) and the classifier (weight (D, C), bias (C,))."""

    mean: torch.Tensor
    std: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N,) class indices."""
        return (((features.float() - self.mean) / self.std) @ self.weight + self.bias).argmax(dim=-1)


def fit_linear_probes(features: list[torch.Tensor], labels: torch.Tensor, n_classes: int, *,
                      weight_decay: float = WEIGHT_DECAY, max_iterations: int = MAX_ITERATIONS) -> list[LinearProbe]:
    """One multinomial logistic regression per feature matrix (each (N, D_k), the same N items and labels), fitted
    together: the loss is the sum of the independent probes' losses, so each probe reaches its own optimum, and one
    L-BFGS run (full batch, from zero weights, batched matrix products) fits them all. Deterministic for given
    features. Narrower matrices are padded with zero columns, which keep zero weights.

    >>> x = torch.tensor([[0.0], [1.0], [2.0], [3.0]]); y = torch.tensor([0, 0, 1, 1])
    >>> first, second = fit_linear_probes([x, torch.cat([-x, x], dim=1)], y, 2)
    >>> first.predict(torch.tensor([[0.2], [2.8]])).tolist(), second.predict(torch.tensor([[-0.2, 0.2]])).tolist()
    ([0, 1], [0])
    """
    width = max(x.shape[1] for x in features)
    means, stds, stacked = [], [], []
    for x in features:
        x = x.float()
        mean, std = x.mean(dim=0), x.std(dim=0, unbiased=False).clamp_min(1e-6)
        means.append(mean)
        stds.append(std)
        stacked.append(F.pad((x - mean) / std, (0, width - x.shape[1])))  # (N, width)
    x = torch.stack(stacked)  # (K, N, width)
    K, N = x.shape[0], x.shape[1]
    weight = torch.zeros(K, width, n_classes, requires_grad=True)
    bias = torch.zeros(K, 1, n_classes, requires_grad=True)
    targets = labels.repeat(K)  # (K * N,)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iterations, history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=1e-7, tolerance_change=1e-10)

    def closure():
        optimizer.zero_grad()
        logits = torch.bmm(x, weight) + bias  # (K, N, C)
        loss = F.cross_entropy(logits.reshape(K * N, n_classes), targets, reduction="sum") / N
        loss = loss + weight_decay * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return [LinearProbe(means[k], stds[k], weight.detach()[k, :features[k].shape[1]], bias.detach()[k, 0])
            for k in range(K)]


def fit_linear_probe(features: torch.Tensor, labels: torch.Tensor, n_classes: int) -> LinearProbe:
    """One probe (`fit_linear_probes` of one matrix)."""
    return fit_linear_probes([features], labels, n_classes)[0]


def layer_accuracies(train_layers: list[torch.Tensor], train_labels: torch.Tensor, validation_layers: list[torch.Tensor],
                     validation_labels: torch.Tensor, n_classes: int) -> list[float]:
    """One probe per layer, fitted together: the validation accuracy of each (the layer with the highest holds the
    label most linearly)."""
    probes = fit_linear_probes(train_layers, train_labels, n_classes)
    return [float((probe.predict(validation) == validation_labels).float().mean())
            for probe, validation in zip(probes, validation_layers)]


def majority_accuracy(train_labels: torch.Tensor, validation_labels: torch.Tensor) -> float:
    """The validation accuracy of always answering the most frequent training label (ties: the lowest index).

    >>> majority_accuracy(torch.tensor([2, 2, 1]), torch.tensor([2, 1, 1, 2]))
    0.5
    """
    majority = int(torch.bincount(train_labels).argmax())
    return float((validation_labels == majority).float().mean())


# ------------------------------------------------------------------------------------------------ the sentences
@dataclass(frozen=True)
class ProbeSentence:
    """One sentence of the probes: its text (words joined by spaces), and its labels: per word (tags, roles as
    indices into TAGS and ROLES) and per sentence (topic, sentiment)."""

    text: str
    tags: tuple[int, ...]
    roles: tuple[int, ...]
    topic: int
    sentiment: int

    def labels(self, task: str):
        return getattr(self, task)


def probe_sentences(seed: int = 0) -> tuple[list[ProbeSentence], list[ProbeSentence]]:
    """(training sentences, validation sentences): TRAIN_SENTENCES and VALIDATION_SENTENCES drawn with
    torch.Generator(seed) from the built-in tasks' splits (the same sentences for every run)."""
    tagging, topic, sentiment = load_task("tagging"), load_task("topic"), load_task("sentiment")
    generator = torch.Generator().manual_seed(seed)
    out = []
    for split, wanted in (("train", TRAIN_SENTENCES), ("validation", VALIDATION_SENTENCES)):
        words, topics, sentiments = (getattr(task, split) for task in (tagging, topic, sentiment))
        order = torch.randperm(len(words), generator=generator)[:wanted].tolist()
        chosen = []
        for i in sorted(order):
            if not words[i].text == topics[i].text == sentiments[i].text:
                raise RuntimeError("the built-in tasks no longer list the same sentences in the same order")
            tag_names = [tagging.label_names[t] for t in words[i].label]
            roles = tuple(ROLES.index(role) for role in phrase_roles(tag_names))
            chosen.append(ProbeSentence(words[i].text, tuple(words[i].label), roles, topics[i].label,
                                        sentiments[i].label))
        out.append(chosen)
    return out[0], out[1]


@dataclass(frozen=True)
class ProbeStory:
    """One story of the stories language's probes: its text (its words joined by spaces) and, per word task, one
    label index per word (-1 where the task labels nothing: lab_models/text/story_tasks.py chooses the items)."""

    text: str
    word_labels: dict[str, tuple[int, ...]]

    def labels(self, task: str):
        return self.word_labels[task]


def probe_stories(seed: int = 0) -> tuple[list[ProbeStory], list[ProbeStory]]:
    """(training stories, validation stories): TRAIN_STORIES and VALIDATION_STORIES drawn with torch.Generator(seed)
    from the stories that hold the context tasks' training and validation items, with every task's labels."""
    tasks = context_tasks()
    generator = torch.Generator().manual_seed(seed)
    out = []
    for split, wanted in (("train", TRAIN_STORIES), ("validation", VALIDATION_STORIES)):
        labelled: dict[tuple[str, ...], dict[str, list[int]]] = {}
        for task in STORY_WORD_TASKS:
            names = STORY_TASK_LABELS[task]
            for item in getattr(tasks[task], split):
                per_task = labelled.setdefault(item.words, {})
                row = per_task.setdefault(task, [-1] * len(item.words))
                row[item.position] = names.index(item.label)
        stories = list(labelled)
        order = torch.randperm(len(stories), generator=generator)[:wanted].tolist()
        chosen = []
        for index in sorted(order):
            words = stories[index]
            chosen.append(ProbeStory(" ".join(words), {task: tuple(labelled[words].get(task, [-1] * len(words)))
                                                       for task in STORY_WORD_TASKS}))
        out.append(chosen)
    return out[0], out[1]


def probe_texts(seed: int, language: str) -> tuple[list, list]:
    """The probes' (training, validation) texts of a language: sentences of the synthetic corpus or stories."""
    return probe_sentences(seed) if language == "synthetic" else probe_stories(seed)


# ------------------------------------------------------------------------------------------------ features
@dataclass(frozen=True)
class LayerInfo:
    stream: str
    layer: int
    name: str
    depth: float


@dataclass(frozen=True)
class ProbeFeatures:
    """The features of one run and of its random-init control, for the probe sentences.

    layers: the (stream, layer) rows, in order. model[i] / control[i]: {"words": (W, D), "sentences": (S, D)} for
    layers[i]. words: (W, 2) long (sentence index, word index) of each probed word; sentences: S sentence indices
    (into train + validation, in that order) that were read; n_train: how many of the S come first from the
    training split."""

    layers: list[LayerInfo]
    model: list[dict[str, torch.Tensor]]
    control: list[dict[str, torch.Tensor]]
    words: torch.Tensor
    sentences: torch.Tensor
    n_train: int
    key: str
    cached: bool = False
    seconds: float = 0.0


def first_content_pieces(offsets: list[tuple[int, int]], words: list[str]) -> list[int]:
    """The index of each word's first piece that covers one of its characters (-1 when none does), for a text that
    is `" ".join(words)`. Unlike the fine-tuning alignment (tasks.py `first_piece_labels`), a piece that covers only
    the space before a word (SentencePiece's lone "▁") is skipped: it is the same token before every word, so its
    embedding says nothing about the word.

    >>> first_content_pieces([(0, 3), (3, 4), (4, 5), (5, 7), (8, 9)], ["the", "cat", "."])
    [0, 2, 4]
    """
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word) + 1
    first = [-1] * len(words)
    for position, (begin, end) in enumerate(offsets):
        for index, (word_start, word_end) in enumerate(spans):
            if begin < word_end and end > word_start and first[index] < 0:
                first[index] = position
    return first


def _encode_for_probe(run: TrainedRun, sentences: list[ProbeSentence]):
    """Per sentence: (its token ids, the index of each word's first piece or -1); sentences over the run's token
    limit, or with no tokens, are skipped (None)."""
    limit = token_limit(run)
    out = []
    for sentence in sentences:
        encoding = run.tokenizer.encode(sentence.text, add_special_tokens=False)
        ids = list(encoding.ids)
        if not ids or len(ids) > limit:
            out.append(None)
            continue
        out.append((ids, first_content_pieces([tuple(o) for o in encoding.offsets], sentence.text.split(" "))))
    return out


@torch.no_grad()
def _read_features(run: TrainedRun, encoded, progress: Callable[[float], None]) -> tuple[list[LayerInfo], list[dict]]:
    """Every stream and layer of `run` over the encoded sentences: the first-piece vector of every word and the mean
    vector of every sentence, batched by token count."""
    by_length: dict[int, list[int]] = {}
    for index, item in enumerate(encoded):
        if item is not None:
            by_length.setdefault(len(item[0]), []).append(index)
    batches = [indices[i:i + BATCH_ROWS] for _, indices in sorted(by_length.items())
               for i in range(0, len(indices), BATCH_ROWS)]
    words: dict[int, list[list[torch.Tensor]]] = {}  # sentence index -> per layer (n_words, D)
    means: dict[int, list[torch.Tensor]] = {}
    layers: list[LayerInfo] = []
    for done, indices in enumerate(batches):
        ids = torch.tensor([encoded[i][0] for i in indices], dtype=torch.long)  # (B, T)
        read = stream_layers(run, ids)
        layers = [LayerInfo(item.stream, item.layer, item.name, item.depth) for item in read]
        for row, index in enumerate(indices):
            pieces = [p for p in encoded[index][1] if p >= 0]
            words[index] = [item.states[row, pieces] for item in read]  # (n_words, D) per layer
            means[index] = [item.states[row].mean(dim=0) for item in read]  # (D,) per layer
        progress((done + 1) / len(batches))
    order = sorted(means)
    features = [{"words": torch.cat([words[i][k] for i in order]).half(),
                 "sentences": torch.stack([means[i][k] for i in order]).half()} for k in range(len(layers))]
    return layers, features


def control_run(run: TrainedRun) -> TrainedRun:
    """The run's architecture built with the run's seed and never trained: the step-0 model the trainer started
    from (`init_seed`), in eval mode, as a TrainedRun (step 0) that the readers take like the run itself."""
    seed = run.config.get("seed")
    seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0
    model = build_model(run.family, run.model_config, run.settings, run.vocab, run.config.get("objectives") or None,
                        seed=init_seed(seed))
    return dataclasses.replace(run, model=model.to(run.device).eval(), step=0)


def features_key(run_dir: Path, seed: int, language: str = "synthetic") -> str:
    weights, _ = weights_file(run_dir)
    sizes = (f"n{TRAIN_SENTENCES}/{VALIDATION_SENTENCES}" if language == "synthetic"
             else f"stories{TRAIN_STORIES}/{VALIDATION_STORIES}")
    return f"v{FEATURES_VERSION}|{os.path.relpath(weights, run_dir)}|{weights.stat().st_mtime_ns}|seed{seed}|{sizes}"


def features_file(language: str) -> str:
    return FEATURES_FILE if language == "synthetic" else STORY_FEATURES_FILE


def _load_cached(run_dir: Path, key: str, language: str = "synthetic") -> ProbeFeatures | None:
    path = run_dir / features_file(language)
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        if metadata.get("key") != key:
            return None
        tensors = load_safetensors(path.read_bytes())
        layers = [LayerInfo(**item) for item in json.loads(metadata["layers"])]
        model = [{unit: tensors[f"model/{i}/{unit}"] for unit in ("words", "sentences")} for i in range(len(layers))]
        control = [{unit: tensors[f"control/{i}/{unit}"] for unit in ("words", "sentences")}
                   for i in range(len(layers))]
        return ProbeFeatures(layers, model, control, tensors["words"], tensors["sentences"],
                             int(metadata["n_train"]), key, cached=True)
    except (OSError, ValueError, KeyError, RuntimeError) as error:  # a broken cache is recomputed, never fatal
        logger.warning("ignoring the probe features cache of %s: %s", run_dir.name, error)
        return None


def _save(run_dir: Path, features: ProbeFeatures, language: str = "synthetic") -> None:
    tensors = {"words": features.words, "sentences": features.sentences}
    for i, (model, control) in enumerate(zip(features.model, features.control)):
        for unit in ("words", "sentences"):
            tensors[f"model/{i}/{unit}"] = model[unit].contiguous()
            tensors[f"control/{i}/{unit}"] = control[unit].contiguous()
    metadata = {"key": features.key, "n_train": str(features.n_train),
                "layers": json.dumps([dataclasses.asdict(layer) for layer in features.layers])}
    try:
        atomic_write_bytes(run_dir / features_file(language), save_safetensors(tensors, metadata=metadata))
    except OSError as error:  # a read-only run folder still gets its probes, just not cached
        logger.warning("could not cache the probe features of %s: %s", run_dir.name, error)


def probe_features(run_dir, seed: int = 0, progress: Callable[[int, int, str], None] | None = None,
                   language: str = "synthetic") -> ProbeFeatures:
    """The probe features of a run and of its random-init control for the texts of `language` ("synthetic"
    sentences or "stories"), from the run folder's cache or computed (and cached). progress(done, total, message)
    is called while they are computed (two models, each batch of rows)."""
    seed = check_seed(seed)
    if language not in LANGUAGES:
        raise LabError("Unknown probe language {language!r}: choose one of {languages}.", language=language,
                       languages=", ".join(LANGUAGES))
    run = load_run(run_dir)
    key = features_key(run.run_dir, seed, language)
    cached = _load_cached(run.run_dir, key, language)
    if cached is not None:
        return cached
    started = time.perf_counter()
    train, validation = probe_texts(seed, language)
    sentences = train + validation
    encoded = _encode_for_probe(run, sentences)
    read_indices = [i for i, item in enumerate(encoded) if item is not None]
    if not any(i < len(train) for i in read_indices) or not any(i >= len(train) for i in read_indices):
        raise LabError("Run {run_id} cannot read the probe sentences (its tokenizer gives no tokens or more "
                       "than {token_limit} for them): probe a run trained with a tokenizer that knows "
                       "English words.", run_id=run.run_id, token_limit=token_limit(run))
    total = 200

    def part(offset: int, what: str):
        def report(fraction: float) -> None:
            if progress is not None:
                progress(offset + int(100 * fraction), total, what)
        return report

    layers, model = _read_features(run, encoded, part(0, f"{run.run_id}: reading every layer"))
    _, control = _read_features(control_run(run), encoded, part(100, f"{run.run_id}: the random-init control"))
    word_rows = [(i, w) for i in read_indices for w, piece in enumerate(encoded[i][1]) if piece >= 0]
    features = ProbeFeatures(layers, model, control, torch.tensor(word_rows, dtype=torch.long).reshape(-1, 2),
                             torch.tensor(read_indices, dtype=torch.long), sum(i < len(train) for i in read_indices),
                             key, seconds=time.perf_counter() - started)
    _save(run.run_dir, features, language)
    return features


# ------------------------------------------------------------------------------------------------ the table
def check_task(task) -> str:
    if not isinstance(task, str) or task.strip() not in PROBE_TASKS:
        raise LabError("Unknown probe task {task!r}: choose one of {probe_tasks}.",
                       task=task, probe_tasks=', '.join(PROBE_TASKS))
    return task.strip()


def check_seed(seed) -> int:
    if isinstance(seed, float) and seed.is_integer():
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise LabError("The probe seed must be a whole number from 0 to {max_seed}, got {seed!r}.",
                       max_seed=MAX_SEED, seed=seed)
    return seed


def task_labels(task: str) -> tuple[str, ...]:
    """The label names of a probe task."""
    return {"tags": TAGS, "roles": ROLES, "topic": TOPICS, "sentiment": SENTIMENT_LABELS, **STORY_TASK_LABELS}[task]


def probe_labels(features: ProbeFeatures, task: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(labels of the probed items, which of them are validation items), for the task's unit; a word the task
    does not label has label -1."""
    train, validation = probe_texts(seed, PROBE_TASKS[task][1])
    sentences = train + validation
    if PROBE_TASKS[task][0] == "word":
        rows = features.words.tolist()
        labels = torch.tensor([sentences[i].labels(task)[w] for i, w in rows], dtype=torch.long)
        held_out = torch.tensor([i >= len(train) for i, _ in rows], dtype=torch.bool)
    else:
        rows = features.sentences.tolist()
        labels = torch.tensor([sentences[i].labels(task) for i in rows], dtype=torch.long)
        held_out = torch.tensor([i >= len(train) for i in rows], dtype=torch.bool)
    return labels, held_out


def probe_layers(run_dir, task: str = "tags", seed: int = 0,
                 progress: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """One linear probe per (stream, layer) of the run, and the same probe on its random-init control (see the
    module docstring). Returns a DataFrame with PROBE_COLUMNS, one row per (stream, layer), in the order of the
    streams and layers; `attrs` holds run_id, family, step, task, seed, labels (the label names), train and
    validation (items probed), cached (features read from the run folder), seconds (features, probes) and note.

    ValueError: an unknown task, a bad seed, a folder that is not a run with weights."""
    task = check_task(task)
    seed = check_seed(seed)
    run = load_run(run_dir)
    features = probe_features(run.run_dir, seed, progress, PROBE_TASKS[task][1])
    started = time.perf_counter()
    labels, held_out = probe_labels(features, task, seed)
    unit = "words" if PROBE_TASKS[task][0] == "word" else "sentences"
    n_classes = len(task_labels(task))
    labelled = labels >= 0
    training, validating = labelled & ~held_out, labelled & held_out
    train_labels, validation_labels = labels[training], labels[validating]
    majority = majority_accuracy(train_labels, validation_labels)
    every = [*(item[unit] for item in features.model), *(item[unit] for item in features.control)]
    accuracies = layer_accuracies([x[training] for x in every], train_labels, [x[validating] for x in every],
                                  validation_labels, n_classes)
    n = len(features.layers)
    rows = [[info.stream, info.layer, info.depth, accuracy, majority, baseline, info.name, accuracy - baseline]
            for info, accuracy, baseline in zip(features.layers, accuracies[:n], accuracies[n:])]
    frame = pd.DataFrame(rows, columns=PROBE_COLUMNS)
    frame.attrs.update(run_id=run.run_id, family=run.family, step=run.step, task=task, seed=seed,
                       labels=list(task_labels(task)), train=int(training.sum()),
                       validation=int(validating.sum()), cached=features.cached,
                       seconds={"features": features.seconds, "probes": time.perf_counter() - started},
                       note=Message("random-init control: {family} built with the run's seed, untrained (step 0)",
                                    family=run.family))
    return frame


def best_probe_layer(frame: pd.DataFrame) -> dict:
    """The (stream, layer) with the highest probe accuracy (ties: the shallowest), as {stream, layer, layer_name,
    depth, accuracy, control}; {} for an empty table."""
    if frame is None or not len(frame):
        return {}
    best = frame.sort_values(["accuracy", "depth"], ascending=[False, True], kind="stable").iloc[0]
    return {"stream": str(best["stream"]), "layer": int(best["layer"]), "layer_name": str(best["layer_name"]),
            "depth": float(best["depth"]), "accuracy": float(best["accuracy"]), "control": float(best["control"])}
