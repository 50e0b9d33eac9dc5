"""models: the family models, one `FamilyModel` per family, built from the one backbone (nn/) plus the family's heads,
with the family's own loss (objectives/<family>.py) as its `loss(batch)`.

    family.py   which `ModelConfig` fields each family sets on a size preset, its heads, shared parameters, and
                `build_model`; every structural choice and deviation is listed in its docstring
    switch.py   the Switch Transformer at the level of a family model: auxiliary losses, routing statistics,
                parameter and FLOP counts
    rnn/        the RNN era (ELMo, CoVe, ULMFiT, CVT): each family's LSTM model, batches and loss in one file

The family models live here, one stage above objectives/ and not in nn/, because a family model calls its objective's
loss and nn/ knows nothing of objectives (docs/design.md, "The layout").

May import: `families`, `batch`, `home`, `text/`, `nn/`, `objectives/`.
"""
