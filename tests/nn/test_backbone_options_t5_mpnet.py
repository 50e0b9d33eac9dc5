"""The backbone options T5 and MPNet need (lab_models/nn/config.py): RMS norm, no linear biases, ReLU / gated GeLU,
no absolute positions, the bucketed relative position bias, no attention scale, d_head != d_model / n_heads, the
output rescale, no LM bias; and the T5 / MPNet family defaults built from them.

What is checked: the eager path (return_weights, what the Understand tab draws) equals SDPA with every option on, for
one stream, two streams and the encoder-decoder, on padded batches; incremental decoding with a cache equals the full
recomputation with the relative bias (the cache keeps the keys' positions); the bias is computed once per forward pass
of a stack, not per layer; it depends on distances only (shifting every position changes nothing) and differs between
distances; `--model KEY=VALUE` parses every new field; bad values are ValueErrors; T5's decoder start token setting and
the value old runs read. Hugging Face parity is in tests/interop/test_t5.py and tests/interop/test_mpnet.py.
"""
from __future__ import annotations


import pytest
import torch

from lab_models.models.family import family_model_config
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig, preset_config
from lab_models.nn.norms import RMSNorm
from lab_models.nn.relative_position import RelativePositionBias
from lab_models.objectives import t5
from lab_models.objectives.common import BatchConfig, StringVocab
from lab_models.training.config import parse_model_overrides
from lab_models.objectives.settings import settings_from_dict
from tests.support.backbones import V, twin

T5_LIKE = dict(norm="pre", norm_type="rmsnorm", linear_bias=False, activation="relu", absolute_positions=False,
               relative_attention="buckets", relative_attention_buckets=8, relative_attention_max_distance=12,
               attention_scale=False, d_head=12, output_scale=True, lm_bias=False, decoder_layers=2,
               layer_norm_eps=1e-6)
MPNET_LIKE = dict(norm="post", lm_transform=True, relative_attention="buckets", query_stream="token")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def build(seed: int = 0, **overrides) -> Backbone:
    torch.manual_seed(seed)
    return Backbone(preset_config("tiny", vocab_size=V, dropout=0.0, **overrides)).eval()


def padded(lengths: list[int], T: int, causal: bool = False) -> torch.Tensor:
    """(B, T, T): row b's first lengths[b] keys are real; causal adds j <= i."""
    keys = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, T)
    mask = keys.unsqueeze(1).expand(-1, T, -1)
    return mask & torch.ones(T, T, dtype=torch.bool).tril() if causal else mask


def arange(B: int, T: int, start: int = 0) -> torch.Tensor:
    return torch.arange(start, start + T).expand(B, T)


# ------------------------------------------------------------------------------------------------ eager = SDPA
@pytest.mark.parametrize("options", [T5_LIKE, dict(T5_LIKE, ffn_gated=True, activation="gelu_tanh", d_head=None),
                                     MPNET_LIKE], ids=["t5-v1.0", "t5-v1.1", "mpnet"])
def test_eager_matches_sdpa_with_every_option(options):
    model = build(**options)
    eager = twin(model, attention_impl="eager")
    B, T, S = 2, 9, 6
    x = torch.randint(0, V, (B, T))
    enc_mask = padded([9, 6], T)
    with torch.no_grad():
        if model.config.decoder_layers:
            memory = model.encode(x, enc_mask, arange(B, T))
            args = (torch.randint(0, V, (B, S)), padded([6, 4], S, causal=True), enc_mask[:, :S], arange(B, S))
            out, ref = model.decode(*args, memory), eager.decode(*args, eager.encode(x, enc_mask, arange(B, T)))
        else:
            out, ref = model(x, enc_mask, arange(B, T)), eager(x, enc_mask, arange(B, T))
        hidden, maps = model(x, enc_mask, arange(B, T), return_attention=True)  # the Understand tab's path
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=0)
    torch.testing.assert_close(hidden, model(x, enc_mask, arange(B, T)), atol=2e-5, rtol=0)
    assert maps[0].shape == (B, model.config.n_heads, T, T)
    assert torch.all(maps[0][1, :, :, 6:] == 0)  # padding keys get no attention, with the bias as without


def test_two_streams_with_the_relative_bias_eager_matches_sdpa_and_reads_slot_positions():
    model = build(**MPNET_LIKE)
    eager = twin(model, attention_impl="eager")
    x = torch.randint(0, V, (2, 8))
    content = torch.ones(2, 8, 8, dtype=torch.bool)
    query = torch.ones(2, 2, 8, dtype=torch.bool)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 2, 4], [0, 1, 2, 3, 4, 5, 1, 3]])  # slots at 6, 7 stand for others
    slots = torch.tensor([[6, 7], [6, 7]])
    with torch.no_grad():
        h, g = model.forward_two_stream(x, content, query, positions, slots)
        h2, g2 = eager.forward_two_stream(x, content, query, positions, slots)
        moved = positions.clone()
        moved[:, 6] = 5  # the same slot token at another position: its relative distances change
        _, g3 = model.forward_two_stream(x, content, query, moved, slots)
    torch.testing.assert_close((h, g), (h2, g2), atol=2e-5, rtol=0)
    assert not torch.allclose(g3[:, 0], g[:, 0], atol=1e-4)


# ------------------------------------------------------------------------------------------------ the cache
def test_decoder_cache_with_the_relative_bias_equals_the_full_pass_and_follows_beams():
    model = build(**T5_LIKE)
    enc, dec = torch.randint(0, V, (2, 7)), torch.randint(0, V, (2, 6))
    full_mask = torch.ones(2, 7, 7, dtype=torch.bool)
    with torch.no_grad():
        memory = model.encode(enc, full_mask, arange(2, 7))
        full = model.decode(dec, padded([6, 6], 6, causal=True), torch.ones(2, 6, 7, dtype=torch.bool),
                            arange(2, 6), memory)
        cache = model.new_cache(decoder=True)
        steps = [model.decode(dec[:, :2], padded([2, 2], 2, causal=True), torch.ones(2, 2, 7, dtype=torch.bool),
                              arange(2, 2), memory, cache=cache)]
        for t in range(2, 6):
            steps.append(model.decode(dec[:, t:t + 1], torch.ones(2, 1, t + 1, dtype=torch.bool),
                                      torch.ones(2, 1, 7, dtype=torch.bool), arange(2, 1, t), memory, cache=cache))
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
        assert cache.key_positions.tolist() == [list(range(6))] * 2
        cache.reorder(torch.tensor([1, 1, 0]))  # beam search: rows follow their parents, positions too
        assert cache.key_positions.shape == (3, 6)


def test_one_stream_cache_with_the_relative_bias_equals_the_full_pass():
    model = build(relative_attention="buckets", absolute_positions=False, norm="pre")
    x = torch.randint(0, V, (1, 10))
    causal = torch.ones(1, 10, 10, dtype=torch.bool).tril()
    with torch.no_grad():
        full = model(x, causal, arange(1, 10))
        cache = model.new_cache()
        parts = [model(x[:, :4], causal[:, :4, :4], arange(1, 4), cache=cache)]
        parts += [model(x[:, t:t + 1], torch.ones(1, 1, t + 1, dtype=torch.bool), arange(1, 1, t), cache=cache)
                  for t in range(4, 10)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------------------------ the bias itself
def test_the_bias_is_computed_once_per_stack_and_pass():
    model = build(**T5_LIKE)
    calls = []
    for table in (model.relative_bias, model.decoder_relative_bias):
        table.register_forward_hook(lambda module, args, out: calls.append(module.bidirectional))
    with torch.no_grad():
        memory = model.encode(torch.randint(0, V, (2, 5)), torch.ones(2, 5, 5, dtype=torch.bool), arange(2, 5))
        model.decode(torch.randint(0, V, (2, 3)), padded([3, 3], 3, causal=True), torch.ones(2, 3, 5, dtype=torch.bool),
                     arange(2, 3), memory)
    assert calls == [True, False]  # two layers per stack, one bias per stack


def test_the_bias_depends_on_distances_only_and_tells_distances_apart():
    model = build(**T5_LIKE)
    x = torch.randint(0, V, (1, 8))
    mask = torch.ones(1, 8, 8, dtype=torch.bool)
    with torch.no_grad():
        out = model(x, mask, arange(1, 8))
        shifted = model(x, mask, arange(1, 8, start=40))  # every distance the same: no absolute position exists
        spread = model(x, mask, torch.arange(0, 16, 2).unsqueeze(0))  # every distance doubled
    torch.testing.assert_close(out, shifted, atol=1e-6, rtol=0)
    assert not torch.allclose(out, spread, atol=1e-3)
    bias = RelativePositionBias(n_heads=2, num_buckets=8, max_distance=12, bidirectional=True)
    assert bias(arange(1, 3), arange(1, 4)).shape == (1, 2, 3, 4)


def test_rms_norm_has_no_mean_or_bias_and_computes_in_float32():
    norm = RMSNorm(4, eps=1e-6)
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    torch.testing.assert_close(norm(x), x / x.pow(2).mean().sqrt(), atol=1e-5, rtol=0)  # the mean is not removed
    half = torch.tensor([[300.0, 400.0, 0.0, 0.0]], dtype=torch.bfloat16)  # squares overflow nothing in float32
    assert norm(half).dtype == torch.bfloat16 and torch.isfinite(norm(half)).all()


# ------------------------------------------------------------------------------------------------ config and CLI
def test_the_options_build_what_they_say():
    model = build(**T5_LIKE)
    names = dict(model.named_parameters())
    assert not any(name.endswith(".bias") for name in names)  # no linear, norm or LM bias anywhere
    assert model.lm_bias is None and len(model.embeddings.positions) == 0
    assert model.blocks[0].attn.qkv.weight.shape == (3 * 2 * 12, 64)  # n_heads * d_head = 24 != d_model = 64
    assert model.blocks[0].attn.proj.weight.shape == (64, 24)
    gated = build(ffn_gated=True, activation="gelu_tanh")
    assert gated.blocks[0].ff.up.weight.shape == (2 * 256, 64)  # [W_0; W_1]
    hidden = torch.randn(3, 64)
    plain = twin(model, output_scale=False)
    torch.testing.assert_close(model.lm_logits(hidden), plain.lm_logits(hidden) * 64 ** -0.5)


def test_family_defaults_are_the_papers():
    c = family_model_config("t5", "tiny", 1000)
    assert (c.norm, c.norm_type, c.linear_bias, c.activation, c.relative_attention, c.absolute_positions,
            c.attention_scale, c.output_scale, c.lm_bias, c.tie_embeddings) == (
        "pre", "rmsnorm", False, "relu", "buckets", False, False, True, False, True)
    m = family_model_config("mpnet", "tiny", 1000)
    assert (m.relative_attention, m.absolute_positions, m.norm, m.norm_type) == ("buckets", True, "post", "layernorm")
    assert family_model_config("bert", "tiny", 1000).relative_attention is None
    override = family_model_config("t5", "tiny", 1000, absolute_positions=True, relative_attention=None)
    assert override.absolute_positions and override.relative_attention is None  # every option stays selectable


def test_model_overrides_parse_every_new_field():
    parsed = parse_model_overrides(["norm_type=rmsnorm", "linear_bias=false", "ffn_gated=true", "activation=relu",
                                    "absolute_positions=false", "relative_attention=buckets",
                                    "relative_attention_buckets=16", "relative_attention_max_distance=64",
                                    "attention_scale=false", "d_head=8", "output_scale=true", "lm_bias=false"], "t5")
    ModelConfig(vocab_size=10, **parsed)  # a valid config
    assert parsed["d_head"] == 8 and parsed["relative_attention"] == "buckets" and parsed["linear_bias"] is False
    assert parse_model_overrides(["relative_attention=none", "d_head=none"], "mpnet") == {
        "relative_attention": None, "d_head": None}


@pytest.mark.parametrize("overrides, match", [
    (dict(norm_type="batchnorm"), "norm_type"), (dict(activation="swish"), "activation"),
    (dict(relative_attention="rotary"), "relative_attention"), (dict(relative_attention_buckets=2), "buckets"),
    (dict(relative_attention_buckets=32, relative_attention_max_distance=10), "max_distance"),
    (dict(d_head=0), "d_head"), (dict(linear_bias="no"), "linear_bias"), (dict(d_model=30, n_heads=4), "d_head")])
def test_bad_option_values_are_value_errors(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(vocab_size=10, **overrides)
    assert ModelConfig(vocab_size=10, d_model=30, n_heads=4, d_head=8).attention_width == 32  # d_head lifts the rule


# ------------------------------------------------------------------------------------------------ T5's start token
def test_t5_decoder_start_is_the_pad_token_and_old_runs_keep_bos():
    vocab = StringVocab("a b c d e f g h".split())
    text = vocab.encode("a b c d e f g h".split())
    pad = t5.build_example(text, {"spans": [(2, 4)]}, None, BatchConfig(t5.Settings(), vocab.info))
    bos = t5.build_example(text, {"spans": [(2, 4)]}, None, BatchConfig(t5.Settings(decoder_start="bos"), vocab.info))
    assert pad.decoder_input_ids[0] == vocab.info.pad_id and bos.decoder_input_ids[0] == vocab.info.bos_id
    assert torch.equal(pad.decoder_input_ids[1:], bos.decoder_input_ids[1:])
    assert settings_from_dict("t5", {}).decoder_start == "bos"  # a run saved before the setting existed
    assert settings_from_dict("t5", {"decoder_start": "pad"}).decoder_start == "pad"
    with pytest.raises(ValueError, match="decoder_start"):
        t5.Settings(decoder_start="eos")
