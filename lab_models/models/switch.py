"""The Switch Transformer at the level of a family model: its auxiliary losses, its routing statistics, and its
parameter and FLOP counts. (The per-token routing view of a trained run is lab_models/inference/routing.py.)

Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers (JMLR 23); the router z-loss from Zoph et al. (2022), ST-MoE.
The layer itself is lab_models/nn/moe.py; this module is what every family shares on top of it, so that no family's
loss knows about experts:

- `add_routing_losses(output, collector)`: `FamilyModel.forward` runs the family's loss inside
  `collect_routing(model)` and adds, for every Switch layer call (encoder, decoder, ELECTRA's generator and
  discriminator, every application of ALBERT's shared block), alpha * load_balance (and router_z_weight * router_z)
  to the total, as the paper adds the auxiliary loss at every Switch layer. The logged parts `load_balance` and
  `router_z` (the latter only when its weight is above 0) are the *means* over those calls, so that 1.0 reads
  "perfectly balanced" whatever the depth; the total therefore carries alpha * (number of calls) * load_balance.
- `RoutingTotals`: per Switch layer, the tokens routed to and dropped at each expert, summed on the device over the
  training steps since the trainer last wrote a metrics row; `switch_metrics(model)` reads them back once per logged
  step into the row's `switch` entry: {"layers": [...], "n_experts": E, "routed": [[fraction per expert] per layer],
  "dropped": [[...]], "tokens": [tokens per layer]}. `routed` sums to 1 per layer; `dropped` is the fraction of all
  the layer's tokens that chose that expert and found it full. Evaluation steps are not counted (they drop nothing);
  under DDP the row counts rank 0's batches.
- `parameter_counts(model)`: total, non-embedding (Kaplan et al. 2020) and *active* non-embedding parameters (one
  expert per Switch layer: what a token's forward pass multiplies with), and `forward_flops_per_token`.

Fine-tuning (lab_models/inference/finetuning/run.py) adds `routing_loss` of its own forward pass to the task loss, as
the paper keeps the auxiliary loss while fine-tuning.

>>> round(load_balance_from_counts([3, 1], [0.7, 0.3]), 3)   # the example of nn/moe.py's docstring
1.2
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from lab_models.messages import LabError
from lab_models.nn.config import ModelConfig
from lab_models.nn.moe import RoutingCollector, SwitchFeedForward, collect_routing, switch_layers
from lab_models.objectives.losses import LossOutput
from lab_models.families import RNN_FAMILIES
from lab_models.families import family_record

SWITCH_KEYS = ("ffn", "n_experts", "capacity_factor", "expert_every", "load_balance_weight", "router_z_weight",
               "router_jitter")
SWITCH_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in SWITCH_KEYS}
LOAD_BALANCE = "load_balance"
ROUTER_Z = "router_z"


def load_balance_from_counts(counts, mean_probabilities) -> float:
    """n_experts * sum_e f_e * P_e from token counts per expert and mean router probabilities (a plain-number
    version of what nn/moe.py computes on tensors)."""
    total = sum(counts)
    return len(counts) * sum(c / total * p for c, p in zip(counts, mean_probabilities))


def check_switch_overrides(family: str, keys) -> None:
    """ValueError when Switch settings are given for a family without a Transformer feed-forward (the RNN era)."""

    given = [key for key in keys if key in SWITCH_KEYS]
    if given and family in RNN_FAMILIES:

        raise LabError("{title} is an LSTM model, not a Transformer: the Switch feed-forward "
                       "({given}) exists only for the Transformer families",
                       title=family_record(family).title, given=', '.join(given))


# ------------------------------------------------------------------------------------------------ losses


def add_routing_losses(output: LossOutput, collector: RoutingCollector) -> LossOutput:
    """`output` with every Switch call's alpha * load_balance (and z-loss) added to the total and their means in
    parts (see the module docstring). Unchanged when no Switch layer ran."""
    calls = collector.calls
    if not calls:
        return output
    total = output.total + routing_loss(collector)
    parts = dict(output.parts)
    parts[LOAD_BALANCE] = torch.stack([call.load_balance for call in calls]).mean().detach()
    if any(call.layer.router_z_weight > 0 for call in calls):
        parts[ROUTER_Z] = torch.stack([call.router_z for call in calls]).mean().detach()
    return dataclasses.replace(output, total=total, parts=parts)


def routing_loss(collector: RoutingCollector):
    """The sum over the collected Switch calls of alpha * load_balance (+ router_z_weight * router_z): what the
    total loss gains (a tensor with graph; 0.0 when no Switch layer ran)."""
    total = 0.0
    for call in collector.calls:
        total = total + call.layer.load_balance_weight * call.load_balance
        if call.layer.router_z_weight > 0:
            total = total + call.layer.router_z_weight * call.router_z
    return total


def loss_with_routing(model: nn.Module, compute_loss) -> LossOutput:
    """`compute_loss()` (the family's loss of `model`) with the Switch losses added, and, in training, the routing
    counts added to `model.routing_totals`. What `FamilyModel.forward` calls for a model with Switch layers."""
    with collect_routing(model) as collector:
        output = compute_loss()
    totals = getattr(model, "routing_totals", None)
    if model.training and totals is not None:
        totals.add(collector)
    return add_routing_losses(output, collector)


# ------------------------------------------------------------------------------------------------ statistics


class RoutingTotals:
    """Tokens routed to and dropped at each expert of each Switch layer, summed on the device since the last
    `pop_record`. One (E,) counter pair per layer label."""

    def __init__(self, layers: list[tuple[str, SwitchFeedForward]]):
        self.labels = [label for label, _ in layers]
        self._index = {id(module): i for i, (_, module) in enumerate(layers)}
        self._experts = [module.n_experts for _, module in layers]
        self._sums: list[torch.Tensor | None] = [None] * len(layers)  # per layer: (2E + 1,) routed, dropped, tokens

    def add(self, collector: RoutingCollector) -> None:
        for call in collector.calls:
            i = self._index.get(id(call.layer))
            if i is None:
                continue
            row = torch.cat([call.routed, call.dropped, call.tokens.reshape(1)]).float()  # (2E + 1,)
            self._sums[i] = row if self._sums[i] is None else self._sums[i] + row

    def pop_record(self) -> dict:
        """{"switch": {...}} for a metrics row (one read back to the host), and start counting afresh; {} when nothing
        was counted."""
        present = [i for i, row in enumerate(self._sums) if row is not None]
        if not present:
            return {}
        values = torch.cat([self._sums[i] for i in present]).tolist()
        self._sums = [None] * len(self._sums)
        layers, routed, dropped, tokens = [], [], [], []
        offset = 0
        for i in present:
            E = self._experts[i]
            row = values[offset: offset + 2 * E + 1]
            offset += 2 * E + 1
            n = max(row[-1], 1.0)
            layers.append(self.labels[i])
            routed.append([round(v / n, 5) for v in row[:E]])
            dropped.append([round(v / n, 5) for v in row[E:2 * E]])
            tokens.append(int(row[-1]))
        return {"switch": {"layers": layers, "n_experts": max(self._experts[i] for i in present), "routed": routed,
                           "dropped": dropped, "tokens": tokens}}


def switch_metrics(model: nn.Module) -> dict:
    """The `switch` entry of a training metrics row for `model` ({} for a model without Switch layers)."""
    totals = getattr(model, "routing_totals", None)
    return totals.pop_record() if isinstance(totals, RoutingTotals) else {}


# ------------------------------------------------------------------------------------------------ counting


def _embedding_tables(model: nn.Module) -> list[nn.Parameter]:
    tables: dict[int, nn.Parameter] = {}
    for module in model.modules():
        embeddings = getattr(module, "embeddings", None)
        if isinstance(getattr(module, "config", None), ModelConfig) and embeddings is not None:
            for table in [embeddings.token, *embeddings.positions, embeddings.segment]:
                if table is not None:
                    tables[id(table.weight)] = table.weight
    return list(tables.values())


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """total, non_embedding (without the token, position and segment tables, as Kaplan et al. count N) and
    active_non_embedding (a Switch layer counts its router and one expert: the parameters one token uses).

    >>> from lab_models.nn.backbone import Backbone
    >>> from lab_models.nn.config import preset_config
    >>> dense = parameter_counts(Backbone(preset_config("tiny", 100)))
    >>> sparse = parameter_counts(Backbone(preset_config("tiny", 100, ffn="switch", n_experts=4)))
    >>> sparse["non_embedding"] > dense["non_embedding"], sparse["active_non_embedding"] - dense["active_non_embedding"]
    (True, -64)
    """
    total = sum(p.numel() for p in model.parameters())
    non_embedding = total - sum(t.numel() for t in _embedding_tables(model))
    inactive = 0
    for _, layer in switch_layers(model):
        per_expert = (layer.up.numel() + layer.proj.numel()) // layer.n_experts
        inactive += per_expert * (layer.n_experts - 1)
    return {"total": total, "non_embedding": non_embedding, "active_non_embedding": non_embedding - inactive}


def forward_flops_per_token(config: ModelConfig, seq_len: int, active_non_embedding: int) -> int:
    """Forward FLOPs per token, Kaplan et al.'s count: 2 per active non-embedding parameter, plus attention over the
    context (2 * n_layers * seq_len * d_model), plus the vocabulary projection (2 * d_model * vocab_size). The Switch
    example of `parameter_counts` has 64 fewer active parameters than the dense one: its experts have no biases
    (320 fewer) and it adds a 4 x 64 router."""
    layers = config.n_layers + config.decoder_layers
    return 2 * active_non_embedding + 2 * layers * seq_len * config.d_model + 2 * config.d_model * config.vocab_size
