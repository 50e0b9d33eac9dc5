"""Numerical parity of the lab's XLNet with transformers' `XLNetLMHeadModel`, through lab_models/interop/xlnet.py.

A small random XLNet of transformers (every weight perturbed, so that LayerNorms and biases are not 1 and 0) is
imported and compared in fp32: (a) one stream without perm_mask or target_mapping, with two segments and padding;
(b) the query stream at the target rows, under the perm_mask and target_mapping equivalent to the lab's own
factorization-order batches; then a lab-built XLNet is exported, loaded by transformers (`from_pretrained` on the
written folder) and gives the same logits; import(export(model)) is the model again; what cannot be represented is
refused with a ValueError. Nothing is downloaded.
"""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

transformers = pytest.importorskip("transformers")

from lab_models.batch import IGNORE_INDEX  # noqa: E402
from lab_models.interop import xlnet as interop  # noqa: E402
from lab_models.models import build_model, family_model_config  # noqa: E402
from lab_models.objectives import xlnet  # noqa: E402
from lab_models.objectives.common import BatchConfig, VocabInfo  # noqa: E402

V = 96
VOCAB = VocabInfo(size=V, pad_id=5, mask_id=6, cls_id=3, sep_id=4, bos_id=1, eos_id=2, start_id=7, end_id=8,
                  sentinel_ids=(9, 10), random_ids=tuple(range(16, V)))
ATOL = 1e-4  # the bar for fp32 logits


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def perturb(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))


def hf_model(**overrides):
    torch.manual_seed(0)
    config = transformers.XLNetConfig(vocab_size=V, d_model=64, n_layer=2, n_head=4, d_inner=128, **overrides)
    model = transformers.XLNetLMHeadModel(config).eval()
    perturb(model, seed=1)
    return model


def imported(hf):
    config, settings, weights = interop.import_config(hf.config.to_dict())
    model = build_model("xlnet", config, xlnet.Settings(**settings), VOCAB, weights, seed=2).eval()
    model.load_state_dict(interop.import_state(hf.config.to_dict(), hf.state_dict(), model), strict=True)
    return model


def token_ids(B: int, T: int, seed: int = 3) -> torch.Tensor:
    return torch.randint(16, V, (B, T), generator=torch.Generator().manual_seed(seed))


def plm_batch(seed: int = 4, lengths=(12, 9)):
    """The lab's own XLNet batch (random factorization orders, the last n/K of each predicted; padded)."""
    rows = [token_ids(1, n, seed=seed + i)[0] for i, n in enumerate(lengths)]
    return xlnet.make_batch(rows, torch.Generator().manual_seed(seed), BatchConfig(xlnet.Settings(k=3), VOCAB))


def hf_query_logits(hf, batch) -> torch.Tensor:
    """transformers' query-stream logits at the lab batch's targets, row-major like `target_logits`: perm_mask = NOT
    the lab's query mask (transformers' content stream adds the diagonal back: the lab's content mask), and one
    target_mapping row per target position."""
    is_target = batch.targets != IGNORE_INDEX  # (B, T)
    B, T = is_target.shape
    P = int(is_target.sum(1).max())
    mapping = torch.zeros(B, P, T)
    for b in range(B):
        where = is_target[b].nonzero().flatten()
        mapping[b, torch.arange(len(where)), where] = 1.0
    assert torch.equal(batch.attention["content"], batch.attention["query"] | torch.eye(T, dtype=torch.bool))
    with torch.no_grad():
        logits = hf(batch.input_ids, perm_mask=(~batch.attention["query"]).float(), target_mapping=mapping,
                    token_type_ids=batch.segment_ids).logits  # (B, P, V)
    return torch.cat([logits[b, : int(is_target[b].sum())] for b in range(B)])


# ---- import: parity -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, segmented", [({}, False), (dict(clamp_len=3, ff_activation="gelu_new"), True)])
def test_one_stream_logits_match_transformers(overrides, segmented):
    hf = hf_model(**overrides)
    model = imported(hf)
    B, T = 2, 10
    x = token_ids(B, T)
    real = torch.ones(B, T, dtype=torch.bool)
    real[1, 7:] = False  # the second row is padded
    segments = torch.tensor([[0] * 4 + [1] * 5 + [2], [0] * 3 + [1] * 4 + [0] * 3]) if segmented else None
    with torch.no_grad():
        expected = hf(x, attention_mask=real.float(), token_type_ids=segments).logits  # (B, T, V)
        mask = real.unsqueeze(1).expand(B, T, T) | torch.eye(T, dtype=torch.bool)  # padded rows attend themselves
        hidden = model.backbone(x, mask, torch.arange(T).expand(B, T), segments)
        ours = model.backbone.lm_logits(hidden)
    assert (ours[real] - expected[real]).abs().max() <= ATOL
    assert torch.equal(ours[real].topk(5).indices, expected[real].topk(5).indices)


@pytest.mark.parametrize("segmented", [False, True])
def test_query_stream_logits_at_the_targets_match_transformers(segmented):
    hf = hf_model()
    model = imported(hf)
    batch = plm_batch()
    if segmented:
        batch.segment_ids = (torch.arange(batch.input_ids.shape[1]) >= 5).long().expand_as(batch.input_ids).clone()
    with torch.no_grad():
        ours = model.target_logits(batch)  # (N, V): the query stream at every target, row-major
    expected = hf_query_logits(hf, batch)
    assert ours.shape == expected.shape and ours.shape[0] >= 6
    assert (ours - expected).abs().max() <= ATOL
    # and the lab's own loss is transformers' loss on the same targets
    targets = batch.targets[batch.targets != IGNORE_INDEX]
    torch.testing.assert_close(model.loss(batch).total, torch.nn.functional.cross_entropy(expected, targets),
                               atol=ATOL, rtol=0)


# ---- export ---------------------------------------------------------------------------------------------------------

def lab_xlnet():
    config = family_model_config("xlnet", "tiny", V)
    model = build_model("xlnet", config, None, VOCAB, seed=5).eval()
    perturb(model, seed=6)
    return model


def test_an_exported_lab_xlnet_loads_in_transformers_with_the_same_logits(tmp_path):
    model = lab_xlnet()
    (tmp_path / "config.json").write_text(json.dumps(interop.export_config(model)))
    save_file(interop.export_state(model), tmp_path / "model.safetensors")  # refuses tensors that share storage
    hf = transformers.XLNetLMHeadModel.from_pretrained(tmp_path).eval()
    assert hf.lm_loss.weight.data_ptr() == hf.transformer.word_embedding.weight.data_ptr()  # tied, as written
    x = token_ids(2, 11)
    with torch.no_grad():
        full = torch.ones(2, 11, 11, dtype=torch.bool)
        ours = model.backbone.lm_logits(model.backbone(x, full, torch.arange(11).expand(2, 11)))
        assert (ours - hf(x).logits).abs().max() <= ATOL
        batch = plm_batch(seed=7)
        assert (model.target_logits(batch) - hf_query_logits(hf, batch)).abs().max() <= ATOL


def test_import_of_an_export_is_the_same_model():
    model = lab_xlnet()
    hf_config, hf_state = interop.export_config(model), interop.export_state(model)
    config, _, _ = interop.import_config(hf_config)
    assert config == model.model_config.__class__(**{**model.model_config.to_dict(), "max_positions": 512})
    again = build_model("xlnet", config, None, VOCAB, seed=8)
    state = interop.import_state(hf_config, {k.removeprefix("transformer."): v for k, v in hf_state.items()}, again)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


# ---- what cannot be represented -------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    (dict(attn_type="uni"), "attn_type='uni'"),
    (dict(bi_data=True), "bi_data=True"),
    (dict(ff_activation="swish"), "ff_activation='swish'"),
    (dict(model_type="bert"), "not an XLNet config"),
    (dict(d_head=32), "d_head=32"),
])
def test_configs_the_lab_cannot_represent_are_refused(change, match):
    config = {**hf_model().config.to_dict(), **change}
    with pytest.raises(ValueError, match=match):
        interop.import_config(config)


def test_missing_or_misshapen_tensors_are_named():
    hf = hf_model()
    model = imported(hf)
    state = dict(hf.state_dict())
    del state["transformer.layer.1.rel_attn.seg_embed"]
    with pytest.raises(ValueError, match="no tensor 'layer.1.rel_attn.seg_embed'"):
        interop.import_state(hf.config.to_dict(), state, model)
    state = {**hf.state_dict(), "lm_loss.bias": torch.zeros(V + 1)}
    with pytest.raises(ValueError, match=r"'lm_loss.bias' has shape \(97,\)"):
        interop.import_state(hf.config.to_dict(), state, model)


def test_export_refuses_what_xlnet_cannot_hold():
    config = family_model_config("xlnet", "tiny", V, relative_attention=None)  # learned absolute positions
    model = build_model("xlnet", config, None, VOCAB, seed=0)
    with pytest.raises(ValueError, match="relative_attention=None.*learned absolute positions"):
        interop.export_config(model)
