"""Tests for the precision a run computes in and the peak its MFU divides by: `precision=auto` picks bf16
autocast on a CPU only where it is native and the matmul probe confirms it; `precision=bf16` runs anywhere, with a
warning where it is emulated; the probe is cached per machine in the lab home; MFU has a peak on every device.

The emulated path is forced for real in a subprocess: `ONEDNN_MAX_CPU_ISA=AVX2` (oneDNN's own cap) and
`ATEN_CPU_CAPABILITY=avx2` keep torch's kernels off every AVX-512 and AMX instruction, as on a laptop CPU without
them, so the test runs the same on any x86 CI machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab_models.training import matmul_probe
from lab_models.training.batches import PackedBatches
from lab_models.training.engine import EngineConfig, StepEvent, Trainer
from lab_models.training.flops import device_peak
from lab_models.training.matmul_probe import MatmulPeaks, cached_matmul_peaks, native_bf16_features
from lab_models.training.performance import MIN_BF16_SPEEDUP, PerformanceConfig, choose_precision
from lab_models.models.family import build_model, family_model_config
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from tests.support.vocab import vocab

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def fake_peaks(fp32: float, bf16: float, calls: list | None = None):
    def peaks():
        if calls is not None:
            calls.append(1)
        return MatmulPeaks("cpu", "Test CPU", "key", 1024, fp32, bf16, {"fp32": 20, "bf16": 20}, 0.0)
    return peaks


# ------------------------------------------------------------------------------------------------ the choice


def test_auto_picks_bf16_only_where_the_cpu_is_native_and_the_probe_confirms_it():
    calls = []
    native = choose_precision("auto", CPU, fake_peaks(201e9, 441e9, calls), features=("avx512_bf16",))
    assert (native.precision, native.why, native.emulated) == ("bf16", "native_bf16", False)
    assert native.bf16_speedup == pytest.approx(441 / 201)
    assert "AVX-512 BF16" in native.reason and "2.2x fp32 (441 vs 201 GFLOP/s)" in native.reason
    slow = choose_precision("auto", CPU, fake_peaks(200e9, 200e9 * (MIN_BF16_SPEEDUP - 0.01)),
                            features=("amx_bf16",))
    assert (slow.precision, slow.why) == ("fp32", "bf16_not_faster")
    assert choose_precision("auto", CPU, None, features=("amx_bf16",)).why == "not_probed"
    assert len(calls) == 1
    small = choose_precision("auto", CPU, fake_peaks(201e9, 441e9, calls), features=("amx_bf16",),
                             flops_per_token=0.9e6)
    assert (small.precision, small.why) == ("fp32", "model_too_small") and "0.9 MFLOPs per token" in small.reason
    assert len(calls) == 1  # decided before the probe is asked
    big = choose_precision("auto", CPU, fake_peaks(201e9, 441e9), features=("amx_bf16",), flops_per_token=27e6)
    assert big.precision == "bf16"
    none = choose_precision("auto", CPU, fake_peaks(1, 1, calls), features=())
    assert (none.precision, none.why) == ("fp32", "no_native_bf16") and len(calls) == 1  # no probe needed


def test_bf16_is_accepted_on_any_cpu_and_flagged_where_emulated():
    emulated = choose_precision("bf16", CPU, fake_peaks(1, 1), features=())
    assert (emulated.precision, emulated.emulated) == ("bf16", True) and "emulates" in emulated.reason
    native = choose_precision("bf16", CPU, fake_peaks(1, 1), features=("avx512_bf16",))
    assert (native.precision, native.emulated) == ("bf16", False)
    for features in ((), ("amx_bf16",)):
        assert choose_precision("fp32", CPU, fake_peaks(1, 9), features=features).precision == "fp32"
    assert choose_precision("auto", torch.device("cuda"), None).precision == "bf16"  # CUDA unchanged
    assert choose_precision("auto", torch.device("mps"), None).precision == "fp32"
    with pytest.raises(ValueError, match="unknown precision"):
        choose_precision("fp16", CPU, None)


def test_native_bf16_follows_torch_and_the_onednn_cap(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": True, "amx_bf16": False})
    assert native_bf16_features() == ("avx512_bf16",)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert native_bf16_features() == ()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_amx")
    assert native_bf16_features() == ("avx512_bf16",)
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True})
    assert native_bf16_features() == ()


# ------------------------------------------------------------------------------------------------ the probe


def test_the_probe_measures_both_dtypes():
    peaks = matmul_probe.probe_matmul_peaks(CPU, seconds=0.01, size=64)
    assert peaks.fp32 > 0 and peaks.bf16 > 0 and peaks.size == 64
    assert min(peaks.repeats.values()) >= matmul_probe.PROBE_MIN_REPEATS
    assert peaks.flops("bf16") == peaks.bf16 and peaks.machine == matmul_probe.machine_key(CPU)
    assert "64 x 64 fp32 matmul probe on this CPU" in peaks.describe("fp32")


def test_the_probe_is_cached_per_machine_in_the_lab_home(tmp_path, monkeypatch):
    measured = []

    def probe(device, **_):
        measured.append(torch.get_num_threads())
        return MatmulPeaks(str(device), "Test CPU", matmul_probe.machine_key(device), 1024, 100e9 * len(measured),
                           300e9, {"fp32": 20, "bf16": 20}, 0.0)

    monkeypatch.setattr(matmul_probe, "probe_matmul_peaks", probe)
    first = cached_matmul_peaks(CPU, tmp_path)
    again = cached_matmul_peaks(CPU, tmp_path)
    assert first == again and len(measured) == 1  # read back from <home>/machine/matmul_probe.json
    saved = json.loads((tmp_path / "machine" / "matmul_probe.json").read_text())
    assert list(saved["machines"]) == [matmul_probe.machine_key(CPU)]
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)  # another thread count is another machine for the probe
    try:
        cached_matmul_peaks(CPU, tmp_path)
    finally:
        torch.set_num_threads(threads)
    assert len(measured) == 2 and len(json.loads((tmp_path / "machine" / "matmul_probe.json").read_text())[
        "machines"]) == 2
    assert cached_matmul_peaks(CPU, tmp_path, refresh=True).fp32 == 300e9 and len(measured) == 3
    (tmp_path / "machine" / "matmul_probe.json").write_text("{not json")  # a damaged cache is measured again
    assert cached_matmul_peaks(CPU, tmp_path).fp32 == 400e9 and len(measured) == 4


def test_mfu_has_a_peak_on_every_device():
    table = device_peak(torch.device("cuda"), "bf16", fake_peaks(1, 2), device_name="NVIDIA H100 80GB HBM3")
    assert (table.flops, table.kind) == (989e12, "table") and "data sheet for the H100" in table.source
    missing = device_peak(torch.device("cuda"), "bf16", fake_peaks(1e12, 2e12), device_name="NVIDIA T4")
    assert (missing.flops, missing.kind) == (2e12, "probe") and "bf16 matmul probe" in missing.source
    cpu = device_peak(CPU, "fp32", fake_peaks(201e9, 441e9))
    assert (cpu.flops, cpu.kind) == (201e9, "probe")
    assert device_peak(CPU, "fp32").kind == "unknown"


# ------------------------------------------------------------------------------------------------ training in bf16


def tiny_trainer(family: str, precision: str, steps: int, home: Path) -> Trainer:
    """The tiny preset's model on a learnable stream (a repeated 50-token phrase, so the loss can fall far)."""
    info = vocab()
    module = objective_module(family)
    phrase = torch.randint(40, info.size, (50,), generator=torch.Generator().manual_seed(4))
    stream = phrase.repeat(200)
    batches = PackedBatches(stream, stream[:1000], seq_len=64, batch_size=16, objective=module,
                            batch_config=BatchConfig(module.Settings(), info), eval_batches=1)
    model = build_model(family, family_model_config(family, "tiny", info.size, dropout=0.0), None, info, seed=0)
    return Trainer(model, batches, EngineConfig(steps=steps, lr=3e-3, warmup_steps=2, log_every=1, seed=1),
                   performance=PerformanceConfig(precision=precision), home=home)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_bf16_training_lowers_the_loss_like_fp32(family, tmp_path):
    """The tiny preset, the same seed and batches: bf16 autocast learns as fp32 does (the direction; the benchmark
    checks the 2% at 300 steps), and its weights stay fp32 (autocast's master weights)."""
    curves = {}
    for precision in ("fp32", "bf16"):
        trainer = tiny_trainer(family, precision, steps=40, home=tmp_path)
        assert trainer.precision.precision == precision
        curves[precision] = [e.loss for e in trainer.run() if isinstance(e, StepEvent)]
        assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
        assert all(s.dtype == torch.float32 for state in trainer.optimizer.state.values() for s in state.values()
                   if torch.is_tensor(s) and s.is_floating_point())
    fp32, bf16 = curves["fp32"], curves["bf16"]
    assert fp32[0] == pytest.approx(bf16[0], rel=0.02)  # the same start
    assert fp32[-1] < 0.8 * fp32[0] and bf16[-1] < 0.8 * bf16[0]  # both learn ...
    assert bf16[-1] == pytest.approx(fp32[-1], rel=0.1)  # ... about as far
    assert bf16 != fp32  # and bf16 really ran (rounded differently)


@pytest.mark.slow
def test_emulated_bf16_is_correct_on_a_cpu_without_native_bf16(tmp_path):
    """A CPU without AVX-512 BF16 or AMX, forced for real (ONEDNN_MAX_CPU_ISA=AVX2): auto trains in fp32 and says
    why; precision=bf16 trains in emulated bf16, warns, and learns like fp32."""
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO), "PRETRAINING_LAB_HOME": str(tmp_path / "home")}
    results = {}
    for precision in ("auto", "bf16"):
        out = tmp_path / precision
        done = subprocess.run([sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--out", str(out),
                               "--steps", "30", "--perf", f"precision={precision}", "--model", "dropout=0.0"],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        config = json.loads((out / "config.json").read_text())
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if r.get("split") == "train"]
        results[precision] = (config["performance_used"], train, done.stderr, (out / "train.log").read_text())
    used, train, stderr, log = results["auto"]
    assert used["precision"]["precision"] == "fp32" and used["precision"]["why"] == "no_native_bf16"
    assert "precision: fp32: this CPU has no native bf16" in log
    assert "emulates" not in stderr and 0 < train[-1]["mfu"] < 1
    used, emulated, stderr, log = results["bf16"]
    assert used["precision"]["precision"] == "bf16" and used["precision"]["emulated"] is True
    assert "torch emulates it" in stderr and "torch emulates it" in log  # the warning, on stderr and in train.log
    assert emulated[-1]["loss"] < 0.95 * emulated[0]["loss"]  # it learns (6.33 -> 5.77 nats in 30 steps)
    assert emulated[-1]["loss"] == pytest.approx(train[-1]["loss"], rel=0.05)


def test_auto_trains_small_models_in_fp32_and_larger_ones_in_bf16_on_a_native_cpu(tmp_path, monkeypatch):
    """Through the Trainer, on a CPU said to be native (so the test runs anywhere): the tiny preset's products are too
    small to pay for autocast's casts (fp32), a 256-wide model's are not (bf16); the MFU peak follows the precision."""
    from lab_models.training import engine, performance

    monkeypatch.setattr(performance, "native_bf16_features", lambda: ("amx_bf16",))
    monkeypatch.setattr(engine, "cached_matmul_peaks", lambda device, home: fake_peaks(200e9, 600e9)())
    info = vocab()
    module = objective_module("gpt")
    stream = torch.randint(40, info.size, (5000,), generator=torch.Generator().manual_seed(4))
    chosen = {}
    for width in (64, 256):
        batches = PackedBatches(stream, stream[:1000], seq_len=64, batch_size=4, objective=module,
                                batch_config=BatchConfig(module.Settings(), info), eval_batches=1)
        config = family_model_config("gpt", "tiny", info.size, d_model=width, n_heads=4, d_ff=4 * width)
        trainer = Trainer(build_model("gpt", config, None, info, seed=0), batches, EngineConfig(steps=1),
                          home=tmp_path)
        assert trainer.precision.why == "not_probed"  # provisional until the model is measured
        trainer.measure_model()
        chosen[width] = (trainer.precision.precision, trainer.precision.why, trainer.peak_flops)
        assert trainer.performance_used()["precision"]["precision"] == trainer.precision.precision
    assert chosen[64] == ("fp32", "model_too_small", 200e9)
    assert chosen[256] == ("bf16", "native_bf16", 600e9)


def test_a_resumed_run_keeps_the_precision_it_started_in():
    from lab_models.training.cli import keep_resolved_precision

    saved = {"device_used": "cpu", "performance_used": {"precision": {"precision": "bf16", "requested": "auto"}}}
    assert keep_resolved_precision({"grad_accum": 2}, saved, CPU) == {"grad_accum": 2, "precision": "bf16"}
    assert keep_resolved_precision({"precision": "fp32"}, saved, CPU) == {"precision": "fp32"}  # asked explicitly
    assert keep_resolved_precision({}, saved, torch.device("cuda")) == {}  # another device decides afresh
    assert keep_resolved_precision({}, {"device_used": "cpu"}, CPU) == {}  # a run from before performance_used


@pytest.mark.parametrize("resume_perf, expected", [([], "bf16"), (["precision=auto"], "auto"),
                                                   (["precision=fp32"], "fp32")])
def test_resume_keeps_the_started_precision_unless_the_resume_names_one(tmp_path, lab_home_dir, resume_perf, expected):
    from lab_models.training.cli import build_parser, config_from_args, config_from_run

    out = tmp_path / "run"
    out.mkdir()
    started, _ = config_from_args(build_parser().parse_args(["--family", "gpt", "--out", str(out), "--steps", "4",
                                                             "--device", "cpu", "--home", str(lab_home_dir)]))
    (out / "config.json").write_text(json.dumps({
        "train": started.to_dict(), "device_used": "cpu",
        "performance_used": {"precision": {"precision": "bf16", "requested": "auto", "why": "native_bf16"}}}))
    perf = [arg for item in resume_perf for arg in ("--perf", item)]
    args = build_parser().parse_args(["--resume", "--out", str(out), "--steps", "8", *perf])
    config, _ = config_from_run(args)
    assert config.steps == 8
    assert config.performance_config().precision == expected
