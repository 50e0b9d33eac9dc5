"""training: one run from a config to a run folder, and the queue that runs many.

    config.py       `TrainConfig` (frozen, saved as config.json), the presets, `--objective`/`--model` parsing
    cli.py          the options of `python -m lab_models train` and the `TrainConfig` they resolve to
    run.py          one training run, start to end (the worker the job manager starts): data, model, engine, files
    init_from.py    `--init-from RUN`: a run started from another run's weights, tokenizer and framing
    corpus_tokens.py a run's tokenizer and token shards before its first step, and `python -m lab_models tokenize`
    batches.py      `PackedBatches`: random windows of the packed stream, fixed validation rows, a family's batches
    engine.py       the model-agnostic training loop: seeded, resumable, a generator of events
    performance.py  precision, fused AdamW, torch.compile, FlexAttention, accumulation, prefetching
    flops.py        model FLOPs per token and MFU against the device's peak
    device.py       the compute device: CUDA, then Apple MPS, then the CPU
    faults.py       test-only fault injection at named points of the trainer
    runs.py         the run folder: what a run writes (status, metrics, checkpoints) and how it is read back
    console.py      what every command of `python -m lab_models` shares at the terminal
    jobs/           the job manager: a lock-protected queue of worker processes, the read-only run store, and the
                    Corpora tab's background tokenizations

May import: everything below it (`families`, `batch`, `home`, `text/`, `nn/`, `objectives/`, `models/`).
"""
