"""Backbones at tiny sizes for the nn tests (tests/nn/): the vocabulary size of their models, random ids, plain
positions, and a twin that shares a model's weights under a changed config."""
from __future__ import annotations

import dataclasses

import torch

from lab_models.nn.backbone import Backbone

V = 50  # vocabulary size for every test model


def twin(model: Backbone, **overrides) -> Backbone:
    """A second model with the same weights and a changed config (e.g. the other attention path)."""
    other = Backbone(dataclasses.replace(model.config, **overrides)).eval()
    other.load_state_dict(model.state_dict())
    return other


def ids(B: int, T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def positions(B: int, T: int) -> torch.Tensor:
    return torch.arange(T).expand(B, T).clone()
