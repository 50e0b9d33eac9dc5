"""The backbone options that faithful checkpoints need: `activation`, `embedding_norm` and `lm_bias`, and the
family defaults that follow the papers (GPT-1: no embedding LayerNorm; GPT and GPT-2: tanh GeLU, no output bias)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lab_models.models.family import family_model_config
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig
from lab_models.nn.feed_forward import activation_module


def _config(**overrides) -> ModelConfig:
    return ModelConfig(vocab_size=20, d_model=8, n_layers=1, n_heads=2, d_ff=16, max_positions=8, dropout=0.0,
                       **overrides)


@pytest.mark.parametrize("name, reference", [
    ("gelu", lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))),
    ("gelu_tanh", lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("relu", lambda x: x.clamp(min=0)),
])
def test_the_feed_forward_uses_the_configured_activation(name, reference):
    model = Backbone(_config(activation=name))
    ff = model.blocks[0].ff
    x = torch.randn(3, 8)
    expected = ff.proj(reference(ff.up(x)))
    torch.testing.assert_close(ff(x), expected, atol=1e-6, rtol=1e-5)
    assert model.lm_transform is None or isinstance(model.lm_transform[1], type(activation_module(name)))


def test_the_two_gelus_differ_so_the_option_matters():
    x = torch.linspace(-3, 3, 101)
    gap = (activation_module("gelu")(x) - activation_module("gelu_tanh")(x)).abs().max()
    assert 1e-5 < gap < 1e-3


def test_embedding_norm_overrides_the_post_ln_rule():
    assert isinstance(Backbone(_config(norm="post")).embeddings.norm, nn.LayerNorm)  # the rule: post-LN has one
    assert isinstance(Backbone(_config(norm="pre")).embeddings.norm, nn.Identity)
    assert isinstance(Backbone(_config(norm="post", embedding_norm=False)).embeddings.norm, nn.Identity)
    assert isinstance(Backbone(_config(norm="pre", embedding_norm=True)).embeddings.norm, nn.LayerNorm)


def test_without_lm_bias_the_logits_are_the_tied_projection_alone():
    model = Backbone(_config(lm_bias=False))
    assert model.lm_bias is None and "lm_bias" not in dict(model.named_parameters())
    hidden = torch.randn(2, 3, 8)
    torch.testing.assert_close(model.lm_logits(hidden), hidden @ model.embeddings.token.weight.T)


@pytest.mark.parametrize("key, value", [("activation", "swish"), ("embedding_norm", "yes"), ("lm_bias", 1)])
def test_bad_option_values_are_clear_errors(key, value):
    with pytest.raises(ValueError, match=key):
        _config(**{key: value})


def test_old_configs_without_the_new_keys_load_as_before():
    saved = _config().to_dict()
    for key in ("activation", "embedding_norm", "lm_bias"):
        del saved[key]
    config = ModelConfig.from_dict(saved)
    assert (config.activation, config.embedding_norm, config.lm_bias) == ("gelu", None, True)


@pytest.mark.parametrize("family, activation, embedding_norm, lm_bias", [
    ("gpt", "gelu_tanh", False, False), ("gpt2", "gelu_tanh", False, False), ("bert", "gelu", True, True),
    ("glm", "gelu", False, False),
])
def test_family_defaults_follow_the_papers(family, activation, embedding_norm, lm_bias):
    config = family_model_config(family, "tiny", 100)
    assert (config.activation, config.has_embedding_norm, config.lm_bias) == (activation, embedding_norm, lm_bias)
    overridden = family_model_config(family, "tiny", 100, activation="relu", lm_bias=True)
    assert (overridden.activation, overridden.lm_bias) == ("relu", True)  # selectable when training from scratch


def test_gpt2_with_the_new_defaults_still_matches_its_kv_cache():
    model = Backbone(family_model_config("gpt2", "tiny", 50)).eval()
    ids = torch.randint(0, 50, (1, 6), generator=torch.Generator().manual_seed(0))
    causal = torch.ones(6, 6, dtype=torch.bool).tril().unsqueeze(0)
    full = model(ids, causal, torch.arange(6).unsqueeze(0))
    cache = model.new_cache()
    first = model(ids[:, :4], causal[:, :4, :4], torch.arange(4).unsqueeze(0), cache=cache)
    rest = model(ids[:, 4:], causal[:, 4:, :], torch.arange(4, 6).unsqueeze(0), cache=cache)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-5, rtol=1e-5)
    assert F.softmax(model.lm_logits(full), -1).isfinite().all()
