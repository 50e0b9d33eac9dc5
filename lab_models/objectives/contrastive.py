"""Contrastive sentence learning, SimCSE-style and unsupervised: an add-on objective `contrastive` that BERT, RoBERTa,
ALBERT, ELECTRA (its discriminator), MPNet, UniLM, GPT and GPT-2 can mix into their own pretraining.

Paper: Gao, Yao, Chen (2021). SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP. Unsupervised SimCSE
encodes every sentence of a minibatch twice; the two encodings differ only by their dropout masks, so each one is the
other's positive, and the other sentences' second encodings are its negatives (eq. 4):

    l_i = -log  exp(sim(h_i, h_i+) / tau) / sum_j exp(sim(h_i, h_j+) / tau),     sim = cosine,  tau = 0.05

The loss is the mean of l_i over the N sentences: a cross-entropy over the rows of the N x N matrix sim(h_i, h_j+) / tau
with the diagonal as the right answer. Alignment and uniformity (Wang & Isola 2020, Understanding Contrastive
Representation Learning through Alignment and Uniformity on the Hypersphere. ICML), on L2-normalised vectors f:

    alignment  = E over positive pairs (x, y) of ||f(x) - f(y)||^2                (lower: positives closer)
    uniformity = log E over all pairs (x, y) of exp(-2 ||f(x) - f(y)||^2)         (lower: vectors spread out)

Worked example (the golden test): three sentences, tau = 1 for readable numbers. Their first encodings h and second
encodings h+ (already unit length) give the similarity matrix S[i, j] = cos(h_i, h_j+):

    h  = [1, 0], [0, 1], [0.6, 0.8]      h+ = [1, 0], [0, 1], [0.8, 0.6]
    S  = 1.00  0.00  0.80                 row 0: -log(e^1.00 / (e^1.00 + e^0.00 + e^0.80)) = 0.7823
         0.00  1.00  0.60                 row 1: -log(e^1.00 / (e^0.00 + e^1.00 + e^0.60)) = 0.7120
         0.60  0.80  0.96                 row 2: -log(e^0.96 / (e^0.60 + e^0.80 + e^0.96)) = 0.9360
    loss = (0.7823 + 0.7120 + 0.9360) / 3 = 0.8101

    alignment  = (0 + 0 + ||[0.6, 0.8] - [0.8, 0.6]||^2) / 3 = 0.08 / 3 = 0.0267
    uniformity = log mean(e^(-2*2), e^(-2*0.8), e^(-2*0.4)) over the pairs (0,1), (0,2), (1,2) = -1.4998

>>> h, h_pos = torch.tensor([[1., 0.], [0., 1.], [.6, .8]]), torch.tensor([[1., 0.], [0., 1.], [.8, .6]])
>>> round(float(info_nce(h, h_pos, temperature=1.0)), 4)
0.8101
>>> round(float(alignment(h, h_pos)), 4), round(float(uniformity(h)), 4)
(0.0267, -1.4998)

Where the sentences come from: a sentence view of the corpus
--------------------------------------------------------------
The lab's pretraining rows are windows of a packed token stream that start and end mid-sentence, so they are no
sentences. The contrastive rows are drawn from a separate view: the corpus's training documents split into sentences
(`split_sentences`: after . ! ? and the Chinese 。！？), each framed as fine-tuning frames a sentence ([CLS] s [SEP]
for the encoder families, [BOS] s [EOS] for GPT and GPT-2; lab_models/inference/finetuning/run.py) and cut to
`max_tokens` (SimCSE's max_seq_length, 32). Each step draws `sentences` of them (default: the run's batch size)
uniformly with replacement from the step's generator, after the family's own draws, so the family's batch is byte for
byte the one it would be without the add-on. Validation batch i holds the validation split's sentences i*N .. i*N+N-1
(wrapping around).

The pooled representation (`pooling`, SimCSE's Table 6 compares these): by default ("auto") the mean of the real
tokens' final states for the encoder families and the last real token ([EOS]) for GPT and GPT-2 (under a causal mask
only it has read the whole sentence). "first" takes the [CLS] position instead (SimCSE's own default for BERT),
"last" and "mean" force the others. Why not [CLS] by default: SimCSE starts from a BERT whose [CLS] pretraining
shaped (NSP), while the lab's pretraining rows carry no [CLS] at all (lab_models/training/batches.py), so only this loss
would ever train it, and it learns to tell sentences apart without learning what they mean; the token states that MLM
shapes do carry meaning, and averaging them keeps it (docs/addons.md: at the tiny preset, mean pooling makes
same-topic sentences clearly closer, [CLS] pooling does not). Each family reads the sentence as it reads text
downstream: a full mask among the real tokens (UniLM: its bidirectional mode; MPNet: its content stream alone), a
causal mask for GPT, and ELECTRA's discriminator. The N sentences are stacked twice into one (2N, L) forward pass,
so every row draws its own dropout mask (SimCSE's implementation does the same).

No leak into the family's objective: the contrastive rows are separate rows of a separate forward pass (no row attends
another), so the logits that predict the family's targets do not depend on them, and they do not depend on the family's
rows (tests/objectives/test_addons.py checks both ways). A contrastive sentence may also occur, unmasked, inside a
window of some step: that is seeing the training text twice, never within one row.

The contrastive loss is added as weight * loss to the family's total and logged as the part `contrastive`.
Validation rows carry it too (computed without dropout, so the two encodings coincide and the loss measures how well
the sentences are told apart), and `alignment`, `uniformity` and `topic_gap` on the synthetic corpus's held-out
sentences (see `SentenceProbe`).

Deviations, stated:
- No MLP over [CLS] in training: SimCSE trains unsupervised models with an MLP pooler over [CLS] and drops it at test
  time; the lab pools the token states with no MLP (SimCSE's Table 6 "avg." and "w/o MLP" rows, within about a
  point), so the add-on adds no parameter and a run loads like any other.
- The encoder families pool the mean by default, not [CLS] (above; `pooling=first` gives SimCSE's [CLS]).
- Sentences come from a rule-based split (no sentence splitter model); a "sentence" of the stdlib-docs corpus can be
  a heading or a code fragment.
- SimCSE fine-tunes a pretrained BERT or RoBERTa; here the objective is mixed into pretraining from `start_step`
  (default 0, the first step). Set it to part of the run to pretrain first, then learn contrastively, as SimCSE does.
  What it does at the tiny preset (docs/addons.md, benchmarks/bench_addons.py, 400 steps): with BERT's mean pooling the
  sentence space spreads out (uniformity -0.8 -> -3.2) and same-topic sentences become clearly closer than
  different-topic ones (gap 0.019 -> 0.087, AUC 0.57 -> 0.62); with [CLS] pooling it spreads out too but learns no
  topic at all (AUC 0.50), and GPT's last token likewise (AUC 0.52), at a cost to GPT's own loss.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from lab_models.messages import LabError
from lab_models.families import RNN_FAMILIES
from lab_models.text.tasks import load_task

OBJECTIVE = "contrastive"
FAMILIES = ("bert", "roberta", "albert", "electra", "mpnet", "unilm", "gpt", "gpt2")
CAUSAL_FAMILIES = ("gpt", "gpt2")
ENCODER_DECODER_FAMILIES = ("mass", "t5")
POOLINGS = ("first", "last", "mean")
SETTING_POOLINGS = ("auto", *POOLINGS)
IDS_KEY = "contrastive_ids"  # Batch.addons: (N, L) long, framed sentences padded with [PAD]
ACTIVE_KEY = "contrastive_active"  # Batch.addons: () bool, False before `start_step` (no contrastive loss that step)
_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")


@dataclass(frozen=True)
class Settings:
    """The contrastive add-on's settings (`--set contrastive.NAME=VALUE`)."""

    temperature: float = 0.05  # SimCSE's tau: the softmax temperature over cosine similarities
    sentences: int = 0  # sentences per step, each encoded twice (0 = the run's batch size)
    max_tokens: int = 32  # longest framed sentence in tokens ([CLS] and [SEP] included; SimCSE: 32)
    pooling: str = "auto"  # auto: the mean of the tokens (encoders), the last token (GPT); or first ([CLS]), last, mean
    start_step: int = 0  # contrastive learning from this step on (SimCSE continues a pretrained model)

    def __post_init__(self):
        if self.pooling not in SETTING_POOLINGS:
            raise LabError("contrastive.pooling must be one of {setting_poolings}, got {pooling!r}",
                           setting_poolings=', '.join(SETTING_POOLINGS), pooling=self.pooling)
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not 0 < self.temperature <= 10:
            raise LabError("contrastive.temperature must be in (0, 10], got {temperature!r}",
                           temperature=self.temperature)
        for name, minimum in (("sentences", 0), ("max_tokens", 3), ("start_step", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise LabError("contrastive.{name} must be a whole number >= {minimum}, got {value!r}",
                               name=name, minimum=minimum, value=value)


# ------------------------------------------------------------------------------------------------ the loss


def info_nce(first: torch.Tensor, second: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCSE's eq. 4: first (N, H) and second (N, H) encodings of the same N sentences -> the mean InfoNCE loss,
    row i's positive being second[i] and its negatives second[j], j != i."""
    similarity = F.cosine_similarity(first.float().unsqueeze(1), second.float().unsqueeze(0), dim=-1)  # (N, N)
    labels = torch.arange(first.shape[0], device=first.device)  # (N,): the diagonal
    return F.cross_entropy(similarity / temperature, labels)


def alignment(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Wang & Isola's alignment (alpha = 2): the mean squared distance of positive pairs, on unit vectors."""
    a, b = F.normalize(first.float(), dim=-1), F.normalize(second.float(), dim=-1)  # (N, H)
    return (a - b).pow(2).sum(dim=-1).mean()


def uniformity(vectors: torch.Tensor) -> torch.Tensor:
    """Wang & Isola's uniformity (t = 2): log of the mean Gaussian potential over all pairs i < j, on unit vectors."""
    x = F.normalize(vectors.float(), dim=-1)  # (N, H)
    return torch.pdist(x, p=2).pow(2).mul(-2).exp().mean().log()


def pooling_for(family: str) -> str:
    """The pooled position: "last" for GPT and GPT-2, "first" ([CLS]) for the other Transformer families, "mean" for
    the bidirectional LSTMs and "last" for ULMFiT (as fine-tuning's pooling "auto")."""
    if family in CAUSAL_FAMILIES or family == "ulmfit":
        return "last"
    return "mean" if family in RNN_FAMILIES else "first"


def frame(ids: Sequence[int], vocab, family: str, max_tokens: int) -> list[int]:
    """A sentence's token ids as the family reads a sentence downstream, at most `max_tokens` long: [CLS] s [SEP]
    (encoders), [BOS] s [EOS] (GPT, GPT-2), s alone (the LSTM families, which never saw framing).

    >>> from lab_models.objectives.common import StringVocab
    >>> v = StringVocab("the cat sees a ball .".split()).info
    >>> frame([16, 17, 18], v, "bert", 32), frame([16, 17, 18], v, "gpt", 4)
    ([2, 16, 17, 18, 3], [4, 16, 17, 5])
    """
    ids = list(ids)
    if family in RNN_FAMILIES:
        return ids[:max_tokens]
    start, end = (vocab.bos_id, vocab.eos_id) if family in CAUSAL_FAMILIES else (vocab.cls_id, vocab.sep_id)
    return [start, *ids[: max(0, max_tokens - 2)], end]


def pad(rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """Rows of ids -> (N, L) long, right-padded with `pad_id`."""
    width = max(len(row) for row in rows)
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(list(row), dtype=torch.long)
    return out


def sentence_states(model, ids: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every family's hidden states of framed sentences `ids` (N, L), padded with `pad_id`: (states (N, L, H),
    lengths (N,)). The view is fine-tuning's (lab_models/inference/finetuning/run.py): a full mask among the real tokens
    (causal for GPT), the encoder of MASS and T5, Part A at 2-D positions (i, 0) for GLM, the content stream for XLNet
    and MPNet, ELECTRA's discriminator, and the LSTM families' `representations`."""
    family = model.family
    lengths = (ids != pad_id).sum(dim=1).clamp(min=1)  # (N,)
    if family in RNN_FAMILIES:
        return model.representations(ids), lengths  # (N, L, R)
    N, L = ids.shape
    real = torch.arange(L, device=ids.device)[None, :] < lengths[:, None]  # (N, L)
    mask = real[:, None, :].expand(N, L, L)  # (N, L, L): every real key
    if family in CAUSAL_FAMILIES:
        mask = mask & torch.ones(L, L, dtype=torch.bool, device=ids.device).tril()
    mask = mask | torch.eye(L, dtype=torch.bool, device=ids.device)  # a padded row attends itself: none is empty
    positions = torch.arange(L, device=ids.device).expand(N, L)  # (N, L)
    if family == "glm":
        positions = torch.stack([positions, torch.zeros_like(positions)], dim=1)  # (N, 2, L)
    if family in ENCODER_DECODER_FAMILIES:
        return model.backbone.encode(ids, mask, positions), lengths  # (N, L, H)
    return model.backbone(ids, mask, positions), lengths  # (N, L, H)


def pool(states: torch.Tensor, lengths: torch.Tensor, pooling: str) -> torch.Tensor:
    """(N, L, H) states -> (N, H): the first position, the last real one, or the mean over the real ones."""
    if pooling == "first":
        return states[:, 0]
    if pooling == "last":
        return states[torch.arange(states.shape[0], device=states.device), lengths - 1]
    if pooling == "mean":
        real = (torch.arange(states.shape[1], device=states.device)[None, :] < lengths[:, None]).to(states.dtype)
        return (states * real.unsqueeze(-1)).sum(dim=1) / lengths.to(states.dtype).unsqueeze(-1)
    raise LabError("unknown pooling {pooling!r}: choose one of {poolings}",
                   pooling=pooling, poolings=', '.join(POOLINGS))


def trained_pooling(family: str, pooling: str = "auto") -> str:
    """The pooling the contrastive objective trains for `family` under the setting `pooling`.

    >>> trained_pooling("bert"), trained_pooling("gpt"), trained_pooling("bert", "first")
    ('mean', 'last', 'first')
    """
    if pooling != "auto":
        return pooling
    return "last" if family in CAUSAL_FAMILIES else "mean"


def sentence_vectors(model, ids: torch.Tensor, pad_id: int, pooling: str | None = None) -> torch.Tensor:
    """(N, L) framed sentences -> (N, H) pooled vectors (pooling None = the family's, `pooling_for`)."""
    states, lengths = sentence_states(model, ids, pad_id)
    return pool(states, lengths, pooling or pooling_for(model.family))


def loss(model, ids: torch.Tensor, settings: Settings) -> torch.Tensor:
    """The contrastive loss of one step: the N sentences `ids` (N, L) encoded twice in one (2N, L) pass (different
    dropout masks per row), InfoNCE between the two halves."""
    n = ids.shape[0]
    pooling = trained_pooling(model.family, settings.pooling)
    vectors = sentence_vectors(model, torch.cat([ids, ids]), model.vocab.pad_id, pooling)  # (2N, H)
    return info_nce(vectors[:n], vectors[n:], settings.temperature)


# ------------------------------------------------------------------------------------------------ the sentence view


def split_sentences(text: str) -> list[str]:
    """A document's sentences: each ends after . ! ? or Chinese 。！？ (a rule, not a model).

    >>> split_sentences("the cat sees a ball . she likes it !小猫看见一个红球。")
    ['the cat sees a ball .', 'she likes it !', '小猫看见一个红球。']
    """
    return [part.strip() for part in _SENTENCE.findall(text) if len(part.strip()) >= 2]


class SentenceView:
    """The corpus's sentences, tokenized and framed for `family`: `sample(generator, n)` for a training step and
    `validation(i, n)` for validation batch i (the module docstring)."""

    def __init__(self, family: str, tokenizer, vocab, train_texts: Sequence[str], validation_texts: Sequence[str],
                 settings: Settings):
        self.family, self.vocab, self.settings = family, vocab, settings
        self.train = self._encode(tokenizer, train_texts)
        if not self.train:
            raise LabError("contrastive learning found no sentence in the corpus's training split: use a corpus "
                           "with sentences ending in . ! or ?")
        self.validation_sentences = self._encode(tokenizer, validation_texts) or self.train

    def _encode(self, tokenizer, texts: Sequence[str]) -> list[list[int]]:
        sentences = [s for text in texts for s in split_sentences(text)]
        encoded = tokenizer.encode_batch(sentences, add_special_tokens=False) if sentences else []
        return [frame(e.ids, self.vocab, self.family, self.settings.max_tokens) for e in encoded if e.ids]

    def sample(self, generator: torch.Generator, n: int) -> torch.Tensor:
        picks = torch.randint(len(self.train), (n,), generator=generator).tolist()  # (n,)
        return pad([self.train[i] for i in picks], self.vocab.pad_id)  # (n, L)

    def validation(self, batch_index: int, n: int) -> torch.Tensor:
        count = len(self.validation_sentences)
        return pad([self.validation_sentences[(batch_index * n + k) % count] for k in range(n)], self.vocab.pad_id)

    def facts(self) -> dict:
        return {"train_sentences": len(self.train), "validation_sentences": len(self.validation_sentences),
                "max_tokens": self.settings.max_tokens}


# ------------------------------------------------------------------------------------------------ held-out probes


class SentenceProbe:
    """What the validation rows report for a contrastive run, on the synthetic corpus's held-out sentences (those of
    its validation stories, whatever the run's corpus): `alignment` over the held-out entailment pairs whose
    hypothesis drops modifiers from the premise (near paraphrases, the lab's stand-in for SimCSE's STS-B pairs rated
    above 4), `uniformity` over the held-out topic sentences, and `topic_gap`: the mean cosine similarity of
    same-topic pairs minus that of different-topic pairs (the Understand tab's sentence-similarity view)."""

    def __init__(self, family: str, tokenizer, vocab, max_tokens: int = 32, limit: int = 256, pooling: str = "auto"):
        self.family, self.vocab = family, vocab
        self.pooling = trained_pooling(family, pooling)  # the pooling the run trains
        topic = load_task("topic")
        sentences = topic.validation[:limit]
        self.topics = torch.tensor([example.label for example in sentences])  # (n,)
        self.sentences = self._encode(tokenizer, [example.text for example in sentences], max_tokens)
        entailment = load_task("entailment")
        entailed = entailment.label_names.index("entailment")
        pairs = [example for example in entailment.validation if example.label == entailed][:limit]
        self.premises = self._encode(tokenizer, [example.text for example in pairs], max_tokens)
        self.hypotheses = self._encode(tokenizer, [example.text_pair for example in pairs], max_tokens)

    def _encode(self, tokenizer, texts, max_tokens) -> torch.Tensor:
        encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return pad([frame(e.ids or [self.vocab.eos_id], self.vocab, self.family, max_tokens) for e in encoded],
                   self.vocab.pad_id)

    @torch.no_grad()
    def __call__(self, model, batch_size: int = 64) -> dict[str, float]:
        def vectors(ids: torch.Tensor) -> torch.Tensor:
            device = next(model.parameters()).device
            return torch.cat([sentence_vectors(model, ids[i:i + batch_size].to(device), self.vocab.pad_id,
                                               self.pooling).float()
                              for i in range(0, ids.shape[0], batch_size)]).cpu()

        was_training = model.training
        model.eval()
        try:
            topic_vectors = vectors(self.sentences)  # (n, H)
            premises, hypotheses = vectors(self.premises), vectors(self.hypotheses)
        finally:
            model.train(was_training)
        same, different = topic_similarity(topic_vectors, self.topics)
        return {"alignment": float(alignment(premises, hypotheses)), "uniformity": float(uniformity(topic_vectors)),
                "topic_gap": same - different}


def topic_similarity(vectors: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """(mean cosine of same-label pairs, mean cosine of different-label pairs), over pairs i != j.

    >>> same, different = topic_similarity(torch.tensor([[1., 0.], [1., .1], [0., 1.]]), torch.tensor([0, 0, 1]))
    >>> round(same, 4), round(different, 4)
    (0.995, 0.0498)
    """
    x = F.normalize(vectors.float(), dim=-1)
    cosine = x @ x.T  # (n, n)
    same = labels[:, None] == labels[None, :]  # (n, n)
    off_diagonal = ~torch.eye(len(labels), dtype=torch.bool)
    return float(cosine[same & off_diagonal].mean()), float(cosine[~same].mean())
