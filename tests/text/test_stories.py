"""Tests for lab_models.text.stories (the language where context decides) and lab_models.text.story_tasks (its context
tasks and their trivial baselines)."""
from __future__ import annotations

from collections import Counter

import pytest

from lab_models.messages import LabError
from lab_models.text import stories
from lab_models.text.corpora import load_corpus
from lab_models.text.stories import (AMBIGUOUS_FORMS, NO_LABEL, entailment_label, grammatical, parse_sentence,
                                     story_blanks, story_dataset)
from lab_models.text.story_tasks import CONTEXT_THRESHOLD, baseline_table, context_tasks


@pytest.fixture(scope="module")
def data():
    return story_dataset(seed=0, n_sentences=3000)


def test_the_language_is_deterministic_from_the_seed_and_its_first_story_is_as_written():
    first, again, other = story_dataset(0, 300), story_dataset(0, 300), story_dataset(1, 300)
    assert first == again and first.examples != other.examples
    assert [(example.english, example.chinese) for example in first.stories()[0]] == [
        ("two teachers watch a coach .", "两位老师看着一位教练。"),
        ("the teachers that chase a pupil judge the tall pen .", "追一个小学生的那些老师评判高笔。"),
        ("no teacher likes a picture .", "没有老师喜欢一幅画。"),
    ]
    assert first.stories()[0][1].tags == ("DET", "NOUN", "REL", "VERB", "DET", "NOUN", "VERB", "DET", "ADJ", "NOUN",
                                          "PUNCT")
    assert first.stories()[0][1].subject_number == ("-", "-", "PL", "-", "PL", "PL", "-", "-", "-", "-", "-")


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_a_bad_size_is_refused(bad):
    with pytest.raises(LabError, match="positive whole number"):
        story_dataset(0, bad)


def test_every_sentence_parses_with_the_tags_and_roles_of_its_derivation(data):
    for example in data.examples:
        parse = parse_sentence(example.english)
        assert parse is not None, example.english
        assert (parse.tags, parse.roles) == (example.tags, example.roles), example.english
    assert set(example.tokens[0] for example in data.examples) <= set(stories.vocabulary())
    assert {token for example in data.examples for token in example.tokens} <= set(stories.vocabulary())


@pytest.mark.parametrize("sentence", [
    "the cat near the dogs chase a ball .",  # agrees with the attractor, not the subject
    "the cats that chases a duck see the dogs .",  # a relative clause agrees with its head
    "the cats that chase a duck does not see the dogs .",
    "a cats sees a ball .",  # determiner and noun
    "two cat see a ball .",
    "every cats see a ball .",
    "no cat does not see a ball .",  # no negation after "no"
    "they sees a ball .",
    "the cat sees a ball",  # the full stop is required
    "the cat sees a ball in the station .",  # a place takes its own preposition
    "the cat sees .",
    "",
])
def test_the_grammar_check_refuses_what_the_language_cannot_say(sentence):
    assert parse_sentence(sentence) is None and not grammatical(sentence)


def test_the_grammar_check_reads_a_form_by_its_place():
    assert parse_sentence("the cooks cook the fish .").tags == ("DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT")
    assert parse_sentence("the cook cooks some drinks .").tags == ("DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT")
    assert parse_sentence("the fish near a cook watches the judges .").subject_number == "SG"
    assert parse_sentence("the fish near a cook watch the judges .").subject_number == "PL"
    assert parse_sentence("every judge does not watch a train .").tags[:4] == ("DET", "NOUN", "AUX", "NEG")


def test_ambiguous_forms_are_nouns_and_verbs_in_the_corpus(data):
    uses = Counter((token, tag) for example in data.examples for token, tag in zip(example.tokens, example.tags)
                   if token in AMBIGUOUS_FORMS)
    assert len(AMBIGUOUS_FORMS) == 20
    for form in AMBIGUOUS_FORMS:
        assert uses[(form, "NOUN")] > 0 and uses[(form, "VERB")] > 0, form


def test_references_point_to_the_storys_two_characters(data):
    for story in data.stories():
        first_sentence = story[0]
        nouns = [token for token, tag, role in zip(first_sentence.tokens, first_sentence.tags, first_sentence.roles)
                 if tag == "NOUN" and role in ("SUBJ", "OBJ")]
        characters = {"FIRST": nouns[0], "SECOND": nouns[-1]}
        assert stories.NOUN_NUMBER[nouns[0]] != stories.NOUN_NUMBER[nouns[-1]]  # one singular, one plural
        for example in story[1:]:
            for token, tag, antecedent in zip(example.tokens, example.tags, example.antecedent):
                if antecedent == NO_LABEL:
                    continue
                if tag == "NOUN":
                    assert token == characters[antecedent]
                else:
                    assert tag == "PRON"
                    plural = stories.NOUN_NUMBER[characters[antecedent]] == {"PL"}
                    assert (token == "they") == plural


def test_entailment_follows_monotonicity():
    assert entailment_label("every", False, "add_subject_adjective") == "entailment"
    assert entailment_label("every", False, "drop_subject_adjective") == "neutral"
    assert entailment_label("every", False, "drop_object_adjective") == "entailment"
    assert entailment_label("some", False, "drop_subject_adjective") == "entailment"
    assert entailment_label("no", False, "add_object_adjective") == "entailment"
    assert entailment_label("no", False, "drop_object_adjective") == "neutral"
    assert entailment_label("the", True, "add_object_adjective") == "entailment"  # negation flips the scope
    assert entailment_label("the", True, "drop_object_adjective") == "neutral"
    assert entailment_label("the", False, "flip_negation") == "contradiction"
    assert entailment_label("some", True, "flip_negation") == "neutral"
    assert entailment_label("every", False, "swap_quantifier") == "contradiction"


def test_entailment_pairs_parse_and_their_labels_follow_from_the_edit(data):
    assert Counter(pair.label for pair in data.pairs).keys() == {"entailment", "contradiction", "neutral"}
    for pair in data.pairs[:500]:
        premise, hypothesis = pair.premise.split(), pair.hypothesis.split()
        assert grammatical(premise) and grammatical(hypothesis)
        negated = "not" in premise
        if ("not" in hypothesis) != negated:
            assert pair.label == ("neutral" if premise[0] == "some" else "contradiction")
        elif premise[0] != hypothesis[0]:
            assert pair.label == "contradiction"
        else:
            subject_premise, subject_hypothesis = premise[:premise.index(_verb(premise))], \
                hypothesis[:hypothesis.index(_verb(hypothesis))]
            position = "subject" if subject_premise != subject_hypothesis else "object"
            edit = ("drop_" if len(hypothesis) < len(premise) else "add_") + position + "_adjective"
            assert pair.label == entailment_label(premise[0], negated, edit), pair


def _verb(words):
    return next(word for word in words if word in ("does", "do") or word in stories.VERB_NUMBER)


def test_blanks_are_decided_by_the_context(data):
    story = data.stories()[0]
    blanks = story_blanks(story)
    assert [(blank.kind, blank.answer, blank.number) for blank in blanks] == [
        ("reference", "teachers", "PL"), ("agreement", "judge", "PL")]
    agreement = blanks[1]
    assert agreement.is_right("watch") and agreement.is_right("do") and not agreement.is_right("judges")
    assert blanks[0].is_right("teachers") and not blanks[0].is_right("teacher")
    for story in data.stories()[:300]:
        words = [token for example in story for token in example.tokens]
        for blank in story_blanks(story):
            assert words[blank.position] == blank.answer
            if blank.kind == "reference":  # the character was named before, in the same number
                assert blank.answer in words[:blank.position]
    with pytest.raises(LabError, match="unknown blank kind"):
        data.blanks("nonsense")


def test_context_tasks_have_word_identity_near_chance_and_the_story_split_of_the_corpus():
    table = baseline_table().set_index("task")
    for task in ("ambiguous_tags", "antecedent", "subject_number", "entailment"):
        assert table.loc[task, "word_identity"] <= CONTEXT_THRESHOLD and table.loc[task, "context_task"]
    assert table.loc["reference", "best_baseline"] < 0.1  # a masked LM must read the story to fill it
    assert table.loc["agreement", "bigram"] < 0.65  # the previous word is the attractor
    assert not table.loc["order", "context_task"]  # the words of a story's later sentences give its order away
    tasks = context_tasks()
    assert Counter(item.label for item in tasks["ambiguous_tags"].validation)["NOUN"] == \
        Counter(item.label for item in tasks["ambiguous_tags"].validation)["VERB"]
    corpus = load_corpus("stories")
    validation_text = " ".join(corpus.validation)
    for blank in tasks["reference"].validation[:50]:
        assert " ".join(blank.story) in validation_text


def test_the_stories_corpus_is_bilingual_and_split_by_story(tmp_path):
    corpus = load_corpus("stories", home=tmp_path)
    assert corpus.name == "stories" and corpus.source == "builtin"
    for split in (corpus.train, corpus.validation):
        assert len(split) % 2 == 0
        for english, chinese in zip(split[::2], split[1::2]):
            assert english.endswith(" .") and chinese.endswith("。")
            assert english.count(" .") == chinese.count("。")
