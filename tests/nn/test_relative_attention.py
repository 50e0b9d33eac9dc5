"""Tests for `relative_attention="xlnet"` (lab_models/nn/relative_attention.py) and the backbone options around it
(`absolute_positions`, `embedding_norm`, `activation`): the eager path (and `return_weights`) equals SDPA in both
streams, only distances and "same segment or not" reach the scores, clamping, the KV cache, XLNet's new default
structure, its validation errors, and fine-tuning an XLNet run end to end. Parity with transformers' XLNet is in
tests/interop/test_xlnet.py."""
from __future__ import annotations


import pytest
import torch

from lab_models.training import run as train_cli
from lab_models.training.config import parse_model_overrides
from lab_models.objectives.masks import materialize, permutation_content, permutation_query
from lab_models.models.family import build_model, family_model_config
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig, preset_config
from lab_models.nn.relative_attention import RelativeMultiHeadAttention, relative_positions
from lab_models.objectives import xlnet
from lab_models.objectives.common import BatchConfig, StringVocab
from tests.support.backbones import V, ids, positions, twin


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def relative(**overrides) -> ModelConfig:
    """XLNet's backbone structure at the tiny size."""
    base = dict(norm="post", relative_attention="xlnet", absolute_positions=False, embedding_norm=False,
                query_stream="learned", layer_norm_eps=1e-12)
    return preset_config("tiny", vocab_size=V, **{**base, **overrides})


def build(config: ModelConfig, seed: int = 0) -> Backbone:
    torch.manual_seed(seed)
    model = Backbone(config).eval()
    with torch.no_grad():  # LayerNorms and biases away from 1 and 0, so that every weight matters
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def padded_full_mask(lengths: list[int]) -> torch.Tensor:
    T = max(lengths)
    mask = torch.eye(T, dtype=torch.bool).repeat(len(lengths), 1, 1)  # a padded row attends itself
    for b, n in enumerate(lengths):
        mask[b, :n, :n] = True
    return mask


def xlnet_masks(order: list[int], B: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = len(order)
    content = materialize(permutation_content(order), n).expand(B, n, n)
    return content, materialize(permutation_query(order), n).expand(B, n, n)


# ---- the attention paths agree -------------------------------------------------------------------------------------

def test_eager_and_return_weights_match_sdpa_in_one_stream_with_segments_and_padding():
    model = build(relative())
    eager = twin(model, attention_impl="eager")
    x, mask, pos = ids(2, 9), padded_full_mask([9, 6]), positions(2, 9)
    segments = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 2], [0, 0, 0, 1, 1, 1, 0, 0, 0]])
    fast = model(x, mask, pos, segments)
    weighted, maps = model(x, mask, pos, segments, return_attention=True)  # the eager path, with the probabilities
    torch.testing.assert_close(eager(x, mask, pos, segments), fast, atol=1e-5, rtol=0)
    torch.testing.assert_close(weighted, fast, atol=1e-5, rtol=0)
    assert len(maps) == 2 and maps[0].shape == (2, 2, 9, 9)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 2, 9))
    assert (maps[0][1, :, :6, 6:] == 0).all()  # padded keys get no probability


def test_eager_matches_sdpa_in_two_streams_with_an_empty_query_row():
    model = build(relative())
    eager = twin(model, attention_impl="eager")
    content, query = xlnet_masks([3, 2, 5, 4, 0, 1], B=2)  # query row 3 (rank 0) is empty
    args = (ids(2, 6), content, query, positions(2, 6), positions(2, 6), torch.tensor([[0, 0, 0, 1, 1, 1]] * 2))
    (h1, g1), (h2, g2) = model.forward_two_stream(*args), eager.forward_two_stream(*args)
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()
    torch.testing.assert_close(h1, h2, atol=1e-5, rtol=0)
    torch.testing.assert_close(g1, g2, atol=1e-5, rtol=0)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_backward_reaches_every_relative_parameter(impl):
    model = Backbone(relative(attention_impl=impl, attention_dropout=0.1)).train()
    content, query = xlnet_masks([3, 2, 5, 4, 0, 1], B=2)
    h, g = model.forward_two_stream(ids(2, 6), content, query, positions(2, 6), positions(2, 6),
                                    torch.tensor([[0, 0, 0, 1, 1, 1]] * 2))
    (model.lm_logits(g).logsumexp(-1).sum() + h.sum()).backward()
    attn = model.blocks[0].attn
    assert isinstance(attn, RelativeMultiHeadAttention)
    for name, p in attn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


# ---- what reaches the scores ---------------------------------------------------------------------------------------

def test_only_distances_matter_not_absolute_positions():
    x, mask = ids(2, 7), padded_full_mask([7, 7])
    rel = build(relative())
    torch.testing.assert_close(rel(x, mask, positions(2, 7) + 40), rel(x, mask, positions(2, 7)), atol=1e-5, rtol=0)
    assert not torch.allclose(rel(x, mask, positions(2, 7).flip(1)), rel(x, mask, positions(2, 7)), atol=1e-3)
    absolute = build(preset_config("tiny", vocab_size=V))  # the negative control: a learned table
    assert not torch.allclose(absolute(x, mask, positions(2, 7) + 40), absolute(x, mask, positions(2, 7)), atol=1e-3)


def test_only_whether_segments_differ_matters():
    model = build(relative())
    x, mask, pos = ids(1, 6), padded_full_mask([6]), positions(1, 6)
    one_segment = model(x, mask, pos)  # no ids: everything in one segment
    torch.testing.assert_close(model(x, mask, pos, torch.full((1, 6), 3)), one_segment, atol=1e-5, rtol=0)
    two = model(x, mask, pos, torch.tensor([[0, 0, 0, 1, 1, 1]]))
    assert not torch.allclose(two, one_segment, atol=1e-3)
    torch.testing.assert_close(model(x, mask, pos, torch.tensor([[4, 4, 4, 9, 9, 9]])), two, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"segment ids lie in \[-1, 0\] but must be >= 0"):
        model(x, mask, pos, torch.tensor([[0, 0, 0, -1, 0, 0]]))


def test_clamped_distances_share_one_encoding():
    pos = torch.arange(6).unsqueeze(0)
    rel = relative_positions(pos, pos, None, None, width=8, clamp_len=2)
    assert rel.distances.tolist() == [2.0, 1.0, 0.0, -1.0, -2.0]
    assert rel.index[0, 5].tolist() == [0, 0, 0, 0, 1, 2]  # distances 5, 4, 3 read the row of 2
    x, mask = ids(1, 10), padded_full_mask([10])
    clamped = build(relative(relative_attention_clamp_len=2))
    free = twin(clamped, relative_attention_clamp_len=None)
    assert not torch.allclose(clamped(x, mask, positions(1, 10)), free(x, mask, positions(1, 10)), atol=1e-3)
    short = positions(1, 3)  # no distance beyond 2: the clamp changes nothing
    torch.testing.assert_close(clamped(x[:, :3], mask[:, :3, :3], short), free(x[:, :3], mask[:, :3, :3], short))


def test_incremental_decoding_with_the_cache_equals_the_full_pass():
    model = build(relative(norm="pre", embedding_norm=None, query_stream=None))
    B, T = 2, 7
    x, pos = ids(B, T), positions(B, T)
    segments = torch.tensor([[0, 0, 0, 1, 1, 1, 1]] * B)
    causal = torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)
    full = model(x, causal, pos, segments)
    cache = model.new_cache()
    steps = [model(x[:, :3], causal[:, :3, :3], pos[:, :3], segments[:, :3], cache=cache)]
    for t in range(3, T):
        steps.append(model(x[:, t:t + 1], causal[:, t:t + 1, :t + 1], pos[:, t:t + 1], segments[:, t:t + 1],
                           cache=cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    cache.reorder(torch.tensor([1, 0]))
    cache.truncate(5)
    assert cache.key_positions.shape == (B, 5) and cache.key_segments.tolist() == [[0, 0, 0, 1, 1]] * B


# ---- the options and XLNet's default -------------------------------------------------------------------------------

def test_embedding_options():
    bare = Backbone(relative())
    assert len(bare.embeddings.positions) == 0 and isinstance(bare.embeddings.norm, torch.nn.Identity)
    assert bare.query_start is not None and not any("positions" in n for n, _ in bare.named_parameters())
    normed = Backbone(preset_config("tiny", vocab_size=V, norm="pre", embedding_norm=True))
    assert isinstance(normed.embeddings.norm, torch.nn.LayerNorm)
    relu = Backbone(preset_config("tiny", vocab_size=V, activation="relu"))
    x = torch.tensor([[-1.0, 2.0]])
    assert relu.blocks[0].ff.act(x).tolist() == [[0.0, 2.0]]


def test_xlnet_defaults_to_the_papers_structure_and_the_old_one_stays_selectable():
    cfg = family_model_config("xlnet", "tiny", V)
    assert (cfg.relative_attention, cfg.absolute_positions, cfg.embedding_norm) == ("xlnet", False, False)
    old = family_model_config("xlnet", "tiny", V, relative_attention=None)
    assert (old.relative_attention, old.absolute_positions) == (None, True)
    gpt = family_model_config("gpt", "tiny", V, **parse_model_overrides(
        ["relative_attention=xlnet", "absolute_positions=false", "relative_attention_clamp_len=64"], "gpt"))
    assert (gpt.relative_attention, gpt.absolute_positions, gpt.relative_attention_clamp_len) == ("xlnet", False, 64)
    assert family_model_config("bert", "tiny", V).relative_attention is None


@pytest.mark.parametrize("overrides, match", [
    (dict(relative_attention="t5"), "unknown relative_attention"),
    (dict(relative_attention="xlnet", n_position_rows=2), "2-D positions"),
    (dict(relative_attention="xlnet", d_model=63, n_heads=3), "even d_model"),
    (dict(relative_attention_clamp_len=0), "relative_attention_clamp_len"),
    (dict(absolute_positions="no"), "absolute_positions"),
    (dict(embedding_norm="yes"), "embedding_norm"),
    (dict(activation="swish"), "unknown activation"),
])
def test_config_rejects_impossible_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{**dict(vocab_size=V, d_model=64, n_layers=2, n_heads=2, d_ff=256), **overrides})


def test_relative_attention_without_the_batch_positions_is_a_value_error():
    attn = RelativeMultiHeadAttention(relative())
    with pytest.raises(ValueError, match="needs the batch's RelativePositions"):
        attn(torch.zeros(1, 3, 64), torch.ones(1, 3, 3, dtype=torch.bool))
    pos = torch.arange(4).unsqueeze(0)
    with pytest.raises(ValueError, match="relative positions are for"):
        attn(torch.zeros(1, 3, 64), torch.ones(1, 3, 3, dtype=torch.bool),
             relative=relative_positions(pos, pos, None, None, width=64))


def test_xlnet_model_with_the_new_default_trains_and_its_loss_falls():
    vocab = StringVocab("the a cat dog sees likes red blue ball box".split())
    settings = xlnet.Settings()
    model = build_model("xlnet", family_model_config("xlnet", "tiny", vocab.info.size, dropout=0.0), settings,
                        vocab.info, seed=0)
    g = torch.Generator().manual_seed(0)
    rows = 16 + torch.randint(10, (8, 12), generator=g)
    batch = xlnet.make_batch(rows, g, BatchConfig(settings, vocab.info))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        out = model.loss(batch)
        optimizer.zero_grad()
        out.total.backward()
        optimizer.step()
        losses.append(out.total.detach().item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.slow
def test_an_xlnet_run_with_the_new_default_fine_tunes_with_its_auxiliary_plm(tmp_path):
    from lab_models.inference.finetuning.config import FinetuneConfig
    from lab_models.inference.finetuning.run import finetune

    run = tmp_path / "runs" / "xlnet-rel"
    assert train_cli.main(["--family", "xlnet", "--out", str(run), "--steps", "3", "--corpus", "synthetic",
                           "--home", str(tmp_path), "--vocab-size", "300"]) == 0
    result = finetune(FinetuneConfig(run_dir=str(run), task="entailment", steps=4, batch_size=8, lm_aux_weight=0.5,
                                     eval_every=4, home=str(tmp_path), out=str(tmp_path / "ft")))
    assert 0.0 <= result["accuracy"] <= 1.0 and result["steps"] == 4


@pytest.mark.parametrize("family", ["gpt2", "albert", "electra", "t5"])
def test_other_families_train_with_relative_attention(family):
    """The option from scratch on other structures: pre-LN, a shared block, ELECTRA's narrower generator, T5's
    decoder (relative self-attention, plain cross-attention); every parameter gets a finite gradient."""
    from lab_models.objectives import objective_module

    vocab = StringVocab("the a cat dog sees likes red blue ball box".split())
    module = objective_module(family)
    config = family_model_config(family, "tiny", vocab.info.size, relative_attention="xlnet", absolute_positions=False)
    model = build_model(family, config, module.Settings(), vocab.info, seed=0)
    g = torch.Generator().manual_seed(0)
    batch = module.make_batch(16 + torch.randint(10, (3, 14), generator=g), g, BatchConfig(module.Settings(),
                                                                                          vocab.info))
    out = model.loss(batch)
    out.total.backward()
    assert torch.isfinite(out.total)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    assert not any("positions" in name for name, _ in model.named_parameters())
