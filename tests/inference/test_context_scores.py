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


def _word_tokenizer_run():
    """A stand-in run whose tokenizer splits on spaces (one token per word)."""
    class Tokenizer:
        def encode(self, text, add_special_tokens=False):
            return SimpleNamespace(ids=list(range(len(text.split()))))
    return SimpleNamespace(tokenizer=Tokenizer())


def test_spans_are_right_only_when_the_fill_is_exactly_the_hidden_the_noun(monkeypatch):
    blanks = {" ".join(list(b.story[:b.position - 1]) + ["___"] + list(b.story[b.position + 1:])): b
              for b in context_tasks()["reference"].validation[:20]}
    asked = []

    def generate(run_dir, prompt, mode, blank_length, max_new_tokens):
        blank = blanks[prompt]
        asked.append((mode, blank_length))
        fill = f" the {blank.answer}" if len(asked) % 2 else f" a {blank.answer} ."
        return SimpleNamespace(supported=True, new_text=fill)
    monkeypatch.setattr(context_scores, "load_decodable_run", lambda run_dir: _word_tokenizer_run())
    monkeypatch.setattr(context_scores, "generate", generate)
    scores = context_scores.span_scores("run", limit=20)
    assert (scores.items, scores.accuracy, scores.noun_accuracy) == (20, 0.5, 0.5)  # "a NOUN ." ends with "."
    assert set(asked) == {("infill", 2)}  # the span's token count: two words

    monkeypatch.setattr(context_scores, "generate", lambda *a, **k: SimpleNamespace(supported=False, new_text=""))
    assert context_scores.span_scores("run", limit=20) is None  # a family without infill


def test_translations_are_scored_with_bleu_beside_copying_the_source(monkeypatch):
    from lab_models.objectives.translation import language_pairs
    chinese = dict(language_pairs("stories", "validation"))
    monkeypatch.setattr(context_scores, "generate", lambda run_dir, english, mode, max_new_tokens:
                        SimpleNamespace(supported=True, new_text=chinese[english]))
    perfect = context_scores.translation_scores("run", limit=10)
    assert perfect.pairs == 10 and perfect.bleu == pytest.approx(100.0) and perfect.copy_bleu < 1.0
    assert perfect.example[1] == perfect.example[2]

    monkeypatch.setattr(context_scores, "generate", lambda run_dir, english, mode, max_new_tokens:
                        SimpleNamespace(supported=True, new_text="。"))
    assert context_scores.translation_scores("run", limit=10).bleu < 5.0
    monkeypatch.setattr(context_scores, "generate", lambda *a, **k: SimpleNamespace(supported=False, new_text=""))
    assert context_scores.translation_scores("run", limit=10) is None
