"""inference: what a trained (or imported) run does and what it has learned.

    loading.py              a run folder back as a model, tokenizer and settings (`load_run`, cached)
    generation/             generation, infilling, translation and fill-mask, decoded the way each family trained
    representations.py      contextual embeddings per layer, the PCA projection, and attention maps per head
    routing.py              which expert each token goes to in a Switch run
    sentence_similarity.py  are same-topic sentences closer than different-topic ones?
    finetuning/             a classification head on a run, fine-tuned on a labelled task
    leaderboard.py          every run on one corpus measured the same way

May import: everything below it, `training/` included (a run folder, the engine for fine-tuning).
"""
