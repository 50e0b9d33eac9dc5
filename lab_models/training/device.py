"""Compute-device selection: the one place that decides between CUDA, Apple MPS and the CPU.

Everything that puts a tensor on a device asks `select_device` instead of hard-coding "cuda".
"""
from __future__ import annotations

import torch

from lab_models.messages import LabError, Message

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def select_device(preference: str = "auto") -> torch.device:
    """Return the device to compute on: cuda, then mps, then cpu for "auto"; the named one otherwise.

    >>> select_device("cpu")
    device(type='cpu')
    """
    if preference not in DEVICE_CHOICES:
        raise LabError("Unknown device {preference!r}: choose one of {device_choices}.",
                       preference=preference, device_choices=', '.join(DEVICE_CHOICES))
    if preference == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if preference == "cuda" and not torch.cuda.is_available():
        raise LabError("CUDA was requested but no CUDA GPU is visible: use --device auto or cpu.")
    if preference == "mps" and not _mps_available():
        raise LabError("MPS was requested but this machine has no Apple GPU: use --device auto or cpu.")
    return torch.device(preference)


def describe_device(device: torch.device | None = None) -> Message | str:
    """A short human label for the page header, e.g. "CPU (2 threads)" or "CUDA: NVIDIA H100"."""
    device = device or select_device()
    if device.type == "cuda":
        return f"CUDA: {torch.cuda.get_device_name(device)}"
    if device.type == "mps":
        return "Apple MPS"
    return Message("CPU ({threads} threads)", threads=torch.get_num_threads())
