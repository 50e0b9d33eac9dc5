"""ELECTRA (Clark et al. 2020) checkpoints <-> the lab's `electra` family. References: transformers'
`ElectraForPreTraining` (the discriminator) and `ElectraForMaskedLM` (the generator).

The released ELECTRA is two checkpoints from one training run that share their embeddings (§3.2): the discriminator
(E-wide embeddings, an E -> H projection when E != H, BERT's encoder, a dense + GeLU + 1-logit head per token) and the
generator (the same embeddings, a narrower encoder of the same depth, an MLM head back to E before the tied matrix).
The lab's `electra` family is the two in one model: `model.backbone` is the discriminator, `model.generator` borrows
its embedding tables.

How to import: `--from DISC_DIR [--generator GEN_DIR]` (api: `import_hf(disc, out, generator_dir=gen)`).

- Both: the generator's width must be one the lab's `electra_generator_config` gives (`generator_size_fraction` =
  its hidden size / the discriminator's; heads and feed-forward scaled alike, the same depth: true of the released
  small, base and large pairs), and its embeddings must equal the discriminator's; else it is refused, naming the
  difference. Fill-mask and Compare then use the generator, as for a trained lab run.
- Only the discriminator: the run's generator is untrained (freshly initialised, objective weight `mlm` 0), and
  fill-mask and mask-predict refuse the run saying so (lab_models/inference/generation/generate.py): ELECTRA's
  discriminator predicts no tokens. Understand (embeddings, attention heads) and fine-tuning use the discriminator, the
  model that matters.
- Only a generator as --from: refused with the command to use instead.

    transformers                                        the lab
    electra.embeddings.* (E wide)                       backbone.embeddings.* (generator: the same tables)
    electra.embeddings_project (E -> H)                 backbone.embeddings.project
    electra.encoder.layer.{i}.*                         backbone.blocks.{i}.* (BERT's layer, lab_models/interop/bert.py)
    discriminator_predictions.dense / dense_prediction  heads.rtd.dense / heads.rtd.classifier.out
    generator: electra.embeddings_project, encoder      generator.embeddings.project, generator.blocks.{i}.*
    generator_predictions.dense / LayerNorm             generator.lm_transform.0 / .2
    generator_lm_head.bias                              generator.lm_bias

The discriminator's unused LM pieces (the lab's backbone always has an output bias, and an MLM transform when E !=
H) are zero in an import: nothing reads them. Export writes the discriminator to the folder and, when the run's
generator was trained (mlm weight > 0), the generator to `generator/` with the shared embeddings copied in.
Refused: a hidden_act other than gelu with a generator (transformers' generator head always applies the exact
GeLU and the lab uses one activation for both).

Worked example (ELECTRA-small's shape, scaled down: E = 8, H = 16, a generator a quarter as wide):

>>> disc = {"model_type": "electra", "vocab_size": 40, "embedding_size": 8, "hidden_size": 16,
...         "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 24}
>>> config, settings, objectives = import_config(disc)
>>> config.embedding_size, objectives
(8, {'mlm': 0.0})
>>> gen = {**disc, "architectures": ["ElectraForMaskedLM"], "hidden_size": 4, "num_attention_heads": 1,
...        "intermediate_size": 16}
>>> import_config({**disc, "_generator": gen})[1:]
({'generator_size_fraction': 0.25}, {'mlm': 1.0})
"""
from __future__ import annotations

import torch

from lab_models.messages import Message
from lab_models.models.family import electra_generator_config
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig
from lab_models.interop.bert import check_encoder_exportable, encoder_config, encoder_export_fields
from lab_models.interop.convert import (StateReader, Subset, bert_embeddings_from_lab, bert_embeddings_to_lab,
                                        bert_layer_from_lab, bert_layer_to_lab, mlm_head_from_lab, mlm_head_to_lab,
                                        owned, require, segments_from_type_vocab)

FAMILY = "electra"
MODEL_TYPES = ("electra",)
HF_ARCHITECTURES = ("ElectraForPreTraining", "ElectraForMaskedLM")
GENERATOR_KEY = "_generator"  # set by the importer (lab_models/interop/importer.py)
GENERATOR_PREFIX = "_generator."
SHARED = ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size", "num_hidden_layers",
          "hidden_act", "layer_norm_eps")


def _discriminator_config(hf_config: dict) -> ModelConfig:
    E, H = int(hf_config.get("embedding_size", 128)), int(hf_config["hidden_size"])
    return encoder_config(hf_config, FAMILY, embedding_size=None if E == H else E,
                          n_segments=segments_from_type_vocab(hf_config, 2), lm_bias=True, embedding_norm=True)


def _generator_fraction(disc: dict, gen: dict, config: ModelConfig) -> float:
    architectures = gen.get("architectures") or ["ElectraForMaskedLM"]
    require("ElectraForMaskedLM" in architectures, Message("--generator's config.json architectures {architectures}: "
                                                           "expected ElectraForMaskedLM, ELECTRA's generator",
                                                           architectures=architectures))
    for field in SHARED:
        require(gen.get(field) == disc.get(field), Message("the generator's {field} is {gen_value!r} but the "
                                                           "discriminator's is {disc_value!r}: the two do not belong "
                                                           "to one ELECTRA",
                                                           field=field, gen_value=gen.get(field),
                                                           disc_value=disc.get(field)))
    require(disc.get("hidden_act", "gelu") == "gelu",
            Message("hidden_act={hidden_act!r}: transformers' ELECTRA generator head always uses the exact GeLU "
                    "and the lab's backbone one activation throughout", hidden_act=disc.get('hidden_act')))
    fraction = int(gen["hidden_size"]) / config.d_model
    require(0 < fraction <= 1, Message("the generator ({hidden_size} wide) is wider than the discriminator "
                                       "({d_model}): the lab's ELECTRA has a smaller generator",
                                       hidden_size=gen['hidden_size'], d_model=config.d_model))
    lab = electra_generator_config(config, fraction)
    for field, key in (("d_model", "hidden_size"), ("n_heads", "num_attention_heads"), ("d_ff", "intermediate_size")):
        require(getattr(lab, field) == int(gen[key]),
                Message("the generator's {key} is {generator_value}, but the lab's ELECTRA with a generator "
                        "{fraction:g} as wide has {lab_value} (it scales width, heads and feed-forward alike)",
                        key=key, generator_value=gen[key], fraction=fraction, lab_value=getattr(lab, field)))
    return fraction


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    architectures = hf_config.get("architectures") or ["ElectraForPreTraining"]
    require("ElectraForPreTraining" in architectures,
            Message("config.json architectures {architectures}: --from takes ELECTRA's discriminator "
                    "(ElectraForPreTraining)", architectures=architectures))
    config = _discriminator_config(hf_config)
    generator = hf_config.get(GENERATOR_KEY)
    if generator is None:
        return config, {}, {"mlm": 0.0}
    fraction = _generator_fraction(hf_config, generator, config)
    return config, {"generator_size_fraction": fraction}, {"mlm": 1.0}


def _encoder_to_lab(r: StateReader, lab: str, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The projection (if any) and the layers of one ELECTRA encoder."""
    state = {}
    if cfg.embedding_size is not None:
        E = cfg.embedding_size
        state[f"{lab}embeddings.project.weight"] = r.take("embeddings_project.weight", (cfg.d_model, E))
        state[f"{lab}embeddings.project.bias"] = r.take("embeddings_project.bias", (cfg.d_model,))
    for i in range(cfg.n_layers):
        state.update(bert_layer_to_lab(r, f"encoder.layer.{i}.", f"{lab}blocks.{i}.", cfg.d_model, cfg.d_ff))
    return state


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    cfg = model.model_config
    V, H, E = cfg.vocab_size, cfg.d_model, cfg.embedding_width
    disc_state = Subset(hf_state, "", exclude=GENERATOR_PREFIX)  # views: tensors are read when taken
    gen_state = Subset(hf_state, GENERATOR_PREFIX)
    r = StateReader(disc_state, ("electra.",))
    state = bert_embeddings_to_lab(r, "backbone.embeddings.", cfg)
    state.update(_encoder_to_lab(r, "backbone.", cfg))
    state.update({"heads.rtd.dense.weight": r.take("discriminator_predictions.dense.weight", (H, H)),
                  "heads.rtd.dense.bias": r.take("discriminator_predictions.dense.bias", (H,)),
                  "heads.rtd.classifier.out.weight": r.take("discriminator_predictions.dense_prediction.weight",
                                                            (1, H)),
                  "heads.rtd.classifier.out.bias": r.take("discriminator_predictions.dense_prediction.bias", (1,))})
    r.check_all_used()
    # the discriminator's LM pieces that nothing reads: zero (a LayerNorm's weight one)
    state["backbone.lm_bias"] = torch.zeros(V)
    if model.backbone.lm_transform is not None:
        state.update({"backbone.lm_transform.0.weight": torch.zeros(E, H),
                      "backbone.lm_transform.0.bias": torch.zeros(E),
                      "backbone.lm_transform.2.weight": torch.ones(E),
                      "backbone.lm_transform.2.bias": torch.zeros(E)})
    gen_cfg = model.generator_config
    if gen_state:
        g = StateReader(gen_state, ("electra.",))
        shared = bert_embeddings_to_lab(g, "backbone.embeddings.", cfg)
        for name, tensor in shared.items():
            gap = (tensor - state[name]).abs().max().item()
            require(gap <= 1e-6, Message("the generator's {part} embeddings differ from the discriminator's "
                                         "(by up to {gap:.3g}): ELECTRA shares them, so these two checkpoints are not "
                                         "from one training run", part=name.split('.')[-2], gap=gap))
        generator = _encoder_to_lab(g, "generator.", gen_cfg)
        Hg = gen_cfg.d_model
        generator.update(mlm_head_to_lab(g, "generator_predictions.dense", "generator_predictions.LayerNorm",
                                         "generator_lm_head.bias", width=E, hidden=Hg, vocab=V, lab="generator."))
        g.ignore("generator_lm_head.weight")  # tied to the shared word embeddings
        g.check_all_used()
    else:  # no generator given: a freshly initialised one (its mlm weight is 0: it is never used to predict)
        with torch.device("cpu"), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            fresh = Backbone(gen_cfg).state_dict()
        wanted = [name for name in model.state_dict() if name.startswith("generator.")]
        generator = {name: fresh[name[len("generator."):]] for name in wanted}
    state.update(generator)
    return state


def _check(model) -> ModelConfig:
    return check_encoder_exportable(model, FAMILY, "ElectraForPreTraining", lm_transform=False)


def export_config(model) -> dict:
    cfg = _check(model)
    require(not cfg.share_layers, Message("the run shares its layers: transformers' ELECTRA has no such option"))
    return {**encoder_export_fields(model), "architectures": [HF_ARCHITECTURES[0]], "model_type": "electra",
            "embedding_size": cfg.embedding_width, "type_vocab_size": max(cfg.n_segments, 1)}


def _embeddings_and_encoder(s: dict, lab: str, cfg: ModelConfig, shared_cfg: ModelConfig) -> dict[str, torch.Tensor]:
    out = bert_embeddings_from_lab(s, "backbone.embeddings.", "electra.", shared_cfg)
    if cfg.embedding_size is not None:
        out["electra.embeddings_project.weight"] = s[f"{lab}embeddings.project.weight"]
        out["electra.embeddings_project.bias"] = s[f"{lab}embeddings.project.bias"]
    for i in range(cfg.n_layers):
        out.update(bert_layer_from_lab(s, f"{lab}blocks.{i}.", f"electra.encoder.layer.{i}."))
    return out


def export_state(model) -> dict[str, torch.Tensor]:
    cfg = _check(model)
    s = model.state_dict()
    out = _embeddings_and_encoder(s, "backbone.", cfg, cfg)
    out.update({"discriminator_predictions.dense.weight": s["heads.rtd.dense.weight"],
                "discriminator_predictions.dense.bias": s["heads.rtd.dense.bias"],
                "discriminator_predictions.dense_prediction.weight": s["heads.rtd.classifier.out.weight"],
                "discriminator_predictions.dense_prediction.bias": s["heads.rtd.classifier.out.bias"]})
    return owned(out)


def export_companions(model) -> dict[str, tuple[dict, dict[str, torch.Tensor]]]:
    """{"generator": (config.json, tensors)} when the run's generator was trained; {} otherwise."""
    cfg = _check(model)
    if model.objective_weights.get("mlm", 0.0) <= 0:
        return {}
    require(cfg.activation == "gelu", Message("the run's activation is not the exact GeLU, which transformers' ELECTRA "
                                              "generator head always applies"))
    gen = model.generator_config
    s = model.state_dict()
    config = {**encoder_export_fields(model), "architectures": [HF_ARCHITECTURES[1]], "model_type": "electra",
              "hidden_size": gen.d_model, "num_attention_heads": gen.n_heads, "intermediate_size": gen.d_ff,
              "embedding_size": cfg.embedding_width, "type_vocab_size": max(cfg.n_segments, 1)}
    out = _embeddings_and_encoder(s, "generator.", gen, cfg)
    out.update(mlm_head_from_lab(s, "generator_predictions.dense", "generator_predictions.LayerNorm",
                                 "generator_lm_head.bias", lab="generator."))
    return {"generator": (config, owned(out))}
