"""The Pretraining Lab's backend: every classic pretraining family on one backbone, laid out as the pipeline it is.

Stages, bottom to top; a stage imports only from the stages below it (tests/project/test_layout.py keeps it so):

    messages                the Message (English that keeps its template) and the LabError every stage raises
    families, batch, home   the family registry (data), the Batch every builder hands the backbone, the lab home
    text/ , nn/             corpora, tokenizers, token streams | backbone, attention, feed-forward, heads
    objectives/             mask predicates, one batch builder and loss per family, add-ons, the Mask Explorer's data
    models/                 the family models: backbone + heads + the family's loss; Switch; the RNN-era families
    training/               config, CLI, engine, speed settings, FLOPs, faults, the run folder, the job manager
    inference/              loading a run, generation, representations, fine-tuning, the leaderboard
    interop/                Hugging Face checkpoints in and out
    experiments/            the zoo and scaling sweeps: many runs composed from the stages below
    api/                    the one surface that app/, scripts and users import: one module per area, and its
                            __init__ the face that lists every public name
    __main__                `python -m lab_models <command>`

The UI in `app/` imports only `lab_models.api`; everything else here is internal and may change.
"""
