"""Tests for the fast path of training (lab_models/training/performance.py) and its FLOPs/MFU accounting
(lab_models/training/flops.py).

What runs on the CPU: the FLOP count against the analytic formula and across families, MFU arithmetic, the settings'
parsing and checks, FlexAttention block masks against SDPA (forward only: FlexAttention has no CPU backward), gradient
accumulation against the big batch it stands for, activation checkpointing and prefetching against the plain
trajectory, and MFU in the metrics rows. Paths that need a CUDA GPU skip with the reason; `torch.compile` on the CPU
runs only with PRETRAINING_LAB_SLOW=1 (inductor's C++ build takes a minute)."""
from __future__ import annotations

import json
import os
import random

import pytest
import torch

from lab_models.batch import TARGET_ROWS, target_rows
from lab_models.training.batches import PackedBatches
from lab_models.training.engine import EngineConfig, StepEvent, Trainer, count_tokens
from lab_models.training.flops import analytic_flops_per_token, mfu, peak_flops, training_flops_per_token
from lab_models.models.family import build_model, family_model_config
from lab_models.nn.backbone import Backbone
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.text.vocab import VocabInfo
from lab_models.training.performance import (PerformanceConfig, enable_activation_checkpointing,
                                             parse_performance_overrides)
from tests.support.vocab import vocab

CUDA = torch.cuda.is_available()


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def batches(family: str, info: VocabInfo, batch_size: int = 4, seq_len: int = 32) -> PackedBatches:
    module = objective_module(family)
    stream = torch.randint(40, info.size, (20_000,), generator=torch.Generator().manual_seed(3))
    return PackedBatches(stream, stream[:2000], seq_len=seq_len, batch_size=batch_size, objective=module,
                         batch_config=BatchConfig(module.Settings(), info), eval_batches=1)


def model(family: str, info: VocabInfo, **overrides):
    sizes = dict(d_model=64, n_layers=2, n_heads=2, d_ff=256) | overrides
    return build_model(family, family_model_config(family, "tiny", info.size, **sizes), None, info, seed=0)


def flops_per_token(family: str, info: VocabInfo, **overrides) -> float:
    m = model(family, info, **overrides)
    batch = batches(family, info).train_batch(torch.Generator().manual_seed(0))
    return training_flops_per_token(m, batch, count_tokens(batch))


# ------------------------------------------------------------------------------------------------ FLOPs and MFU


def test_gpt2_flops_match_the_palm_formula():
    """GPT-2: 6N over the blocks, 6 d V for the tied head on every row that predicts (T-1 of T), 12 L d T attention."""
    info = vocab()
    m = model("gpt2", info)
    T, d, L, V = 32, 64, 2, info.size
    counted = flops_per_token("gpt2", info)
    blocks = m.backbone.num_parameters(exclude_embeddings=True) - V  # without the LM bias (not a matmul weight)
    matmul_weights = sum(p.numel() for n, p in m.backbone.named_parameters() if p.dim() == 2 and "embeddings" not in n)
    expected = analytic_flops_per_token(matmul_weights, L, d, T) + 6 * d * V * (T - 1) / T
    assert blocks > 0
    assert counted == pytest.approx(expected, rel=1e-3)


def test_albert_costs_what_bert_costs_although_it_shares_its_layers():
    info = vocab()
    bert, albert = flops_per_token("bert", info), flops_per_token("albert", info)
    assert model("albert", info).num_parameters() < 0.7 * model("bert", info).num_parameters()
    assert albert == pytest.approx(bert, rel=0.25)  # the same blocks applied as often; E-projections differ
    assert albert > 0.75 * bert


def test_the_query_stream_and_cross_attention_are_counted():
    info = vocab()
    # XLNet's query rows run through every layer beside the content rows: more FLOPs per input token than RoBERTa
    assert flops_per_token("xlnet", info) > flops_per_token("roberta", info)
    # MASS's decoder rows also read the encoder memory through cross-attention (q, o and k, v of the memory per layer)
    assert flops_per_token("mass", info) > flops_per_token("roberta", info)


def test_mfu_arithmetic_and_peaks():
    assert mfu(1e9, 1e5, 1e15) == pytest.approx(0.1)
    assert mfu(1e9, 1e5, None) is None
    assert peak_flops("NVIDIA A100-SXM4-80GB", "bf16") == 312e12
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32") == 67e12
    assert peak_flops("Apple M2", "bf16") is None
    with pytest.raises(ValueError, match="unknown dtype"):
        peak_flops("NVIDIA A100", "fp8")


# ------------------------------------------------------------------------------------------------ settings


def test_settings_parse_and_refuse_what_the_device_cannot_run():
    assert parse_performance_overrides(["prefetch=auto", "fused_adamw=off"]) == {"prefetch": None,
                                                                                  "fused_adamw": False}
    for bad, message in ((["grad_accum=0"], "grad_accum"), (["attention=magic"], "attention backend"),
                         (["compile=maybe"], "true or false"), (["speed=11"], "unknown --perf setting"),
                         (["grad_accum"], "KEY=VALUE")):
        with pytest.raises(ValueError, match=message):
            parse_performance_overrides(bad)
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA"):
        PerformanceConfig(attention="flex", compile=True).check_device(cpu)
    PerformanceConfig(precision="bf16").check_device(cpu)  # bf16 is accepted on any device (docs/contract.md §6)
    with pytest.raises(ValueError, match="unknown precision"):
        parse_performance_overrides(["precision=fp16"])
    with pytest.raises(ValueError, match="unknown performance"):
        PerformanceConfig.from_dict({"grad_acum": 2})
    PerformanceConfig().check_device(cpu)  # the defaults run anywhere


# ------------------------------------------------------------------------------------------------ FlexAttention


@pytest.mark.parametrize("family", ["unilm", "glm"])
def test_flex_block_masks_give_the_sdpa_outputs(family):
    """The block mask built from each family's real boolean mask reads exactly that mask: the backbone's outputs
    are those of SDPA (forward only on the CPU). UniLM's and GLM's structured masks."""
    info = vocab()
    m = model(family, info).eval()
    batch = batches(family, info).train_batch(torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = m.prediction_states(batch)
        for module in m.modules():
            if isinstance(module, Backbone):
                module.flex_attention = True
        flexed = m.prediction_states(batch)
    assert torch.allclose(plain, flexed, atol=2e-5)
    with torch.no_grad():  # and the block masks were really built and read (not a silent fallback to SDPA)
        mask = torch.ones(1, 4, 4, dtype=torch.bool).tril()
        mask[0, 3, 0] = False
        from lab_models.nn.attention import prepare_mask
        assert prepare_mask(mask, flex=True).block_mask is not None


@pytest.mark.skipif(not CUDA, reason="FlexAttention's backward and compiled kernels need a CUDA GPU")
def test_flex_training_step_on_cuda():
    info = vocab()
    trainer = Trainer(model("glm", info), batches("glm", info), EngineConfig(steps=2, log_every=1),
                      device="cuda", performance=PerformanceConfig(attention="flex", compile=True))
    events = [e for e in trainer.run() if isinstance(e, StepEvent)]
    assert events and all(torch.isfinite(torch.tensor(e.loss)) for e in events)
    assert events[0].record.get("compile_s", 0) > 0 and events[-1].mfu is not None


# ------------------------------------------------------------------------------------------------ the loop


def weights_after(trainer: Trainer) -> dict[str, torch.Tensor]:
    for _ in trainer.run():
        pass
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def make_trainer(family="gpt", performance=None, batch_size=4, steps=3, dropout=0.0):
    info = vocab()
    return Trainer(model(family, info, dropout=dropout), batches(family, info, batch_size=batch_size),
                   EngineConfig(steps=steps, lr=1e-3, log_every=1, grad_clip=0.0, seed=5), performance=performance)


def test_gradient_accumulation_equals_the_big_batch():
    """Two micro-batches of 4 rows give the gradient of their 8 rows in one batch (GPT: every row has the same
    number of targets, so the mean of the two means is the mean of all)."""
    trainer = make_trainer(performance=PerformanceConfig(grad_accum=2, precision="fp32"), steps=1)  # as the reference
    micro = [trainer._build_batch((1, k)) for k in range(2)]
    big = micro[0]._map_tensors(lambda t: t)  # a copy whose fields are replaced below
    for name in ("input_ids", "position_ids", "targets"):
        setattr(big, name, torch.cat([getattr(b, name) for b in micro]))
    # the engine prepares its masks on the host (nn/attention.py): the big batch joins the masks themselves
    big.attention = {k: torch.cat([b.attention[k].allowed[:, 0] for b in micro]) for k in micro[0].attention}
    big.extras = {**big.extras, TARGET_ROWS: target_rows(big.targets)}  # the rows of the joined batch
    reference = model("gpt", vocab(), dropout=0.0)
    reference.loss(big).total.backward()
    seen = {}
    trainer.optimizer.step = lambda: seen.update(
        {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None})
    next(trainer.run())
    grads = {n: p.grad for n, p in reference.named_parameters() if p.grad is not None}
    assert grads.keys() == seen.keys()
    for name in grads:
        assert torch.allclose(grads[name], seen[name], atol=1e-6), name
    assert trainer.tokens_seen == 2 * 4 * 32


def test_activation_checkpointing_and_prefetch_keep_the_trajectory():
    """Recomputing the blocks (with dropout: the RNG is replayed) and building batches in a background thread change
    no number of a CPU run; the state dict keeps its names."""
    plain = weights_after(make_trainer(dropout=0.1))
    recomputed = weights_after(make_trainer(dropout=0.1, performance=PerformanceConfig(activation_checkpointing=True)))
    prefetched = weights_after(make_trainer(dropout=0.1, performance=PerformanceConfig(prefetch=True)))
    assert plain.keys() == recomputed.keys() == prefetched.keys()
    for name in plain:
        assert torch.allclose(plain[name], recomputed[name], atol=1e-6), name
        assert torch.equal(plain[name], prefetched[name]), name


def test_activation_checkpointing_wraps_every_block():
    m = model("t5", vocab())
    n_blocks = len(list(m.backbone.blocks)) + len(list(m.backbone.decoder_blocks))
    assert enable_activation_checkpointing(m) == n_blocks


@pytest.mark.slow
def test_metrics_rows_carry_flops_and_mfu(tmp_path):
    from lab_models.training.run import main

    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice("abcdefgh") * rng.randint(1, 4) for _ in range(12))
                                for _ in range(300)), encoding="utf-8")
    out = tmp_path / "run"
    code = main(["--family", "gpt", "--out", str(out), "--steps", "3", "--corpus", str(corpus), "--home",
                 str(tmp_path / "home"), "--perf", "grad_accum=2", "--vocab-size", "60", "--device", "cpu"])
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("split") == "train"]
    assert train and all(r["flops_per_token"] > 0 for r in train)
    assert all(0 < r["mfu"] < 1 for r in train)  # MFU on every device: a CPU's peak comes from the matmul probe
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["performance"] == {"grad_accum": 2}
    used = config["performance_used"]
    assert used["peak_kind"] == "probe" and "matmul probe on this CPU" in used["peak_source"]
    precision = used["precision"]["precision"]
    probe = json.loads((tmp_path / "home" / "machine" / "matmul_probe.json").read_text())["machines"]
    assert len(probe) == 1 and used["peak_flops"] == pytest.approx(next(iter(probe.values()))[precision])
    log = (out / "train.log").read_text()
    assert f"precision: {used['precision']['reason']}" in log and "MFU peak: a 1024 x 1024" in log


@pytest.mark.skipif(os.environ.get("PRETRAINING_LAB_SLOW") != "1",
                    reason="torch.compile on the CPU builds C++ kernels for a minute; set PRETRAINING_LAB_SLOW=1")
def test_compiled_blocks_train_like_eager_ones():
    plain = weights_after(make_trainer())
    compiled_trainer = make_trainer(performance=PerformanceConfig(compile=True))
    compiled = weights_after(compiled_trainer)
    assert compiled_trainer.compile_s is not None and compiled_trainer.compile_s > 0
    for name in plain:
        assert torch.allclose(plain[name], compiled[name], atol=1e-4), name
