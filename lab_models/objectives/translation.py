"""Translation for the encoder-decoder families (MASS, T5): English -> Chinese on a built-in corpus's sentence pairs.

The objective "translation" trains the same encoder-decoder as the family's denoising objective on parallel
sentences: the encoder reads the English sentence, the decoder writes its Chinese translation left to right. MASS
(Song et al. 2019, its low-resource NMT experiments) fine-tunes its pre-trained encoder-decoder on bilingual pairs
this way; T5 (Raffel et al. 2020, §2.4, "translate English to German: ...") casts translation as text-to-text with a
task prefix on the input.

The example format (one sentence pair)
--------------------------------------
    encoder inputs     encoder_ids(family, ...): MASS the English tokens; T5 the tokens of
                       T5_TASK_PREFIX + English ("translate English to Chinese: the cat sees a ball .")
    encoder positions  0 .. E-1
    decoder inputs     start z_0 .. z_{n-1}          (z = the Chinese tokens; start: [BOS], T5's pad token)
    decoder positions  0 .. n                        (input k sits at the position of target k)
    targets            z_0 .. z_{n-1} [EOS]
    attention          encoder (E x E) all True; decoder (n+1 x n+1) causal; cross (n+1 x E) all True

This is the decoder side of the lab's MASS and T5 batch builders: [BOS] starts the decoder (objectives/mass.py uses
it for a fragment at u = 0), or T5's own start token (`decoder_start_id`: the pad token by default, as
objectives/t5.py starts span corruption), decoder input k is the token before target k, decoder position
k is the position of the token input k predicts (for MASS: in the Chinese sentence's own numbering, 0 .. n), and
padding follows `batch.collate` (pad_id in the inputs, IGNORE_INDEX in the targets, padded keys never attended).
The lab adds no framing: no [EOS] after the English (T5's pipeline appends one to its inputs) and no [BOS] before it.

Worked example (the golden test; a `StringVocab` over the words, whose ids start at 16 after the 8 specials and 8
sentinels: [PAD] 0, [BOS] 4, [EOS] 5; "the" 16 "cat" 17 "sees" 18 "a" 19 "ball" 20 "." 21, "猫" 22 "看见" 23
"一个" 24 "球" 25 "。" 26, "translate" 27 "English" 28 "to" 29 "Chinese:" 30; a word-level tokenizer over them;
`build_example(encoder_ids(family, tok, vocab, "the cat sees a ball ."), [22, 23, 24, 25, 26], vocab)`):

    MASS  encoder inputs     the  cat  sees  a   ball  .           ids 16 17 18 19 20 21
          encoder positions  0    1    2     3   4     5
    T5    encoder inputs     translate English to Chinese: the cat sees a ball .
                                                                    ids 27 28 29 30 16 17 18 19 20 21
          encoder positions  0 .. 9
    both  decoder inputs     [BOS] 猫   看见  一个  球   。        ids  4 22 23 24 25 26  (T5: [PAD] 0, not [BOS] 4)
          decoder positions  0     1    2     3     4    5
          targets            猫    看见  一个  球   。   [EOS]     ids 22 23 24 25 26  5

          encoder (E x E): all 1    decoder (6 x 6): causal    cross (6 x E): all 1
                                    1 0 0 0 0 0
                                    1 1 0 0 0 0
                                    1 1 1 0 0 0
                                    1 1 1 1 0 0
                                    1 1 1 1 1 0
                                    1 1 1 1 1 1

Translating (what decoding does with a trained model): encode `encoder_ids(family, tokenizer, vocab, english)` at
positions 0 .. E-1 with full attention; start the decoder with its start token at position 0; at step k feed the token
chosen at step k-1 at position k (causal self-attention, full cross-attention), and stop at [EOS]. The tokens before
[EOS], decoded with the run's tokenizer, are the Chinese text.

Deviations, stated:
- MASS has language embeddings (XLM's: one per language, added on the encoder and the decoder side); the lab has one
  token/position table and no language embedding, so nothing but the input itself tells the model which language it
  reads; the decoder always writes Chinese here, so it needs none.
- Rows are cut to the model's max_positions (training passes it as `max_len`; not seq_len, because T5's task prefix
  alone is ~25 tokens of a 512-token vocabulary): the encoder keeps its first max_len tokens, the Chinese side its
  first max_len - 1 (then [EOS]). The synthetic sentences are far shorter (at most 13 English words and 26
  characters; at most ~70 encoder tokens with T5's prefix at the tiny preset), and config.json records the share of
  cut pairs ("truncated_fraction").

Where the pairs come from (training)
------------------------------------
A built-in bilingual corpus's own parallel sentences (`language_pairs(language, split)`: the `parallel_pairs()` of
`synthetic_dataset(seed=0)` or of `story_dataset(seed=0)`, the data `corpora.load_corpus("synthetic")` and
`load_corpus("stories")` are made of), split exactly as the corpus is: by story, with `corpora.split_train_validation`
over the English stories. The translation training pairs are the sentences of the corpus's training stories (~7,600),
the validation pairs those of its held-out stories (~400), so the translation validation loss is on sentences the
model never trained on in either direction (the grammar can repeat a short sentence in two stories; such repeats are
not removed). Deterministic from the seed 0; no file is read.

When the run's corpus is not a built-in bilingual one, the translation objective reads the synthetic pairs:
config.json records whose pairs under "translation" ("pairs": synthetic or stories; seed, counts, prefix, what the
tokenizer was trained on).

Tokenizer coverage: a bilingual corpus holds each English story followed by its Chinese translation, so a tokenizer
trained on its training split covers the Chinese characters of the pairs. On any other corpus the tokenizer would see
no Chinese and the targets would be [UNK] (byte-level BPE excepted), so with translation on, the tokenizer is trained
on the corpus's training split plus the English and Chinese sides of the training pairs (`tokenizer_corpus`). For T5
the task prefix is added as one more text, so that its capitals and ":" are in the vocabulary. config.json records
the share of [UNK] among the Chinese target tokens ("unknown_target_fraction").

How a step mixes objectives
---------------------------
One Batch per step, with one forward pass: the B denoising rows (the family's own `build_example`, drawn exactly as
`make_batch` draws them) followed by B translation rows (pairs drawn uniformly with replacement by the same step
generator, after the denoising draws), collated together. `batch.extras["translation"]` (B_total,) bool marks the
translation rows. The family's loss (objectives/mass.py: `sequence_to_sequence_loss`) takes one cross-entropy over the
targets of the denoising rows and one over those of the translation rows, each a mean over its own target tokens,
and adds weight * part for each objective that is on. The logged `losses` then hold both names.
- Translation only (denoising weight 0, e.g. `--objective span_corruption=0 --objective translation=1`): the batch
  holds B translation rows only (no denoising rows are built) and a pure NMT model trains.
- Translation off (weight 0, the default): nothing changes, byte for byte: the data source calls the family's
  `make_batch` alone, batches carry no "translation" flag, and config.json does not list the objective.
- Bits per byte and perplexity (`LossOutput.target_ids / target_nll`) come from the denoising rows whenever the
  denoising objective is on, so they stay the main objective's numbers; with translation only they are those of the
  Chinese targets given the English (bits per byte of the translation).
- Determinism and resume: the pairs a step draws depend only on the step generator (derive_seed(seed, "batch", step,
  rank)), and validation pairs are fixed (validation batch i takes pairs i*B .. i*B+B-1 in order, wrapping around),
  so a resumed run repeats the same trajectory as the engine promises for every family.
- `tokens_per_s` counts the translation rows too (they are part of the batch, padding included).

Default weight: 0 (off) for both families. The papers pretrain without parallel data (MASS's NMT is a fine-tuning
stage; T5's translation tasks are supervised mixtures), existing runs, tests and benchmarks stay as they were, and a
default that depended on the corpus could not be shown by the Train tab's one weight box. Turn it on with
`--objective translation=1` or the Train tab's weight.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import torch

from lab_models.messages import Joined, LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives import objective_module
from lab_models.text.vocab import VocabInfo
from lab_models.text.tokenizer_inspect import unknown_token_id
from lab_models.text.corpora import split_train_validation
from lab_models.text.synthetic import synthetic_dataset
from lab_models.text.stories import story_dataset
from lab_models.text.corpora import Corpus
from lab_models.text.corpora import content_fingerprint

OBJECTIVE = "translation"
TRANSLATION_FAMILIES = ("mass", "t5")
T5_TASK_PREFIX = "translate English to Chinese: "  # T5's "translate English to German: " convention
ROW_FLAG = "translation"  # Batch.extras key: (B,) bool, True for a translation row
SYNTHETIC_SEED = 0  # the seed of corpora.load_corpus("synthetic") and of load_corpus("stories")
PAIR_LANGUAGES = ("synthetic", "stories")  # the built-in bilingual corpora, whose own pairs a run on them translates
SPLITS = ("train", "validation")


def _check_family(family: str) -> str:
    if family not in TRANSLATION_FAMILIES:
        raise LabError("{family!r} has no translation objective: translation trains the encoder-decoder families "
                       "{translation_families}", family=family, translation_families=', '.join(TRANSLATION_FAMILIES))
    return family


def task_prefix(family: str) -> str:
    """The text put before the English: T5's task prefix, nothing for MASS."""
    return T5_TASK_PREFIX if _check_family(family) == "t5" else ""


# ----------------------------------------------------------------------------------------------------------- format


def _ids(tokenizer, text: str) -> list[int]:
    if not isinstance(text, str):
        raise LabError("expected a text (str), got {text_type}", text_type=type(text).__name__)
    return list(tokenizer.encode(text, add_special_tokens=False).ids)


def encoder_ids(family: str, tokenizer, vocab: VocabInfo, english_text: str) -> list[int]:
    """The encoder input for translating `english_text` with a `family` model: the ids of the English (MASS) or of
    T5_TASK_PREFIX + English (T5), as the run's tokenizer encodes them, without added framing.

    Example (the module's worked example: a word-level tokenizer that splits on spaces):

    >>> from tokenizers import Tokenizer, models, pre_tokenizers
    >>> from lab_models.objectives.common import StringVocab
    >>> v = StringVocab("the cat sees a ball . 猫 看见 一个 球 。 translate English to Chinese:".split())
    >>> tok = Tokenizer(models.WordLevel(v.token_to_id, unk_token="[MASK]"))
    >>> tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    >>> encoder_ids("mass", tok, v.info, "the cat sees a ball .")
    [16, 17, 18, 19, 20, 21]
    >>> encoder_ids("t5", tok, v.info, "the cat sees a ball .")
    [27, 28, 29, 30, 16, 17, 18, 19, 20, 21]
    """
    prefix = task_prefix(family)
    if not isinstance(vocab, VocabInfo):
        raise LabError("vocab must be a VocabInfo, got {vocab_type}", vocab_type=type(vocab).__name__)
    if not isinstance(english_text, str) or not english_text.strip():
        raise LabError("the English text to translate is empty")
    ids = _ids(tokenizer, prefix + english_text)
    if any(not 0 <= i < vocab.size for i in ids):
        raise LabError("the tokenizer produced ids outside the vocabulary of {size}: use the run's own "
                       "tokenizer.json", size=vocab.size)
    return ids


def chinese_ids(tokenizer, chinese_text: str) -> list[int]:
    """The ids of the Chinese side (the decoder's targets without [EOS])."""
    return _ids(tokenizer, chinese_text)


def decoder_start_id(family: str, settings, vocab: VocabInfo) -> int:
    """The id the family's decoder starts from, as its own batch builder says (`decoder_start_id` of
    objectives/<family>.py): T5's setting (its pad token by default), MASS's [BOS]. `settings` None: the family's
    defaults."""
    module = objective_module(_check_family(family))
    return module.decoder_start_id(module.Settings() if settings is None else settings, vocab)


def build_example(encoder: Sequence[int] | torch.Tensor, chinese: Sequence[int] | torch.Tensor, vocab: VocabInfo,
                  max_len: int | None = None, start_id: int | None = None) -> Example:
    """One translation example (the format above) from the encoder ids and the Chinese ids; `max_len` cuts the
    encoder to max_len tokens and the Chinese side to max_len - 1 (then [EOS]). `start_id`: the decoder's first
    input (default [BOS]; T5: `decoder_start_id`).

    >>> from lab_models.objectives.common import StringVocab
    >>> v = StringVocab("the cat sees a ball . 猫 看见 一个 球 。".split())
    >>> ex = build_example([16, 17, 18, 19, 20, 21], [22, 23, 24, 25, 26], v.info)
    >>> ex.decoder_input_ids.tolist(), ex.decoder_position_ids.tolist(), ex.targets.tolist()
    ([4, 22, 23, 24, 25, 26], [0, 1, 2, 3, 4, 5], [22, 23, 24, 25, 26, 5])
    """
    encoder = torch.as_tensor(encoder, dtype=torch.long).reshape(-1)
    chinese = torch.as_tensor(chinese, dtype=torch.long).reshape(-1)
    if max_len is not None:
        if max_len < 2:
            raise LabError("max_len must be at least 2 (one Chinese token and [EOS]), got {max_len}", max_len=max_len)
        encoder, chinese = encoder[:max_len], chinese[:max_len - 1]
    if encoder.numel() == 0:
        raise LabError("a translation example needs at least one encoder token")
    e, s = encoder.numel(), chinese.numel() + 1
    return Example(
        input_ids=encoder.clone(),  # (E,)
        attention={"encoder": torch.ones(e, e, dtype=torch.bool),  # (E, E)
                   "decoder": torch.ones(s, s, dtype=torch.bool).tril(),  # (S, S) causal
                   "cross": torch.ones(s, e, dtype=torch.bool)},  # (S, E)
        position_ids=torch.arange(e),  # (E,)
        targets=torch.cat([chinese, torch.tensor([vocab.eos_id])]),  # (S,): Chinese + [EOS]
        decoder_input_ids=torch.cat([torch.tensor([vocab.bos_id if start_id is None else start_id]),
                                     chinese]),  # (S,): start + Chinese
        decoder_position_ids=torch.arange(s),  # (S,): input k sits at the position of target k
        extras={ROW_FLAG: torch.tensor(True)},
    )


def flagged(example: Example, is_translation: bool) -> Example:
    """`example` with extras[ROW_FLAG] set (a denoising example gets False, so that it can share a batch)."""
    return dataclasses.replace(example, extras={**example.extras, ROW_FLAG: torch.tensor(is_translation)})


def mix(denoising: Sequence[Example], translation: Sequence[Example], pad_id: int) -> Batch:
    """One batch: the denoising examples first, then the translation examples, flagged in extras[ROW_FLAG]."""
    examples = [flagged(e, False) for e in denoising] + [flagged(e, True) for e in translation]
    return collate(examples, pad_id=pad_id)


def split_targets(batch: Batch) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(targets of the denoising rows, targets of the translation rows), each batch.targets with the other rows set to
    IGNORE_INDEX; (batch.targets, None) for a batch without translation rows (no ROW_FLAG)."""
    flag = batch.extras.get(ROW_FLAG)
    if flag is None:
        return batch.targets, None
    rows = flag.bool().reshape(-1, 1)  # (B, 1)
    if rows.shape[0] != batch.targets.shape[0]:
        raise LabError("extras[{row_flag!r}] must hold one flag per row ({n_targets}), got "
                       "{n_rows}", row_flag=ROW_FLAG, n_targets=batch.targets.shape[0], n_rows=rows.shape[0])
    return batch.targets.masked_fill(rows, IGNORE_INDEX), batch.targets.masked_fill(~rows, IGNORE_INDEX)


# ------------------------------------------------------------------------------------------------------------ pairs


@functools.lru_cache(maxsize=4)
def language_pairs(language: str, split: str) -> tuple[tuple[str, str], ...]:
    """The (english, chinese) sentence pairs of the built-in bilingual corpus `language` ("synthetic" or "stories"),
    of its `split` ("train" or "validation"), split by story exactly as `corpora.load_corpus(language)` splits its
    documents."""
    if split not in SPLITS:
        raise LabError("split must be one of {splits}, got {split!r}", splits=', '.join(SPLITS), split=split)
    if language not in PAIR_LANGUAGES:
        raise LabError("no sentence pairs for {language!r}: the pairs come from {languages}", language=language,
                       languages=", ".join(PAIR_LANGUAGES))
    data = (synthetic_dataset(seed=SYNTHETIC_SEED) if language == "synthetic" else story_dataset(seed=SYNTHETIC_SEED))
    stories = data.stories()
    english_stories = [" ".join(example.english for example in story) for story in stories]
    train, validation = split_train_validation(english_stories)
    chosen = set(train if split == "train" else validation)
    return tuple((example.english, example.chinese) for text, story in zip(english_stories, stories)
                 if text in chosen for example in story)


def synthetic_pairs(split: str) -> tuple[tuple[str, str], ...]:
    """The synthetic corpus's sentence pairs of `split` (`language_pairs("synthetic", split)`)."""
    return language_pairs("synthetic", split)


def holds_its_pairs(corpus) -> bool:
    """Whether `corpus` is a built-in bilingual corpus, whose text already holds both sides of its pairs."""
    return getattr(corpus, "source", None) == "builtin" and getattr(corpus, "name", None) in PAIR_LANGUAGES


def pairs_language(corpus) -> str:
    """Whose sentence pairs a run on `corpus` translates: the corpus's own when it is a built-in bilingual corpus
    ("synthetic", "stories"), else the synthetic corpus's."""
    return corpus.name if holds_its_pairs(corpus) else "synthetic"


def tokenizer_corpus(corpus, family: str):
    """The corpus the tokenizer of a run with translation on is trained on: `corpus` plus, in its training split,
    the English and Chinese sides of the training pairs (unless `corpus` is the synthetic one, which holds them) and,
    for T5, the task prefix. Returns `corpus` itself when nothing is added."""

    extra: list[str] = []
    if task_prefix(family):
        extra.append(task_prefix(family).strip())
    if not holds_its_pairs(corpus):
        extra += [text for pair in synthetic_pairs("train") for text in pair]
    if not extra:
        return corpus
    train = tuple(corpus.train) + tuple(extra)
    return Corpus(corpus.name, corpus.source, train, corpus.validation,
                  content_fingerprint(train, corpus.validation))


def tokenizer_texts_note(corpus, family: str) -> Joined:
    """What config.json says the tokenizer was trained on."""
    parts = [Message("the corpus's training split")]
    if not holds_its_pairs(corpus):
        parts.append(Message("both sides of the synthetic training pairs"))
    if task_prefix(family):
        parts.append(Message("the T5 task prefix"))
    return Joined(parts, " + ")


class TranslationPairs:
    """The tokenized pairs a run trains and validates on, and the translation examples of a step.

    `sample(generator, n)`: n training examples, pairs drawn uniformly with replacement from `generator`.
    `validation(i, n)`: the n fixed examples of validation batch i (pairs i*n .. i*n+n-1, wrapping around).
    """

    def __init__(self, family: str, tokenizer, vocab: VocabInfo, max_len: int,
                 train_pairs: Sequence[tuple[str, str]] | None = None,
                 validation_pairs: Sequence[tuple[str, str]] | None = None, settings=None,
                 language: str = "synthetic"):
        self.family = _check_family(family)
        self.language = language
        self.vocab = vocab
        self.max_len = max_len
        self.start_id = decoder_start_id(self.family, settings, vocab)  # settings: the family's (None: defaults)
        train_pairs = language_pairs(language, "train") if train_pairs is None else tuple(train_pairs)
        validation_pairs = (language_pairs(language, "validation") if validation_pairs is None
                            else tuple(validation_pairs))
        if not train_pairs:
            raise LabError("translation needs at least one training pair")
        if not validation_pairs:
            validation_pairs = train_pairs
        self.train = self._encode(tokenizer, train_pairs)
        self.validation_pairs = self._encode(tokenizer, validation_pairs)
        unk = unknown_token_id(tokenizer)
        targets = torch.cat([zh for _, zh in self.train])
        self.unknown_target_fraction = (float((targets == unk).float().mean())
                                        if unk is not None and targets.numel() else 0.0)
        cut = sum(1 for en, zh in self.train if en.numel() > max_len or zh.numel() > max_len - 1)
        self.truncated_fraction = cut / len(self.train)  # pairs cut to max_len (a short seq_len)

    def _encode(self, tokenizer, pairs) -> list[tuple[torch.Tensor, torch.Tensor]]:
        prefix = task_prefix(self.family)
        english = tokenizer.encode_batch([prefix + en for en, _ in pairs], add_special_tokens=False)
        chinese = tokenizer.encode_batch([zh for _, zh in pairs], add_special_tokens=False)
        return [(torch.tensor(en.ids, dtype=torch.long), torch.tensor(zh.ids, dtype=torch.long))
                for en, zh in zip(english, chinese)]

    def _example(self, pair) -> Example:
        return build_example(pair[0], pair[1], self.vocab, self.max_len, self.start_id)

    def sample(self, generator: torch.Generator, n: int) -> list[Example]:
        picks = torch.randint(len(self.train), (n,), generator=generator).tolist()  # (n,)
        return [self._example(self.train[i]) for i in picks]

    def validation(self, batch_index: int, n: int) -> list[Example]:
        count = len(self.validation_pairs)
        return [self._example(self.validation_pairs[(batch_index * n + k) % count]) for k in range(n)]

    def facts(self) -> dict:
        """What config.json records about the pairs (beside the weight and the tokenizer note)."""
        return {"pairs": self.language, "synthetic_seed": SYNTHETIC_SEED, "train_pairs": len(self.train),
                "validation_pairs": len(self.validation_pairs), "task_prefix": task_prefix(self.family),
                "max_len": self.max_len, "unknown_target_fraction": round(self.unknown_target_fraction, 6),
                "truncated_fraction": round(self.truncated_fraction, 6)}
