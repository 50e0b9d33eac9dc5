"""The device's matmul speed, measured: whether a CPU computes bf16 natively, a short matmul probe of its fp32 and
bf16 peaks, and the cache that keeps the probe's answer per machine in the lab home.

Two readers use it:
- `precision=auto` (lab_models/training/performance.py) picks bf16 autocast on a CPU only where torch reports a native
  bf16 instruction set (AVX-512 BF16 or AMX-BF16: recent Xeons and EPYCs) *and* the probe confirms that a bf16 matmul
  beats an fp32 one there. Elsewhere bf16 is emulated (converted to fp32 around every product), correct but slower.
- MFU (lab_models/training/flops.py) divides by the device's peak: from NVIDIA's data sheets where the GPU is in the
  table, from this probe everywhere else (every CPU, Apple GPUs, GPUs missing from the table).

The probe: a `size` x `size` matrix product (1024 on a CPU, the size of docs/speed.md's CPU table; 4096 on a GPU),
repeated for `PROBE_SECONDS` and at least `PROBE_MIN_REPEATS` times per dtype (at most `PROBE_MAX_SECONDS`) after one
untimed warm-up product (AMX configures its tiles on first use), and the best repeat is the peak: 2 size^3 FLOPs over
its seconds. The best, not the mean, because a machine shared with other jobs slows some repeats and never speeds one
up. Its answer is cached in `<lab home>/machine/matmul_probe.json` under the machine's key (the device's name, its
instruction sets, the torch version and the thread count: the things that change the answer), so each machine probes
once; a corrupt or foreign cache is measured again and rewritten (atomically).

Deviation, stated: a peak measured by one matmul is what this torch reaches on this machine, not the vendor's
theoretical peak (which no library reaches on a CPU). MFU against it says how much of the reachable matmul speed the
model's step uses, which is the comparable figure between families and settings on one machine.

`ONEDNN_MAX_CPU_ISA` (oneDNN's own setting) caps the instruction sets torch's CPU matmuls may use; a cap below
AVX512_CORE_BF16 (e.g. AVX512_CORE, AVX2) turns native bf16 off, and `native_bf16_features` says so too.

>>> describe_features(("avx512_bf16", "amx_bf16"))
'AVX-512 BF16, AMX-BF16'
>>> machine_key_for("Intel Xeon", ("avx512_bf16",), threads=2, torch_version="2.13.0")
'Intel Xeon|avx512_bf16|threads=2|torch=2.13.0'
>>> round(matmul_flops(1024) / 1e9, 3)
2.147
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_json

logger = logging.getLogger(__name__)

PROBE_SECONDS = 0.5  # per dtype: the whole probe takes about one second on a quiet machine
PROBE_MIN_REPEATS = 20  # ... and at least this many products per dtype, so that a busy machine (where one fp32
# product takes 50 ms instead of 10) still offers the best-of some quiet moments
PROBE_MAX_SECONDS = 3.0  # per dtype, whatever the repeats (an emulated bf16 product can take seconds)
PROBE_SIZES = {"cpu": 1024, "cuda": 4096, "mps": 2048}
DEVICE_WORDS = {"cpu": "CPU", "cuda": "GPU", "mps": "Apple GPU"}
PROBE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
CACHE_FILE = Path("machine") / "matmul_probe.json"  # inside the lab home
CACHE_VERSION = 1
# torch.cpu.get_capabilities()'s names of the instruction sets that compute bf16 products natively, and their titles
NATIVE_BF16_FEATURES = {"avx512_bf16": "AVX-512 BF16", "amx_bf16": "AMX-BF16"}
# oneDNN's ISA caps that still allow bf16 instructions (ONEDNN_MAX_CPU_ISA); any other value caps them off
ONEDNN_BF16_ISAS = ("ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
                    "AVX512_CORE_AMX_FP16", "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
                    "AVX10_2_512_AMX_2")


@dataclass(frozen=True)
class MatmulPeaks:
    """The best fp32 and bf16 matmul speed (FLOPs/s) the probe measured on one device of one machine."""

    device: str  # "cpu", "cuda:0", "mps"
    device_name: str  # "Intel Xeon", "NVIDIA H100 80GB HBM3", ...
    machine: str  # the cache key (machine_key_for)
    size: int  # the probe's square matrices
    fp32: float  # FLOPs/s
    bf16: float
    repeats: dict  # dtype -> how many products were timed
    measured_at: float  # time.time()

    def flops(self, precision: str) -> float:
        if precision not in PROBE_DTYPES:
            raise LabError("unknown precision {precision!r}: choose one of {probe_dtypes}",
                           precision=precision, probe_dtypes=', '.join(PROBE_DTYPES))
        return self.fp32 if precision == "fp32" else self.bf16

    @property
    def bf16_speedup(self) -> float:
        """bf16's matmul speed over fp32's (2.2 on an EPYC with AVX-512 BF16; below 1 where bf16 is emulated)."""
        return self.bf16 / self.fp32 if self.fp32 > 0 else 0.0

    def describe(self, precision: str) -> Message:
        """How the peak was obtained, for the run's log and the Train tab:
        'a 1024 x 1024 bf16 matmul probe on this CPU (441 GFLOP/s, best of 93)'."""
        where = DEVICE_WORDS.get(self.device.split(":")[0], self.device)
        return Message("a {size} x {size} {precision} matmul probe on this {where} ({gflops:,.0f} GFLOP/s, best of "
                       "{repeats})", size=self.size, precision=precision, where=where,
                       gflops=self.flops(precision) / 1e9, repeats=self.repeats.get(precision, 0))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "MatmulPeaks":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def matmul_flops(size: int) -> float:
    """FLOPs of one size x size by size x size product: a multiply and an add per term."""
    return 2.0 * size ** 3


def describe_features(features) -> str:
    return ", ".join(NATIVE_BF16_FEATURES.get(f, f) for f in features)


def native_bf16_features() -> tuple[str, ...]:
    """The CPU's instruction sets that compute bf16 natively, as torch reports them (`torch.cpu.get_capabilities`):
    ("avx512_bf16", "amx_bf16") on a Sapphire Rapids Xeon, () on a CPU that emulates bf16 or where ONEDNN_MAX_CPU_ISA
    caps the instruction sets below bf16's."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap and cap not in ONEDNN_BF16_ISAS:
        return ()
    get = getattr(torch.cpu, "get_capabilities", None)
    try:
        capabilities = get() if callable(get) else {}
    except Exception:  # noqa: BLE001 - an unknown CPU: no native bf16 assumed
        logger.debug("torch.cpu.get_capabilities failed", exc_info=True)
        capabilities = {}
    return tuple(name for name in NATIVE_BF16_FEATURES if capabilities.get(name))


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    get = getattr(torch.cpu, "get_capabilities", None)
    try:
        name = (get() if callable(get) else {}).get("cpu_name")
    except Exception:  # noqa: BLE001
        name = None
    return str(name or "CPU")


def machine_key_for(name: str, features, *, threads: int, torch_version: str) -> str:
    return f"{name}|{','.join(features) or 'no-bf16'}|threads={threads}|torch={torch_version}"


def machine_key(device: torch.device) -> str:
    """What the probe's answer depends on: the device, its bf16 instruction sets (CPU), threads and torch."""
    features = native_bf16_features() if device.type == "cpu" else (device.type,)
    threads = torch.get_num_threads() if device.type == "cpu" else 0
    return machine_key_for(device_name(device), features, threads=threads, torch_version=torch.__version__)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def best_matmul_flops(device: torch.device, dtype: torch.dtype, *, size: int, seconds: float,
                      generator: torch.Generator) -> tuple[float, int]:
    """(the best FLOPs/s of a size x size product in `dtype` on `device` over about `seconds`, repeats timed)."""
    a = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    started = time.perf_counter()
    torch.mm(a, b)  # warm-up: kernel selection, AMX tile configuration, CUDA context
    _synchronize(device)
    first = time.perf_counter() - started
    if first > PROBE_MAX_SECONDS / 4:  # an emulated dtype (seconds a product): its one timing is answer enough
        return matmul_flops(size) / first, 1
    best, repeats = float("inf"), 0
    began = time.perf_counter()
    while (repeats < PROBE_MIN_REPEATS or time.perf_counter() - began < seconds) and (
            repeats < 3 or time.perf_counter() - began < max(seconds, PROBE_MAX_SECONDS)):
        started = time.perf_counter()
        torch.mm(a, b)
        _synchronize(device)
        best = min(best, time.perf_counter() - started)
        repeats += 1
    return matmul_flops(size) / max(best, 1e-12), repeats


def probe_matmul_peaks(device: torch.device, *, seconds: float = PROBE_SECONDS, size: int | None = None,
                       generator: torch.Generator | None = None) -> MatmulPeaks:
    """Measure the device's fp32 and bf16 matmul peaks now (about 2 x `seconds`)."""
    size = size or PROBE_SIZES.get(device.type, 1024)
    generator = generator or torch.Generator().manual_seed(0)
    speeds, repeats = {}, {}
    with torch.autocast(device_type=device.type, enabled=False):  # the dtypes as given, whatever the caller's context
        for name, dtype in PROBE_DTYPES.items():
            speeds[name], repeats[name] = best_matmul_flops(device, dtype, size=size, seconds=seconds,
                                                            generator=generator)
    peaks = MatmulPeaks(device=str(device), device_name=device_name(device), machine=machine_key(device), size=size,
                        fp32=speeds["fp32"], bf16=speeds["bf16"], repeats=repeats, measured_at=time.time())
    logger.info("matmul probe on %s (%s): fp32 %.0f GFLOP/s, bf16 %.0f GFLOP/s (%.2fx)", device, peaks.device_name,
                peaks.fp32 / 1e9, peaks.bf16 / 1e9, peaks.bf16_speedup)
    return peaks


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("machines"),
                                                                                             dict):
        return {}
    return data


def cached_matmul_peaks(device: torch.device, home: str | os.PathLike, *, refresh: bool = False) -> MatmulPeaks:
    """The device's matmul peaks from the lab home's cache, probed (and cached) when this machine has none yet or
    `refresh` is true. A cache that cannot be written (a read-only home) costs a probe per call, nothing else."""
    path = Path(home) / CACHE_FILE
    key = machine_key(device)
    data = _read_cache(path)
    entry = data.get("machines", {}).get(key)
    if entry is not None and not refresh:
        try:
            peaks = MatmulPeaks.from_dict(entry)
            if peaks.fp32 > 0 and peaks.bf16 > 0:
                return peaks
        except (TypeError, ValueError):
            pass  # an older or damaged entry: measure again
    peaks = probe_matmul_peaks(device)
    machines = dict(data.get("machines", {}))
    machines[key] = peaks.to_dict()
    try:
        atomic_write_json(path, {"version": CACHE_VERSION, "machines": machines})
    except OSError as error:
        logger.warning("could not cache the matmul probe in %s (%s); it will run again next time", path, error)
    return peaks
