"""Sentence similarity by topic: are sentences about the same thing closer than sentences about different things?

    topic_similarity(run_dir, pooling="mean", per_topic=40) -> TopicSimilarity
        matrix[a][b]: the mean cosine similarity between the pooled vectors of topic a's and topic b's sentences
        same, different: the mean over same-topic pairs (i != j) and over different-topic pairs; gap = same - different
        auc: the chance that a random same-topic pair is closer than a random different-topic pair (0.5 = no topic)
        nearest_same_topic: the share of sentences whose most similar other sentence has their topic (0.2 = chance)

This is the Understand tab's "Sentence similarity" view and the measure of the contrastive add-on
(lab_models/objectives/contrastive.py): SimCSE's claim (Gao et al. 2021) is that contrastive training makes the
sentence vector space less anisotropic (unrelated sentences stop having cosine near 1) while related sentences stay
close. The sentences are the held-out (validation-story) sentences of the synthetic corpus's topic task
(lab_models/text/tasks.py: animals, food, city, school, sports, decided by the grammar), the first `per_topic` of each
topic, so no run trained on them.

Each sentence is framed and read exactly as the contrastive objective and fine-tuning read one ([CLS] s [SEP] and the
[CLS] state for the encoder families, [BOS] s [EOS] and the last state for GPT, the encoder of MASS and T5, the
LSTM families' own representations: `contrastive.sentence_vectors`; an imported checkpoint's sentences are framed
as its own tokenizer frames them, `run.framing.downstream`). Pooling "auto" is the family's (the pooled
position of `contrastive.pooling_for`); "mean" (the default) averages the states of the real tokens instead, which is
how sentence vectors are read from a model that never trained its [CLS] position (the lab's pretraining rows have no
[CLS]), and what the contrastive add-on trains for the encoder families. The gap depends on the scale of the
cosines (an anisotropic space has every cosine near 1); the AUC and the nearest-neighbour share do not.

Worked example (the measure itself, on three unit vectors and two topics):

>>> from lab_models.objectives.contrastive import topic_similarity as measure
>>> same, different = measure(torch.tensor([[1., 0.], [0.8, 0.6], [0., 1.]]), torch.tensor([0, 0, 1]))
>>> round(same, 2), round(different, 2), round(same - different, 2)
(0.8, 0.3, 0.5)
>>> round(separation_auc(torch.tensor([0.9, 0.5]), torch.tensor([0.6, 0.1, 0.2])), 4)   # 5 of the 6 pairs
0.8333

Deviation: SimCSE evaluates on STS benchmarks (human similarity ratings, Spearman correlation); the lab has no such
data, and its topics are the grammar's, so the gap is a coarse stand-in for "semantic similarity".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from lab_models.messages import LabError
from lab_models.objectives import contrastive
from lab_models.text.tasks import load_task
from lab_models.inference.loading import load_run

POOLINGS = ("mean", "auto")
DEFAULT_PER_TOPIC = 40
MAX_PER_TOPIC = 80  # the smallest topic has about 80 held-out sentences
MAX_TOKENS = 64


@dataclass(frozen=True)
class TopicSimilarity:
    """One run's sentence similarities by topic (see the module docstring)."""

    run_id: str
    family: str
    step: int
    pooling: str  # the pooling used: first, last or mean
    topics: tuple[str, ...]
    matrix: list[list[float]]  # (topics, topics) mean cosine similarity
    same: float
    different: float
    sentences: int
    auc: float = 0.5  # P(a same-topic pair is more similar than a different-topic pair)
    nearest_same_topic: float = 0.0  # share of sentences whose nearest other sentence shares their topic
    examples: dict[str, list[str]] = field(default_factory=dict)  # topic -> a few of its sentences

    @property
    def gap(self) -> float:
        return self.same - self.different


def held_out_sentences(per_topic: int) -> tuple[list[str], list[int], tuple[str, ...]]:
    """(texts, topic indices, topic names): the first `per_topic` held-out sentences of each topic."""

    task = load_task("topic")
    texts, labels = [], []
    for index in range(len(task.label_names)):
        chosen = [example.text for example in task.validation if example.label == index][:per_topic]
        texts += chosen
        labels += [index] * len(chosen)
    return texts, labels, tuple(task.label_names)


def _check(pooling, per_topic) -> int:
    if pooling not in POOLINGS:
        raise LabError("unknown pooling {pooling!r}: choose one of {poolings}",
                       pooling=pooling, poolings=', '.join(POOLINGS))
    if isinstance(per_topic, bool) or not isinstance(per_topic, (int, float)) or per_topic != int(per_topic) \
            or not 2 <= per_topic <= MAX_PER_TOPIC:
        raise LabError("sentences per topic must be a whole number from 2 to {max_per_topic}, got {per_topic!r}",
                       max_per_topic=MAX_PER_TOPIC, per_topic=per_topic)
    return int(per_topic)


def separation_auc(same: torch.Tensor, different: torch.Tensor) -> float:
    """P(s > d) for s drawn from `same` and d from `different` (ties count one half): the Mann-Whitney AUC, from
    the ranks of all the values at once."""
    values = torch.cat([same.double(), different.double()])
    order = torch.argsort(values)
    ranks = torch.empty_like(values)
    ranks[order] = torch.arange(1, len(values) + 1, dtype=values.dtype)
    for value in values.unique()[torch.unique(values, return_counts=True)[1] > 1]:  # ties: the mean rank
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    n_same, n_different = len(same), len(different)
    return float((ranks[:n_same].sum() - n_same * (n_same + 1) / 2) / (n_same * n_different))


@torch.no_grad()
def topic_similarity(run_dir, pooling: str = "mean", per_topic: int = DEFAULT_PER_TOPIC,
                     batch_size: int = 64) -> TopicSimilarity:
    """One run's TopicSimilarity. ValueError for a run without weights, an unknown pooling or a bad count."""

    per_topic = _check(pooling, per_topic)
    run = load_run(run_dir)
    model, vocab = run.model, run.vocab
    texts, labels, topics = held_out_sentences(per_topic)
    limit = min(MAX_TOKENS, run.max_positions)
    encoded = run.tokenizer.encode_batch(texts, add_special_tokens=False)
    downstream = run.framing.downstream  # [CLS] s [SEP] for the lab's encoders; a checkpoint's own framing
    room = max(1, limit - downstream.added())
    rows = [downstream.frame((e.ids or [vocab.eos_id])[:room]).ids for e in encoded]
    used = downstream.pooling(contrastive.pooling_for(run.family), vocab.cls_id) if pooling == "auto" else pooling
    model.eval()
    vectors = []
    for start in range(0, len(rows), batch_size):
        ids = contrastive.pad(rows[start:start + batch_size], vocab.pad_id).to(run.device)  # (b, L)
        vectors.append(contrastive.sentence_vectors(model, ids, vocab.pad_id, used).float().cpu())
    x = F.normalize(torch.cat(vectors), dim=-1)  # (n, H)
    label = torch.tensor(labels)
    cosine = x @ x.T  # (n, n)
    off_diagonal = ~torch.eye(len(labels), dtype=torch.bool)
    matrix = [[float(cosine[(label[:, None] == a) & (label[None, :] == b) & off_diagonal].mean())
               for b in range(len(topics))] for a in range(len(topics))]
    same, different = contrastive.topic_similarity(x, label)
    same_topic = label[:, None] == label[None, :]  # (n, n)
    auc = separation_auc(cosine[same_topic & off_diagonal], cosine[~same_topic])
    nearest = cosine.masked_fill(~off_diagonal, float("-inf")).argmax(dim=1)  # (n,)
    return TopicSimilarity(run_id=run.run_id, family=run.family, step=run.step, pooling=used, topics=topics,
                           matrix=matrix, same=same, different=different, sentences=len(texts), auc=auc,
                           nearest_same_topic=float((label[nearest] == label).float().mean()),
                           examples={topic: [t for t, l in zip(texts, labels) if l == i][:3]
                                     for i, topic in enumerate(topics)})
