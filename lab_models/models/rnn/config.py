"""`RNNConfig`: the sizes of the RNN-era models (ELMo, CoVe, ULMFiT, CVT) and their four presets.

The Transformer families take their sizes from `nn.config.ModelConfig`; the LSTM families need other numbers (an
embedding width, an LSTM width, a depth), so they have their own frozen config. It keeps the names that the run
folders, the Train tab and docs/contract.md §2 read from every model config (`d_model`, `n_layers`, `n_heads`, `d_ff`,
`vocab_size`, `max_positions`) as properties:

    d_model = hidden_size (the width of one LSTM direction), n_heads = 0 (no attention heads; CoVe's one attention
    is not multi-head), d_ff = 0 (no feed-forward blocks).

Presets (the RNN sizes are derived from the lab's preset names, not from the Transformer widths):

    preset   embedding  LSTM hidden  layers  max_positions   why
    tiny        64         128          2        128         trains 50 steps on a CPU in seconds (tests)
    small      256         512          2        256         the CPU demo
    medium     512        1024          2        512         GPU
    base       512        4096          2        512         ELMo's original biLM: 4096 cells projected to 512

ULMFiT's AWD-LSTM has 3 layers at every preset (Merity et al. 2018: 400 / 1150 / 3); ELMo, CoVe (its MT-LSTM) and
CVT have 2, as in their papers. CoVe's decoder has as many layers as its encoder (McCann et al.: 2 and 2).

>>> cfg = rnn_preset_config("ulmfit", "tiny", 1000)
>>> cfg.embedding_size, cfg.hidden_size, cfg.n_layers, cfg.d_model, cfg.n_heads
(64, 128, 3, 128, 0)
>>> RNNConfig.from_dict(cfg.to_dict()) == cfg
True
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lab_models.messages import LabError
from lab_models.nn.config import require_int  # the transformer config's check, shared
from lab_models.families import RNN_FAMILIES


RNN_PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(embedding_size=64, hidden_size=128, n_layers=2, max_positions=128),
    "small": dict(embedding_size=256, hidden_size=512, n_layers=2, max_positions=256),
    "medium": dict(embedding_size=512, hidden_size=1024, n_layers=2, max_positions=512),
    "base": dict(embedding_size=512, hidden_size=4096, n_layers=2, max_positions=512),
}

# family -> structure on top of the preset (overrides given by the user win over both)
FAMILY_STRUCTURE: dict[str, dict[str, Any]] = {
    "elmo": {"dropout": 0.1},  # Peters et al.: dropout 0.1 on the biLM
    "cove": {"dropout": 0.2, "decoder_layers": 2},  # OpenNMT's 0.2 (CoVe's MT-LSTM was trained with it); 2 + 2 layers
    "ulmfit": {"n_layers": 3, "dropout": 0.0},  # AWD-LSTM: 3 layers; its own dropouts are ulmfit.Settings
    "cvt": {"dropout": 0.5},  # Clark et al.: dropout 0.5 on the labelled examples (the student's noise)
}


@dataclass(frozen=True)
class RNNConfig:
    vocab_size: int
    embedding_size: int = 256  # the token embedding width (ELMo: also its LSTM projection width)
    hidden_size: int = 512  # the cell / hidden width of one LSTM direction
    n_layers: int = 2  # stacked LSTM layers (CoVe: encoder layers)
    decoder_layers: int = 0  # CoVe's LSTM decoder; 0 for the others
    dropout: float = 0.1  # between layers and on the outputs (ULMFiT uses its own AWD dropouts instead)
    max_positions: int = 256  # the longest input the data pipeline may feed (LSTMs have no position table)

    def __post_init__(self):
        for name in ("vocab_size", "embedding_size", "hidden_size", "n_layers", "max_positions"):
            require_int(name, getattr(self, name), 1)
        require_int("decoder_layers", self.decoder_layers, 0)
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise LabError("dropout must be a probability in [0, 1), got {dropout!r}", dropout=self.dropout)

    # the names every model config answers to (config.json, the Train tab, docs/contract.md §2)
    @property
    def d_model(self) -> int:
        return self.hidden_size

    @property
    def n_heads(self) -> int:
        return 0

    @property
    def d_ff(self) -> int:
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "rnn", **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RNNConfig":
        if not isinstance(values, dict):
            raise LabError("a model config must be a dict, got {values_type}", values_type=type(values).__name__)
        values = {k: v for k, v in values.items() if k != "kind"}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise LabError("unknown RNN model config keys: {unknown} (valid: {known})",
                           unknown=', '.join(unknown), known=', '.join(sorted(known)))
        if "vocab_size" not in values:
            raise LabError("a model config needs vocab_size")
        return cls(**values)



def rnn_preset_config(family: str, preset: str, vocab_size: int, **overrides) -> RNNConfig:
    """The preset's RNN sizes with the family's structure; `overrides` (RNNConfig fields) win over both."""
    if family not in RNN_FAMILIES:
        raise LabError("{family!r} is not an RNN family: choose one of {rnn_families}",
                       family=family, rnn_families=', '.join(RNN_FAMILIES))
    if preset not in RNN_PRESETS:
        raise LabError("unknown preset {preset!r}: choose one of {rnn_presets}",
                       preset=preset, rnn_presets=', '.join(RNN_PRESETS))
    known = {f.name for f in dataclasses.fields(RNNConfig)} - {"vocab_size"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise LabError("unknown model setting {unknown} for {family}; valid keys: "
                       "{known}", unknown=', '.join(map(repr, unknown)), family=family, known=', '.join(sorted(known)))
    values = {**RNN_PRESETS[preset], **FAMILY_STRUCTURE[family], **overrides}
    if family == "cove" and "decoder_layers" not in overrides:
        values["decoder_layers"] = values["n_layers"]  # as deep a decoder as the encoder
    return RNNConfig(vocab_size=vocab_size, **values)
