"""The vocabulary projection and its loss in chunks (lab_models/nn/vocab_loss.py, `--perf vocab_loss=chunked`): the same
loss, row losses and gradients as the plain projection, for every family, and the same training trajectory."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lab_models.families import FAMILY_NAMES, RNN_FAMILIES
from lab_models.messages import LabError
from lab_models.nn.vocab_loss import chunk_rows_for, chunked_vocab_loss
from lab_models.training.engine import EngineConfig, StepEvent, Trainer
from lab_models.training.performance import PerformanceConfig, set_chunked_vocab_loss
from tests.support.vocab import vocab
from tests.training.test_performance import batches, model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TRANSFORMERS = tuple(name for name in FAMILY_NAMES if name not in RNN_FAMILIES)


def leaves(n_rows: int, width: int, vocab_size: int, bias: bool):
    generator = torch.Generator().manual_seed(n_rows)
    x = torch.randn(n_rows, width, generator=generator, requires_grad=True)
    weight = torch.randn(vocab_size, width, generator=generator, requires_grad=True)
    b = torch.randn(vocab_size, generator=generator, requires_grad=True) if bias else None
    targets = torch.randint(0, vocab_size, (n_rows,), generator=generator)
    return x, weight, b, targets


@pytest.mark.parametrize("n_rows, chunk_rows, bias", [(37, 5, True), (37, 37, False), (8, 3, False), (1, 4, True)])
def test_chunks_give_the_plain_loss_and_gradients(n_rows, chunk_rows, bias):
    x, weight, b, targets = leaves(n_rows, 16, 101, bias)
    mean, nll = chunked_vocab_loss(x, weight, b, targets, chunk_rows=chunk_rows)
    (2.5 * mean).backward()  # a weighted part, as `combine` sums them
    chunked = [t.grad.clone() for t in (x, weight, b) if t is not None]
    for t in (x, weight, b):
        if t is not None:
            t.grad = None
    plain = F.cross_entropy(F.linear(x, weight, b), targets, reduction="none")
    (2.5 * plain.mean()).backward()
    assert torch.allclose(mean, plain.mean(), atol=1e-6) and torch.allclose(nll, plain, atol=1e-5)
    assert not nll.requires_grad
    for got, want in zip(chunked, [t.grad for t in (x, weight, b) if t is not None]):
        assert torch.allclose(got, want, atol=1e-6)


def test_no_rows_give_a_connected_zero():
    x, weight, _, _ = leaves(4, 8, 11, False)
    mean, nll = chunked_vocab_loss(x[:0], weight, None, torch.zeros(0, dtype=torch.long))
    mean.backward()
    assert mean.item() == 0.0 and nll.shape == (0,) and torch.equal(weight.grad, torch.zeros_like(weight))


def test_bf16_autocast_stays_close_to_the_plain_bf16_loss():
    x, weight, b, targets = leaves(64, 32, 257, True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mean, _ = chunked_vocab_loss(x, weight, b, targets, chunk_rows=16)
        plain = F.cross_entropy(F.linear(x, weight, b).float(), targets)
    mean.backward()
    assert weight.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert abs(mean.item() - plain.item()) < 1e-3 * plain.item()


def test_chunk_size_bounds_the_logits_kept():
    assert chunk_rows_for(50257) * 50257 <= 2**26 < (chunk_rows_for(50257) + 1) * 50257


@pytest.mark.parametrize("family", TRANSFORMERS)
def test_every_family_computes_the_same_loss_and_gradients_in_chunks(family, monkeypatch):
    from lab_models.objectives import losses

    calls = []
    monkeypatch.setattr(losses, "chunked_vocab_loss", lambda *args: calls.append(1) or chunked_vocab_loss(*args))
    info = vocab()
    batch = batches(family, info).train_batch(torch.Generator().manual_seed(0))
    results = []
    for chunked in (False, True):
        m = model(family, info, dropout=0.0)
        set_chunked_vocab_loss(m, chunked)
        torch.manual_seed(1)
        out = m.loss(batch)
        out.total.backward()
        grads = {name: p.grad.clone() for name, p in m.named_parameters() if p.grad is not None}
        results.append((out, grads))
    (plain, plain_grads), (chunked, chunked_grads) = results
    assert bool(calls) == (family != "electra")  # ELECTRA's generator keeps its logits: it samples from them
    assert torch.allclose(plain.total, chunked.total, atol=1e-5)
    assert torch.allclose(plain.target_nll, chunked.target_nll, atol=1e-5)
    assert plain_grads.keys() == chunked_grads.keys()
    for name in plain_grads:
        assert torch.allclose(plain_grads[name], chunked_grads[name], atol=1e-5), name


@pytest.mark.slow
def test_a_run_trains_the_same_with_the_setting():
    def losses(perf):
        info = vocab()
        trainer = Trainer(model("gpt2", info), batches("gpt2", info),
                          EngineConfig(steps=5, lr=1e-3, log_every=1, eval_every=10**6), device="cpu",
                          performance=perf)
        return [event.loss for event in trainer.run() if isinstance(event, StepEvent)]

    plain, chunked = losses(PerformanceConfig()), losses(PerformanceConfig(vocab_loss="chunked"))
    assert chunked == pytest.approx(plain, rel=1e-5) and plain[0] != plain[-1]
    with pytest.raises(LabError, match="unknown vocab_loss 'fused'"):
        PerformanceConfig(vocab_loss="fused")
