"""Masks as nested lists of 0 and 1, the form the golden examples of the mask and batch-builder tests are written in."""
from __future__ import annotations

import torch


def as_lists(mask: torch.Tensor) -> list[list[int]]:
    return mask.int().tolist()
