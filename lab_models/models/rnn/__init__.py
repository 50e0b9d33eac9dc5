"""The RNN era in the lab: ELMo, CoVe, ULMFiT and CVT, on LSTM backbones, trained by the same engine, CLI, run
folders and Train tab as the Transformer families.

    family  paper                        model (rnn/<family>.py)                        objectives (default weight)
    elmo    Peters et al. 2018           biLM: forward + backward LSTM LMs, shared      forward_lm 0.5, backward_lm 0.5
                                         embedding and softmax; scalar mix
    cove    McCann et al. 2017           biLSTM encoder + attentional LSTM decoder,     nmt 1.0
                                         English -> Chinese synthetic pairs
    ulmfit  Howard & Ruder 2018          AWD-LSTM: LM pretraining, LM fine-tuning,      lm 1.0, classifier 1.0
                                         classifier fine-tuning (three stages)
    cvt     Clark et al. 2018            BiLSTM tagger + auxiliary restricted views     labelled 1.0, unlabelled 1.0

Each family module provides what `lab_models.objectives` asks of a family (a frozen `Settings`, `CHOICES`, `RULE`)
plus `build(family, config, settings, vocab, weights)` -> the model and, where the data is not plain corpus windows,
`batch_source(context)` (rnn/common.py DataContext). Sizes: rnn/config.py (RNNConfig, the presets). Shared layers:
rnn/layers.py.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from lab_models.messages import LabError
from lab_models.families import RNN_FAMILIES
from lab_models.models.rnn.config import RNNConfig


def rnn_module(family: str) -> ModuleType:
    if family not in RNN_FAMILIES:
        raise LabError("{family!r} is not an RNN family: choose one of {rnn_families}",
                       family=family, rnn_families=', '.join(RNN_FAMILIES))
    return importlib.import_module(f"{__name__}.{family}")


def build_rnn_model(family: str, model_config: RNNConfig, settings, vocab, objective_weights: dict[str, float]):
    """The family's model (weights resolved by lab_models.models.family.resolve_objective_weights)."""
    if not isinstance(model_config, RNNConfig):
        raise LabError("{family} needs an RNNConfig (lab_models.models.rnn.config), got "
                       "{model_config_type}: "
                       "build it with family_model_config({family!r}, preset, vocab_size)",
                       family=family, model_config_type=type(model_config).__name__)
    return rnn_module(family).build(family, model_config, settings, vocab, objective_weights)
