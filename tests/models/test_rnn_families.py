"""The RNN-era families (lab_models/models/rnn/): registration, golden and shape tests, no leak in ELMo's biLM, CoVe's
decoder and CVT's restricted views, ULMFiT's learning-rate rules (STLR and discriminative rates against the paper's
numbers), gradual unfreezing, weight drop on nn.LSTM's hidden-to-hidden matrix, and the docstring examples."""
from __future__ import annotations

import doctest
import importlib
import math

import pytest
import torch

from lab_models import api
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.training.engine import EngineConfig
from lab_models.models.family import TRAINED_FAMILIES, build_model, family_model_config, model_config_from_dict
from lab_models.objectives.common import StringVocab
from lab_models.families import RNN_FAMILIES
from lab_models.models.rnn.config import RNNConfig
from lab_models.models.rnn import cove, cvt, elmo, ulmfit
from lab_models.models.rnn.common import lm_batch
from lab_models.models.rnn.layers import (ScalarMix, WeightDropLSTM, concat_pool, discriminative_lrs,
                                          slanted_triangular_lr)

WORDS = "the cat sat on a mat and dog ran to big red ball".split()
VOCAB = StringVocab(WORDS)
V = VOCAB.info.size
SMALL = dict(embedding_size=8, hidden_size=16, max_positions=32)


def model(family: str, settings=None, weights=None, seed: int = 0, **overrides):
    config = family_model_config(family, "tiny", V, **{**SMALL, **overrides})
    return build_model(family, config, settings, VOCAB.info, weights, seed=seed).eval()


def ids(*rows):
    return torch.tensor([[VOCAB.token_to_id[w] for w in row.split()] for row in rows])


@pytest.mark.parametrize("name", ["config", "common", "layers", "elmo", "cove", "ulmfit", "cvt"])
def test_docstring_examples_hold(name):
    module = importlib.import_module(f"lab_models.models.rnn.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


# ------------------------------------------------------------------------------------------------ registration


def test_the_four_families_are_registered_and_trainable():
    specs = {spec.name: spec for spec in api.families()}
    assert set(RNN_FAMILIES) <= set(TRAINED_FAMILIES) and set(RNN_FAMILIES) <= set(specs)
    assert {name: specs[name].kind for name in RNN_FAMILIES} == dict.fromkeys(RNN_FAMILIES, "rnn")
    assert {name: [(o.name, o.weight) for o in specs[name].objectives] for name in RNN_FAMILIES} == {
        "elmo": [("forward_lm", 0.5), ("backward_lm", 0.5)], "cove": [("nmt", 1.0), ("back_translation", 0.0)],
        "ulmfit": [("lm", 1.0), ("classifier", 1.0)], "cvt": [("labelled", 1.0), ("unlabelled", 1.0)]}
    assert "Peters" in specs["elmo"].paper and "Howard" in specs["ulmfit"].paper
    assert not any(specs[name].has_anatomy for name in RNN_FAMILIES)  # no attention mask to draw
    assert {spec.name for spec in api.trainable_families()} >= set(RNN_FAMILIES)
    # the Train tab's settings table reads the Settings fields and their comments
    assert api.family_settings("ulmfit")["cut_frac"] == 0.1 and api.family_settings("ulmfit")["ratio"] == 32.0
    assert api.family_settings("ulmfit")["discriminative_factor"] == 2.6
    assert api.family_settings("elmo") == {"scalar_mix": True, "residual": True, "share_softmax": True}
    assert "auxiliary module" in api.family_settings_help("cvt")["future_view"]


def test_presets_give_the_documented_rnn_sizes():
    sizes = {(f, p): family_model_config(f, p, 1000) for f in RNN_FAMILIES for p in ("tiny", "small", "base")}
    assert all(isinstance(c, RNNConfig) for c in sizes.values())
    tiny = sizes["elmo", "tiny"]
    assert (tiny.embedding_size, tiny.hidden_size, tiny.n_layers, tiny.max_positions) == (64, 128, 2, 128)
    assert (sizes["elmo", "small"].embedding_size, sizes["elmo", "small"].hidden_size) == (256, 512)
    assert (sizes["elmo", "base"].embedding_size, sizes["elmo", "base"].hidden_size) == (512, 4096)
    assert sizes["ulmfit", "tiny"].n_layers == 3 and sizes["cove", "tiny"].decoder_layers == 2
    assert (tiny.d_model, tiny.n_heads, tiny.d_ff, tiny.vocab_size) == (128, 0, 0, 1000)
    assert model_config_from_dict("cvt", sizes["cvt", "small"].to_dict()) == sizes["cvt", "small"]
    assert family_model_config("ulmfit", "tiny", 1000, n_layers=2).n_layers == 2  # overrides win
    with pytest.raises(ValueError, match="unknown model setting 'd_model'"):
        family_model_config("elmo", "tiny", 1000, d_model=32)
    with pytest.raises(ValueError, match="must be smaller than hidden_size"):
        model("elmo", embedding_size=16, hidden_size=16)


def test_bad_settings_raise_value_errors():
    with pytest.raises(ValueError, match="task must be one of sentiment, topic"):
        ulmfit.Settings(task="tagging")
    with pytest.raises(ValueError, match="at most 1"):
        ulmfit.Settings(pretrain_fraction=0.8, lm_finetune_fraction=0.5)
    with pytest.raises(ValueError, match="at least one auxiliary view"):
        model("cvt", cvt.Settings(forward_view=False, backward_view=False, future_view=False, past_view=False))
    with pytest.raises(ValueError, match="stages 1 and 2 have steps"):
        model("ulmfit", weights={"lm": 0.0})
    with pytest.raises(ValueError, match="has no objective 'mlm'"):
        model("elmo", weights={"mlm": 1.0})


# ------------------------------------------------------------------------------------------------ ELMo


def test_lm_batch_golden():
    batch = lm_batch(ids("the cat sat on"), VOCAB.info)
    assert [[VOCAB.decode(t) if t != IGNORE_INDEX else None for t in row] for row in batch.targets.tolist()] == [
        ["cat", "sat", "on", None]]
    assert [VOCAB.decode(t) if t != IGNORE_INDEX else None for t in batch.extras["backward_targets"][0]] == [
        None, "the", "cat", "sat"]
    padded = lm_batch([torch.tensor([16, 17, 18]), torch.tensor([19])], VOCAB.info)  # right-padded rows
    assert padded.targets.tolist() == [[17, 18, IGNORE_INDEX], [IGNORE_INDEX] * 3]


def test_elmo_shapes_loss_and_scalar_mix():
    m = model("elmo")
    x = ids("the cat sat on a mat", "dog ran to the big ball")
    layers = m.layers(x)
    assert len(layers) == 3 and all(t.shape == (2, 6, 16) for t in layers)  # L + 1 layers of 2E
    assert torch.equal(layers[0][..., :8], layers[0][..., 8:])  # layer 0 is [x; x]
    assert torch.allclose(m.representations(x), torch.stack(layers).mean(0), atol=1e-6)  # s uniform, gamma 1
    assert not any(p.requires_grad for p in m.scalar_mix.parameters())  # trained downstream, not here
    out = m.loss(elmo.make_batch(x, None, type("Cfg", (), {"vocab": VOCAB.info})))
    assert set(out.parts) == {"forward_lm", "backward_lm"}
    assert torch.allclose(out.total, 0.5 * (out.parts["forward_lm"] + out.parts["backward_lm"]))  # the mean
    assert out.target_nll.shape == (20,) and out.target_ids.shape == (20,)  # 10 targets per direction
    top = model("elmo", elmo.Settings(scalar_mix=False))
    assert torch.equal(top.representations(x), top.layers(x)[-1])


def test_scalar_mix_golden():
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.0, math.log(2.0), math.log(5.0)]))  # s = (1, 2, 5) / 8
        mix.gamma.fill_(2.0)
    layers = [torch.full((1, 1, 2), v) for v in (8.0, 4.0, 16.0)]
    assert mix(layers).flatten().tolist() == pytest.approx([2 * (8 * 1 + 4 * 2 + 16 * 5) / 8] * 2)  # 2 * 12 = 24


def test_elmo_bilm_does_not_leak():
    """The forward direction at t never sees tokens after t; the backward never sees tokens before t."""
    m = model("elmo")
    x = ids("the cat sat on a mat and dog")
    forward, backward = m.forward_logits(x), m.backward_logits(x)
    for t in range(1, 7):
        future = x.clone()
        future[0, t + 1:] = torch.randint(16, V, (x.shape[1] - t - 1,))
        past = x.clone()
        past[0, :t] = torch.randint(16, V, (t,))
        assert torch.equal(m.forward_logits(future)[0, : t + 1], forward[0, : t + 1]), t
        assert torch.equal(m.backward_logits(past)[0, t:], backward[0, t:]), t
        # and each direction does read its own side: the prediction at t moves when x_t moves
        moved = x.clone()
        moved[0, t] = VOCAB.token_to_id["ball"] if x[0, t] != VOCAB.token_to_id["ball"] else 16
        assert not torch.equal(m.forward_logits(moved)[0, t], forward[0, t])
        assert not torch.equal(m.backward_logits(moved)[0, t], backward[0, t])


# ------------------------------------------------------------------------------------------------ CoVe


def cove_batch(pairs):
    from lab_models.batch import collate
    from lab_models.objectives.translation import build_example

    return collate([build_example(ids(en)[0], ids(zh)[0], VOCAB.info) for en, zh in pairs], pad_id=VOCAB.info.pad_id)


def test_cove_shapes_padding_and_decoder_causality():
    m = model("cove")
    batch = cove_batch([("the cat sat on a mat", "dog ran"), ("big red ball", "the cat sat to")])
    assert batch.input_ids.shape == (2, 6) and batch.decoder_input_ids.shape == (2, 5)
    vectors = m.context_vectors(batch.input_ids)
    assert vectors.shape == (2, 6, 32)  # 2h
    assert m.representations(batch.input_ids).shape == (2, 6, 8 + 32)  # [embedding; CoVe]
    assert model("cove", cove.Settings(with_embedding=False)).representations(batch.input_ids).shape == (2, 6, 32)
    # packing: the padded short sentence gets the same context vectors as alone (the backward LSTM starts at "ball")
    alone = m.context_vectors(ids("big red ball"))
    assert torch.allclose(vectors[1, :3], alone[0], atol=1e-6) and torch.equal(vectors[1, 3:], torch.zeros(3, 32))
    out = m.loss(batch)
    assert set(out.parts) == {"nmt"} and out.target_ids.tolist()[:3] == ids("dog ran")[0].tolist() + [
        VOCAB.info.eos_id]
    # the decoder at step s reads target tokens < s only
    H, lengths, final = m.encode(batch.input_ids)
    logits, _ = m.decoder_logits(batch.decoder_input_ids, H, lengths, m.bridge(final))
    changed = batch.decoder_input_ids.clone()
    changed[:, 3:] = VOCAB.token_to_id["mat"]
    again, _ = m.decoder_logits(changed, H, lengths, m.bridge(final))
    assert torch.equal(logits[:, :3], again[:, :3]) and not torch.equal(logits[:, 3:], again[:, 3:])
    assert all(isinstance(t, int) for t in m.translate(ids("the cat")[0].tolist(), max_new_tokens=4))
    assert len(m.translate(ids("the cat")[0].tolist(), max_new_tokens=4)) <= 4


# ------------------------------------------------------------------------------------------------ ULMFiT


def test_slanted_triangular_rates_match_the_paper():
    lr = 0.01  # T = 1000, cut_frac 0.1, ratio 32: cut = 100
    assert slanted_triangular_lr(0, 1000, lr) == pytest.approx(lr / 32)
    assert slanted_triangular_lr(100, 1000, lr) == pytest.approx(lr)  # the peak at the cut
    assert slanted_triangular_lr(1000, 1000, lr) == pytest.approx(lr / 32)
    assert slanted_triangular_lr(50, 1000, lr) == pytest.approx(lr * (1 + 0.5 * 31) / 32)  # p = 1/2 going up
    assert slanted_triangular_lr(550, 1000, lr) == pytest.approx(lr * (1 + 0.5 * 31) / 32)  # p = 1/2 going down
    assert slanted_triangular_lr(10, 1000, lr) == pytest.approx(lr * (1 + 0.1 * 31) / 32)
    rates = [slanted_triangular_lr(t, 1000, lr) for t in range(1001)]
    assert max(rates) == rates[100] and rates[:101] == sorted(rates[:101]) and rates[100:] == sorted(rates[100:])[::-1]
    assert slanted_triangular_lr(0, 200, 1.0, cut_frac=0.5, ratio=4) == pytest.approx(0.25)  # other settings


def test_discriminative_rates_divide_by_2_6_per_group():
    rates = discriminative_lrs(0.01, 4)  # bottom group first
    assert rates == pytest.approx([0.01 / 2.6 ** 3, 0.01 / 2.6 ** 2, 0.01 / 2.6, 0.01])
    assert [b / a for a, b in zip(rates, rates[1:])] == pytest.approx([2.6] * 3)


def test_ulmfit_stages_rates_and_gradual_unfreezing():
    m = model("ulmfit")
    config = EngineConfig(steps=100, lr=0.01)
    names = [name for name, _ in m.layer_groups()]
    assert names == ["embedding", "lstm_1", "lstm_2", "lstm_3", "head"]
    assert ulmfit.stage_bounds(100, m.settings) == {1: (1, 50), 2: (51, 75), 3: (76, 100)}
    assert len(m.optimizer_groups(0.01)) == 2 * len(names)
    # stage 1: every LM group at the STLR of step 0 of 50 (cut 5): lr / 32; the head is not trained
    plan = m.begin_step(1, config)
    assert plan.record["stage"] == 1 and plan.record["lrs"]["head"] == 0
    assert plan.record["lrs"]["embedding"] == plan.record["lrs"]["lstm_3"] == pytest.approx(0.01 / 32)
    # stage 2 at its cut (step 51 + floor(25 * 0.1) = 53): the top LM group at the peak, each group below / 2.6
    plan = m.begin_step(53, config)
    assert plan.record["stage"] == 2 and m.stage == 2
    assert [plan.record["lrs"][n] for n in names] == pytest.approx(
        [0.01 / 2.6 ** 3, 0.01 / 2.6 ** 2, 0.01 / 2.6, 0.01, 0.0])
    assert len(plan.lrs) == 10 and plan.lrs[6] == plan.lrs[7] == pytest.approx(0.01)  # lstm_3's two AdamW groups
    # stage 3 (25 steps, 5 groups: one more group every 5 steps), at its first step only the head trains
    first = m.begin_step(76, config).record
    assert first["stage"] == 3 and first["unfrozen_groups"] == 1
    assert [n for n in names if first["lrs"][n] > 0] == ["head"]
    assert first["lrs"]["head"] == pytest.approx(0.01 / 32)
    assert [m.begin_step(76 + 5 * k, config).record["unfrozen_groups"] for k in range(5)] == [1, 2, 3, 4, 5]
    later = m.begin_step(86, config).record["lrs"]  # t = 10: 3 groups
    assert [n for n in names if later[n] > 0] == ["lstm_2", "lstm_3", "head"]
    assert later["lstm_2"] == pytest.approx(later["head"] / 2.6 ** 2)
    no_unfreezing = model("ulmfit", ulmfit.Settings(gradual_unfreezing=False)).begin_step(76, config).record["lrs"]
    assert all(no_unfreezing[n] > 0 for n in names)


def test_weight_drop_masks_the_lstm_hidden_to_hidden_matrix():
    torch.manual_seed(0)
    layer = WeightDropLSTM(4, 32, weight_drop=0.5)
    raw = layer.lstm.weight_hh_l0
    layer.train()
    first, second = layer.dropped_weight_hh(), layer.dropped_weight_hh()
    assert not torch.equal(first, second)  # a new mask every call
    dropped = first == 0
    assert 0.4 < dropped.float().mean() < 0.6
    assert torch.allclose(first[~dropped], raw[~dropped] * 2)  # kept weights scaled by 1 / (1 - p)
    assert not any(name.endswith("_raw") for name, _ in layer.named_parameters())  # the LSTM's own parameter
    x = torch.randn(2, 5, 4)
    assert not torch.equal(layer(x)[0], layer(x)[0])  # the masks reach the nn.LSTM call
    layer.eval()
    assert torch.equal(layer.dropped_weight_hh(), raw)
    assert torch.equal(layer(x)[0], layer.lstm(x)[0]) and torch.equal(layer(x)[0], layer(x)[0])
    layer.train()
    layer(x)[0].sum().backward()
    assert raw.grad is not None and raw.grad.abs().sum() > 0  # the gradient reaches the raw matrix
    ulm = model("ulmfit")  # AWD-LSTM's layers are weight-dropped (ulmfit.Settings.weight_drop)
    assert all(isinstance(layer, WeightDropLSTM) and layer.weight_drop == 0.2 for layer in ulm.layers)


def test_concat_pool_golden():
    hidden = torch.tensor([[[1.0], [5.0], [3.0], [9.0]], [[2.0], [4.0], [0.0], [0.0]]])  # (2, 4, 1)
    pooled = concat_pool(hidden, torch.tensor([3, 2]))  # the second row's last two steps are padding
    assert pooled.tolist() == [[3.0, 5.0, 3.0], [4.0, 4.0, 3.0]]  # [h_T; max; mean]


def test_ulmfit_loss_follows_the_stage():
    m = model("ulmfit")
    x = ids("the cat sat on a mat")
    lm = m.loss(lm_batch(x, VOCAB.info))
    assert set(lm.parts) == {"lm"} and lm.target_ids.shape == (5,)
    batch = lm_batch(x, VOCAB.info)
    batch.extras = {ulmfit.CLASS_IDS: ids("the cat sat", "big red ball"), ulmfit.CLASS_LABELS: torch.tensor([0, 2])}
    both = m.loss(batch)
    assert set(both.parts) == {"lm", "classifier"} and torch.equal(both.total, both.parts["lm"])  # stage 1
    m.stage = 3
    assert torch.equal(m.loss(batch).total, both.parts["classifier"])
    assert m.classify(ids("the cat sat", "big red ball")).shape == (2, 3)


# ------------------------------------------------------------------------------------------------ CVT


def test_cvt_views_see_only_their_side():
    m = model("cvt")
    x = ids("the cat sat on a mat and dog")
    base = m.auxiliary_logits(x, noisy=False)
    T = x.shape[1]
    for t in range(1, T - 1):
        after = x.clone()
        after[0, t + 1:] = VOCAB.token_to_id["ball"]
        before = x.clone()
        before[0, :t] = VOCAB.token_to_id["ball"]
        at = x.clone()
        at[0, t] = VOCAB.token_to_id["ball"] if x[0, t] != VOCAB.token_to_id["ball"] else 16
        changed = {name: m.auxiliary_logits(v, noisy=False) for name, v in
                   (("after", after), ("before", before), ("at", at))}
        assert torch.equal(changed["after"]["forward"][0, t], base["forward"][0, t])  # forward: x_1..x_t
        assert torch.equal(changed["before"]["backward"][0, t], base["backward"][0, t])  # backward: x_t..x_N
        for view in ("future", "past"):  # neither sees x_t itself
            assert torch.equal(changed["at"][view][0, t], base[view][0, t]), (view, t)
        assert torch.equal(changed["after"]["future"][0, t], base["future"][0, t])
        assert torch.equal(changed["before"]["past"][0, t], base["past"][0, t])
    assert m.primary_logits(x).shape == (1, T, 10) and m.representations(x).shape == (1, T, 32)


def test_cvt_teacher_is_detached_and_labelled_trains_the_primary():
    m = model("cvt").train()
    x = ids("the cat sat on a mat and dog")
    m.cvt_loss(x).backward()
    assert all(p.grad is None for p in m.primary.parameters())  # the primary is the fixed teacher here
    assert all(p.grad is not None for p in m.auxiliary.parameters())
    m.zero_grad(set_to_none=True)
    tags = torch.full_like(x, IGNORE_INDEX)
    tags[0, ::2] = 2
    batch = Batch(input_ids=x, attention={}, position_ids=torch.arange(8)[None], targets=torch.full_like(x, -100),
                  extras={cvt.TAGS: tags})
    out = m.loss(batch)
    assert set(out.parts) == {"labelled"} and out.target_ids.numel() == 0  # no token predictions, no bits per byte
    out.total.backward()
    assert all(p.grad is not None for p in m.primary.parameters())
    assert all(p.grad is None for p in m.auxiliary.parameters())
    only_views = model("cvt", cvt.Settings(backward_view=False, past_view=False))
    assert sorted(only_views.auxiliary_logits(x)) == ["forward", "future"]
