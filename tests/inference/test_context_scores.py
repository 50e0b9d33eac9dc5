"""Tests for lab_models.inference.context_scores: how a run's fills and continuations are scored on the stories
language (the fills and continuations are stood in for, so that the scoring itself is what is checked)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from lab_models.inference import context_scores
from lab_models.messages import LabError
from lab_models.text.stories import VERB_NUMBER
from lab_models.text.story_tasks import context_tasks


def _fills(answer_for):
    """A stand-in for fill_mask that answers `answer_for(blank)` for the blank whose story it is given."""
    blanks = {" ".join(w if i != b.position else "[MASK]" for i, w in enumerate(b.story)): b
              for kind in ("reference", "agreement") for b in context_tasks()[kind].validation}

    def fill_mask(run_dir, text, top_k=1):
        return [[(" " + answer_for(blanks[text]), 0.9)]]
    return fill_mask


def test_blank_scores_count_the_exact_noun_and_any_verb_of_the_right_number(monkeypatch):
    monkeypatch.setattr(context_scores, "fill_mask", _fills(lambda blank: blank.answer))
    assert context_scores.blank_scores("run", "reference", limit=30).accuracy == 1.0

    monkeypatch.setattr(context_scores, "fill_mask", _fills(lambda blank: "the"))
    scores = context_scores.blank_scores("run", "reference", limit=30)
    assert scores.accuracy == 0.0 and scores.top_answers == (("the", 30),) and scores.items == 30

    def some_verb_of(number):
        return next(verb for verb, verb_number in sorted(VERB_NUMBER.items()) if verb_number == number)
    monkeypatch.setattr(context_scores, "fill_mask", _fills(lambda blank: some_verb_of(blank.number)))
    assert context_scores.blank_scores("run", "agreement", limit=30).accuracy == 1.0
    monkeypatch.setattr(context_scores, "fill_mask",
                        _fills(lambda blank: some_verb_of("PL" if blank.number == "SG" else "SG")))
    assert context_scores.blank_scores("run", "agreement", limit=30).accuracy == 0.0
    with pytest.raises(LabError, match="unknown blank kind"):
        context_scores.blank_scores("run", "verbs")


def test_continuations_are_scored_sentence_by_sentence_by_the_grammar(monkeypatch):
    continuation = " the cat sees a ball . the cat see a ball . 猫看见球。 the dogs"
    monkeypatch.setattr(context_scores, "generate",
                        lambda run_dir, prompt, max_new_tokens: SimpleNamespace(new_text=continuation))
    scores = context_scores.continuation_scores("run", prompts=3)
    assert (scores.prompts, scores.sentences, scores.parse_rate) == (3, 6, 0.5)
    assert scores.example == continuation
