"""Tests for lab_models/nn: attention paths agree, masks do not leak, sharing/factorization count right, checkpoints
round-trip. Everything runs at tiny sizes on the CPU in a few seconds."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from lab_models.objectives.masks import causal, materialize, permutation_content, permutation_query
from lab_models.nn.attention import AttentionMask, MultiHeadAttention, prepare_mask
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig, preset_config
from lab_models.nn.heads import SequenceClassificationHead, SpanBoundaryHead, TokenClassificationHead
from tests.support.backbones import V, ids, positions, twin


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def tiny(**overrides) -> ModelConfig:
    return preset_config("tiny", vocab_size=V, **overrides)


def build(config: ModelConfig, seed: int = 0) -> Backbone:
    torch.manual_seed(seed)
    return Backbone(config).eval()


def causal_mask(B: int, T: int) -> torch.Tensor:
    return materialize(causal, T).expand(B, T, T).clone()  # (B, T, T)


def padded_causal_mask(lengths: list[int]) -> torch.Tensor:
    """As batch.collate pads: padded keys are never attended, a padded query row attends only itself."""
    T = max(lengths)
    mask = torch.zeros(len(lengths), T, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n, :n] = materialize(causal, n)
        for r in range(n, T):
            mask[b, r, r] = True
    return mask


def xlnet_masks(order: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    n = len(order)
    return materialize(permutation_content(order), n), materialize(permutation_query(order), n)  # (n, n) each


# ---- eager attention == SDPA -------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["pre", "post"])
def test_eager_matches_sdpa_on_a_padded_batch(norm):
    model = build(tiny(norm=norm))
    eager = twin(model, attention_impl="eager")
    x, mask, pos = ids(2, 12), padded_causal_mask([12, 7]), positions(2, 12)
    torch.testing.assert_close(model(x, mask, pos), eager(x, mask, pos), atol=1e-5, rtol=0)


def test_eager_matches_sdpa_with_an_empty_row_and_neither_makes_nan():
    model = build(tiny())
    eager = twin(model, attention_impl="eager")
    mask = causal_mask(2, 8)
    mask[0, 3] = False  # row 3 of the first sequence may attend nothing
    x, pos = ids(2, 8), positions(2, 8)
    out_sdpa, out_eager = model(x, mask, pos), eager(x, mask, pos)
    assert torch.isfinite(out_sdpa).all() and torch.isfinite(out_eager).all()
    torch.testing.assert_close(out_sdpa, out_eager, atol=1e-5, rtol=0)


def test_eager_matches_sdpa_for_cross_attention():
    model = build(tiny(decoder_layers=2))
    eager = twin(model, attention_impl="eager")
    src, tgt = ids(2, 9, seed=1), ids(2, 6, seed=2)
    enc_mask = torch.ones(2, 9, 9, dtype=torch.bool)
    enc_mask[1, :, 6:] = False  # the second source is padded after 6 tokens
    cross = torch.ones(2, 6, 9, dtype=torch.bool)
    cross[1, :, 6:] = False
    cross[0, 2] = False  # and an empty cross row
    outs = []
    for m in (model, eager):
        memory = m.encode(src, enc_mask, positions(2, 9))
        outs.append(m.decode(tgt, causal_mask(2, 6), cross, positions(2, 6), memory))
    assert torch.isfinite(outs[0]).all()
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("query_stream", ["learned", "token"])
def test_eager_matches_sdpa_for_two_streams(query_stream):
    model = build(tiny(query_stream=query_stream))
    eager = twin(model, attention_impl="eager")
    content, query = xlnet_masks([3, 2, 5, 4, 0, 1])  # query row 3 (rank 0) is empty
    B, T = 2, 6
    args = (ids(B, T), content.expand(B, T, T), query.expand(B, T, T), positions(B, T), positions(B, T))
    (h1, g1), (h2, g2) = model.forward_two_stream(*args), eager.forward_two_stream(*args)
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()
    torch.testing.assert_close(h1, h2, atol=1e-5, rtol=0)
    torch.testing.assert_close(g1, g2, atol=1e-5, rtol=0)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_two_streams_backward_is_finite_and_reaches_w(impl):
    model = Backbone(tiny(query_stream="learned", attention_impl=impl, attention_dropout=0.1)).train()
    content, query = xlnet_masks([3, 2, 5, 4, 0, 1])
    B, T = 2, 6
    h, g = model.forward_two_stream(ids(B, T), content.expand(B, T, T), query.expand(B, T, T), positions(B, T),
                                    positions(B, T))
    (model.lm_logits(g).logsumexp(-1).sum() + h.sum()).backward()
    assert model.query_start.grad is not None and model.query_start.grad.abs().sum() > 0
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_attention_module_empty_row_outputs_zero_and_weights_are_probabilities():
    torch.manual_seed(0)
    attn = MultiHeadAttention(tiny()).eval()
    x = torch.randn(1, 4, 64)
    mask = torch.ones(1, 4, 4, dtype=torch.bool).tril()
    mask[0, 2] = False  # empty row
    y, w = attn(x, mask, return_weights=True)
    assert w.shape == (1, 2, 4, 4)
    assert torch.all(y[0, 2] == 0) and torch.all(w[0, :, 2] == 0)
    torch.testing.assert_close(w[0, :, [0, 1, 3]].sum(-1), torch.ones(2, 3))
    assert torch.all(w[~mask.unsqueeze(1).expand_as(w)] == 0)  # nothing leaks where the mask says no
    torch.testing.assert_close(attn(x, mask), y, atol=1e-5, rtol=0)  # the SDPA path gives the same output


def test_prepare_mask_repairs_only_empty_rows():
    mask = torch.tensor([[[True, False], [False, False]]])
    prepared = prepare_mask(mask)
    assert isinstance(prepared, AttentionMask) and prepared.allowed.shape == (1, 1, 2, 2)
    assert prepared.allowed[0, 0].tolist() == [[True, False], [True, False]]
    assert prepared.empty_rows[0, :, 0].tolist() == [False, True]
    assert prepare_mask(torch.ones(1, 2, 2, dtype=torch.bool)).empty_rows is None
    with pytest.raises(ValueError, match="bool tensor"):
        prepare_mask(torch.ones(1, 2, 2))


@pytest.mark.parametrize("sizes, wrong", [(dict(batch_size=2), "batch size is 1, expected 2"),
                                          (dict(n_queries=3), "query length is 2, expected 3"),
                                          (dict(n_keys=4), "key length is 2, expected 4")])
def test_a_mask_that_does_not_fit_the_inputs_says_which_dimension(sizes, wrong):
    mask = torch.ones(1, 2, 2, dtype=torch.bool)
    for given in (mask, prepare_mask(mask)):  # a tensor and an already prepared mask are checked alike
        with pytest.raises(ValueError, match=rf"mask of shape \(1, 2, 2\) does not fit the inputs: its {wrong}"):
            prepare_mask(given, **sizes)
    assert prepare_mask(mask, n_queries=2, n_keys=2, batch_size=1).allowed.shape == (1, 1, 2, 2)


def test_return_attention_gives_one_map_per_layer_and_the_same_hidden():
    model = build(tiny(share_layers=True))
    x, mask, pos = ids(2, 7), causal_mask(2, 7), positions(2, 7)
    hidden, maps = model(x, mask, pos, return_attention=True)
    assert len(maps) == model.config.n_layers and maps[0].shape == (2, 2, 7, 7)
    torch.testing.assert_close(hidden, model(x, mask, pos), atol=1e-5, rtol=0)
    assert torch.all(maps[1][:, :, ~materialize(causal, 7)] == 0)


# ---- no leaks ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [dict(norm="pre"), dict(norm="post", share_layers=True, embedding_size=16)])
def test_causal_mask_does_not_leak_the_future(overrides):
    model = build(tiny(**overrides))
    T = 10
    x, mask, pos = ids(1, T), causal_mask(1, T), positions(1, T)
    base = model(x, mask, pos)
    for t in range(T):
        changed = x.clone()
        changed[0, t] = (changed[0, t] + 1) % V
        out = model(changed, mask, pos)
        torch.testing.assert_close(out[:, :t], base[:, :t], atol=0, rtol=0)
        assert not torch.allclose(out[:, t], base[:, t])  # the position itself does see its token


def test_query_stream_never_sees_its_own_token():
    model = build(tiny(query_stream="learned"))
    order = [3, 2, 5, 4, 0, 1]
    content, query = xlnet_masks(order)
    T = len(order)
    x, pos = ids(1, T), positions(1, T)
    args = (content.unsqueeze(0), query.unsqueeze(0), pos, pos)
    _, g = model.forward_two_stream(x, *args)
    assert torch.isfinite(g).all()
    for i in range(T):
        changed = x.clone()
        changed[0, i] = (changed[0, i] + 1) % V
        h2, g2 = model.forward_two_stream(changed, *args)
        torch.testing.assert_close(g2[:, i], g[:, i], atol=0, rtol=0)
        # and the rows whose query mask lets them read i do change: the stream is not dead
        readers = query[:, i].nonzero().flatten()
        if len(readers):
            assert not torch.allclose(g2[:, readers], g[:, readers])


def test_query_stream_from_tokens_starts_at_the_slot_token():
    model = build(tiny(query_stream="token"))
    content, query = xlnet_masks([1, 0, 2, 3])
    x, pos = ids(1, 4), positions(1, 4)
    slots = torch.tensor([[2]])  # one query row, sitting at position 2, reading nothing of h except via rank
    q = query[2:3].unsqueeze(0)  # (1, 1, 4)
    _, g = model.forward_two_stream(x, content.unsqueeze(0), q, pos, slots)
    changed = x.clone()
    changed[0, 2] = (changed[0, 2] + 1) % V
    _, g2 = model.forward_two_stream(changed, content.unsqueeze(0), q, pos, slots)
    assert not torch.allclose(g, g2)  # the slot's own token is its starting point (MPNet's [MASK] slots)


def test_decoder_does_not_see_later_decoder_inputs_but_sees_the_encoder():
    model = build(tiny(decoder_layers=2, norm="post"))
    S, T = 7, 5
    src, tgt = ids(1, T, seed=3), ids(1, S, seed=4)
    enc_mask, cross = torch.ones(1, T, T, dtype=torch.bool), torch.ones(1, S, T, dtype=torch.bool)

    def run(src_ids, tgt_ids):
        memory = model.encode(src_ids, enc_mask, positions(1, T))
        return model.decode(tgt_ids, causal_mask(1, S), cross, positions(1, S), memory)

    base = run(src, tgt)
    for s in range(S):
        changed = tgt.clone()
        changed[0, s] = (changed[0, s] + 1) % V
        torch.testing.assert_close(run(src, changed)[:, :s], base[:, :s], atol=0, rtol=0)
    other_src = src.clone()
    other_src[0, 0] = (other_src[0, 0] + 1) % V
    assert not torch.allclose(run(other_src, tgt), base)


# ---- structure: sharing, factorization, positions ----------------------------------------------------------------

def block_parameters(H: int, d_ff: int) -> int:
    ln = 2 * H
    attention = (3 * H * H + 3 * H) + (H * H + H)
    feed_forward = (H * d_ff + d_ff) + (d_ff * H + H)
    return ln + attention + ln + feed_forward


def test_parameter_counts_for_shared_and_factorized_models():
    H, L, F_, P, E = 64, 2, 256, 128, 16
    plain = Backbone(tiny())
    expected_plain = V * H + P * H + L * block_parameters(H, F_) + 2 * H + V  # + final LN + LM bias
    assert plain.num_parameters() == expected_plain

    shared = Backbone(tiny(share_layers=True))
    assert plain.num_parameters() - shared.num_parameters() == (L - 1) * block_parameters(H, F_)
    assert shared.blocks[0].attn.qkv.weight.data_ptr() == shared._stack(shared.blocks, L)[1].attn.qkv.weight.data_ptr()

    factorized = Backbone(tiny(embedding_size=E))
    embeddings = V * E + P * E + (E * H + H)  # tables in E dims + the E -> H projection
    lm_head = (H * E + E) + 2 * E + V  # H -> E dense + LayerNorm(E) + bias; the V x E matrix is tied
    assert factorized.num_parameters() == embeddings + L * block_parameters(H, F_) + 2 * H + lm_head
    assert factorized.num_parameters(exclude_embeddings=True) == factorized.num_parameters() - (V + P) * E

    untied = Backbone(tiny(tie_embeddings=False))
    assert untied.num_parameters() - plain.num_parameters() == V * H


def test_shared_layers_receive_gradient_from_every_application():
    model = Backbone(tiny(share_layers=True, n_layers=3))
    assert len(model.blocks) == 1
    model(ids(1, 5), causal_mask(1, 5), positions(1, 5)).sum().backward()
    assert model.blocks[0].attn.qkv.weight.grad is not None


def test_second_position_row_changes_the_output():
    model = build(tiny(n_position_rows=2))
    T = 6
    x, mask = ids(1, T), torch.ones(1, T, T, dtype=torch.bool)
    zeros_row = torch.stack([torch.arange(T), torch.zeros(T, dtype=torch.long)]).unsqueeze(0)  # (1, 2, T)
    span_row = torch.stack([torch.arange(T), torch.tensor([0, 0, 0, 1, 2, 3])]).unsqueeze(0)
    assert not torch.allclose(model(x, mask, zeros_row), model(x, mask, span_row))
    with pytest.raises(ValueError, match="position_ids must have shape"):
        model(x, mask, positions(1, T))  # one row given, two expected


def test_segment_embeddings_are_used_when_configured_and_ignored_otherwise():
    T = 6
    x, mask, pos = ids(1, T), torch.ones(1, T, T, dtype=torch.bool), positions(1, T)
    seg = torch.tensor([[0, 0, 0, 1, 1, 1]])
    with_segments = build(tiny(n_segments=2))
    assert not torch.allclose(with_segments(x, mask, pos, seg), with_segments(x, mask, pos))
    without = build(tiny())
    torch.testing.assert_close(without(x, mask, pos, seg), without(x, mask, pos))
    with pytest.raises(ValueError, match="segment ids"):
        with_segments(x, mask, pos, seg + 1)


# ---- the LM head -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [dict(), dict(embedding_size=16), dict(tie_embeddings=False, lm_transform=True)])
def test_lm_logits_at_positions_equals_the_gathered_full_logits(overrides):
    model = build(tiny(**overrides))
    hidden = model(ids(2, 8), causal_mask(2, 8), positions(2, 8))
    full = model.lm_logits(hidden)  # (2, 8, V)
    assert full.shape == (2, 8, V)
    picked = torch.zeros(2, 8, dtype=torch.bool)
    picked[0, [1, 5]] = True
    picked[1, 7] = True
    torch.testing.assert_close(model.lm_logits(hidden, picked), full[picked], atol=1e-6, rtol=0)
    flat = torch.tensor([1, 5, 15])
    torch.testing.assert_close(model.lm_logits(hidden, flat), full.reshape(-1, V)[flat], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="position indices"):
        model.lm_logits(hidden, torch.tensor([16]))


def test_tied_output_matrix_is_the_token_embedding():
    model = build(tiny())
    hidden = torch.randn(3, 64)
    expected = hidden @ model.embeddings.token.weight.T + model.lm_bias
    torch.testing.assert_close(model.lm_logits(hidden), expected)


# ---- config ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, match", [
    (dict(d_model=65), "divisible by n_heads"),
    (dict(n_layers=0), "n_layers must be an integer >= 1"),
    (dict(vocab_size=-3), "vocab_size"),
    (dict(norm="sandwich"), "unknown norm"),
    (dict(dropout=1.0), "dropout must be a probability"),
    (dict(attention_dropout=-0.1), "attention_dropout"),
    (dict(embedding_size=0), "embedding_size"),
    (dict(n_position_rows=3), "n_position_rows"),
    (dict(n_segments=-1), "n_segments"),
    (dict(decoder_layers=-1), "decoder_layers"),
    (dict(attention_impl="flash"), "attention_impl"),
    (dict(share_layers="yes"), "share_layers"),
    (dict(query_stream="w"), "query_stream"),
    (dict(d_ff=2.5), "d_ff"),
])
def test_config_rejects_impossible_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{**dict(vocab_size=V, d_model=64, n_layers=2, n_heads=2, d_ff=256), **overrides})


def test_presets_and_dict_round_trip():
    assert (preset_config("small", V).d_model, preset_config("base", V).n_layers) == (256, 12)
    cfg = preset_config("medium", V, norm="post", embedding_size=128, n_segments=2, query_stream="token")
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="unknown preset"):
        preset_config("huge", V)
    with pytest.raises(ValueError, match="unknown model config keys: colour"):
        preset_config("tiny", V, colour="blue")
    with pytest.raises(ValueError, match="unknown model config keys"):
        ModelConfig.from_dict({**cfg.to_dict(), "extra": 1})


# ---- checkpoints -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [dict(), dict(tie_embeddings=False, embedding_size=16, decoder_layers=1),
                                       dict(query_stream="learned", share_layers=True)])
def test_safetensors_round_trip_gives_identical_outputs(tmp_path, overrides):
    model = build(tiny(**overrides), seed=0)
    x, mask, pos = ids(2, 6), causal_mask(2, 6), positions(2, 6)
    expected = model.lm_logits(model(x, mask, pos))

    save_file(model.state_dict(), tmp_path / "model.safetensors")  # plain save_file: no tensor is stored twice
    restored = build(ModelConfig.from_dict(model.config.to_dict()), seed=1)
    assert not torch.equal(restored.lm_logits(restored(x, mask, pos)), expected)  # different init, different output
    restored.load_state_dict(load_file(tmp_path / "model.safetensors"), strict=True)
    assert torch.equal(restored.lm_logits(restored(x, mask, pos)), expected)

    save_model(model, str(tmp_path / "again.safetensors"))
    again = build(model.config, seed=2)
    missing, unexpected = load_model(again, str(tmp_path / "again.safetensors"))
    assert not missing and not unexpected
    assert torch.equal(again.lm_logits(again(x, mask, pos)), expected)


# ---- input errors ------------------------------------------------------------------------------------------------

def test_bad_inputs_raise_value_errors():
    model = build(tiny())
    x, mask, pos = ids(2, 6), causal_mask(2, 6), positions(2, 6)
    with pytest.raises(ValueError, match="attention_mask must be a bool tensor of shape"):
        model(x, mask[:, :5], pos)
    with pytest.raises(ValueError, match="attention_mask must be a bool tensor"):
        model(x, mask.float(), pos)
    with pytest.raises(ValueError, match="vocabulary has 50 ids"):
        model(x + V, mask, pos)
    with pytest.raises(ValueError, match="128 positions"):
        model(x, mask, pos + 200)
    with pytest.raises(ValueError, match="no query stream"):
        model.forward_two_stream(x, mask, mask, pos, pos)
    with pytest.raises(ValueError, match="no decoder"):
        model.decode(x, mask, mask, pos, torch.zeros(2, 6, 64))
    two = build(tiny(query_stream="learned"))
    with pytest.raises(ValueError, match="query_slots lie in"):
        two.forward_two_stream(x, mask, mask, pos, pos + 1)


# ---- heads -------------------------------------------------------------------------------------------------------

def test_sequence_classification_pooling_ignores_padding():
    hidden = torch.randn(2, 5, 64)
    is_real = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    noisy = hidden.clone()
    noisy[0, 3:] = 100.0  # garbage on the padding
    for pool in ("first", "last", "mean"):
        head = SequenceClassificationHead(64, n_classes=2, pool=pool).eval()
        out = head(hidden, is_real)
        assert out.shape == (2, 2)
        torch.testing.assert_close(head(noisy, is_real), out)
    head = SequenceClassificationHead(64, 2, pool="last").eval()
    torch.testing.assert_close(head(hidden, is_real)[0], head(hidden[:, :3])[0])  # last real token = index 2
    with pytest.raises(ValueError, match="unknown pooling"):
        SequenceClassificationHead(64, 2, pool="max")


def test_token_classification_head_shape():
    assert TokenClassificationHead(64).eval()(torch.randn(2, 5, 64)).shape == (2, 5, 1)
    assert TokenClassificationHead(64, n_labels=7)(torch.randn(2, 5, 64)).shape == (2, 5, 7)


def test_span_boundary_head_uses_the_outside_vector_for_minus_one():
    torch.manual_seed(0)
    head = SpanBoundaryHead(64).eval()
    hidden = torch.randn(1, 6, 64)
    I = -100  # IGNORE_INDEX: no SBO target at this token
    # span x0..x2 touches the left edge (left = -1, right = x3); x4 and x5 carry no SBO target
    left, right = torch.tensor([[-1, -1, -1, I, I, I]]), torch.tensor([[3, 3, 3, I, I, I]])
    relative = torch.tensor([[1, 2, 3, I, I, I]])
    out = head(hidden, left, right, relative)
    assert out.shape == (1, 6, 64) and torch.isfinite(out).all()
    assert torch.all(out[0, 3:] == 0)  # rows without a target
    changed = hidden.clone()
    changed[0, 0] = 5.0  # row 0 is no boundary here: left=-1 reads the outside vector, not hidden[0]
    torch.testing.assert_close(head(changed, left, right, relative), out)
    changed[0, 3] = 5.0  # row 3 is the right boundary
    assert not torch.allclose(head(changed, left, right, relative)[0, :3], out[0, :3])
    assert not torch.allclose(out[0, 0], out[0, 1])  # the relative position tells the targets apart
    with pytest.raises(ValueError, match="relative_position must lie in"):
        head(hidden, left, right, torch.tensor([[1, 2, 16, I, I, I]]))
    with pytest.raises(ValueError, match="right must lie in"):
        head(hidden, left, right + 3, relative)
