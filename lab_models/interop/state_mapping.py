"""Small helpers the architecture modules share to move tensors between Hugging Face names and the lab's.

No paper: bookkeeping. A conversion is a list of `(lab name, hf names)` rules: the lab tensor is the Hugging Face
tensors concatenated along dim 0 (one name: the tensor itself; T5's q, k, v: the lab's fused qkv). Import reads each
rule (`gather`), export splits the lab tensor back into equal parts (`scatter`).

Worked example (a fused (3, 2) projection from three (1, 2) ones, and back):

>>> import torch
>>> hf = {"q.weight": torch.zeros(1, 2), "k.weight": torch.ones(1, 2), "v.weight": torch.full((1, 2), 2.0)}
>>> rules = [("attn.qkv.weight", ("q.weight", "k.weight", "v.weight"))]
>>> gather(hf, rules)["attn.qkv.weight"][:, 0].tolist()
[0.0, 1.0, 2.0]
>>> sorted(scatter(gather(hf, rules), rules))
['k.weight', 'q.weight', 'v.weight']

Deviation: none.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

import torch

from lab_models.messages import LabError, Message

logger = logging.getLogger(__name__)

Rule = tuple[str, tuple[str, ...]]


def strip_prefix(hf_state: Mapping[str, torch.Tensor], prefix: str, bare_roots: tuple[str, ...]
                 ) -> dict[str, torch.Tensor]:
    """The checkpoint's names with a base-model prefix (e.g. "mpnet.") removed from every name that has it, so that
    checkpoints saved with or without it read alike. `bare_roots`: the first name parts that stay as they are.
    `hf_state` may be a plain dict or the importer's lazy mapping over safetensors files (each tensor is read here,
    once: the converted state holds these tensors, so the peak stays about one copy of the checkpoint)."""
    if not isinstance(hf_state, Mapping):
        raise LabError("hf_state must map tensor names to torch.Tensor (the checkpoint's state dict)")
    out = {}
    for name in hf_state.keys():
        tensor = hf_state[name]
        if not isinstance(tensor, torch.Tensor):
            raise LabError("the checkpoint's {name!r} is a {tensor_type}, not a tensor",
                           name=name, tensor_type=type(tensor).__name__)
        if name.startswith(prefix) and not name.startswith(bare_roots):
            name = name[len(prefix):]
        out[name] = tensor
    return out


def take(hf_state: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """hf_state[name], or a ValueError naming the missing tensor."""
    if name not in hf_state:
        raise LabError("the checkpoint has no tensor {name!r}: is it a complete checkpoint of this architecture?",
                       name=name)
    return hf_state[name]


def gather(hf_state: dict[str, torch.Tensor], rules: list[Rule]) -> dict[str, torch.Tensor]:
    """{lab name: the rule's Hugging Face tensors concatenated along dim 0}."""
    return {lab: torch.cat([take(hf_state, name) for name in names], dim=0) if len(names) > 1
            else take(hf_state, names[0]) for lab, names in rules}


def scatter(lab_state: dict[str, torch.Tensor], rules: list[Rule]) -> dict[str, torch.Tensor]:
    """{hf name: its equal share of the lab tensor}, as contiguous copies (no storage shared with the model)."""
    out = {}
    for lab, names in rules:
        for name, part in zip(names, lab_state[lab].detach().chunk(len(names), dim=0)):
            out[name] = part.clone().contiguous()
    return out


def warn_unused(hf_state: dict[str, torch.Tensor], rules: list[Rule], known: tuple[str, ...]) -> list[str]:
    """The checkpoint's tensor names that no rule reads and that are not `known` copies (name prefixes the format
    saves twice or the lab does not use); logged as a warning, so that a checkpoint of another variant is noticed."""
    used = {name for _, names in rules for name in names}
    unused = sorted(name for name in hf_state if name not in used and not name.startswith(known))
    if unused:
        logger.warning("the checkpoint's %s are not used: %s", "tensor" if len(unused) == 1 else "tensors",
                       ", ".join(unused[:10]) + (" ..." if len(unused) > 10 else ""))
    return unused


def fit_state(model: torch.nn.Module, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`values` checked against `model.state_dict()`: every tensor present and of the model's shape, cast to the
    model's dtype. ValueError names a missing tensor or a shape mismatch."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(values))
    if missing:
        raise LabError("the converted checkpoint lacks {missing}"
                       "{more}: the checkpoint does not match the model its config "
                       "describes", missing=', '.join(missing[:5]), more=' ...' if len(missing) > 5 else '')
    out = {}
    for name, want in expected.items():
        got = values[name]
        if tuple(got.shape) != tuple(want.shape):
            raise LabError("shape mismatch for {name}: the checkpoint gives {got_shape}, the model built "
                           "from its config needs {want_shape}",
                           name=name, got_shape=tuple(got.shape), want_shape=tuple(want.shape))
        out[name] = got.detach().to(want.dtype)
    extra = sorted(set(values) - set(expected))
    if extra:
        logger.warning("not loaded (the model has no such tensors): %s", ", ".join(extra))
    return out


def require(condition: bool, message: Message) -> None:
    """LabError(message) unless `condition`: for options a format cannot represent."""
    if not condition:
        raise LabError.of(message)
