"""What a trained run gets right on the "stories" language's context tasks, read beside the trivial baselines.

    blank_scores(run_dir, kind="reference", limit=120) -> BlankScores: top-1 fills of held-out blanks
    continuation_scores(run_dir, prompts=40) -> ContinuationScores: how often a run's continuations parse
    next_sentence_scores(run_dir, prompts=60) -> HitScores: how often the sentence a run writes after a story's opening
        parses (every family that writes: left to right, or by mask-predict into a blank after the prompt)
    span_blank_scores(run_dir, limit=120) -> HitScores: "the NOUN" hidden as two [MASK]s, both filled right
    span_scores(run_dir, limit=120) -> SpanScores: infills of held-out two-word spans ("the NOUN")
    translation_scores(run_dir, limit=120) -> TranslationScores: BLEU of held-out translations, and of copying

The blanks and the baselines come from lab_models/text/story_tasks.py (the validation stories of the "stories"
corpus, which a run pretrained on it never saw). A blank is filled the way the Understand tab's fill-mask does
(`fill_mask` with one [MASK] where the word was, the whole story around it): "reference" blanks are right when the
top-1 piece is the hidden noun, "agreement" blanks when it is any verb or auxiliary of the subject's number.

Spans: the two words "the NOUN" of the same reference blanks, hidden whole as one `___`, filled by the family's
infill mode (T5, GLM: the model decides the span's length; MASS, UniLM: told it, the span's token count under the
run's tokenizer, as their decoders need); right when the fill's words are exactly "the NOUN". The baselines are
story_tasks.span_baselines (row "reference_span" of its baseline_table).

Translations: the validation pairs of the zoo corpus's language (objectives/translation.py `language_pairs`: sentences
of stories the runs never trained on), translated greedily by the family's translate mode, scored with sacrebleu's
corpus BLEU (its "zh" tokenizer: one token per Chinese character) beside the copy-the-source baseline (the English
sentence itself as the "translation").

Continuations: the first sentence of each validation story is the prompt; the run continues it greedily (what the
Compare tab shows by default) for `CONTINUATION_TOKENS` tokens; every complete English sentence of the continuation
(up to a "." ; Chinese text and an unfinished last sentence are not scored) is checked by the grammar
(`parse_sentence`, agreement included). Greedy decoding is the deviation from the usual sampled evaluation: it
scores what a reader of the lab sees.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lab_models.inference.generation.context import load_decodable_run
from lab_models.inference.generation.generate import fill_mask, generate
from lab_models.objectives.translation import language_pairs
from lab_models.messages import LabError
from lab_models.text.stories import BLANK_KINDS, parse_sentence
from lab_models.text.story_tasks import context_tasks, story_split

CONTINUATION_TOKENS = 40
TRANSLATION_TOKENS = 48  # a sentence's Chinese is at most about 30 characters
SPAN_TOKENS = 8
BLANK_LIMIT = 120  # held-out blanks scored
SENTENCE_BLANK_TOKENS = 8  # a sentence of the stories is 4 to 8 words, one token each at the zoo's vocabulary
MASK = "[MASK]"


@dataclass(frozen=True)
class BlankScores:
    kind: str
    items: int
    accuracy: float
    top_answers: tuple[tuple[str, int], ...]  # the most frequent top-1 fills: one answer for all is a plateau
    hits: tuple[int, ...] = ()  # 1 where the fill of that blank was right, in the blanks' order


@dataclass(frozen=True)
class HitScores:
    """A hit rate over held-out items, with each item's hit (the claims' bootstrap over examples reads them)."""

    items: int
    accuracy: float
    hits: tuple[int, ...]
    example: str = ""


@dataclass(frozen=True)
class ContinuationScores:
    prompts: int
    sentences: int  # complete English sentences in the continuations
    parse_rate: float  # the fraction of them that parse, agreement included
    example: str  # the first prompt's continuation


def blank_scores(run_dir, kind: str = "reference", limit: int = BLANK_LIMIT) -> BlankScores:
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
    hits = tuple(int(blank.is_right(answer)) for blank, answer in zip(blanks, answers))
    return BlankScores(kind, len(blanks), sum(hits) / max(len(blanks), 1), tuple(Counter(answers).most_common(3)),
                       hits)


def span_blank_scores(run_dir, limit: int = BLANK_LIMIT) -> HitScores:
    """The reference blanks' two words "the NOUN" hidden as two [MASK]s, filled at once (top-1 of each slot, as the
    Understand tab's fill-mask fills several blanks); a hit when both words are right. Every family with a fill-mask
    answers it, so a span masker (SpanBERT) and a token masker (BERT) are scored alike. ValueError (fill_mask's
    refusal) when the family cannot fill a blank."""
    blanks = context_tasks()["reference"].validation[:limit]
    hits = []
    example = ""
    for blank in blanks:
        words = list(blank.story)
        words[blank.position - 1:blank.position + 1] = [MASK, MASK]
        slots = fill_mask(run_dir, " ".join(words), top_k=1)
        fill = [slot[0][0].strip() if slot else "" for slot in slots]
        example = example or " ".join(fill)
        hits.append(int(fill == ["the", blank.answer]))
    return HitScores(len(blanks), sum(hits) / max(len(blanks), 1), tuple(hits), example)


def next_sentence_scores(run_dir, prompts: int = 60) -> HitScores:
    """How often the first complete sentence a run writes after a validation story's opening sentence parses under
    the grammar (agreement included). A left-to-right family continues the prompt greedily; a masked LM, which
    cannot continue a text, fills a blank of `SENTENCE_BLANK_TOKENS` tokens after it by mask-predict (the Compare
    tab's way of letting BERT write). A continuation without a complete sentence is a miss."""
    data, _, validation = story_split()
    stories = data.stories()
    hits = []
    example = ""
    for index in validation[:prompts]:
        prompt = stories[index][0].english
        try:
            text = generate(run_dir, prompt, max_new_tokens=CONTINUATION_TOKENS // 2).new_text
        except LabError:  # a masked LM: it writes into a blank
            text = generate(run_dir, f"{prompt} ___", blank_length=SENTENCE_BLANK_TOKENS,
                            max_new_tokens=SENTENCE_BLANK_TOKENS).new_text
        sentences = complete_sentences(text.replace(".", " . "))  # a decoded "cats." ends a sentence too
        example = example or text.strip()
        hits.append(int(bool(sentences) and parse_sentence(sentences[0]) is not None))
    return HitScores(len(hits), sum(hits) / max(len(hits), 1), tuple(hits), example)


@dataclass(frozen=True)
class SpanScores:
    items: int
    accuracy: float  # fills that are exactly "the NOUN"
    noun_accuracy: float  # fills whose last word is the noun (a fill that adds or drops words still counts here)
    top_answers: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TranslationScores:
    pairs: int
    bleu: float  # sacrebleu corpus BLEU, 0-100, Chinese tokenized per character
    copy_bleu: float  # the same for copying the English source
    chrf: float
    example: tuple[str, str, str]  # (English, reference Chinese, the run's translation) of the first pair


def span_scores(run_dir, limit: int = 120) -> SpanScores | None:
    """How often the run's infill of a hidden "the NOUN" (the reference blanks' two words) is exactly right; None
    when the family has no infill mode."""
    run = load_decodable_run(run_dir)
    blanks = context_tasks()["reference"].validation[:limit]
    exact = noun = 0
    answers = []
    for blank in blanks:
        words = list(blank.story)
        words[blank.position - 1:blank.position + 1] = ["___"]
        span = f"the {blank.answer}"
        length = (len(run.tokenizer.encode(f"x {span}", add_special_tokens=False).ids)
                  - len(run.tokenizer.encode("x", add_special_tokens=False).ids))
        generation = generate(run_dir, " ".join(words), mode="infill", blank_length=max(length, 1),
                              max_new_tokens=SPAN_TOKENS)
        if not generation.supported:
            return None
        fill = " ".join(generation.new_text.split())
        answers.append(fill)
        exact += fill == span
        noun += fill.split()[-1:] == [blank.answer]
    return SpanScores(len(blanks), exact / max(len(blanks), 1), noun / max(len(blanks), 1),
                      tuple(Counter(answers).most_common(3)))


def translation_scores(run_dir, limit: int = 120, language: str = "stories") -> TranslationScores | None:
    """The BLEU of the run's translations of `language`'s first `limit` validation pairs, beside copying the source;
    None when the family does not translate."""
    import sacrebleu

    pairs = language_pairs(language, "validation")[:limit]
    hypotheses = []
    for english, _ in pairs:
        generation = generate(run_dir, english, mode="translate", max_new_tokens=TRANSLATION_TOKENS)
        if not generation.supported:
            return None
        hypotheses.append(generation.new_text.strip())
    references = [[chinese for _, chinese in pairs]]
    # force: the sentences end in a spaced "." by design, which sacrebleu would otherwise warn about
    bleu = sacrebleu.corpus_bleu(hypotheses, references, tokenize="zh", force=True).score
    copy_bleu = sacrebleu.corpus_bleu([english for english, _ in pairs], references, tokenize="zh", force=True).score
    chrf = sacrebleu.corpus_chrf(hypotheses, references).score
    return TranslationScores(len(pairs), bleu, copy_bleu, chrf, (pairs[0][0], pairs[0][1], hypotheses[0]))


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
