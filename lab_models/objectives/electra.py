"""ELECTRA: replaced token detection. A small generator (an MLM) fills masked slots; the discriminator labels every
token of the result as original or replaced.

Paper: Kevin Clark, Minh-Thang Luong, Quoc V. Le, Christopher D. Manning (2020). ELECTRA: Pre-training Text Encoders
as Discriminators Rather Than Generators. ICLR 2020. arXiv:2003.10555.

Who may attend to whom: everyone to everyone, in both the generator and the discriminator (bidirectional). What is
predicted: the generator predicts the original token at each masked position (the batch's `targets`); the
discriminator predicts, at **every** position, whether its input token differs from the original (`is_replaced`,
built by `discriminator_targets` once the generator has sampled). The loss is L_MLM + λ L_Disc with λ = 50.

The batch built here is the generator's: `count_to_mask(n, 0.15)` positions picked uniformly; each becomes [MASK] with
probability 0.85 and stays unchanged with probability 0.15, never a random token: the released code's choice
(`pretrain_helpers.mask`); the paper itself only says the selected positions are replaced by [MASK]. `extras`
carries `original_ids` (T,) and `masked` (T,) bool, the two inputs `discriminator_targets` needs besides the
generator's samples.

Tiny worked example: `build_anatomy("electra", "the chef cooked the meal and we ate it".split(), seed=1)` (a golden
test in tests/objectives/test_bert_family_batches.py). Nine tokens, one picked (round(1.35) = 1): "meal" became [MASK].

    inputs     the chef cooked the [MASK] and we ate it
    positions  0   1    2      3   4      5   6  7   8
    targets    -   -    -      -   meal   -   -  -   -
    masked     0   0    0      0   1      0   0  0   0
    attention  all ones, 9 x 9 (every row: 1 1 1 1 1 1 1 1 1)

Then, if the generator samples "dish" at position 4, `discriminator_targets` gives the discriminator
"the chef cooked the dish and we ate it" with is_replaced = 0 0 0 0 1 0 0 0 0; had it sampled "meal", every label
would be 0 (a sample equal to the original counts as original, as in the paper).

Deviations from the paper, stated:
- No [CLS]/[SEP] framing and a single segment (`segment_ids` all 0): ELECTRA's data builder packs one or two
  sentence runs with segment ids but no NSP; packing belongs to the data pipeline.
- The generator's size (`generator_size_fraction`) is read by lab_models/models/family.py; λ is the `rtd` objective
  weight (`disc_weight` is its default when no weight is given). `loss` below samples the generator's replacements with
  a torch.Generator seeded from a hash of the batch (the paper does not say how its sampling is seeded).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
import torch.nn.functional as F

from lab_models.batch import Batch, Example, collate
from lab_models.objectives.bert import (as_ids, as_rows, check_masking, corrupt_tokens, mlm_targets, reject_unknown,
                                        sample_masked, validate_masked)
from lab_models.objectives.common import BatchConfig, CorruptionRates
from lab_models.objectives.losses import (LossOutput, combine, content_seed, masked_mean, require_extra, run_backbone,
                                          sparse_token_loss)

CHOICES: tuple[str, ...] = ("masked",)
RULE = Message("bidirectional: every x_i may attend every x_j; the generator predicts each masked x_i, the "
               "discriminator labels every token original/replaced")


@dataclass(frozen=True)
class Settings:
    """ELECTRA's objective settings; the defaults are the paper's and its released code's."""

    mask_rate: float = 0.15  # fraction of tokens masked for the generator
    mask_token_rate: float = 0.85  # the released code: 85% [MASK] ...
    random_token_rate: float = 0.0  # ... 0% random, 15% unchanged
    disc_weight: float = 50.0  # λ in L_MLM + λ L_Disc
    generator_size_fraction: float = 0.25  # generator hidden size / discriminator hidden size (1/4 to 1/2 work best)

    def __post_init__(self):
        check_masking(self)
        weight = self.disc_weight
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
            raise LabError("disc_weight must be a finite number >= 0, got {weight!r}", weight=weight)
        size = self.generator_size_fraction
        if isinstance(size, bool) or not isinstance(size, numbers.Real) or not 0 < size <= 1:
            raise LabError("generator_size_fraction must be in (0, 1] (a fraction of the discriminator's width), "
                           "got {size!r}", size=size)

    @property
    def rates(self) -> CorruptionRates:
        return CorruptionRates(mask=self.mask_token_rate, random=self.random_token_rate)


def discriminator_targets(original_ids: torch.Tensor, generator_input_ids: torch.Tensor, masked: torch.Tensor,
                          sampled_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and labels: sampled tokens put at the masked positions of the generator's input;
    is_replaced = 1 exactly where the result differs from the original (a sample equal to the original counts as
    original), 0 elsewhere.

    Shapes: `original_ids`, `generator_input_ids` and `masked` (bool) share one shape, (T,) or (B, T). `sampled_ids` is
    either that shape too (read only where masked) or 1-D with one id per masked position in row-major order (what
    `x[masked]` gives). Returns (discriminator_input_ids, is_replaced), both long, of the input shape.

    >>> original = torch.tensor([5, 6, 7, 8])
    >>> generator_input = torch.tensor([5, 1, 1, 8])          # positions 1 and 2 masked ([MASK] = 1)
    >>> masked = torch.tensor([False, True, True, False])
    >>> inputs, is_replaced = discriminator_targets(original, generator_input, masked, torch.tensor([9, 7]))
    >>> inputs.tolist(), is_replaced.tolist()                 # 9 replaced 6; 7 equals the original 7
    ([5, 9, 7, 8], [0, 1, 0, 0])
    """
    if masked.dtype != torch.bool:
        raise LabError("masked must be a bool tensor, got dtype {masked_dtype}", masked_dtype=masked.dtype)
    if original_ids.shape != generator_input_ids.shape or original_ids.shape != masked.shape:
        raise LabError("original_ids, generator_input_ids and masked must share one shape, got "
                       "{original_ids_shape}, {generator_input_ids_shape}, {masked_shape}",
                       original_ids_shape=tuple(original_ids.shape),
                       generator_input_ids_shape=tuple(generator_input_ids.shape), masked_shape=tuple(masked.shape))
    discriminator_input = generator_input_ids.clone().long()  # (B, T) or (T,)
    if sampled_ids.shape == original_ids.shape:
        discriminator_input[masked] = sampled_ids[masked].long()
    elif sampled_ids.dim() == 1 and sampled_ids.numel() == int(masked.sum()):
        discriminator_input[masked] = sampled_ids.long()
    else:
        raise LabError("sampled_ids must have the input's shape {original_ids_shape} or one id per masked "
                       "position ({n_masked}), got shape {sampled_ids_shape}",
                       original_ids_shape=tuple(original_ids.shape), n_masked=int(masked.sum()),
                       sampled_ids_shape=tuple(sampled_ids.shape))
    is_replaced = (masked & (discriminator_input != original_ids)).long()  # (B, T) or (T,)
    return discriminator_input, is_replaced


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """`masked`: count_to_mask(n, mask_rate) positions drawn uniformly."""
    ids = as_ids(token_ids)
    return {"masked": sample_masked(ids.numel(), cfg.settings.mask_rate, generator)}


def validate_choices(n: int, choices: dict) -> dict:
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    reject_unknown(choices, CHOICES, "electra")
    return {"masked": validate_masked(n, choices["masked"])} if "masked" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    """The generator's input: `choices["masked"]` become [MASK] (85%) or stay (15%). A missing `masked` is drawn."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    n = ids.numel()
    if "masked" not in choices:
        choices = {**sample_choices(ids, generator, cfg), **choices}
    positions = validate_masked(n, choices["masked"])  # (k,)
    is_masked = torch.zeros(n, dtype=torch.bool)  # (T,)
    is_masked[positions] = True
    return Example(
        input_ids=corrupt_tokens(ids, positions, settings.rates, cfg.vocab, generator),  # (T,)
        attention={"self": masks.materialize(masks.bidirectional, n)},  # (T, T)
        position_ids=torch.arange(n),  # (T,)
        targets=mlm_targets(ids, positions),  # (T,)
        segment_ids=torch.zeros(n, dtype=torch.long),  # (T,)
        extras={"original_ids": ids.clone(), "masked": is_masked},
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = as_rows(token_ids)
    examples = [build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows]
    return collate(examples, pad_id=cfg.vocab.pad_id)


def sample_replacements(logits: torch.Tensor, seed: int) -> torch.Tensor:
    """One token per row of the generator's logits (N, V), drawn from softmax(logits) (temperature 1, as the released
    code) with a generator seeded by `seed`. No gradient flows through the draw. (N,) long."""
    if logits.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long, device=logits.device)
    probs = torch.softmax(logits.detach().float(), dim=-1)  # (N, V)
    draw = torch.Generator(device=logits.device).manual_seed(seed)
    return torch.multinomial(probs, 1, generator=draw).squeeze(1)  # (N,)


def loss(model, batch: Batch) -> LossOutput:
    """L = w_mlm * L_MLM + λ * L_Disc (λ = the rtd weight, 50 by default).

    1. The generator (`model.generator`) reads the masked input; L_MLM is its cross-entropy at the masked positions
       (sparse vocabulary head). It runs without gradient when mlm is off (it still has to sample).
    2. At each masked position a replacement is sampled from its softmax (seeded from the batch's content, so a
       run is reproducible), and `discriminator_targets` writes the discriminator's input and is_replaced labels.
    3. The discriminator (`model.backbone` + `model.heads["rtd"]`) scores every token; L_Disc is the binary
       cross-entropy averaged over the real (non-padding) tokens, as the released code weights it by the input mask.
    """
    weights = model.objective_weights
    masked = require_extra(batch, "masked", "electra")  # (B, T) bool
    original = require_extra(batch, "original_ids", "electra")  # (B, T) long
    generator = model.generator
    with torch.set_grad_enabled(torch.is_grad_enabled() and weights["mlm"] > 0):
        generator_hidden = run_backbone(generator, batch)  # (B, T, H_g)
        mlm, target_ids, target_nll, generator_logits = sparse_token_loss(generator, generator_hidden,
                                                                          batch.targets, positions=masked,
                                                                          keep_logits=True)
    parts = {}
    if weights["mlm"] > 0:
        parts["mlm"] = mlm
    if weights["rtd"] > 0:
        seed = content_seed(batch.input_ids, batch.targets, salt="electra/sample")
        sampled = sample_replacements(generator_logits, seed)  # (N,), row-major over masked
        disc_input, is_replaced = discriminator_targets(original, batch.input_ids, masked, sampled)  # (B, T) each
        hidden = run_backbone(model.backbone, batch, input_ids=disc_input)  # (B, T, H)
        logits = model.heads["rtd"](hidden)  # (B, T)
        real = batch.input_ids != model.vocab.pad_id  # (B, T)
        bce = F.binary_cross_entropy_with_logits(logits.float(), is_replaced.float(), reduction="none")  # (B, T)
        parts["rtd"] = masked_mean(bce[real], real.sum())
    return combine(weights, parts, target_ids, target_nll)
