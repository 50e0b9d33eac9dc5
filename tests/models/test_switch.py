"""Tests for the Switch Transformer layer (lab_models/nn/moe.py) and its family-level glue
(lab_models/models/switch.py).

The layer against a per-token reference loop (capacity in token order, dropped tokens give 0, padding takes no
room, inference drops nothing), the router's float32 under bf16 autocast, the load-balancing loss against its formula,
every Transformer family with Switch layers (the loss gains `load_balance`, every expert gets a gradient), the
leakage test with Switch layers, KV-cache decoding and a safetensors round trip, clear errors for bad settings and for
the RNN families, and a CLI run whose metrics rows carry the per-expert statistics and whose routing the Understand
view reads.
"""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_model, save_model

from lab_models.training import run as train_cli
from lab_models.training.config import parse_model_overrides
from lab_models.models.family import TRAINED_FAMILIES, family_model_config
from lab_models.nn.backbone import Backbone
from lab_models.nn.config import ModelConfig, is_switch_layer, preset_config
from lab_models.nn.moe import (RoutingCollector, SwitchFeedForward, collect_routing, expert_capacity, route_slots,
                               switch_layers)
from lab_models.objectives import objective_module
from lab_models.families import RNN_FAMILIES
from lab_models.models.switch import parameter_counts, routing_loss, switch_metrics
from lab_models.inference.routing import token_routing
from tests.support import toy_families
from tests.support.toy_families import FIRST_WORD, WORDS, make_batch

TRANSFORMER_FAMILIES = [f for f in TRAINED_FAMILIES if f not in RNN_FAMILIES]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def switch_layer(n_experts=4, capacity_factor=1.0, d_model=8, d_ff=16, seed=0) -> SwitchFeedForward:
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=10, d_model=d_model, n_heads=1, d_ff=d_ff, n_layers=2, ffn="switch",
                         n_experts=n_experts, capacity_factor=capacity_factor)
    layer = SwitchFeedForward(config)
    torch.nn.init.normal_(layer.router, std=1.0)  # a router that takes clear decisions
    return layer


def reference(layer: SwitchFeedForward, x: torch.Tensor, token_mask=None, capacity=None) -> torch.Tensor:
    """The paper's layer, one token at a time: top-1 expert, capacity in token order, gate * FFN_e(x)."""
    tokens = x.reshape(-1, x.shape[-1])
    counted = [True] * tokens.shape[0] if token_mask is None else token_mask.reshape(-1).tolist()
    probs = F.linear(tokens.float(), layer.router.float()).softmax(-1)
    out = torch.zeros_like(tokens)
    used = [0] * layer.n_experts
    for n, token in enumerate(tokens):
        if not counted[n]:
            continue
        e = int(probs[n].argmax())
        if used[e] < capacity:
            out[n] = probs[n, e] * (F.gelu(token @ layer.up[e]) @ layer.proj[e])
        used[e] += 1
    return out.reshape(x.shape)


# ------------------------------------------------------------------------------------------------ the layer


def test_route_slots_worked_example():
    position, kept = route_slots(torch.tensor([0, 0, 0, 1]), n_experts=2, capacity=2)
    assert position.tolist() == [0, 1, 2, 0] and kept.tolist() == [True, True, False, True]
    position, kept = route_slots(torch.tensor([0, 0, 0, 1]), 2, 2, counted=torch.tensor([True, False, True, True]))
    assert kept.tolist() == [True, False, True, True]  # the padding took no room: the third 0 now fits


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 9), n_experts=st.integers(1, 5),
       capacity_factor=st.sampled_from([0.25, 0.5, 1.0, 1.25, 2.0]), seed=st.integers(0, 1000),
       padded=st.booleans())
def test_layer_matches_the_per_token_reference(B, T, n_experts, capacity_factor, seed, padded):
    layer = switch_layer(n_experts, capacity_factor, seed=seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, 8, generator=g)
    mask = (torch.rand(B, T, generator=g) > 0.3) if padded else None
    layer.train()
    capacity = expert_capacity(B * T, n_experts, capacity_factor)
    torch.testing.assert_close(layer(x, mask), reference(layer, x, mask, capacity), atol=1e-5, rtol=1e-4)
    layer.eval()  # inference drops nothing
    torch.testing.assert_close(layer(x, mask), reference(layer, x, mask, B * T), atol=1e-5, rtol=1e-4)


def test_experts_follow_the_configs_activation_and_gating():
    """A config with `activation` and T5 v1.1's `ffn_gated` (fields other branches add to ModelConfig; a stand-in
    here): each expert computes act(x W_0) * (x W_1) W_o."""
    config = SimpleNamespace(n_experts=3, d_model=8, d_ff=16, capacity_factor=2.0, router_jitter=0.0,
                             load_balance_weight=0.01, router_z_weight=0.0, n_layers=2, norm="pre",
                             activation="relu", ffn_gated=True)
    torch.manual_seed(0)
    layer = SwitchFeedForward(config).eval()
    assert layer.up.shape == (3, 8, 32) and layer.proj.shape == (3, 16, 8)
    x = torch.randn(2, 5, 8)
    tokens = x.reshape(-1, 8)
    probs = F.linear(tokens, layer.router).softmax(-1)
    expected = torch.stack([probs[n].max() * (F.relu(t @ layer.up[e, :, :16]) * (t @ layer.up[e, :, 16:]))
                            @ layer.proj[e] for n, (t, e) in enumerate(zip(tokens, probs.argmax(-1)))])
    torch.testing.assert_close(layer(x).reshape(-1, 8), expected, atol=1e-5, rtol=1e-4)


def test_tokens_over_capacity_pass_through_with_zero_output():
    layer = switch_layer(n_experts=2, capacity_factor=0.5).train()
    x = torch.randn(1, 12, 8)
    with collect_routing(layer, record_tokens=True) as collector:
        out = layer(x)
    call = collector.calls[0]
    assert call.dropped.sum() > 0  # capacity 3 of 12 tokens per expert: some must drop
    assert torch.all(out[0, ~call.kept] == 0)
    assert torch.all(out[0, call.kept].abs().sum(-1) > 0)
    assert call.routed.sum() == 12 and call.tokens == 12


def test_load_balance_is_its_formula_and_one_when_balanced():
    layer = switch_layer(n_experts=4).train()
    x = torch.randn(2, 6, 8)
    with collect_routing(layer) as collector:
        layer(x)
    probs = F.linear(x.reshape(-1, 8), layer.router).softmax(-1)
    f = F.one_hot(probs.argmax(-1), 4).float().mean(0)
    expected = 4 * (f * probs.mean(0)).sum()
    torch.testing.assert_close(collector.calls[0].load_balance, expected)
    torch.testing.assert_close(collector.calls[0].router_z, torch.logsumexp(F.linear(x.reshape(-1, 8), layer.router),
                                                                           -1).square().mean())
    with torch.no_grad():
        layer.router.zero_()  # uniform probabilities: P_e = 1/4 whatever f is
    with collect_routing(layer) as collector:
        layer(x)
    assert collector.calls[0].load_balance.item() == pytest.approx(1.0)
    # the gradient reaches the router through P_e (f is an argmax)
    layer.zero_grad()
    with collect_routing(layer) as collector:
        layer(x)
    collector.calls[0].load_balance.backward()
    assert layer.router.grad is not None and layer.router.grad.abs().sum() > 0


def test_router_runs_in_float32_under_bf16_autocast():
    layer = switch_layer().train()
    with torch.autocast("cpu", dtype=torch.bfloat16), collect_routing(layer, record_tokens=True) as collector:
        out = layer(torch.randn(2, 5, 8))
    call = collector.calls[0]
    assert call.probability.dtype == torch.float32 and call.load_balance.dtype == torch.float32
    assert out.dtype == torch.float32  # the residual stream keeps its dtype


def test_router_init_is_the_papers_smaller_scale():
    layer = SwitchFeedForward(preset_config("small", 100, ffn="switch"))
    std = math.sqrt(0.1 / 256)
    assert layer.router.abs().max() <= 2 * std + 1e-7
    assert 0.6 * std < layer.router.std() < std


def test_which_layers_switch_and_their_labels():
    cfg = preset_config("small", 100, ffn="switch", expert_every=2)
    assert [is_switch_layer(cfg, i) for i in range(4)] == [False, True, False, True]
    assert [label for label, _ in switch_layers(Backbone(cfg))] == ["layer 2", "layer 4"]
    assert [label for label, _ in toy_families.make_model("bert", ffn="switch").switch_layers] == ["layer 2"]
    assert [label for label, _ in toy_families.make_model("t5", ffn="switch").switch_layers] == [
        "encoder layer 2", "decoder layer 2"]
    assert [label for label, _ in toy_families.make_model("electra", ffn="switch").switch_layers] == [
        "layer 2", "generator layer 2"]
    assert [label for label, _ in toy_families.make_model("albert", ffn="switch", expert_every=1).switch_layers] == [
        "shared layer"]


def test_parameters_grow_but_active_parameters_do_not():
    dense = parameter_counts(Backbone(preset_config("tiny", 100)))
    sparse = parameter_counts(Backbone(preset_config("tiny", 100, ffn="switch", n_experts=8)))
    expert = 2 * 64 * 256
    assert sparse["non_embedding"] - dense["non_embedding"] == 7 * expert + 8 * 64 - (256 + 64)
    assert sparse["active_non_embedding"] - dense["active_non_embedding"] == 8 * 64 - (256 + 64)


# ------------------------------------------------------------------------------------------------ the families


def make_model(family: str, **overrides):
    overrides.setdefault("expert_every", 1 if family == "albert" else 2)
    return toy_families.make_model(family, ffn="switch", n_experts=4, **overrides)


@pytest.mark.parametrize("family", TRANSFORMER_FAMILIES)
def test_every_transformer_family_adds_the_load_balance_loss(family):
    model = make_model(family).eval()  # eval + the same seed: both passes are the same function
    batch = make_batch(family, toy_families.random_rows(4, 16))
    torch.manual_seed(0)
    with torch.no_grad(), collect_routing(model) as collector:
        plain = objective_module(family).loss(model, batch)  # the family's own loss, without the Switch losses
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.loss(batch)
    calls = [call.load_balance.item() for call in collector.calls]
    assert len(calls) >= (2 if family in ("mass", "t5", "electra") else 1)
    assert "load_balance" in out.parts and "router_z" not in out.parts
    assert out.parts["load_balance"].item() == pytest.approx(sum(calls) / len(calls))
    alpha = model.model_config.load_balance_weight
    assert out.total.item() == pytest.approx(plain.total.item() + alpha * sum(calls), abs=1e-5)

    model.train()
    model.loss(batch).total.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == []  # every expert gets a gradient: DDP needs no find_unused_parameters
    assert switch_metrics(model)["switch"]["layers"] == [label for label, _ in model.switch_layers]
    assert switch_metrics(model) == {}  # read once per logged step


def test_router_z_loss_is_logged_when_on():
    model = make_model("gpt", router_z_weight=1e-3).train()
    out = model.loss(make_batch("gpt", toy_families.random_rows(2, 10)))
    assert out.parts["router_z"] > 0


@pytest.mark.parametrize("family", ["gpt", "bert", "unilm"])
def test_no_switch_family_leaks_its_targets(family):
    settings = toy_families.leak_settings(family)
    model = make_model(family, settings=settings)
    rows = toy_families.random_rows(2, 12, seed=3)
    checked, leaks, targets = toy_families.find_leaks(model, lambda r: make_batch(family, r, settings, seed=5), rows)
    assert checked == targets and leaks == []


@pytest.mark.parametrize("family", ["xlnet", "t5"])
def test_no_switch_two_stream_or_seq2seq_family_leaks(family):
    settings = toy_families.leak_settings(family)
    model = make_model(family, settings=settings)
    rows = toy_families.random_rows(2, 12, seed=3)
    checked, leaks, targets = toy_families.find_leaks(model, lambda r: make_batch(family, r, settings, seed=5), rows,
                                                      words_only=True)
    assert checked == targets and leaks == []


def test_training_capacity_is_causal_for_a_causal_lm():
    """In training, tokens take capacity in batch order: changing token r of a row never changes the outputs of the
    positions before it (here with a capacity small enough to drop tokens)."""
    model = make_model("gpt", capacity_factor=0.5, dropout=0.0).train()
    backbone = model.backbone
    rows = toy_families.random_rows(2, 12, seed=1)
    causal = torch.ones(2, 12, 12, dtype=torch.bool).tril()
    positions = torch.arange(12).expand(2, 12)
    with collect_routing(model) as collector:
        base = backbone(rows, causal, positions)
    assert sum(call.dropped.sum() for call in collector.calls) > 0
    for r in (3, 8):
        changed = rows.clone()
        changed[1, r] = FIRST_WORD + (changed[1, r] - FIRST_WORD + 1) % len(WORDS)
        out = backbone(changed, causal, positions)
        torch.testing.assert_close(out[1, :r], base[1, :r])
        torch.testing.assert_close(out[0], base[0])  # an earlier row is never affected


def test_kv_cache_and_safetensors_round_trip(tmp_path):
    model = make_model("gpt").eval()
    backbone = model.backbone
    ids = toy_families.random_rows(1, 9)
    causal = torch.ones(1, 9, 9, dtype=torch.bool).tril()
    positions = torch.arange(9).unsqueeze(0)
    with torch.no_grad():
        full = backbone(ids, causal, positions)
        cache = backbone.new_cache()
        steps = [backbone(ids[:, :4], causal[:, :4, :4], positions[:, :4], cache=cache)]
        for t in range(4, 9):
            steps.append(backbone(ids[:, t:t + 1], causal[:, t:t + 1, :t + 1], positions[:, t:t + 1], cache=cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
    save_model(model, str(tmp_path / "model.safetensors"))
    again = make_model("gpt", seed=1).eval()
    load_model(again, str(tmp_path / "model.safetensors"))
    batch = make_batch("gpt", toy_families.random_rows(2, 10))
    assert again.loss(batch).total.item() == pytest.approx(model.loss(batch).total.item(), abs=1e-6)


def test_bad_switch_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown ffn"):
        preset_config("tiny", 100, ffn="moe")
    with pytest.raises(ValueError, match="capacity_factor must be a number > 0"):
        preset_config("tiny", 100, ffn="switch", capacity_factor=0)
    with pytest.raises(ValueError, match="no feed-forward would become a Switch layer"):
        preset_config("tiny", 100, ffn="switch", expert_every=3)
    with pytest.raises(ValueError, match="needs expert_every=1"):
        family_model_config("albert", "tiny", 100, ffn="switch")
    with pytest.raises(ValueError, match="n_experts must be an integer >= 1"):
        preset_config("tiny", 100, ffn="switch", n_experts=0)
    with pytest.raises(ValueError, match="ELMo is an LSTM model, not a Transformer"):
        parse_model_overrides(["ffn=switch"], "elmo")


def test_cli_rejects_switch_for_an_rnn_family_with_one_line(tmp_path, capsys):
    code = train_cli.main(["--family", "cvt", "--out", str(tmp_path / "r"), "--model", "n_experts=4"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: CVT is an LSTM model")


# ------------------------------------------------------------------------------------------------ a real run


@pytest.fixture(scope="module")
def switch_run(tmp_path_factory, lab_home_dir):
    out = tmp_path_factory.mktemp("switch-run") / "gpt-switch"
    code = train_cli.main(["--family", "gpt", "--out", str(out), "--steps", "6", "--home", str(lab_home_dir),
                           "--model", "ffn=switch", "--model", "n_experts=4", "--model", "capacity_factor=0.5",
                           "--eval-every", "3", "--device", "cpu"])
    assert code == 0
    return out


@pytest.mark.slow
def test_cli_run_logs_load_balance_and_per_expert_routing(switch_run):
    rows = [json.loads(line) for line in (switch_run / "metrics.jsonl").read_text().splitlines()]
    train = [row for row in rows if row.get("split") == "train"]
    val = [row for row in rows if row.get("split") == "val"]
    assert len(train) == 6 and len(val) == 2
    assert all("load_balance" in row["losses"] for row in train + val)
    switch = train[-1]["switch"]
    assert switch["layers"] == ["layer 2"] and switch["n_experts"] == 4
    assert sum(switch["routed"][0]) == pytest.approx(1.0, abs=1e-3)
    assert 0 < sum(switch["dropped"][0]) < 1  # capacity factor 0.5 drops about half
    assert switch["tokens"] == [16 * 64]
    config = json.loads((switch_run / "config.json").read_text())
    assert config["model"]["ffn"] == "switch" and config["model"]["n_experts"] == 4


@pytest.mark.slow
def test_routing_view_of_a_trained_run(switch_run):
    view = token_routing(switch_run, "the cat sees a red ball .")
    assert view.n_experts == 4 and [layer.label for layer in view.layers] == ["layer 2"]
    layer = view.layers[0]
    assert len(layer.tokens) == len(layer.experts) == len(layer.probabilities) >= 5
    assert all(0 <= e < 4 for e in layer.experts) and all(layer.kept)
    assert all(0.25 <= p <= 1 for p in layer.probabilities)  # the top-1 of 4 has at least a quarter


def test_routing_view_of_a_dense_or_lstm_run_says_what_to_do(tmp_path):
    for family, model, message in (("gpt", {"ffn": "dense"}, "has no Switch layers"),
                                   ("elmo", {"hidden_size": 128}, "is an LSTM run")):
        folder = tmp_path / family
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"family": family, "model": model}))
        with pytest.raises(ValueError, match=message):
            token_routing(folder, "the cat")


def test_routing_loss_and_nested_collectors():
    """Fine-tuning wraps its forward pass in collect_routing and adds routing_loss; a FamilyModel.loss inside (GPT's
    auxiliary LM loss) collects its own calls, so nothing is counted twice."""
    model = make_model("gpt").train()
    batch = make_batch("gpt", toy_families.random_rows(2, 10))
    with collect_routing(model) as outer:
        model.loss(batch)
    assert outer.calls == []  # the inner block took them and added them to that loss
    causal = torch.ones(2, 10, 10, dtype=torch.bool).tril()
    with collect_routing(model) as collector:
        model.backbone(batch.input_ids, causal, batch.position_ids)
    [call] = collector.calls
    assert routing_loss(collector).item() == pytest.approx(0.01 * call.load_balance.item())
    assert routing_loss(RoutingCollector()) == 0.0


@pytest.mark.slow
def test_a_switch_run_is_not_exported_to_transformers(switch_run, tmp_path):
    from lab_models import api

    with pytest.raises(ValueError, match="Switch Transformer feed-forward layers"):
        api.export_hf(switch_run, tmp_path / "exported")
    assert not (tmp_path / "exported").exists()


def test_t5s_own_init_reaches_the_experts():
    from lab_models.models.family import family_model_config
    from lab_models.nn.backbone import Backbone

    torch.manual_seed(0)
    config = family_model_config("t5", "small", 200, ffn="switch", n_experts=4)
    layer = next(m for m in Backbone(config).modules() if type(m).__name__ == "SwitchFeedForward")
    assert layer.up.std().item() == pytest.approx(config.d_model ** -0.5, rel=0.05)
    assert layer.proj.std().item() == pytest.approx(config.d_ff ** -0.5, rel=0.05)
