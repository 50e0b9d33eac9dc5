"""Which expert each token goes to: the per-token routing view of a trained Switch Transformer run (Understand ->
Switch routing).

Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers (JMLR 23), whose figures show tokens coloured by expert.
`token_routing(run_dir, sentence)` reads the real forward pass in evaluation mode (nothing dropped: capacity is
raised to fit every token), with the input each family uses at inference (lab_models/inference/representations.py):
GPT-style causal, BERT-style full, XLNet/MPNet's content stream, ELECTRA's discriminator, MASS/T5's encoder on the
sentence and decoder on the sentence shifted right. The layer is lab_models/nn/moe.py; the losses and statistics of
training are lab_models/models/switch.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from lab_models.messages import LabError, Message
from lab_models.families import RNN_FAMILIES
from lab_models.inference import representations as probes
from lab_models.inference.loading import load_run
from lab_models.nn.moe import collect_routing, switch_layers
from lab_models.training import runs


@dataclass(frozen=True)
class RoutedLayer:
    """One Switch layer's decisions for one sentence: per token, its expert and router probability."""

    label: str  # e.g. "layer 2", "decoder layer 2"
    tokens: list[str]
    experts: list[int]
    probabilities: list[float]
    kept: list[bool]  # False would mean dropped; inference drops nothing, so all True


@dataclass(frozen=True)
class RoutingView:
    run_id: str
    family: str
    n_experts: int
    layers: list[RoutedLayer]
    note: Message
    step: int


def token_routing(run_dir, sentence: str) -> RoutingView:
    """The expert of every token in every Switch layer of the run in `run_dir` (see the module docstring)."""
    run_dir = Path(run_dir)
    config = runs.read_config(run_dir)
    if config.get("family") in RNN_FAMILIES:
        raise LabError("{name} is an LSTM run: only Transformer runs can have Switch layers", name=run_dir.name)
    if config and (config.get("model") or {}).get("ffn") != "switch":
        raise LabError("{name} has no Switch layers: train a run with the Switch Transformer toggle "
                       "(--model ffn=switch) to see its routing", name=run_dir.name)
    run = load_run(run_dir)
    labels = {id(module): label for label, module in switch_layers(run.model.backbone)}
    encoded = probes.encode_sentence(run, sentence)
    backbone = run.model.backbone
    device = run.device
    n = len(encoded.ids)
    ids = torch.tensor([encoded.ids], dtype=torch.long, device=device)  # (1, n)
    text = list(encoded.labels)
    streams = []  # (collector, token labels) per side
    with torch.no_grad():
        if run.model_config.decoder_layers > 0:
            decoder_ids = torch.tensor([[run.vocab.bos_id] + encoded.ids[:-1]], dtype=torch.long, device=device)
            positions = torch.arange(n, device=device).unsqueeze(0)  # (1, n)
            full = torch.ones(1, n, n, dtype=torch.bool, device=device)
            with collect_routing(backbone, record_tokens=True) as collector:
                memory = backbone.encode(ids, full, positions)
                backbone.decode(decoder_ids, full.tril(), full, positions, memory)
            bos = run.tokenizer.id_to_token(run.vocab.bos_id) or "[BOS]"
            view = Message("The encoder reads the sentence; the decoder reads [BOS] + the sentence shifted right, as "
                           "if writing it back.")
            encoder_calls = sum(1 for call in collector.calls if "decoder" not in labels[id(call.layer)])
            streams = [(call, text if i < encoder_calls else [bos] + text[:-1])
                       for i, call in enumerate(collector.calls)]
        else:
            mask = probes.square_mask(n, probes.one_stream_view(run)).unsqueeze(0).to(device)  # (1, n, n)
            with collect_routing(backbone, record_tokens=True) as collector:
                backbone(ids, mask, probes.position_ids_for(run, n).to(device))
            view = Message("{view}.", view=probes.view_description(run))
            streams = [(call, text) for call in collector.calls]
    layers = []
    seen: dict[str, int] = {}
    for call, tokens in streams:
        label = labels[id(call.layer)]
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:  # ALBERT's shared block runs once per layer
            label = f"{label} (application {seen[label]})"
        layers.append(RoutedLayer(label=label, tokens=list(tokens), experts=call.expert.reshape(-1).tolist(),
                                  probabilities=[round(p, 4) for p in call.probability.reshape(-1).float().tolist()],
                                  kept=call.kept.reshape(-1).tolist()))
    n_experts = max(module.n_experts for _, module in switch_layers(backbone))
    note = Message("{view} Evaluation mode: no token is dropped (capacity is raised to fit every token).", view=view)
    return RoutingView(run_id=run.run_id, family=run.family, n_experts=n_experts, layers=layers, note=note,
                       step=run.step)

