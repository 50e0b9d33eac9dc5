"""inference: what a trained (or imported) run does and what it has learned.

    loading.py              a run folder back as a model, tokenizer and settings (`load_run`, cached)
    generation/             generation, infilling, translation and fill-mask, decoded the way each family trained
    representations.py      contextual embeddings per layer, the PCA projection, and attention maps per head
    routing.py              which expert each token goes to in a Switch run
    sentence_similarity.py  are same-topic sentences closer than different-topic ones?
    probing.py              linear probes of every layer and stream against a random-init control
    predicting.py           the one token a family predicts for a text, and its own forward pass there
    logit_lens.py           what every layer already predicts there, through the family's output head
    attributions.py         gradient x input and integrated gradients of that prediction (or a classifier's label)
    finetuning/             a classification head on a run, fine-tuned on a labelled task (saved.py: one back
                            from its folder)
    leaderboard.py          every run on one corpus measured the same way
    seed_intervals.py       each family's scores over its seeds: mean, 95% interval, the families not told apart
    context_scores.py       a run's blanks and continuations on the stories language, beside its trivial baselines

May import: everything below it, `training/` included (a run folder, the engine for fine-tuning).
"""
