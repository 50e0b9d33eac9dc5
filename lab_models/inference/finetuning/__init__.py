"""inference.finetuning: a head on a pretrained run, fine-tuned on a labelled task (BERT §4, GPT §3.2).

    config.py    `FinetuneConfig` (frozen, saved with every fine-tuning), constants, the schedule, macro F1, folders
    encoding.py  framing each example with the lab's special tokens, truncation and batching
    heads.py     the classifier on the backbone's hidden states, the auxiliary LM loss, evaluation
    results.py   summaries of finished fine-tunings, the leaderboard over them, queueing one on the job manager
    run.py       one fine-tuning, start to end, and `python -m lab_models finetune`
    saved.py     a finished fine-tuning's classifier back from its folder (for the attributions of its labels)

May import: what `inference/` may, and `inference.loading`.
"""
