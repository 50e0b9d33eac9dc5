"""What a trained run gets right on the "stories" language's context tasks, read beside the trivial baselines.

    blank_scores(run_dir, kind="reference", limit=120) -> BlankScores: top-1 fills of held-out blanks
    continuation_scores(run_dir, prompts=40) -> ContinuationScores: how often a run's continuations parse

The blanks and the baselines come from lab_models/text/story_tasks.py (the validation stories of the "stories"
corpus, which a run pretrained on it never saw). A blank is filled the way the Understand tab's fill-mask does
(`fill_mask` with one [MASK] where the word was, the whole story around it): "reference" blanks are right when the
top-1 piece is the hidden noun, "agreement" blanks when it is any verb or auxiliary of the subject's number.

Continuations: the first sentence of each validation story is the prompt; the run continues it greedily (what the
Compare tab shows by default) for `CONTINUATION_TOKENS` tokens; every complete English sentence of the continuation
(up to a "." ; Chinese text and an unfinished last sentence are not scored) is checked by the grammar
(`parse_sentence`, agreement included). Greedy decoding is the deviation from the usual sampled evaluation: it
scores what a reader of the lab sees.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lab_models.inference.generation.generate import fill_mask, generate
from lab_models.messages import LabError
from lab_models.text.stories import BLANK_KINDS, parse_sentence
from lab_models.text.story_tasks import context_tasks, story_split

CONTINUATION_TOKENS = 40
MASK = "[MASK]"


@dataclass(frozen=True)
class BlankScores:
    kind: str
    items: int
    accuracy: float
    top_answers: tuple[tuple[str, int], ...]  # the most frequent top-1 fills: one answer for all is a plateau


@dataclass(frozen=True)
class ContinuationScores:
    prompts: int
    sentences: int  # complete English sentences in the continuations
    parse_rate: float  # the fraction of them that parse, agreement included
    example: str  # the first prompt's continuation


def blank_scores(run_dir, kind: str = "reference", limit: int = 120) -> BlankScores:
    """The top-1 accuracy of the run's fills of the first `limit` validation blanks of `kind`.
    LabError for an unknown kind; ValueError (fill_mask's refusal) when the family cannot fill a blank."""
    if kind not in BLANK_KINDS:
        raise LabError("unknown blank kind {kind!r}; choose one of {kinds}", kind=kind, kinds=", ".join(BLANK_KINDS))
    blanks = context_tasks()[kind].validation[:limit]
    answers = []
    for blank in blanks:
        words = list(blank.story)
        words[blank.position] = MASK
        slots = fill_mask(run_dir, " ".join(words), top_k=1)
        answers.append(slots[0][0][0].strip() if slots and slots[0] else "")
    right = sum(blank.is_right(answer) for blank, answer in zip(blanks, answers))
    return BlankScores(kind, len(blanks), right / max(len(blanks), 1), tuple(Counter(answers).most_common(3)))


def continuation_scores(run_dir, prompts: int = 40) -> ContinuationScores:
    """How many complete sentences of the run's greedy continuations of validation stories' first sentences parse."""
    data, _, validation = story_split()
    stories = data.stories()
    first_sentences = [stories[index][0].english for index in validation[:prompts]]
    parsed = total = 0
    example = ""
    for prompt in first_sentences:
        continuation = generate(run_dir, prompt, max_new_tokens=CONTINUATION_TOKENS).new_text
        example = example or continuation
        for sentence in complete_sentences(continuation):
            total += 1
            parsed += parse_sentence(sentence) is not None
    return ContinuationScores(len(first_sentences), total, parsed / max(total, 1), example)


def complete_sentences(text: str) -> list[str]:
    """The English sentences of `text` that end with " .", without the words after the last one or any word that is
    not ASCII (the Chinese translation a bilingual run may write next).

    >>> complete_sentences(" the cat sees a ball . it likes the dogs . the")
    ['the cat sees a ball .', 'it likes the dogs .']
    """
    sentences, words = [], []
    for word in text.split():
        if not word.isascii():
            words = []
            continue
        words.append(word)
        if word == ".":
            sentences.append(" ".join(words))
            words = []
    return sentences
