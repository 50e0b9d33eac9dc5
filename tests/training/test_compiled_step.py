"""The training step without waits for the device: masks prepared on the host, and the whole forward pass and loss
compiled as one graph (`--perf compile=true compile_scope=model`, lab_models/training/performance.py).

On the CPU the graphs are traced with dynamo's `aot_eager` backend (the same graphs as inductor's, without its minute
of C++ build), so the losses must equal the eager ones exactly; `torch._dynamo.explain` counts the graph breaks, each
of which is a read-back from the device on a GPU."""
from __future__ import annotations

import pytest
import torch

from lab_models.families import FAMILY_NAMES, RNN_FAMILIES
from lab_models.messages import LabError
from lab_models.batch import TARGET_ROWS
from lab_models.nn.attention import AttentionMask, prepare_mask
from lab_models.training import performance
from lab_models.training.engine import EngineConfig, StepEvent, Trainer, host_ready
from lab_models.training.performance import WHOLE_MODEL_DYNAMO, PerformanceConfig
from tests.support.vocab import vocab
from tests.training.test_performance import batches, model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TRANSFORMERS = tuple(name for name in FAMILY_NAMES if name not in RNN_FAMILIES)


def host_prepared(batch):
    return host_ready(batch)  # as the engine builds its batches


@pytest.mark.parametrize("family", TRANSFORMERS)
def test_masks_prepared_on_the_host_give_the_same_loss(family):
    info = vocab()
    m = model(family, info)
    batch = batches(family, info).train_batch(torch.Generator().manual_seed(0))
    prepared = host_prepared(batch)
    two_streams = family in ("xlnet", "mpnet")  # content and query: joined before they are prepared
    assert any(isinstance(mask, AttentionMask) for mask in prepared.attention.values()) != two_streams
    assert torch.equal(prepared.targets.reshape(-1)[prepared.extras[TARGET_ROWS]],
                       batch.targets[batch.targets != -100])
    torch.manual_seed(1)
    raw_loss = m.loss(batch)
    torch.manual_seed(1)
    prepared_loss = m.loss(prepared)
    assert torch.equal(raw_loss.total, prepared_loss.total)
    assert torch.equal(raw_loss.target_nll, prepared_loss.target_nll)


def test_a_prepared_mask_moves_with_its_batch_and_keeps_what_was_read():
    info = vocab()
    batch = host_prepared(batches("gpt2", info).train_batch(torch.Generator().manual_seed(0)))
    moved = batch.to("meta")
    mask = moved.attention["self"]
    assert isinstance(mask, AttentionMask) and mask.allowed.device.type == "meta"
    assert mask.pattern == "causal" and mask.empty_rows is None
    # XLNet's content and query streams are cut and joined before they are prepared: they stay tensors
    xlnet = host_prepared(batches("xlnet", info).train_batch(torch.Generator().manual_seed(0)))
    assert all(isinstance(mask, torch.Tensor) for mask in xlnet.attention.values())


def test_a_host_prepared_mask_gets_its_flex_block_mask_where_it_runs():
    allowed = torch.tensor([[[True, False, True], [False, True, True], [True, True, False]]])  # (1, 3, 3)
    prepared = prepare_mask(allowed)
    assert prepared.pattern is None and prepared.block_mask is None
    flex = prepare_mask(prepared, flex=True)
    assert flex.block_mask is not None and torch.equal(flex.allowed, prepared.allowed)
    causal = prepare_mask(torch.ones(1, 3, 3).tril().bool())
    assert prepare_mask(causal, flex=True).block_mask is None  # SDPA's causal kernel needs no block mask


# where a family's training forward must still break the graph, and why: ELECTRA hashes its batch on the host to seed
# its generator's samples (content_seed) and samples through an opaque generator; XLNet and MPNet join their two
# streams' masks in the backbone and read the joined mask back for its pattern
EXPECTED_BREAKS = {"electra": {"content_seed", "sample_replacements", "discriminator_targets"},
                   "xlnet": {"_inspect"}, "mpnet": {"_inspect"}}


@pytest.mark.parametrize("family", TRANSFORMERS)
def test_the_training_forward_traces_as_one_graph_or_breaks_where_expected(family):
    info = vocab()
    m = model(family, info)
    batch = host_prepared(batches(family, info).train_batch(torch.Generator().manual_seed(0)))
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**WHOLE_MODEL_DYNAMO):
        explained = torch._dynamo.explain(m.loss)(batch)
    torch._dynamo.reset()
    places = {next((frame.name for frame in reversed(reason.user_stack) if "lab_models" in frame.filename), "?")
              for reason in explained.break_reasons}
    assert places == EXPECTED_BREAKS.get(family, set()), [reason.reason.splitlines()[0]
                                                          for reason in explained.break_reasons]
    assert (explained.graph_count == 1) == (family not in EXPECTED_BREAKS)


def losses(family: str, perf: PerformanceConfig, steps: int = 4) -> tuple[list[float], Trainer]:
    info = vocab()
    trainer = Trainer(model(family, info), batches(family, info),
                      EngineConfig(steps=steps, lr=1e-3, log_every=1, eval_every=10**6), device="cpu",
                      performance=perf)
    return [event.loss for event in trainer.run() if isinstance(event, StepEvent)], trainer


@pytest.mark.slow
@pytest.mark.parametrize("family", ("gpt2", "bert", "t5"))
def test_the_whole_model_compiled_trains_exactly_as_eager(family, monkeypatch):
    monkeypatch.setattr(performance, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    eager, _ = losses(family, PerformanceConfig())
    compiled, trainer = losses(family, PerformanceConfig(compile=True, compile_scope="model"))
    torch._dynamo.reset()
    assert trainer.compile_s is not None and trainer.compile_s > 0
    assert compiled == pytest.approx(eager, rel=1e-6, abs=1e-6)
    assert eager[0] != eager[-1]  # it trained


def test_compile_scope_is_checked_and_parsed():
    with pytest.raises(LabError, match="unknown compile scope 'graph'"):
        PerformanceConfig(compile_scope="graph")
    assert performance.parse_performance_overrides(["compile=true", "compile_scope=model"]) == {
        "compile": True, "compile_scope": "model"}
    assert PerformanceConfig.from_dict({"compile": True}).compile_scope == "blocks"  # older runs' config.json


@pytest.mark.slow
def test_the_range_checks_stop_after_the_first_batch_and_come_back_after_the_run():
    info = vocab()
    trainer = Trainer(model("bert", info), batches("bert", info),
                      EngineConfig(steps=3, lr=1e-3, log_every=1, eval_every=10**6), device="cpu")
    backbone = trainer.model.backbone
    seen = []
    for event in trainer.run():
        if isinstance(event, StepEvent):
            seen.append(backbone.trust_input_values)
    assert seen == [True, True, True] and backbone.trust_input_values is False
    batch = batches("bert", info).train_batch(torch.Generator().manual_seed(0))
    batch.input_ids[0, 0] = info.size  # an id the vocabulary does not have
    with pytest.raises(LabError, match="holds ids in"):
        trainer.model.loss(batch)


@pytest.mark.parametrize("family", ("gpt2", "bert"))  # T5 still reads back whether its rows share positions
def test_an_eager_step_reads_nothing_back_once_the_inputs_are_trusted(family):
    """No operator whose result the host must read (a range check's aminmax, a boolean index's nonzero) runs in the
    forward and backward pass of the engine's batch: on a GPU each would be a wait for the device."""
    from torch.profiler import ProfilerActivity, profile

    info = vocab()
    m = model(family, info)
    batch = host_prepared(batches(family, info).train_batch(torch.Generator().manual_seed(0)))
    for module in m.modules():
        if hasattr(module, "trust_input_values"):
            module.trust_input_values = True
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        m.loss(batch).total.backward()
    names = {event.name for event in prof.events()}
    assert not names & {"aten::aminmax", "aten::nonzero", "aten::_local_scalar_dense", "aten::item"}, names
    assert "aten::mm" in names or "aten::addmm" in names  # the profile saw the step
