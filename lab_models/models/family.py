"""The trainable models of the lab: one `FamilyModel` per family, built from the one `Backbone`, plus the family's heads.

A family is (a model structure) + (a batch builder) + (a loss). The batch builders live in `objectives/<family>.py`,
the losses next to them (`objectives/<family>.py: loss(model, batch) -> LossOutput`); this module decides the
*structure*: which `ModelConfig` fields a family sets on top of a size preset, which heads it adds, and which
parameters it shares.

    family_model_config("bert", "tiny", vocab_size)   -> ModelConfig (the preset's sizes + BERT's structure)
    build_model("bert", config, settings, vocab, {"mlm": 1.0, "nsp": 1.0}, seed=0) -> FamilyModel
    model.loss(batch)                                  -> LossOutput(total, parts, target_ids, target_nll)

Per family (the papers and their released code; every deviation is listed below):

    family    norm  segments  structure                                               heads (objective)
    gpt       post  -         no embedding LayerNorm; tied LM head, no bias, tanh GeLU -           (clm)
    gpt2      pre   -         tied LM head without bias, final LayerNorm, tanh GeLU   -            (clm)
    bert      post  2         MLM transform (dense, GeLU, LN) + tied decoder + bias   pooler+2-way (nsp)
    roberta   post  -         BERT's, one segment (no token types)                    -            (mlm)
    albert    post  2         factorized embeddings E, one block shared by all layers pooler+2-way (sop)
    spanbert  post  2 if nsp  BERT's                                                  SBO MLP + tied decoder (sbo)
    electra   post  2         discriminator at the preset; generator of a fraction    dense+GeLU+1 logit (rtd)
                              of its width, sharing token/position/segment embeddings
    unilm     post  2 (or 6)  BERT's; one model for all four attention modes          pooler+2-way (optional nsp)
    xlnet     post  -         two streams sharing every weight, query starts at w;    -            (plm)
                              relative attention (no position table, no embedding
                              LayerNorm); tied LM head + bias, no transform
    mpnet     post  -         two streams sharing every weight, query starts at its   -            (mplm)
                              [MASK] slot; RoBERTa's LM head (transform + tied + bias);
                              absolute positions + a relative bias (32 buckets)
    mass      post  -         encoder-decoder, n_layers each, shared embeddings;      -            (seq2seq)
                              tied LM head + bias, no transform
    glm       pre   -         one stream, 2-D positions (a second position table);    -            (blank_infilling)
                              tied LM head without bias, final LayerNorm
    t5        pre   -         encoder-decoder, n_layers each, shared embeddings;      -            (span_corruption)
                              T5's own blocks (RMS norm, ReLU, no biases, relative
                              position buckets, no 1/sqrt(d)); tied LM head scaled
                              by d_model^-0.5, no bias; final RMS norm on both sides

The RNN-era families (elmo, cove, ulmfit, cvt) are LSTM models from lab_models/models/rnn/ (one file per family, each
with its paper and deviations): `family_model_config` gives them an `RNNConfig` (rnn/config.py: the presets' embedding,
LSTM and layer sizes) and `build_model` their own model class, with the same objective weights, checks and seeding.

Choices, per family:
- GPT (Radford et al. 2018) is post-LN: LayerNorm after each residual add, no final LayerNorm, and no LayerNorm on
  the summed embeddings (`embedding_norm=False`). GPT-2 (Radford et al. 2019, §2.3) moves it before each sublayer and
  adds one after the last block. Both tie the output matrix to the token embedding with no output bias
  (`lm_bias=False`) and no transform before it, and use the tanh approximation of GeLU (`activation="gelu_tanh"`),
  as their released code does (Hugging Face: `gelu_new`).
- BERT (Devlin et al. 2019): post-LN, 2 segment (token type) embeddings, and the MLM head of the released code
  (`cls/predictions/transform`: dense H -> H, GeLU, LayerNorm, then the tied embedding matrix and an output bias).
  NSP reads the first position through BERT's pooler (dense + tanh) and a 2-way classifier
  (`SequenceClassificationHead(pool="first")`). LayerNorm eps 1e-12 as in the released configs.
- RoBERTa (Liu et al. 2019): BERT's structure without segment embeddings (one stream; fairseq's RoBERTa has no token
  types), and its LM head (dense, GeLU, LayerNorm, tied decoder, bias). LayerNorm eps 1e-5 (fairseq's default).
- ALBERT (Lan et al. 2020): factorized embeddings, E = 128 for base and medium (the paper uses 128 at every size);
  for the smaller presets E = d_model / 4, at least 16 (tiny: 16, small: 64), so that V x E + E x H stays smaller
  than V x H as in the paper. All layers share one block (attention and feed-forward, the paper's default
  "all-shared"). 2 segments for SOP. The MLM head projects H -> E (dense, GeLU, LayerNorm) before the tied V x E
  matrix, as the released code. SOP uses the pooler + 2-way classifier.
- SpanBERT (Joshi et al. 2020): BERT's structure. Segment embeddings only when the settings turn NSP back on
  (`nsp=True`); the paper trains single sequences. The SBO head is `nn.SpanBoundaryHead` (the 2-layer GeLU+LayerNorm
  MLP over [x_(s-1); x_(e+1); p_(i-s+1)]), followed, as in the released `BertPairTargetPredictionHead`, by the **tied**
  token embedding matrix and an SBO-only output bias (no MLM transform in between). Its relative-position table has
  `settings.sbo_max_tokens` rows (15), the builder's bound.
- ELECTRA (Clark et al. 2020): the discriminator is the preset model (post-LN, 2 segments as BERT's configs); the
  generator has `generator_size_fraction` (default 1/4) of its width: d_model, d_ff and the number of heads scaled
  (at least 1 head, d_model divisible by the heads; the released code keeps 64-dim heads, which at the lab's
  presets gives the same head count), the same depth. The two share the token, position and segment embeddings and
  the embedding LayerNorm ("we share the embeddings", §3.2; the released code's shared "electra/embeddings" scope),
  so the generator reads E = the discriminator's width and projects E -> its own width (`embedding_size`), and its
  MLM head goes back to E (dense, GeLU, LayerNorm) before the tied matrix: the released `generator_predictions`.
  The discriminator head is the released `discriminator_predictions`: dense H -> H, GeLU, then one logit per token
  (`TokenClassificationHead(n_labels=1)`). The discriminator is the model to keep; `model.backbone` is it.
- UniLM (Dong et al. 2019): BERT's structure; all four modes share every parameter, the mask comes with the batch.
  2 segments, or 6 when `settings.lm_segment_ids` writes the released code's per-mode segment ids (0/1, 2, 3, 4/5).
- XLNet (Yang et al. 2019): post-LN blocks (the released code's `post-attention` LayerNorm), LayerNorm eps 1e-12 as in
  the released configs, GeLU, no embedding LayerNorm (`embedding_norm=False`). Positions enter only through
  Transformer-XL's relative attention with XLNet's relative segment encoding (`relative_attention="xlnet"`,
  nn/relative_attention.py: sinusoid encodings of p_i - p_j projected per layer, the content, position and segment
  biases, "same segment or not"), so there is no position table (`absolute_positions=False`); the attention's
  q, k, v, o and r have no biases, as the released code's. The content stream h and the query stream g run through
  the *same* blocks (`Backbone.forward_two_stream`, `config.query_stream="learned"`): g starts from the learned
  vector w (the released `mask_emb`) and reads h under the query mask, at the distances of its slot. The LM head is
  the released `lm_loss`: the tied embedding matrix and a bias, no transform. The loss reads g at the target rows
  only. With `settings.two_stream=False` the model has no query stream and no w (`query_stream=None`) and predicts
  from the content stream: the leak demonstration (objectives/xlnet.py). `--model relative_attention=none` gives the
  lab's earlier XLNet (learned absolute positions, still without the embedding LayerNorm); the structure matches
  transformers' XLNetLMHeadModel weight for weight (lab_models/interop/xlnet.py, tests/interop/test_xlnet.py).
- MPNet (Song et al. 2020): BERT/RoBERTa's structure (post-LN, embedding LayerNorm, RoBERTa's LM head: dense, GeLU,
  LayerNorm, tied matrix, bias), LayerNorm eps 1e-5 as in the released mpnet-base config. Two streams sharing every
  weight; in the default "mpnet" input mode the query stream starts from the embedding of its [MASK] slot at the
  predicted token's position (`query_stream="token"`, the reference feeds the masked tokens twice). "xlnet" mode starts
  it from a learned w (`query_stream="learned"`; see objectives/mpnet.py), "mlm" mode has one stream (`None`).
  Positions as the released `mpnet_rel_base` and mpnet-base: learned absolute positions plus the bucketed relative
  position bias (`relative_attention="buckets"`, 32 buckets up to distance 128, one table shared by all layers and
  computed once per forward pass), read from each token's position id, so a [MASK] slot sits at the distance of the
  token it stands for (the reference's `encode_relative_emb(positions)`). A Hugging Face `MPNetForMaskedLM` loads
  into it with the same logits (lab_models/interop/mpnet.py).
- MASS (Song et al. 2019): the encoder-decoder of XLM, which MASS's code builds on: post-LN, an embedding LayerNorm,
  LayerNorm eps 1e-12, GeLU, encoder and decoder of `n_layers` each (the paper: 6 and 6), one token/position table
  shared by the encoder, the decoder and the output projection (XLM's `pred_layer`: tied matrix + bias).
- GLM (Du et al. 2022): one stream with the Part A/B mask from the batch; Megatron's pre-LN blocks with a final
  LayerNorm, GeLU, eps 1e-5; 2-D positions (`n_position_rows=2`: row 1 the Part A index, row 2 the index inside a
  span, each with its own learned table, summed with the token vector). The output layer is the tied embedding
  matrix ("a single linear layer for the output token prediction"), without a bias (`lm_bias=False`), as Megatron's.
- T5 (Raffel et al. 2020): pre-LN encoder-decoder, `n_layers` each (T5-base: 12 and 12), one token table shared by
  the encoder, the decoder and the tied output projection, built as the paper (v1.0) and its released code build it
  (`T5_STRUCTURE`): T5's RMS norm (scale only, no mean, no bias; eps 1e-6) before each sublayer and at the end of each
  stack, no bias in any linear layer, ReLU, no absolute positions but the bucketed relative position bias (32
  buckets up to 128; bidirectional in the encoder, unidirectional in the decoder, one table per stack computed once
  per forward pass), no 1/sqrt(d_kv) in the attention with T5's initialization absorbing it (nn/initialization.py:
  embeddings N(0, 1), W_q N(0, (d_model d_kv)^-0.5), ...), and the decoder output scaled by d_model^-0.5 before the
  tied projection, which has no bias. The decoder starts with the pad token (objectives/t5.py). A Hugging Face
  `T5ForConditionalGeneration` (v1.0, or v1.1 with `ffn_gated`, gelu_tanh and untied embeddings) loads into it with
  the same logits (lab_models/interop/t5.py). Under the lab's AdamW at the presets' learning rate, T5's init learns
  more slowly at first than the lab's N(0, 0.02) (docs/families.md, "T5 and MPNet as the papers build them").

Objectives and weights: `objective_weights` maps objective names to weights (defaults: lab_models/families.py).
A weight of 0 switches an objective off: it is not computed, its head is not built, and parameters that only it
would train are frozen (requires_grad=False), so that every trainable parameter gets a gradient every step (DDP
needs no `find_unused_parameters`). An objective whose batch-builder switch is off (`bert: nsp=False`,
`albert: sop=False`) gets weight 0 whatever was asked. Two optional objectives exist beyond families.py's list:
`nsp` for SpanBERT (on by default when `settings.nsp` is on: the paper's two-sequence baseline trains it) and for
UniLM (on by default when `settings.nsp` is on, the default: UniLM §2.2 trains NSP with the bidirectional LM).
An objective whose default weight in families.py is 0 is opt-in: it appears in the resolved weights (and config.json)
only when a weight is given for it. MASS and T5 have one, `translation` (objectives/translation.py): English ->
Chinese through the same encoder-decoder and tied LM head, on rows flagged in the batch; it adds no parameters, and
with the denoising objective at 0 and translation on, the LM head stays trainable. The add-on objectives
(contrastive, adversarial, back_translation: objectives/addons.py) are opt-in the same way and add no parameters;
their weights are checked here, and their losses join the family's in `forward` when a training run attaches them.

Deviations, stated:
- BERT-family inputs carry no [CLS]/[SEP] framing from the objectives; the pooled "first" position is whatever token
  the data pipeline put first (BERT's [CLS] when it frames).
- The post-LN families other than GPT-1 and XLNet get an embedding LayerNorm (BERT and MASS's XLM have one): a
  Backbone rule (`embedding_norm=None`), see nn/backbone.py. Positions are learned absolute embeddings everywhere but
  in XLNet (relative attention), T5 (relative buckets only) and MPNet (absolute plus relative buckets).
- ALBERT keeps the exact GeLU of the v1 release (the paper's main setting); the v2 checkpoints use the tanh form,
  which an imported ALBERT v2 gets (`activation="gelu_tanh"`, lab_models/interop/albert.py).
- ELECTRA's λ is the `rtd` objective weight (default 50, the paper's). `settings.disc_weight` is used only when no
  `rtd` weight is given; when both are given and differ, the weight wins and a warning is logged.
- ELECTRA samples the generator's replacement with a torch.Generator seeded from a hash of the batch (its inputs and
  targets), so training is reproducible across runs, resumes and ranks without state to checkpoint. The discriminator
  never sees a gradient through the sample (it is a token id).
- The discriminator's LM output bias exists (the Backbone always builds one) but is frozen: the discriminator has no
  LM head.
- SpanBERT with factorized embeddings (only if you override `embedding_size`): its SBO head then gets its own H -> E
  projection before the tied matrix (the released code has E = H and none).
- ALBERT keeps dropout 0.1 (ALBERT v1, the paper's main setting; the v2 checkpoints use 0).
- XLNet: no segment-level recurrence (Transformer-XL's memory) and no `bi_data`; the relative distances come from the
  batch's position ids (nn/relative_attention.py states its own deviations). XLNet's pretraining input is two
  segments with [SEP]s and a [CLS]; the lab's rows are one segment (objectives/xlnet.py).
- T5: dropout sits on the embeddings and after each residual branch only (T5 also drops inside the feed-forward, on
  the attention probabilities and after each stack's final norm); the lab's optimizer is AdamW, not Adafactor.
- MASS: no language embeddings (one language), learned positions (XLM's default too).
- Encoder-decoder models share the *positions* table between encoder and decoder, as XLM (MASS) does; T5 has none
  (its encoder and decoder each have their own relative bias table).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.batch import Batch, IGNORE_INDEX
from lab_models.families import family_record
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig
from lab_models.nn.heads import SequenceClassificationHead, SpanBoundaryHead, TokenClassificationHead
from lab_models.nn.feed_forward import activation_module
from lab_models.nn.initialization import normal_init_
from lab_models.nn.config import PRESETS, preset_config
from lab_models.nn.moe import switch_layers
from lab_models.objectives import objective_module
from lab_models.objectives.addons import (check_names as check_addon_names, check_weights as check_addon_weights,
                                          family_addons)
from lab_models.text.vocab import VocabInfo
from lab_models.objectives.losses import LossOutput, run_backbone
from lab_models.families import RNN_FAMILIES
from lab_models.models.rnn.config import RNNConfig, rnn_preset_config
from lab_models.models.rnn import build_rnn_model
from lab_models.models.switch import RoutingTotals, loss_with_routing

logger = logging.getLogger(__name__)


TRAINED_FAMILIES = ("gpt", "gpt2", "bert", "roberta", "albert", "spanbert", "electra", "unilm", "xlnet", "mpnet",
                    "mass", "glm", "t5", *RNN_FAMILIES)

# the objective whose token predictions give LossOutput.target_ids / target_nll (bits per byte, perplexity)
MAIN_OBJECTIVE = {"gpt": "clm", "gpt2": "clm", "bert": "mlm", "roberta": "mlm", "albert": "mlm", "spanbert": "mlm",
                  "electra": "mlm", "unilm": "cloze", "xlnet": "plm", "mpnet": "mplm", "mass": "seq2seq",
                  "glm": "blank_infilling", "t5": "span_corruption",
                  # the RNN era (lab_models/models/rnn/): CVT predicts tags, not tokens (its runs have no bits per byte)
                  "elmo": "forward_lm", "cove": "nmt", "ulmfit": "lm", "cvt": "labelled"}

ENCODER_DECODER_FAMILIES = ("mass", "t5")

# the released configs' LayerNorm eps (XLNet, XLM for MASS, mpnet-base, Megatron for GLM, T5); BERT's are set below
LAYER_NORM_EPS = {"xlnet": 1e-12, "mpnet": 1e-5, "mass": 1e-12, "glm": 1e-5, "t5": 1e-6}

# objectives a family supports beyond families.py's list: name -> the Settings switch that must be on (and that turns
# the objective on by default)
OPTIONAL_OBJECTIVES = {"spanbert": {"nsp": "nsp"}, "unilm": {"nsp": "nsp"}}

# objectives that need a batch-builder switch: (family, objective) -> the Settings field
REQUIRED_SWITCH = {("bert", "nsp"): "nsp", ("albert", "sop"): "sop", ("spanbert", "nsp"): "nsp",
                   ("unilm", "nsp"): "nsp"}

ALBERT_EMBEDDING_SIZE = 128  # the paper's E at every size

# T5 as the paper (v1.0) and its released code build it: RMS norm without bias, no bias in any linear layer, ReLU,
# the bucketed relative position bias instead of absolute positions, no 1/sqrt(d) in the attention (T5's init,
# nn/initialization.py, absorbs it), and the tied output projection reading the decoder output scaled by d_model^-0.5.
T5_STRUCTURE = dict(norm_type="rmsnorm", linear_bias=False, activation="relu", relative_attention="buckets",
                    absolute_positions=False, attention_scale=False, output_scale=True, lm_bias=False)


def _check_family(family) -> str:
    if family not in TRAINED_FAMILIES:
        raise LabError("no trainable model for family {family!r} yet: choose one of {trained_families}",
                       family=family, trained_families=', '.join(TRAINED_FAMILIES))
    return family


def _default_settings(family: str, settings):
    """`settings`, checked to be the family's Settings; None gives the paper defaults."""
    module = objective_module(family)
    if settings is None:
        return module.Settings()
    if not isinstance(settings, module.Settings):
        raise LabError("{family} needs the settings object of lab_models.objectives.{module_name}"
                       ".Settings, got {settings_type}",
                       family=family, module_name=module.__name__.split('.')[-1], settings_type=type(settings).__name__)
    return settings


# ---------------------------------------------------------------------------------------------- model configs


def albert_embedding_size(d_model: int) -> int:
    """ALBERT's E for a width H: 128 (the paper) once H >= 512, else H / 4 but at least 16.

    >>> [albert_embedding_size(h) for h in (64, 256, 512, 768)]
    [16, 64, 128, 128]
    """
    return min(ALBERT_EMBEDDING_SIZE, max(16, d_model // 4))


def segments_needed(family: str, settings) -> int:
    """How many segment embeddings the family's batches need (0 = its segment ids are all 0 or absent)."""
    if family in ("bert", "electra"):
        return 2  # BERT's token types; ELECTRA's released configs keep BERT's two even without NSP
    if family == "albert":
        return 2
    if family == "spanbert":
        return 2 if settings.nsp else 0
    if family == "unilm":
        return 6 if settings.lm_segment_ids else 2
    return 0  # gpt, gpt2, roberta, xlnet, mpnet, mass, glm, t5: no segment embeddings


def stream_structure(family: str, settings) -> dict:
    """The backbone modes the family's batches need: `query_stream` (None, "learned" or "token"), `n_position_rows`
    (1, or 2 for GLM) and `encoder_decoder` (decoder blocks, MASS and T5).

    >>> from lab_models.objectives import xlnet
    >>> stream_structure("xlnet", xlnet.Settings())["query_stream"], stream_structure("xlnet",
    ...     xlnet.Settings(two_stream=False))["query_stream"]
    ('learned', None)
    """
    query_stream = None
    if family == "xlnet" and settings.two_stream:
        query_stream = "learned"  # XLNet's w
    if family == "mpnet":
        query_stream = {"mpnet": "token", "xlnet": "learned", "mlm": None}[settings.input_mode]
    return {"query_stream": query_stream, "n_position_rows": 2 if family == "glm" else 1,
            "encoder_decoder": family in ENCODER_DECODER_FAMILIES}


def family_model_config(family: str, preset: str, vocab_size: int, *, settings=None, **overrides) -> ModelConfig:
    """The preset's sizes with the family's structure; `overrides` (ModelConfig fields) win over both.

    `settings` (the family's objective Settings; default: the paper's) decides what depends on the batch builder:
    SpanBERT's segments (only with nsp) and UniLM's 6 per-mode segment ids. For ELECTRA this is the
    discriminator's config; the generator's comes from `electra_generator_config` at `build_model`.

    >>> cfg = family_model_config("albert", "tiny", 1000)
    >>> cfg.norm, cfg.embedding_size, cfg.share_layers, cfg.n_segments
    ('post', 16, True, 2)
    """
    family = _check_family(family)
    if preset not in PRESETS:
        raise LabError("unknown preset {preset!r}: choose one of {presets}", preset=preset, presets=', '.join(PRESETS))
    settings = _default_settings(family, settings)
    if family in RNN_FAMILIES:  # LSTM sizes: lab_models/models/rnn/config.py
        return rnn_preset_config(family, preset, vocab_size, **overrides)
    d_model = overrides.get("d_model", PRESETS[preset]["d_model"])
    structure: dict = {"norm": "post", "n_segments": segments_needed(family, settings)}
    if family == "gpt2":
        structure["norm"] = "pre"
    if family in ("gpt", "gpt2"):
        # the released code's tanh GeLU (HF: OpenAI GPT's "gelu" is gelu_new; GPT-2's activation_function gelu_new)
        # and an output projection that is the tied embedding matrix alone, without a bias
        structure.update(activation="gelu_tanh", lm_bias=False)
    if family == "gpt":
        structure["embedding_norm"] = False  # GPT-1 is post-LN, but sums its embeddings without a LayerNorm
    if family in ("bert", "roberta", "spanbert", "unilm"):
        structure["lm_transform"] = True  # BERT's cls/predictions/transform
    if family in ("bert", "albert", "spanbert", "electra", "unilm"):
        structure["layer_norm_eps"] = 1e-12  # the released BERT/ALBERT/ELECTRA configs
    if family == "albert":
        if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
            raise LabError("d_model must be an integer >= 1, got {d_model!r}", d_model=d_model)
        structure.update(embedding_size=albert_embedding_size(d_model), share_layers=True)
    streams = stream_structure(family, settings)
    structure.update(query_stream=streams["query_stream"], n_position_rows=streams["n_position_rows"])
    if streams["encoder_decoder"]:  # as deep a decoder as the encoder (MASS 6 + 6, T5-base 12 + 12)
        structure["decoder_layers"] = overrides.get("n_layers", PRESETS[preset]["n_layers"])
    if family in ("glm", "t5"):
        structure["norm"] = "pre"  # Megatron's (GLM) and T5's pre-LN blocks, with a final LayerNorm
    if family == "glm":
        structure["lm_bias"] = False  # "a single linear layer for the output": the tied matrix, no bias (Megatron)
    if family in LAYER_NORM_EPS:
        structure["layer_norm_eps"] = LAYER_NORM_EPS[family]
    if family == "mpnet":
        structure["lm_transform"] = True  # RoBERTa's LM head
        structure["relative_attention"] = "buckets"  # mpnet_rel_base: a relative bias next to the absolute positions
    if family == "t5":
        structure.update(T5_STRUCTURE)
    if family == "xlnet":  # Transformer-XL's relative attention, no position table, no embedding LayerNorm
        structure.update(xlnet_structure(overrides.get("relative_attention", "xlnet")))
    return preset_config(preset, vocab_size, **{**structure, **overrides})


def xlnet_structure(relative_attention: str | None) -> dict:
    """XLNet's backbone options: the paper's relative attention ("xlnet") with no learned position table and no
    embedding LayerNorm. Asked for `relative_attention=None`, the learned absolute table comes back (else the model
    would have no positions at all); `--model absolute_positions=...` still wins over both.

    >>> xlnet_structure("xlnet")
    {'relative_attention': 'xlnet', 'absolute_positions': False, 'embedding_norm': False}
    >>> xlnet_structure(None)["absolute_positions"]
    True
    """
    return {"relative_attention": relative_attention, "absolute_positions": relative_attention is None,
            "embedding_norm": False}


def electra_generator_config(discriminator: ModelConfig, fraction: float) -> ModelConfig:
    """ELECTRA's generator: `fraction` of the discriminator's width (d_model, d_ff, heads), the same depth, reading
    the discriminator's E-wide shared embeddings through a projection, with an MLM transform back to E.

    >>> d = family_model_config("electra", "base", 30522)
    >>> g = electra_generator_config(d, 0.25)
    >>> g.d_model, g.n_heads, g.d_ff, g.embedding_size, g.n_layers
    (192, 3, 768, 768, 12)
    """
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
        raise LabError("generator_size_fraction must be in (0, 1], got {fraction!r}", fraction=fraction)
    width = max(1, round(discriminator.d_model * fraction))
    heads = max(1, min(width, round(discriminator.n_heads * fraction)))
    while width % heads:  # each head needs an equal share of the width
        heads -= 1
    E = discriminator.embedding_width  # the shared tables' width
    return dataclasses.replace(
        discriminator, d_model=width, n_heads=heads, d_ff=max(1, round(discriminator.d_ff * fraction)),
        embedding_size=None if width == E else E,  # the released code projects only when the widths differ
        lm_transform=True,  # generator_predictions: dense to E, GeLU, LayerNorm, tied matrix, bias
        share_layers=False,
    )


# ---------------------------------------------------------------------------------------------- objective weights


def resolve_objective_weights(family: str, settings, objective_weights: dict | None) -> dict[str, float]:
    """Every objective of the family with its weight: the given ones, the defaults for the rest (families.py, and
    for the optional objectives 1.0 when their settings switch is on). Objectives whose batch-builder switch is off
    get 0. ValueError for an unknown name, a weight that is not a finite number >= 0, or no positive weight."""
    family = _check_family(family)
    settings = _default_settings(family, settings)
    if objective_weights is None:
        objective_weights = {}
    if not isinstance(objective_weights, dict):
        raise LabError("objective_weights must be a dict of objective name -> weight, got "
                       "{objective_weights_type}", objective_weights_type=type(objective_weights).__name__)
    registered = {name: float(weight) for name, weight in family_record(family).objectives}
    registered.update({addon: 0.0 for addon in family_addons(family)})  # objectives/addons.py: opt-in
    defaults = dict(registered)
    for name, switch in OPTIONAL_OBJECTIVES.get(family, {}).items():
        defaults[name] = 1.0 if getattr(settings, switch) else 0.0
    if family == "electra" and "rtd" not in objective_weights:
        defaults["rtd"] = float(settings.disc_weight)
    check_addon_names(family, objective_weights)  # add-on objectives (objectives/addons.py): a clear error
    unknown = sorted(set(objective_weights) - set(defaults))
    if unknown:
        raise LabError("{family} has no objective {unknown}: its objectives are "
                       "{defaults}", family=family, unknown=', '.join(map(repr, unknown)), defaults=', '.join(defaults))
    weights = dict(defaults)
    for name, weight in registered.items():  # opt-in objectives (default 0: translation, add-ons) are listed when asked
        if weight == 0 and name not in objective_weights:
            del weights[name]
    for name, value in objective_weights.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise LabError("the weight of objective {name!r} must be a finite number >= 0, got {value!r}",
                           name=name, value=value)
        weights[name] = float(value)
    for name in list(weights):
        switch = REQUIRED_SWITCH.get((family, name))
        if switch is not None and not getattr(settings, switch) and weights[name] > 0:
            if name in objective_weights:
                logger.info("%s: objective %s is off because settings.%s is False", family, name, switch)
            weights[name] = 0.0
    if family == "electra" and "rtd" in objective_weights and weights["rtd"] != float(settings.disc_weight):
        logger.warning("electra: λ is the rtd objective weight %g; settings.disc_weight=%g is not used",
                       weights["rtd"], settings.disc_weight)
    if not any(w > 0 for w in weights.values()):
        raise LabError("every objective of {family} has weight 0: give at least one of {defaults} a "
                       "positive weight", family=family, defaults=', '.join(defaults))
    check_addon_weights(family, weights)
    return weights


# ---------------------------------------------------------------------------------------------- heads


class SpanBoundaryPredictionHead(nn.Module):
    """SpanBERT's pair-target prediction: `SpanBoundaryHead` (H-vectors from the boundaries and the relative
    position), then the backbone's tied (V, E) matrix and an output bias of its own (the released
    `BertPairTargetPredictionHead`). `to_embedding` (H -> E) exists only when the embeddings are factorized."""

    def __init__(self, config: ModelConfig, max_relative_position: int):
        super().__init__()
        self.boundary = SpanBoundaryHead(config.d_model, max_relative_position, config.layer_norm_eps)
        self.to_embedding = None
        if config.embedding_width != config.d_model:
            self.to_embedding = nn.Linear(config.d_model, config.embedding_width)
            nn.init.normal_(self.to_embedding.weight, std=0.02)
            nn.init.zeros_(self.to_embedding.bias)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor, left: torch.Tensor, right: torch.Tensor,
                relative_position: torch.Tensor) -> torch.Tensor:
        """(B, T, H) and (B, N) indices -> (B, N, H) span representations y (zeros where there is no target)."""
        return self.boundary(hidden, left, right, relative_position)

    def logits(self, backbone: Backbone, y: torch.Tensor) -> torch.Tensor:
        """y (..., H) -> (..., V) through the backbone's output matrix (tied to the token embedding)."""
        x = y if self.to_embedding is None else self.to_embedding(y)  # (..., E)
        return F.linear(x, backbone.output_weight, self.bias)


class ReplacedTokenDetectionHead(nn.Module):
    """ELECTRA's discriminator head (the released `discriminator_predictions`): dense H -> H, the backbone's
    activation (GeLU), one logit per token ("was this token replaced?")."""

    def __init__(self, d_model: int, activation: str = "gelu"):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.act = activation_module(activation)
        self.classifier = TokenClassificationHead(d_model, n_labels=1)
        normal_init_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (B, T, H) -> logits (B, T)."""
        return self.classifier(self.act(self.dense(hidden))).squeeze(-1)


def _borrow(owner: nn.Module, name: str, module: nn.Module | None) -> None:
    """Make `owner.<name>` read `module` without registering it as a child of `owner`.

    ELECTRA's generator uses the discriminator's embedding tables. Registering them twice would put each tensor in
    the state dict under two names (safetensors' save_file refuses shared tensors, and a strict load would miss one).
    Borrowed, each parameter has one name (under the discriminator), `parameters()` lists it once, `.to(device)` moves
    it once, and the generator still reads it as `owner.<name>`.
    """
    owner._modules.pop(name, None)
    object.__setattr__(owner, name, module)


# ---------------------------------------------------------------------------------------------- the model


class FamilyModel(nn.Module):
    """One family's model: the backbone (ELECTRA: the discriminator), its heads, and (ELECTRA) the generator.

    `model(batch)` and `model.loss(batch)` return the family's `LossOutput` (objectives/<family>.py: `loss`).
    Attributes: family, model_config, settings, vocab, objective_weights (resolved: every objective, 0 = off),
    backbone, heads (nn.ModuleDict by objective name: nsp, sop, sbo, rtd), generator and generator_config (ELECTRA),
    switch_layers and routing_totals (Switch Transformer layers, `ffn="switch"`: their load-balancing loss is added to
    every family's loss in `forward`, lab_models/models/switch.py).
    """

    def __init__(self, family: str, model_config: ModelConfig, settings, vocab: VocabInfo,
                 objective_weights: dict[str, float]):
        super().__init__()
        self.family = family
        self.model_config = model_config
        self.settings = settings
        self.vocab = vocab
        self.objective_weights = dict(objective_weights)
        self.backbone = Backbone(model_config)
        self.heads = nn.ModuleDict()
        self.generator: Backbone | None = None
        self.generator_config: ModelConfig | None = None
        self.addons = None  # the add-on objectives a training run attaches (objectives/addons.py: attach)
        w = self.objective_weights
        H = model_config.d_model
        for name in ("nsp", "sop"):
            if w.get(name, 0.0) > 0:  # BERT's pooler + classifier on the first position
                self.heads[name] = SequenceClassificationHead(H, 2, pool="first", dropout=model_config.dropout)
        if w.get("sbo", 0.0) > 0:
            self.heads["sbo"] = SpanBoundaryPredictionHead(model_config, settings.sbo_max_tokens)
            if settings.sbo_skip_edge_spans:  # no span reaches the row edge: the "outside" vector is never read
                self.heads["sbo"].boundary.outside.requires_grad_(False)
        if family == "electra":
            self._build_electra()
        # Switch Transformer layers (lab_models/models/switch.py): padding takes no expert capacity; routing counts per
        # layer
        for backbone in (self.backbone, self.generator):
            if backbone is not None:
                backbone.pad_id = vocab.pad_id
        self.switch_layers = switch_layers(self)  # [(label, SwitchFeedForward)], empty for a dense model
        self.routing_totals = RoutingTotals(self.switch_layers)
        main = MAIN_OBJECTIVE[family]
        lm_head_used = w[main] > 0 or w.get("translation", 0.0) > 0  # translation predicts through the same head
        if not lm_head_used and family != "electra":  # nothing reaches the LM head: freeze it
            for module in (self.backbone.lm_transform, self.backbone.lm_out, self.backbone.lm_bias):
                if module is not None:
                    module.requires_grad_(False)

    def _build_electra(self) -> None:
        w = self.objective_weights
        self.generator_config = electra_generator_config(self.model_config, self.settings.generator_size_fraction)
        self.generator = Backbone(self.generator_config)
        shared = ("token", "positions", "segment", "norm")  # the released code's shared "electra/embeddings" scope
        for name in shared:
            _borrow(self.generator.embeddings, name, getattr(self.backbone.embeddings, name))
        if self.backbone.lm_bias is not None:
            self.backbone.lm_bias.requires_grad_(False)  # the discriminator has no LM head
        if w["rtd"] > 0:
            self.heads["rtd"] = ReplacedTokenDetectionHead(self.model_config.d_model, self.model_config.activation)
        else:  # only the generator's MLM trains: freeze what only the discriminator would use
            prefixes = tuple(f"embeddings.{name}" for name in shared)
            for name, p in self.backbone.named_parameters():
                if not name.startswith(prefixes):
                    p.requires_grad_(False)
        if w["mlm"] == 0:  # the generator still samples, without gradient; its own parameters stay as they are
            self.generator.requires_grad_(False)

    # ---- the interface ------------------------------------------------------------------------------------------

    def forward(self, batch: Batch) -> LossOutput:
        """The family's loss on `batch` (so that DDP's forward hooks run: call the wrapped model with the batch)."""
        if not isinstance(batch, Batch):
            raise LabError("a FamilyModel takes a Batch (from the family's make_batch), got {batch_type}",
                           batch_type=type(batch).__name__)
        if self.switch_layers:  # + the load-balancing loss of every Switch layer, whatever the family
            return loss_with_routing(self, lambda: self._family_loss(batch))
        return self._family_loss(batch)

    def _family_loss(self, batch: Batch) -> LossOutput:
        """The family's own loss, then the add-on objectives' (objectives/addons.py), if any."""
        out = objective_module(self.family).loss(self, batch)
        if self.addons is not None:
            out = self.addons.apply(self, batch, out)
        return out

    def loss(self, batch: Batch) -> LossOutput:
        """The weighted sum of the enabled objectives, their parts, and the main token objective's per-target NLL."""
        return self(batch)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Distinct parameters: tied and shared tensors (ALBERT's block, ELECTRA's embeddings) count once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # ---- helpers for evaluation, generation and tests -----------------------------------------------------------

    @property
    def lm_backbone(self) -> Backbone:
        """The backbone whose LM head makes the family's token predictions (ELECTRA: the generator)."""
        return self.generator if self.generator is not None else self.backbone

    def hidden_states(self, batch: Batch) -> torch.Tensor:
        """The main backbone's hidden states for `batch` (ELECTRA: the discriminator on the batch's inputs). For the
        two-stream and encoder-decoder families: `prediction_states`."""
        if hasattr(objective_module(self.family), "prediction_states"):
            return self.prediction_states(batch)
        return run_backbone(self.backbone, batch)  # (B, T, H)

    def prediction_states(self, batch: Batch) -> torch.Tensor:
        """The hidden states that predict `batch.targets`, aligned with them: (B, L, H) with L = targets.shape[1].
        One stream: the LM backbone's output. Two streams (XLNet, MPNet): the query stream placed at the positions
        it predicts (zeros where there is no target). Encoder-decoder (MASS, T5): the decoder's output."""
        module = objective_module(self.family)
        if hasattr(module, "prediction_states"):
            return module.prediction_states(self, batch)
        return run_backbone(self.lm_backbone, batch)  # (B, T, H)

    def target_logits(self, batch: Batch, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The vocabulary logits of the main token objective at `positions` (a bool mask shaped like batch.targets;
        default: where batch.targets != IGNORE_INDEX): (N, V) in row-major order. Row i predicts targets[b, i] (a
        causal LM's row i predicts token i+1; an encoder-decoder's decoder row i predicts targets[b, i])."""
        hidden = self.prediction_states(batch)  # (B, L, H)
        if positions is None:
            positions = batch.targets != IGNORE_INDEX
        return self.lm_backbone.lm_logits(hidden, positions)  # (N, V)


def build_model(family: str, model_config: ModelConfig, settings, vocab: VocabInfo,
                objective_weights: dict[str, float] | None = None, *, seed: int | None = None) -> FamilyModel:
    """The family's model, checked against its batch builder's settings and vocabulary.

    settings: the family's objective Settings (None = the paper's). objective_weights: name -> weight, missing names
    take their defaults (see `resolve_objective_weights`). seed: initialise from torch.manual_seed(seed) inside a
    forked RNG (the global generator is left as it was); None draws from the global generator.
    """
    family = _check_family(family)
    if family in RNN_FAMILIES:
        return _build_rnn_model(family, model_config, settings, vocab, objective_weights, seed)
    if not isinstance(model_config, ModelConfig):
        raise LabError("model_config must be a ModelConfig (see family_model_config), got "
                       "{model_config_type}", model_config_type=type(model_config).__name__)
    settings = _default_settings(family, settings)
    if not isinstance(vocab, VocabInfo):
        raise LabError("vocab must be a VocabInfo, got {vocab_type}", vocab_type=type(vocab).__name__)
    if vocab.size > model_config.vocab_size:
        raise LabError("the vocabulary has {size} ids but the model only {vocab_size}: set "
                       "vocab_size >= {size}", size=vocab.size, vocab_size=model_config.vocab_size)
    streams = stream_structure(family, settings)
    has = {"query_stream": model_config.query_stream, "n_position_rows": model_config.n_position_rows,
           "encoder_decoder": model_config.decoder_layers > 0}
    if has != streams:
        wanted = Message("query_stream={query_stream!r}, n_position_rows={n_position_rows} and decoder_layers "
                         "{decoder_layers}", query_stream=streams["query_stream"],
                         n_position_rows=streams["n_position_rows"],
                         decoder_layers="> 0" if streams["encoder_decoder"] else "= 0")
        raise LabError("{family} with these settings needs {wanted}, but the model config has "
                       "query_stream={query_stream!r}, n_position_rows={n_position_rows} "
                       "and decoder_layers={decoder_layers}: build the config with "
                       "family_model_config(..., settings=...)",
                       family=family, wanted=wanted, query_stream=model_config.query_stream,
                       n_position_rows=model_config.n_position_rows, decoder_layers=model_config.decoder_layers)
    needed = segments_needed(family, settings)
    if needed and model_config.n_segments < needed:
        raise LabError("{family}'s batches carry segment ids 0..{needed_rows} but the model has "
                       "n_segments={n_segments}: build the config with family_model_config(..., "
                       "settings=...) or set n_segments={needed}",
                       family=family, needed_rows=needed - 1, n_segments=model_config.n_segments, needed=needed)
    weights = resolve_objective_weights(family, settings, objective_weights)
    if seed is None:
        return FamilyModel(family, model_config, settings, vocab, weights)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabError("seed must be an integer or None, got {seed!r}", seed=seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return FamilyModel(family, model_config, settings, vocab, weights)


def model_config_from_dict(family: str, values: dict):
    """The saved model config of a `family` run (config.json "model"): a ModelConfig, or an RNNConfig for the RNN
    families."""
    return (RNNConfig if family in RNN_FAMILIES else ModelConfig).from_dict(values)


def model_config_class(family: str) -> type:
    """The config dataclass whose fields `--model KEY=VALUE` may override for `family`."""
    return RNNConfig if family in RNN_FAMILIES else ModelConfig


def _build_rnn_model(family, model_config, settings, vocab, objective_weights, seed):
    """ELMo, CoVe, ULMFiT, CVT: lab_models/models/rnn/<family>.py, with the same checks and seeding as the others."""
    settings = _default_settings(family, settings)
    if not isinstance(vocab, VocabInfo):
        raise LabError("vocab must be a VocabInfo, got {vocab_type}", vocab_type=type(vocab).__name__)
    if isinstance(model_config, RNNConfig) and vocab.size > model_config.vocab_size:
        raise LabError("the vocabulary has {size} ids but the model only {vocab_size}: set "
                       "vocab_size >= {size}", size=vocab.size, vocab_size=model_config.vocab_size)
    weights = resolve_objective_weights(family, settings, objective_weights)
    if seed is None:
        return build_rnn_model(family, model_config, settings, vocab, weights)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabError("seed must be an integer or None, got {seed!r}", seed=seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_rnn_model(family, model_config, settings, vocab, weights)
