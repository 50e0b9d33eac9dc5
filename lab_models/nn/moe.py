"""The Switch Transformer's feed-forward layer: n_experts feed-forward networks and a top-1 router.

Paper: Fedus, Zoph, Shazeer (2022). Switch Transformers: Scaling to Trillion Parameter Models with Simple and
Efficient Sparsity. JMLR 23. The router z-loss is from Zoph et al. (2022), ST-MoE: Designing Stable and Transferable
Sparse Expert Models.

A Switch layer replaces a dense feed-forward (`ModelConfig(ffn="switch")`, every `expert_every`-th block). Each token
goes to one expert, so it costs the FLOPs of one dense feed-forward (plus the small router), while the layer holds
n_experts times the parameters:

    p = softmax(x W_r)                           router, W_r (H, E), computed in float32 ("selective precision")
    i = argmax_e p_e                             top-1 ("switch") routing
    y = p_i * FFN_i(x)                           the chosen expert's output, scaled by its router probability
    y = 0 if the token is beyond expert i's capacity (it is dropped and passes through the residual connection)

    capacity  = ceil(capacity_factor * tokens / n_experts)      tokens = all rows of the batch (B * T)
    load_balance = n_experts * sum_e f_e * P_e                   f_e: fraction of tokens whose argmax is e,
                                                                 P_e: mean router probability of e (the gradient path)
    router_z  = mean over tokens of logsumexp(x W_r)^2           ST-MoE, off unless router_z_weight > 0

Tokens take capacity in batch order (row by row, position by position): a token is dropped when its expert already
received `capacity` tokens earlier in the flattened batch. Dispatch is batched: a token's slot in its expert's buffer
is a cumulative sum over a one-hot (tokens, experts) matrix, the buffer (experts, capacity, H) is filled with one
`index_copy`, the experts run as two `torch.bmm` over weights stored as (n_experts, H, d_ff) and (n_experts, d_ff, H),
and a second `index_copy` brings the outputs back to their tokens. No Python loop over tokens or experts, and in
training no value is read back to the host (the capacity follows from the tensor's shape), so a GPU step never waits
on a Switch layer.

Worked example (4 tokens, 2 experts, capacity_factor 1.0, so capacity = ceil(1.0 * 4 / 2) = 2):

    router argmax      [0, 0, 0, 1]
    slot in its expert [0, 1, 2, 0]      -> token 2 is the third for expert 0: dropped (its output is 0)
    f = [3/4, 1/4]; with P = [0.7, 0.3]: load_balance = 2 * (0.75 * 0.7 + 0.25 * 0.3) = 1.2 (1.0 = balanced)

>>> route_slots(torch.tensor([0, 0, 0, 1]), n_experts=2, capacity=2)
(tensor([0, 1, 2, 0]), tensor([ True,  True, False,  True]))

Reporting. Every call adds a `RouterCall` (its losses and per-expert counts, and with `record_tokens` each token's
expert) to the `RoutingCollector` of the current thread, set with `collect_routing(model)`; outside such a block
nothing is computed for reporting. lab_models/models/switch.py turns the calls into the `load_balance` (and `router_z`)
loss of every family and into the per-expert statistics of metrics.jsonl.

Deviations from the paper, stated:
- Experts are the model's feed-forward (H -> d_ff -> H, its activation, gated where the config says so) without
  biases, as T5's feed-forward (the paper's backbone) has none; the dense layers of the same model keep theirs.
- Initialisation: the router is drawn from a truncated normal with std sqrt(0.1 / H) (the paper's scale s = 0.1
  instead of 1.0, cut at two standard deviations); the experts keep the lab's N(0, 0.02) (with GPT-2's
  1/sqrt(2 n_layers) on the output projection for pre-LN models), as the dense feed-forward they are compared with.
- Evaluation and inference (`module.eval()`) drop no token: the capacity is raised to the largest number of tokens any
  expert received (one small read back to the host per layer). A token's output then never depends on the other
  tokens of the batch, so the KV-cache decoding, fill-mask and the leakage test see the same function as a full
  forward pass. The paper evaluates with a larger capacity factor (2.0) instead.
- Padding ([PAD] ids, when the caller gives a `token_mask`) takes no capacity, counts in no statistic or loss and
  gets output 0. The capacity is still computed from all B * T rows (counting the real ones would need a read back to
  the host), so a padded batch has slightly more room than the paper's.
- Capacity is shared by the whole batch in flattened order, as in the paper. A causal model cannot learn about a
  future token from this (a token's drop depends only on tokens before it in its row and on earlier rows). Where the
  input holds tokens that other rows must not see (XLNet and MPNet's content stream holds the tokens their query
  stream predicts; UniLM's right-to-left rows), whether a token was dropped can carry a fraction of a bit from one
  position to another in training. The two-stream query rows flow through the same experts and take capacity after
  the content rows of their sequence. Evaluation drops nothing, so it has no such path.
- Jitter noise on the router input (the paper's 1e-2 for its large models) is off by default (`router_jitter`); it
  draws from torch's global generator, which the trainer reseeds before every step, as for dropout.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError
from lab_models.nn.config import ModelConfig

ROUTER_INIT_SCALE = 0.1  # the paper's s: weights ~ truncated normal with std sqrt(s / fan_in)


def expert_capacity(n_tokens: int, n_experts: int, capacity_factor: float) -> int:
    """ceil(capacity_factor * n_tokens / n_experts), at least 1.

    >>> expert_capacity(1024, 8, 1.25)
    160
    """
    return max(1, math.ceil(capacity_factor * n_tokens / n_experts))


def one_hot(expert: torch.Tensor, n_experts: int) -> torch.Tensor:
    """(N,) expert ids -> (N, E) long one-hot, by comparison with arange (F.one_hot may check its input's range with a
    read back to the host on some devices; this never does).

    >>> one_hot(torch.tensor([2, 0]), 3).tolist()
    [[0, 0, 1], [1, 0, 0]]
    """
    return (expert.unsqueeze(1) == torch.arange(n_experts, device=expert.device)).long()


def route_slots(expert: torch.Tensor, n_experts: int, capacity: int,
                counted: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's position in its expert's queue (in token order) and whether it fits the capacity.

    expert (N,) long: the chosen expert per token; counted (N,) bool or None: tokens that take capacity (False: padding,
    never kept). Returns (position (N,) long, kept (N,) bool). Batched: a cumulative sum over a one-hot matrix.
    """
    chosen = one_hot(expert, n_experts)  # (N, E)
    if counted is not None:
        chosen = chosen * counted.unsqueeze(1)
    position = (chosen.cumsum(0) - 1).gather(1, expert.unsqueeze(1)).squeeze(1)  # (N,)
    kept = position < capacity
    if counted is not None:
        kept = kept & counted
    return position, kept


@dataclass
class RouterCall:
    """What one Switch layer call reports (tensors stay on the device; nothing is read back)."""

    layer: "SwitchFeedForward"
    load_balance: torch.Tensor  # scalar, with graph: n_experts * sum f_e P_e
    router_z: torch.Tensor  # scalar, with graph: mean logsumexp(logits)^2
    routed: torch.Tensor  # (E,) float: counted tokens whose argmax was each expert
    dropped: torch.Tensor  # (E,) float: of those, the ones beyond the capacity
    tokens: torch.Tensor  # scalar float: counted tokens
    expert: torch.Tensor | None = None  # (N,) the chosen expert per row (record_tokens only)
    probability: torch.Tensor | None = None  # (N,) its router probability
    kept: torch.Tensor | None = None  # (N,) bool: False = dropped or padding


@dataclass
class RoutingCollector:
    """The calls of every Switch layer during one `collect_routing` block, in call order."""

    record_tokens: bool = False
    calls: list[RouterCall] = field(default_factory=list)


def expert_activation(name: str):
    """The experts' non-linearity for a ModelConfig `activation` name, as the dense feed-forward uses it: "gelu" (the
    exact GeLU), "gelu_tanh" (its tanh approximation, GPT and GPT-2) or "relu" (T5 v1.0).

    >>> expert_activation("relu")(torch.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    if name == "gelu":
        return F.gelu
    if name == "gelu_tanh":
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu
    raise LabError("unknown activation {name!r} for the Switch experts: choose gelu, gelu_tanh or relu", name=name)


class SwitchFeedForward(nn.Module):
    """n_experts feed-forwards (H -> d_ff -> H, no biases) behind a top-1 router. See the module docstring."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        E, H, F_ = config.n_experts, config.d_model, config.d_ff
        # The experts follow the dense feed-forward's options where the config has them (other branches add
        # `activation` and T5 v1.1's gated `ffn_gated`; without them: GeLU, not gated).
        self.activation = expert_activation(getattr(config, "activation", "gelu"))
        self.gated = bool(getattr(config, "ffn_gated", False))  # act(x W_0) * (x W_1): up holds [W_0, W_1]
        self.d_ff = F_
        self.n_experts = E
        self.capacity_factor = float(config.capacity_factor)
        self.jitter = float(config.router_jitter)
        self.load_balance_weight = float(config.load_balance_weight)
        self.router_z_weight = float(config.router_z_weight)
        self.router = nn.Parameter(torch.empty(E, H))  # (E, H): nn.Linear(H, E, bias=False)'s weight layout
        self.up = nn.Parameter(torch.empty(E, H, 2 * F_ if self.gated else F_))  # (E, H, d_ff) or (E, H, 2 d_ff)
        self.proj = nn.Parameter(torch.empty(E, F_, H))  # (E, d_ff, H): writes into the residual stream
        router_std = math.sqrt(ROUTER_INIT_SCALE / H)
        nn.init.trunc_normal_(self.router, std=router_std, a=-2 * router_std, b=2 * router_std)
        nn.init.normal_(self.up, std=0.02)
        proj_std = 0.02 / math.sqrt(2 * config.n_layers) if config.norm == "pre" else 0.02
        nn.init.normal_(self.proj, std=proj_std)
        self._collectors: dict[int, RoutingCollector] = {}  # thread id -> the collector of its collect_routing

    def extra_repr(self) -> str:
        E, H, _ = self.up.shape
        return (f"n_experts={E}, d_model={H}, d_ff={self.d_ff}, gated={self.gated}, "
                f"capacity_factor={self.capacity_factor}")

    def capacity(self, n_tokens: int) -> int:
        return expert_capacity(n_tokens, self.n_experts, self.capacity_factor)

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (..., H) -> (..., H). token_mask (...) bool: the real tokens (False = padding), or None for all."""
        shape, H, E = x.shape, x.shape[-1], self.n_experts
        tokens = x.reshape(-1, H)  # (N, H)
        counted = None if token_mask is None else token_mask.reshape(-1)  # (N,)
        router_input = tokens
        if self.training and self.jitter > 0:
            noise = torch.empty_like(tokens).uniform_(1.0 - self.jitter, 1.0 + self.jitter)
            router_input = tokens * noise
        with torch.autocast(device_type=x.device.type, enabled=False):  # selective precision: the router in fp32
            logits = F.linear(router_input.float(), self.router.float())  # (N, E)
        probs = logits.softmax(dim=-1)  # (N, E)
        gate, expert = probs.max(dim=-1)  # (N,), (N,)

        if self.training:
            capacity = self.capacity(tokens.shape[0])
        else:  # inference drops nothing: room for the busiest expert's tokens (one read back per layer)
            routed = one_hot(expert, E) if counted is None else one_hot(expert, E) * counted.unsqueeze(1)
            capacity = max(1, int(routed.sum(0).max()))
        position, kept = route_slots(expert, E, capacity, counted)  # (N,), (N,)
        N, slots = tokens.shape[0], E * capacity
        # Each kept token's row in the (E*C) buffer; dropped tokens and padding go to one extra row, thrown away.
        slot = torch.where(kept, expert * capacity + position, torch.full_like(position, slots))  # (N,)
        # And back: the token each buffer row holds; empty rows point at an extra output row N, thrown away.
        token_of_slot = torch.full((slots + 1,), N, dtype=torch.long, device=x.device).index_copy(
            0, slot, torch.arange(N, device=x.device))[:slots]  # (E*C,)
        # Both moves are index_copy (its backward is a gather): much cheaper on a CPU than index_select, whose
        # backward is a scatter-add.
        buffer = tokens.new_zeros(slots + 1, H).index_copy(0, slot, tokens)  # (E*C + 1, H)
        expert_input = buffer[:slots].view(E, capacity, H)  # (E, C, H)
        up = torch.bmm(expert_input, self.up.to(expert_input.dtype))  # (E, C, d_ff) or (E, C, 2 d_ff)
        if self.gated:
            activated, linear = up.split(self.d_ff, dim=-1)  # 2 x (E, C, d_ff)
            hidden = self.activation(activated) * linear  # (E, C, d_ff)
        else:
            hidden = self.activation(up)  # (E, C, d_ff)
        expert_output = torch.bmm(hidden, self.proj.to(hidden.dtype)).reshape(slots, H)  # (E*C, H)
        out = expert_output.new_zeros(N + 1, H).index_copy(0, token_of_slot, expert_output)[:N]  # (N, H), 0 = dropped
        out = out * gate.to(out.dtype).unsqueeze(1)  # scaled by the router probability

        collector = self._collectors.get(threading.get_ident())
        if collector is not None:
            collector.calls.append(self._report(logits, probs, expert, gate, kept, counted,
                                                collector.record_tokens))
        return out.to(x.dtype).reshape(shape)  # (..., H)

    def _report(self, logits, probs, expert, gate, kept, counted, record_tokens: bool) -> RouterCall:
        """The load-balancing and z losses and the per-expert counts of one call (all on the device)."""
        E = self.n_experts
        weight = torch.ones_like(gate) if counted is None else counted.float()  # (N,)
        n = weight.sum().clamp(min=1.0)
        chosen = one_hot(expert, E).float() * weight.unsqueeze(1)  # (N, E)
        fraction = chosen.sum(0) / n  # f_e (no gradient: argmax)
        mean_probability = (probs * weight.unsqueeze(1)).sum(0) / n  # P_e (the gradient path)
        load_balance = E * (fraction * mean_probability).sum()
        router_z = (torch.logsumexp(logits, dim=-1).square() * weight).sum() / n
        dropped = (chosen * (~kept).float().unsqueeze(1)).sum(0)  # (E,)
        call = RouterCall(layer=self, load_balance=load_balance, router_z=router_z, routed=chosen.sum(0).detach(),
                          dropped=dropped.detach(), tokens=weight.sum().detach())
        if record_tokens:
            call.expert, call.probability, call.kept = expert.detach(), gate.detach(), kept.detach()
        return call


def switch_layers(model: nn.Module) -> list[tuple[str, SwitchFeedForward]]:
    """Every Switch layer of `model` with a readable label, in module order: "layer 2" (1-based), "encoder layer 2"
    and "decoder layer 2" for encoder-decoder models, "shared layer" for ALBERT's one shared block, and "generator "
    in front for ELECTRA's generator. Found through every backbone (a module with a ModelConfig `config` and
    `blocks`) inside `model`."""
    found = []
    for name, module in model.named_modules():
        config = getattr(module, "config", None)
        if not isinstance(config, ModelConfig) or not isinstance(getattr(module, "blocks", None), nn.ModuleList):
            continue
        prefix = "generator " if name.split(".")[0] == "generator" else ""
        decoder = getattr(module, "decoder_blocks", None)
        stacks = [(module.blocks, "encoder layer" if decoder is not None else "layer"), (decoder, "decoder layer")]
        for blocks, title in stacks:
            for index, block in enumerate(blocks or []):
                ff = getattr(block, "ff", None)
                if isinstance(ff, SwitchFeedForward):
                    found.append((f"{prefix}shared {title}" if config.share_layers else f"{prefix}{title} {index + 1}",
                                  ff))
    return found


@contextmanager
def collect_routing(model: nn.Module, record_tokens: bool = False):
    """Within the block, every Switch layer of `model` reports its calls of this thread to the yielded
    `RoutingCollector` (an earlier collector of an enclosing block is restored at the end)."""
    layers = [module for module in model.modules() if isinstance(module, SwitchFeedForward)]
    key = threading.get_ident()
    collector = RoutingCollector(record_tokens=record_tokens)
    previous = [layer._collectors.get(key) for layer in layers]
    for layer in layers:
        layer._collectors[key] = collector
    try:
        yield collector
    finally:
        for layer, before in zip(layers, previous):
            if before is None:
                layer._collectors.pop(key, None)
            else:
                layer._collectors[key] = before
