"""Tests for the training engine and its data, vocabulary and run-folder helpers: the schedule, bits per byte on a
hand example, byte lengths and word starts per tokenizer kind, the exact resume trajectory, checkpoint atomicity,
and metrics that survive a half-written line. Small real models on the CPU, one thread; a few seconds in all."""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from lab_models.training import runs
from lab_models.batch import Batch
from lab_models.training.batches import PackedBatches
from lab_models.text.streams import encode_stream
from lab_models.training.engine import (EngineConfig, EvalEvent, StepEvent, StopEvent, Trainer, bits_per_byte,
                                        derive_seed, learning_rate, parameter_groups)
from lab_models.models.family import build_model, family_model_config
from lab_models.training.performance import PerformanceConfig
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.text.tokenization import train_tokenizer
from lab_models.text.vocab import LAB_SPECIAL_TOKENS, EndMarkedVocabInfo, prepare_tokenizer, token_byte_lengths


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


WORDS = ("the cat dog bird sat ran flew over under near a big small red blue green house tree river quickly slowly "
         "and then later because jumped walked sang").split()


def texts(n: int = 160, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))) + "." for _ in range(n)]


@pytest.fixture(scope="module")
def wordpiece():
    return prepare_tokenizer(train_tokenizer("wordpiece", texts(), vocab_size=120))


def make_trainer(tokenizer, info, family="bert", steps=20, precision="auto", **engine) -> Trainer:
    """A 1-layer model of `family` with dropout on, fed by packed batches of the toy corpus."""
    module = objective_module(family)
    settings = module.Settings()
    batches = PackedBatches(encode_stream(tokenizer, texts(), info.eos_id),
                            encode_stream(tokenizer, texts(12, seed=1), info.eos_id), seq_len=24, batch_size=4,
                            objective=module, batch_config=BatchConfig(settings, info), eval_batches=2)
    config = family_model_config(family, "tiny", info.size, settings=settings, d_model=32, n_layers=1, n_heads=2,
                                 d_ff=64, dropout=0.1)
    model = build_model(family, config, settings, info, seed=0)
    options = dict(steps=steps, lr=3e-3, warmup_steps=3, eval_every=10, seed=7) | engine
    return Trainer(model, batches, EngineConfig(**options), byte_lengths=token_byte_lengths(tokenizer),
                   performance=PerformanceConfig(precision=precision))


def train_losses(trainer: Trainer, stop_at: int | None = None) -> list[float]:
    losses = []
    for event in trainer.run(should_stop=lambda: stop_at is not None and trainer.step >= stop_at):
        if isinstance(event, StepEvent):
            losses.append(event.loss)
    return losses


# ------------------------------------------------------------------------------------------------ schedule
def test_learning_rate_warmup_then_cosine_or_constant():
    cfg = EngineConfig(steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert learning_rate(1, cfg) == pytest.approx(0.1)
    assert learning_rate(10, cfg) == pytest.approx(1.0)
    assert learning_rate(60, cfg) == pytest.approx(0.55)  # half way down the cosine: (1 + 0.1) / 2
    assert learning_rate(110, cfg) == pytest.approx(0.1)
    const = EngineConfig(steps=110, lr=1.0, warmup_steps=10, schedule="constant")
    assert [learning_rate(s, const) for s in (5, 10, 50, 110)] == pytest.approx([0.5, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="schedule"):
        EngineConfig(steps=10, schedule="linear")
    with pytest.raises(ValueError, match="steps"):
        EngineConfig(steps=0)


def test_weight_decay_only_on_matrices(wordpiece):
    trainer = make_trainer(*wordpiece)
    decay, no_decay = parameter_groups(trainer.model, 0.01)
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.01
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    assert any("norm" in names[id(p)] for p in no_decay["params"])  # LayerNorm gains are not decayed
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(trainer.model.parameters()))


def test_seeds_are_stable_and_distinct():
    assert derive_seed(0, "batch", 3, 0) == derive_seed(0, "batch", 3, 0)
    assert len({derive_seed(0, "batch", s, r) for s in range(50) for r in range(4)}) == 200


# ------------------------------------------------------------------------------------------------ bits per byte
@dataclass
class _Out:
    total: torch.Tensor
    parts: dict
    target_ids: torch.Tensor
    target_nll: torch.Tensor


class _FixedLossModel(torch.nn.Module):
    """Scores every batch the same: targets [5, 6, 7] with NLLs [ln 2, 2 ln 2, 3 ln 2] (1, 2 and 3 bits)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def loss(self, batch):
        nll = torch.tensor([1.0, 2.0, 3.0]) * math.log(2)
        total = nll.mean() + 0 * self.w
        return _Out(total, {"lm": nll.mean()}, torch.tensor([5, 6, 7]), nll)


class _Rows:
    def train_batch(self, generator):
        return Batch(input_ids=torch.zeros(1, 4, dtype=torch.long), attention={}, position_ids=torch.zeros(1, 4),
                     targets=torch.zeros(1, 4, dtype=torch.long))

    def validation_batches(self, generators):
        return [self.train_batch(generators(i)) for i in range(2)]


def test_bits_per_byte_on_a_hand_example():
    assert bits_per_byte(3 * math.log(2), 4) == pytest.approx(0.75)
    byte_lengths = torch.zeros(10, dtype=torch.long)
    byte_lengths[5], byte_lengths[6], byte_lengths[7] = 1, 2, 3  # 6 bytes per batch
    trainer = Trainer(_FixedLossModel(), _Rows(), EngineConfig(steps=1), byte_lengths=byte_lengths)
    result = trainer.evaluate()
    # two batches, each 1 + 2 + 3 = 6 bits over 6 bytes
    assert result.bits_per_byte == pytest.approx(12 / 12)
    assert (result.targets, result.bytes) == (6, 12)
    assert result.nll_per_token == pytest.approx(2 * math.log(2))
    assert result.perplexity == pytest.approx(4.0)
    assert result.loss == pytest.approx(2 * math.log(2)) and result.losses == {"lm": pytest.approx(2 * math.log(2))}


# ------------------------------------------------------------------------------------------------ vocabulary
def test_prepare_tokenizer_adds_the_lab_specials_once(wordpiece):
    tokenizer, info = wordpiece
    vocab = tokenizer.get_vocab()
    assert all(token in vocab for token in LAB_SPECIAL_TOKENS)
    again, info_again = prepare_tokenizer(tokenizer)
    assert again.get_vocab_size() == tokenizer.get_vocab_size() and info_again == info
    specials = {vocab[t] for t in LAB_SPECIAL_TOKENS} | {vocab["[UNK]"]}
    assert not specials & set(info.random_ids)
    assert len(info.random_ids) == info.size - len(specials)
    ids = torch.tensor(tokenizer.encode("the cat jumped quickly").ids)
    tokens = [tokenizer.id_to_token(i) for i in ids.tolist()]
    assert info.starts_word(ids).tolist() == [not t.startswith("##") for t in tokens]


def test_gpt1_bpe_word_starts_follow_the_end_of_word_mark():
    tokenizer, info = prepare_tokenizer(train_tokenizer("bpe", texts(), vocab_size=70))
    assert isinstance(info, EndMarkedVocabInfo)
    ids = torch.tensor(tokenizer.encode("quickly jumped").ids)
    tokens = [tokenizer.id_to_token(i) for i in ids.tolist()]
    expected = [True] + [previous.endswith("</w>") for previous in tokens[:-1]]
    assert info.starts_word(ids).tolist() == expected
    assert sum(expected) == 2  # two words


def _hand_tokenizer(vocab: list[str], kind: str) -> Tokenizer:
    ids = {token: i for i, token in enumerate(vocab)}
    if kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
        tokenizer.add_special_tokens(["[PAD]", "[UNK]"])
    else:
        tokenizer = Tokenizer(models.BPE(ids, [], unk_token=None))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer


def test_token_byte_lengths_by_hand():
    wordpiece = _hand_tokenizer(["[PAD]", "[UNK]", "the", "##ing", ",", "猫", "é"], "wordpiece")
    # specials 0; "the" 3 bytes + the space before a word; "##ing" 3; "," and "猫" take no space; "é" is 2 bytes + 1
    assert token_byte_lengths(wordpiece).tolist() == [0, 0, 4, 3, 1, 3, 3]
    byte_level = _hand_tokenizer(["<|endoftext|>", "Ġthe", "the", "Ãł"], "byte_bpe")
    assert token_byte_lengths(byte_level).tolist() == [0, 4, 3, 2]  # "Ãł" is the two bytes of "à"


# ------------------------------------------------------------------------------------------------ determinism
@pytest.mark.slow  # trains three runs
def test_the_same_seed_gives_the_same_batches_and_losses(wordpiece):
    first = train_losses(make_trainer(*wordpiece, steps=6))
    second = train_losses(make_trainer(*wordpiece, steps=6))
    assert first == second and len(first) == 6
    assert train_losses(make_trainer(*wordpiece, steps=6, seed=8)) != first


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=pytest.mark.slow)])  # bf16 is emulated here
@pytest.mark.parametrize("family", ["bert", "electra"])
def test_resume_from_a_checkpoint_continues_the_exact_trajectory(wordpiece, tmp_path, family, precision):
    """20 steps straight == 10 steps, checkpoint (safetensors + JSON), a fresh process-like restore, 10 more; in
    fp32 and in bf16 autocast alike (bit-exact within one precision; emulated bf16 on a CPU without it)."""
    straight = train_losses(make_trainer(*wordpiece, family=family, precision=precision))
    assert len(straight) == 20

    first = make_trainer(*wordpiece, family=family, precision=precision)
    head = []
    events = list(first.run(should_stop=lambda: first.step >= 10))
    head = [e.loss for e in events if isinstance(e, StepEvent)]
    assert isinstance(events[-1], StopEvent) and events[-1].step == 10
    runs.save_checkpoint(tmp_path, model=first.model, optimizer=first.optimizer, state=first.state())

    second = make_trainer(*wordpiece, family=family, precision=precision)  # fresh weights: all from the checkpoint
    second.restore(runs.load_checkpoint(tmp_path, model=second.model, optimizer=second.optimizer))
    assert second.step == 10
    tail = train_losses(second)
    assert torch.allclose(torch.tensor(head + tail), torch.tensor(straight), rtol=0, atol=1e-6)
    assert straight[-1] < straight[0]  # and it learns


def test_evaluation_uses_fixed_batches(wordpiece):
    trainer = make_trainer(*wordpiece, steps=2)
    a, b = trainer.evaluate(), trainer.evaluate()
    assert a == b and a.bits_per_byte > 0 and math.isfinite(a.bits_per_byte)
    events = list(trainer.run())
    assert isinstance(events[-1], EvalEvent) and events[-1].step == 2


def test_nan_loss_fails_the_run(wordpiece):
    trainer = make_trainer(*wordpiece, steps=3)
    original = trainer.model.loss

    def broken(batch):
        out = original(batch)
        out.total = out.total * float("nan")
        return out

    trainer.model.loss = broken
    with pytest.raises(Exception, match="NaN"):
        list(trainer.run())


# ------------------------------------------------------------------------------------------------ checkpoints
def test_checkpoints_are_atomic(wordpiece, tmp_path, monkeypatch):
    trainer = make_trainer(*wordpiece, steps=2)
    list(trainer.run())
    runs.save_checkpoint(tmp_path, model=trainer.model, optimizer=trainer.optimizer, state=trainer.state())
    good = {k: v.clone() for k, v in trainer.model.state_dict().items()}

    # A write that dies half way (after the weights, before the optimizer) leaves the old checkpoint in charge and no
    # partial folder behind.
    trainer.step = 3
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(1.0)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(runs, "save_file", crash)
    with pytest.raises(OSError):
        runs.save_checkpoint(tmp_path, model=trainer.model, optimizer=trainer.optimizer, state=trainer.state())
    monkeypatch.undo()
    root = runs.checkpoint_dir(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == ["latest.json", "step-00000002"]

    # A kill -9 mid-write leaves a hidden staging folder: ignored when loading, swept by the next save.
    (root / ".writing-step-00000003-x").mkdir()
    (root / ".writing-step-00000003-x" / "model.safetensors").write_bytes(b"\x00" * 10)
    fresh = make_trainer(*wordpiece, steps=2)
    state = runs.load_checkpoint(tmp_path, model=fresh.model, optimizer=fresh.optimizer)
    assert state["step"] == 2
    assert all(torch.equal(fresh.model.state_dict()[k], v) for k, v in good.items())
    # latest.json lost (killed between the rename and its replacement): the highest complete folder is used.
    (root / "latest.json").unlink()
    assert runs.latest_checkpoint(tmp_path).name == "step-00000002"
    runs.save_checkpoint(tmp_path, model=trainer.model, optimizer=trainer.optimizer, state=trainer.state())
    assert sorted(p.name for p in root.iterdir()) == ["latest.json", "step-00000003"]
    assert json.loads((root / "latest.json").read_text())["step"] == 3
    # weights are safetensors and the optimizer state has no pickle
    folder = root / "step-00000003"
    assert sorted(p.name for p in folder.iterdir()) == ["model.safetensors", "optimizer.json",
                                                        "optimizer.safetensors", "state.json"]


def test_metrics_tolerate_a_half_written_line(tmp_path):
    runs.append_metrics(tmp_path, {"step": 1, "loss": 2.0})
    runs.append_metrics(tmp_path, {"step": 2, "loss": 1.5})
    with open(tmp_path / runs.METRICS_FILE, "a") as handle:
        handle.write('{"step": 3, "lo')
    assert [row["step"] for row in runs.read_metrics(tmp_path)] == [1, 2]
    assert runs.truncate_metrics(tmp_path, 1) == 1
    assert [row["step"] for row in runs.read_metrics(tmp_path)] == [1]


def test_status_and_run_listing(tmp_path):
    run_dir = tmp_path / "runs" / "bert-tiny-1"
    run_dir.mkdir(parents=True)
    runs.write_config(run_dir, {"family": "bert", "preset": "tiny", "corpus": "synthetic", "created": 5.0})
    runs.write_status(run_dir, "running", step=3, total_steps=10, pid=2**22 + 12345)  # no such process
    runs.append_metrics(run_dir, {"split": "train", "step": 3, "loss": 4.0})
    runs.append_metrics(run_dir, {"split": "val", "step": 3, "loss": 4.5, "bits_per_byte": 2.5})
    [row] = runs.list_runs(tmp_path)
    assert row["run_id"] == "bert-tiny-1" and row["family"] == "bert" and row["state"] == "interrupted"
    assert (row["step"], row["total_steps"], row["loss"], row["val_bits_per_byte"]) == (3, 10, 4.0, 2.5)
    runs.write_status(run_dir, "finished", step=10, total_steps=10)
    assert runs.read_status(run_dir)["state"] == "finished"
    with pytest.raises(ValueError):
        runs.write_status(run_dir, "done", step=1, total_steps=1)
