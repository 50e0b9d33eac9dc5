"""The family models on a toy vocabulary, for the model tests (tests/models/, tests/objectives/test_addons.py): thirty
ordinary words, tiny models and seeded batches of every family, a repetitive toy corpus to train on, and the leakage
check.

The leakage check is the test that matters most: a wrong attention mask (or a batch builder that leaves the answer in
the input) still trains and still lowers the loss. `find_leaks` changes, one at a time, every original token of a row,
rebuilds the batch with the same seed, and checks that the logits predicting each changed target did not move
(`FamilyModel.target_logits` gives, for every family, the logits aligned with `batch.targets`: the query stream for
XLNet/MPNet, the decoder for MASS/T5).
"""
from __future__ import annotations

import torch

from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.models.family import FamilyModel, build_model, family_model_config
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig, StringVocab

WORDS = ("the a my cat dog bird fish sees likes finds eats chases red blue big small old ball box tree house park "
         "in on near quickly slowly today . and").split()
VOCAB = StringVocab(WORDS)
V = VOCAB.info.size
FIRST_WORD = VOCAB.token_to_id[WORDS[0]]


def settings_for(family: str, **changes):
    return objective_module(family).Settings(**changes)


def make_model(family: str, settings=None, weights=None, seed: int = 0, **overrides) -> FamilyModel:
    settings = settings if settings is not None else settings_for(family)
    config = family_model_config(family, "tiny", V, settings=settings, **overrides)
    return build_model(family, config, settings, VOCAB.info, weights or {}, seed=seed)


def make_batch(family: str, rows, settings=None, seed: int = 1) -> Batch:
    settings = settings if settings is not None else settings_for(family)
    module = objective_module(family)
    return module.make_batch(rows, torch.Generator().manual_seed(seed), BatchConfig(settings, VOCAB.info))


def random_rows(B: int, T: int, seed: int = 0) -> torch.Tensor:
    """(B, T) ids of ordinary words."""
    g = torch.Generator().manual_seed(seed)
    return FIRST_WORD + torch.randint(len(WORDS), (B, T), generator=g)


# ----------------------------------------------------------------------------------------------------------- leakage

def leak_settings(family: str, **changes):
    """Settings under which a batch's structure does not depend on token content and the input at a target is never
    the target itself: every picked token becomes [MASK] (no 10% keep / random), MPNet's slots and MASS's fragment are
    all [MASK], no static (hash-of-content) masking, and no NotNext segments copied from other rows. XLNet, GLM and T5
    corrupt nothing by chance."""
    mlm = dict(mask_token_rate=1.0, random_token_rate=0.0)
    per_family = {
        "gpt": {}, "gpt2": {},
        "bert": dict(mlm, static_masking=False, nsp_random_rate=0.0),
        "roberta": dict(mlm, static_masking=False),
        "albert": dict(mlm),  # SOP swaps are content-independent: kept
        "spanbert": dict(mlm),
        "electra": dict(mlm),
        "unilm": dict(mlm, nsp_random_rate=0.0),
        "xlnet": {}, "glm": {}, "t5": {},
        "mpnet": dict(mask_prob=1.0, random_prob=0.0),
        "mass": dict(mask_prob=1.0, random_prob=0.0),
    }
    return settings_for(family, **{**per_family[family], **changes})


def same_structure(a: Batch, b: Batch) -> bool:
    def same(x, y):
        return (x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))

    return (list(a.attention) == list(b.attention)
            and all(torch.equal(a.attention[k], b.attention[k]) for k in a.attention)
            and same(a.position_ids, b.position_ids) and same(a.segment_ids, b.segment_ids)
            and same(a.query_slots, b.query_slots) and same(a.decoder_position_ids, b.decoder_position_ids)
            and torch.equal(a.targets != IGNORE_INDEX, b.targets != IGNORE_INDEX))


def find_leaks(model: FamilyModel, build, rows: torch.Tensor, atol: float = 1e-5, *, words_only: bool = False):
    """Change each original token in turn; at every target that changes with it, the logits predicting that target
    must not. Returns (the checked target positions, the leaking ones, the target positions: all of them, or with
    `words_only` those whose target is an ordinary word, for the families with targets no text token stands for:
    GLM's [E] and T5's sentinels)."""
    model.eval()
    base = build(rows)
    B, L = base.targets.shape
    everywhere = torch.ones(B, L, dtype=torch.bool)
    with torch.no_grad():
        base_logits = model.target_logits(base, everywhere).reshape(B, L, -1)  # (B, L, V)
    checked, leaks = set(), []
    for b in range(rows.shape[0]):
        for r in range(rows.shape[1]):
            changed_rows = rows.clone()
            changed_rows[b, r] = FIRST_WORD + (rows[b, r] - FIRST_WORD + 1) % len(WORDS)  # another ordinary word
            batch = build(changed_rows)
            assert same_structure(base, batch), f"changing token {r} of row {b} changed the batch's structure"
            affected = (batch.targets != base.targets).nonzero().tolist()  # the targets this token is
            if not affected:
                continue
            with torch.no_grad():
                logits = model.target_logits(batch, everywhere).reshape(B, L, -1)
            for bb, p in affected:
                checked.add((bb, p))
                if not torch.allclose(logits[bb, p], base_logits[bb, p], atol=atol):
                    leaks.append((bb, p))
    counted = base.targets >= FIRST_WORD if words_only else base.targets != IGNORE_INDEX
    return checked, leaks, {tuple(x) for x in counted.nonzero().tolist()}


# ------------------------------------------------------------------------------------------------------ toy corpus

def toy_corpus(n_tokens: int, seed: int = 0) -> list[int]:
    """A repetitive seeded text: 'DET ADJ NOUN VERB DET NOUN PLACE .' sentences over WORDS."""
    g = torch.Generator().manual_seed(seed)

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=g))]

    tokens = []
    while len(tokens) < n_tokens:
        sentence = [pick(["the", "a", "my"]), pick(["red", "big", "old"]), pick(["cat", "dog", "bird"]),
                    pick(["sees", "likes", "chases"]), "the", pick(["ball", "box", "tree"]),
                    pick(["in", "near"]), "the", "park", "."]
        tokens += [VOCAB.token_to_id[w] for w in sentence]
    return tokens[:n_tokens]


CORPUS = torch.tensor(toy_corpus(4000))


def corpus_rows(g: torch.Generator, B: int = 8, T: int = 32) -> torch.Tensor:
    starts = torch.randint(CORPUS.numel() - T, (B,), generator=g)
    return torch.stack([CORPUS[s:s + T] for s in starts.tolist()])  # (B, T)
