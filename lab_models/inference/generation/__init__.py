"""inference.generation: text from a trained run, decoded the way its family was trained.

    context.py   the limits, the `Generation` record, the modes each family can do, argument checks, a run's
                 `DecodingContext` (vocabulary facts, ids never to generate) and the prompt's blanks
    decoders.py  what a left-to-right search asks of each family (first logits, logits after each step)
    plans.py     a prompt and its blanks, planned per family and mode, as a decoder with its limits
    search.py    greedy, sampled and beam search over a decoder
    generate.py  the entry points: `generate` and `fill_mask`

May import: what `inference/` may, and `inference.loading`.
"""
