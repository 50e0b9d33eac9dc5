"""T5: span corruption for an encoder-decoder.

Raffel, Shazeer, Roberts, Lee, Narang, Matena, Zhou, Li, Liu (2020). Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer. JMLR 21(140):1-67. arXiv:1910.10683. Reference code:
google-research/text-to-text-transfer-transformer, t5/data/preprocessors.py (`span_corruption`,
`random_spans_noise_mask`, `noise_span_to_unique_sentinel`, `nonnoise_span_to_unique_sentinel`).

Choosing the noise (`random_spans_noise_mask`, 15% noise, mean span length 3):
    num_noise_tokens = round(n * 0.15), clipped to [1, n - 1]
    num_noise_spans  = round(num_noise_tokens / 3), at least 1
    the noise tokens and the non-noise tokens are each split into num_noise_spans random positive segments (all
    splits equally likely), and the segments alternate, starting with non-noise.
For n = 512 this is always 77 noise tokens in 26 spans (mean span length 2.96).

Encoder input: the text with each noise span replaced by one sentinel <extra_id_0>, <extra_id_1>, ... (in text order).
Targets: each span's sentinel followed by its tokens, then one final sentinel, as in the paper's Figure 2. Decoder
inputs: the targets shifted right behind the start token, T5's pad token (`decoder_start="pad"`, the reference's
`decoder_start_token_id = 0`, which is the pad token in T5's vocabulary). Encoder attention is full, decoder attention
causal, cross attention all True.

Worked example (the paper's Figure 2; spans (2, 4) "for inviting" and (8, 9) "last";
`api.anatomy("t5", tokens, spans=[(2, 4), (8, 9)])`; no randomness):

    tokens             Thank you for inviting me to your party last week .
    encoder inputs     Thank you <extra_id_0> me to your party <extra_id_1> week .
    encoder positions  0     1   2            3  4  5    6     7            8    9
    decoder inputs     [PAD]         <extra_id_0> for inviting <extra_id_1> last
    targets            <extra_id_0>  for          inviting <extra_id_1> last <extra_id_2>
    decoder positions  0 1 2 3 4 5

    encoder (10 x 10): all 1     decoder (6 x 6): causal     cross (6 x 10): all 1
                                 1 0 0 0 0 0
                                 1 1 0 0 0 0
                                 1 1 1 0 0 0
                                 1 1 1 1 0 0
                                 1 1 1 1 1 0
                                 1 1 1 1 1 1

Settings: `final_token="sentinel"` (default, the paper's Figure 2: targets end with the next unused sentinel) or
"eos" (the code: targets end with EOS; the code's pipeline also appends EOS to the encoder input, which the lab
leaves out because it adds no framing). `decoder_start`: "pad" (default, T5) or "bos" (the lab's [BOS]: what runs
saved before this setting existed used; they still load with it, see `SAVED_BEFORE`).

The model (lab_models/models/family.py) is T5's own: RMS norm without bias, no biases in the linear layers, ReLU, no
absolute positions but the bucketed relative position bias (encoder bidirectional, decoder unidirectional; position ids
are 0, 1, 2, ... on both sides and enter only through it), no 1/sqrt(d) in the attention, T5's initialization, and the
tied output projection of the decoder output scaled by d_model^-0.5. A Hugging Face `T5ForConditionalGeneration`
checkpoint loads into it with the same logits (lab_models/interop/t5.py).

Deviations, stated:
- The pad token is the lab tokenizer's [PAD], wherever it sits in the vocabulary (T5's is id 0).
- Sentinels are vocab.sentinel_ids in order (<extra_id_0> first); T5's SentencePiece vocabulary counts them down from
  the end of the vocabulary, which is the same tokens.
- If num_noise_spans would exceed the number of non-noise tokens (only for extreme settings, e.g. density 0.9), it is
  lowered so every segment stays positive; the reference would build an invalid segmentation there.

The loss (`loss(model, batch)`, objective "span_corruption"): the backbone's encoder-decoder mode, as MASS's
(`mass.decoder_states`): cross-entropy of the decoder states against the sentinel-delimited targets.

Translation (objective "translation", default weight 0; objectives/translation.py): T5's text-to-text form of a
supervised task, the encoder reads the task prefix and the English ("translate English to Chinese: the cat sees a
ball ."), the decoder writes the Chinese ([PAD] + Chinese -> Chinese + [EOS], from the same start token as span
corruption). With it on, each step's batch holds the span-corruption rows and the translation rows together (flagged in
extras["translation"]) and the loss adds weight * translation loss (`mass.sequence_to_sequence_loss`); with
span_corruption at 0 the model trains on translation alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import Batch, Example, collate
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.glm import check_spans
from lab_models.objectives.losses import LossOutput
from lab_models.objectives.mass import decoder_states, sequence_to_sequence_loss

CHOICES: tuple[str, ...] = ("spans",)
RULE = Message("encoder: bidirectional over the text with each noise span replaced by a sentinel; decoder: causal "
               "over sentinel + span, ...; cross: every decoder row sees the encoder")
FINAL_TOKENS = ("sentinel", "eos")
DECODER_STARTS = ("pad", "bos")
# Settings added after runs had been saved, with the value those runs trained with: a saved config without the field
# reads it from here, not from the new default (lab_models/training/run.py: settings_from_dict).
SAVED_BEFORE = {"decoder_start": "bos"}


@dataclass(frozen=True)
class Settings:
    """T5's span-corruption settings; defaults are the paper's (15% noise, mean span length 3)."""

    noise_density: float = 0.15
    mean_noise_span_length: float = 3.0
    final_token: str = "sentinel"  # "sentinel": the paper's Figure 2; "eos": the reference code
    decoder_start: str = "pad"  # the decoder's first input: "pad" (T5's pad token) or "bos" (the lab's [BOS])

    def __post_init__(self):
        density, mean = self.noise_density, self.mean_noise_span_length
        if isinstance(density, bool) or not isinstance(density, (int, float)) or not 0.0 < density < 1.0:
            raise LabError("noise_density must be in (0, 1), got {density!r}", density=density)
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not mean >= 1.0:
            raise LabError("mean_noise_span_length must be a number >= 1, got {mean!r}", mean=mean)
        if self.final_token not in FINAL_TOKENS:
            raise LabError("final_token must be one of {final_tokens}, got {final_token!r}",
                           final_tokens=', '.join(FINAL_TOKENS), final_token=self.final_token)
        if self.decoder_start not in DECODER_STARTS:
            raise LabError("decoder_start must be one of {decoder_starts}, got {decoder_start!r}",
                           decoder_starts=', '.join(DECODER_STARTS), decoder_start=self.decoder_start)


def decoder_start_id(settings: Settings, vocab) -> int:
    """The id the decoder starts from: vocab.pad_id ("pad", T5) or vocab.bos_id ("bos")."""
    return vocab.pad_id if settings.decoder_start == "pad" else vocab.bos_id


def noise_counts(n: int, density: float, mean_span_length: float) -> tuple[int, int]:
    """(num_noise_tokens, num_noise_spans) as in `random_spans_noise_mask`. n=512: (77, 26); n=11: (2, 1)."""
    if n < 2:
        raise LabError("T5 span corruption needs at least 2 tokens (one noise, one kept), got {n}.", n=n)
    num_noise = min(max(round(n * density), 1), n - 1)
    num_spans = max(round(num_noise / mean_span_length), 1)
    return num_noise, min(num_spans, num_noise, n - num_noise)


def random_segmentation(num_items: int, num_segments: int, generator: torch.Generator) -> torch.Tensor:
    """Split num_items into num_segments positive lengths, every split equally likely (T5's `_random_segmentation`)."""
    cuts = torch.randperm(num_items - 1, generator=generator)[:num_segments - 1].sort().values + 1  # (S-1,)
    bounds = torch.cat([torch.tensor([0]), cuts, torch.tensor([num_items])])  # (S+1,)
    return bounds.diff()  # (S,)


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    settings: Settings = cfg.settings
    n = token_ids.numel()
    num_noise, num_spans = noise_counts(n, settings.noise_density, settings.mean_noise_span_length)
    noise_lengths = random_segmentation(num_noise, num_spans, generator)  # (S,)
    kept_lengths = random_segmentation(n - num_noise, num_spans, generator)  # (S,)
    interleaved = torch.stack([kept_lengths, noise_lengths], dim=1).reshape(-1)  # (2S,): kept, noise, kept, ...
    ends = torch.cumsum(interleaved, 0)  # (2S,)
    starts = ends - interleaved
    return {"spans": list(zip(starts[1::2].tolist(), ends[1::2].tolist()))}


def validate_choices(n: int, choices: dict) -> dict:
    """Check `spans` (at least one, non-empty, in range, non-overlapping); they are sorted into text order."""
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        raise LabError("T5 takes the choice spans; got {unknown}", unknown=', '.join(unknown))
    return {"spans": sorted(check_spans(n, choices["spans"]))} if "spans" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    settings: Settings = cfg.settings
    vocab = cfg.vocab
    n = token_ids.numel()
    spans = sorted(check_spans(n, choices["spans"]))
    k = len(spans)
    needed = k + (1 if settings.final_token == "sentinel" else 0)
    if len(vocab.sentinel_ids) < needed:
        raise LabError("T5 needs {needed} sentinel tokens for {k} noise spans, but the vocabulary has only "
                       "{n_sentinel_ids}: use fewer spans or a vocabulary with more <extra_id_k>.",
                       needed=needed, k=k, n_sentinel_ids=len(vocab.sentinel_ids))
    sentinels = torch.tensor(vocab.sentinel_ids[:needed], dtype=torch.long)  # (needed,)

    # Encoder: every noise span collapses into its sentinel.
    starts = torch.tensor([s for s, _ in spans], dtype=torch.long)  # (k,)
    ends = torch.tensor([e for _, e in spans], dtype=torch.long)  # (k,)
    cover = torch.zeros(n + 1, dtype=torch.long)
    cover.index_add_(0, starts, torch.ones(k, dtype=torch.long))
    cover.index_add_(0, ends, -torch.ones(k, dtype=torch.long))
    is_noise = torch.cumsum(cover, 0)[:n] > 0  # (n,)
    is_start = torch.zeros(n, dtype=torch.bool)
    is_start[starts] = True
    span_index = torch.cumsum(is_start.long(), 0) - 1  # (n,): which span a noise token belongs to
    encoder_ids = torch.where(is_start, sentinels[span_index.clamp(min=0)], token_ids)[~is_noise | is_start]  # (E,)

    # Targets: sentinel_i + span_i for each span, then the final sentinel (or EOS).
    pieces = []
    for i, (start, end) in enumerate(spans):
        pieces += [sentinels[i:i + 1], token_ids[start:end]]
    pieces.append(sentinels[k:k + 1] if settings.final_token == "sentinel" else torch.tensor([vocab.eos_id]))
    targets = torch.cat(pieces)  # (S,)
    decoder_ids = torch.cat([torch.tensor([decoder_start_id(settings, vocab)]), targets[:-1]])  # (S,): shifted right
    e, s = encoder_ids.numel(), targets.numel()
    return Example(
        input_ids=encoder_ids,
        attention={"encoder": torch.ones(e, e, dtype=torch.bool),  # (E, E)
                   "decoder": torch.ones(s, s, dtype=torch.bool).tril(),  # (S, S) causal
                   "cross": torch.ones(s, e, dtype=torch.bool)},  # (S, E)
        position_ids=torch.arange(e),  # (E,)
        targets=targets,  # (S,): aligned with the decoder inputs
        decoder_input_ids=decoder_ids,
        decoder_position_ids=torch.arange(s),  # (S,)
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = list(token_ids)
    return collate([build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows],
                   pad_id=cfg.vocab.pad_id)


def sentinels_needed(n: int, settings: Settings) -> int:
    """How many sentinels the longest corruption of an n-token row uses: one per noise span (+1 for the final one).
    n=64 (the defaults): 3 spans -> 4; n=512: 26 spans -> 27."""
    _, num_spans = noise_counts(n, settings.noise_density, settings.mean_noise_span_length)
    return num_spans + (1 if settings.final_token == "sentinel" else 0)


def prediction_states(model, batch: Batch) -> torch.Tensor:
    """The decoder states (B, S, H): row k predicts targets[:, k]."""
    return decoder_states(model, batch)


def loss(model, batch: Batch) -> LossOutput:
    """span_corruption: -log p(<extra_id_0> span_0 <extra_id_1> span_1 ... | the text with each span replaced by its
    sentinel), left to right in the decoder; plus, when on, translation: -log p(Chinese + [EOS] | "translate English
    to Chinese: " + English) on the batch's translation rows."""
    return sequence_to_sequence_loss(model, batch, "span_corruption")
