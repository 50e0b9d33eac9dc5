"""Tokenizer Lab tab: train BPE, byte-level BPE, WordPiece and Unigram on one corpus and watch them split the same text.

Handlers are plain methods of `TokenizerLab`; the trained tokenizers live in the lab home's on-disk cache (keyed by
corpus fingerprint, kind, vocabulary size), so every endpoint is stateless and `gradio_client` can drive it.

A vocabulary size too small for the corpus's alphabet (a Chinese corpus at 512) is not a dead end: the status names
the smallest size that works for every ticked kind (`api.propose_vocab_size`, lab_models/text/vocab_fit.py) and a button
**Use vocabulary size N** (`/use_proposed_vocab_size`) sets it and trains again.

What the handlers write (the status, the proposal, the progress lines, the statistics table's headers, the figures'
titles and axes, the chips' subtitles, the button's label) is in the reader's language (app/i18n/language.py `tr`); a
tokenizer that could not be trained says why through the message catalogue (app/i18n/messages.py). Kinds (bpe, ...),
tokens and numbers stay as they are.
"""
from __future__ import annotations

import pandas as pd
import gradio as gr

from lab_models import api

from app.display import tokenizer_kind_choices, tokenizer_title
from app.errors import user_errors
from app.i18n.language import current_language, text, tr
from app.i18n.messages import translate
from app.tab_parts import CorpusPicker, TabParts
from app.tokenizer_lab.figures import chips_html, overlap_figure, pieces_html, token_length_figure

DEFAULT_TEXT = ("The tokenizer splits unbelievably long words, numbers like 3.14159 and 2026, "
                "code such as `def f(x): return x**2`, emoji 🙂🚀 and Chinese 小猫看见一个红球。")
DEFAULT_VOCAB = 2000
BPE_KINDS = ("bpe", "byte_bpe")
USE_SIZE_LABEL = "Use vocabulary size {size}"  # the button's English (tokenizer.json "use_size"), page-build value
# the statistics table's headers (api.tokenizer_stats' keys, plus "cached") -> tokenizer.json keys
STATS_COLUMNS = {"kind": "col_kind", "vocab_size": "col_vocab_size", "tokens": "col_tokens",
                 "tokens_per_word": "col_tokens_per_word", "tokens_per_char": "col_tokens_per_char",
                 "unknown_rate": "col_unknown_rate", "avg_token_chars": "col_avg_token_chars",
                 "train_seconds": "col_train_seconds", "cached": "col_cached"}


def use_size_label(size: int) -> str:
    """The proposal button's label, in the reader's language ("Use vocabulary size 947")."""
    return tr("tokenizer.use_size", size=size)


def proposal_text(proposal) -> str:
    """`VocabProposal.message()` in the reader's language, from the proposal's numbers (the English is the same
    sentence): which kinds need a larger vocabulary than requested, and the size that works for every kind."""
    if not proposal.raised:
        return tr("tokenizer.proposal_fits", requested=proposal.requested)
    short = sorted(((kind, minimum) for kind, minimum in proposal.minimums.items() if minimum > proposal.requested),
                   key=lambda item: -item[1])
    needs = tr("tokenizer.proposal_separator").join(
        tr("tokenizer.proposal_needs_first" if i == 0 else "tokenizer.proposal_needs_more",
           kind=tokenizer_title(kind), minimum=minimum) for i, (kind, minimum) in enumerate(short))
    return tr("tokenizer.proposal", requested=proposal.requested, needs=needs, size=proposal.size)


def stats_table(stats: list[dict]) -> pd.DataFrame:
    """The statistics table as shown: one row per kind, rounded, headers in the reader's language (and "cached" as a
    word for a reader of another language than English, whose page would show true/false)."""
    table = pd.DataFrame(stats).round(4)
    if current_language() != "en" and "cached" in table.columns:
        table["cached"] = [tr("tokenizer.cached_yes") if cached else tr("tokenizer.cached_no")
                           for cached in table["cached"]]
    return table.rename(columns={name: tr(f"tokenizer.{key}") for name, key in STATS_COLUMNS.items()})


class TokenizerLab:
    """The tab's handlers, bound to one lab home."""

    def __init__(self, home):
        self.home = home

    def refresh_corpora(self, current=None):
        """The corpus picker with the corpora of the lab home now, keeping `current` while it is one of them."""
        choices = api.list_corpora(home=self.home)
        return gr.update(choices=choices, value=current if current in choices else (choices[0] if choices else None))

    def _trained(self, corpus_name: str, vocab_size, kind: str, progress=None):
        if not corpus_name:
            raise api.LabError("Choose a corpus first.")
        if vocab_size is None:
            raise api.LabError("Enter a vocabulary size, for example 2000.")
        if float(vocab_size) != int(vocab_size) or not 0 < vocab_size <= api.MAX_VOCAB_SIZE:
            raise api.LabError("The vocabulary size must be a whole number from 1 to {max_vocab_size:,}, such as "
                               "2000; got {vocab_size:,.15g}.",
                               max_vocab_size=api.MAX_VOCAB_SIZE, vocab_size=vocab_size)
        corpus = api.load_named_corpus(corpus_name, home=self.home)
        return api.cached_tokenizer(kind, corpus.train, int(vocab_size), corpus_fingerprint=corpus.fingerprint,
                                    home=self.home, progress=progress)

    @staticmethod
    def _kinds(kinds) -> list[str]:
        kinds = list(kinds or [])
        if not kinds:
            raise api.LabError("Tick at least one tokenizer kind.")
        unknown = [k for k in kinds if k not in api.TOKENIZER_KINDS]
        if unknown:
            raise api.LabError("Unknown tokenizer kind {unknown!r}: choose from {tokenizer_kinds}.",
                               unknown=unknown[0], tokenizer_kinds=', '.join(api.TOKENIZER_KINDS))
        return kinds

    def train(self, corpus_name, vocab_size, kinds, text, progress=gr.Progress()):
        """Train (or load from cache) every ticked kind; return status, stats, charts, chips and the files.

        Each kind is trained on its own: one that cannot reach the vocabulary size is reported in the status while
        the others still train. Only when every kind fails is it an error.
        """
        kinds = self._kinds(kinds)
        if not corpus_name:
            raise api.LabError("Choose a corpus first.")
        corpus = api.load_named_corpus(corpus_name, home=self.home)
        results, stats, histograms, failures, minimums = {}, [], {}, {}, {}
        for index, kind in enumerate(kinds):
            progress(index / len(kinds), desc=tr("tokenizer.progress_training", kind=tokenizer_title(kind),
                                                 index=index + 1, total=len(kinds)))
            try:
                result = self._trained(corpus_name, vocab_size, kind)
            except api.VocabSizeTooSmall as error:  # the alphabet does not fit: propose the size that does
                minimums[kind] = error.minimum
                continue
            except ValueError as error:
                failures[kind] = api.message_of(error)
                continue
            results[kind] = result
            row = api.tokenizer_stats(result.tokenizer, corpus.validation or corpus.train[:200],
                                      train_seconds=result.train_seconds, kind=kind)
            row["cached"] = result.from_cache
            stats.append(row)
            histograms[kind] = api.token_length_histogram(result.tokenizer)
        progress(1.0, desc=tr("tokenizer.progress_done"))
        proposal = api.propose_vocab_size(list(minimums), [], int(vocab_size), known=minimums) if minimums else None
        # kinds that fail for the same reason share one sentence ("BPE, WordPiece: the vocabulary size ...")
        same_reason: dict[str, tuple] = {}
        for kind, message in failures.items():
            same_reason.setdefault(str(message), (message, []))[1].append(kind)
        if not results and proposal is None:  # each reason once, after the titles of the kinds it stopped
            raise api.LabError.of(api.Joined((api.Message("{kind}: {error}", kind=", ".join(
                api.TOKENIZER_KINDS[k] for k in stopped), error=m) for m, stopped in same_reason.values()), " "))
        status = (tr("tokenizer.status_trained", count=len(results), corpus=corpus_name, size=int(vocab_size))
                  if results else tr("tokenizer.status_none", corpus=corpus_name, size=int(vocab_size)))
        if proposal is not None:
            status += "\n\n⚠️ " + tr("tokenizer.status_proposal", proposal=proposal_text(proposal),
                                      button=use_size_label(proposal.size))
        for message, failed in same_reason.values():
            status += "\n\n⚠️ " + tr("tokenizer.status_failed", kind=", ".join(tokenizer_title(k) for k in failed),
                                      message=translate(message))
        use_size = gr.update(visible=proposal is not None,
                             value=use_size_label(proposal.size) if proposal else None)
        if not results:
            return status, None, None, None, "", [], use_size, proposal.size
        table = stats_table(stats)
        overlap = api.vocab_overlap({k: r.tokenizer for k, r in results.items()}) if len(results) > 1 else None
        chips = self._chips(results, text) if text and text.strip() else ""
        files = [str(r.path) for r in results.values()]
        return (status, table, token_length_figure(histograms),
                overlap_figure(overlap) if overlap is not None else None, chips, files, use_size,
                proposal.size if proposal else None)

    @staticmethod
    def use_proposed_size(proposed):
        """The proposed vocabulary size into the size box (the training follows as the next event)."""
        if not proposed:
            raise api.LabError("There is no proposed vocabulary size: train the tokenizers first.")
        return int(proposed)

    def _chips(self, results, text: str) -> str:
        rows = []
        for kind, result in results.items():
            pieces = api.tokenize_for_display(result.tokenizer, text)
            rows.append(chips_html(tokenizer_title(kind), pieces,
                                   subtitle=tr("tokenizer.chips_vocab", size=result.vocab_size)))
        return "".join(rows)

    def tokenize(self, corpus_name, vocab_size, kinds, text):
        """The same text split by every ticked kind, as coloured chips (id on hover)."""
        kinds = self._kinds(kinds)
        if not text or not text.strip():
            raise api.LabError("Type some text to tokenize.")
        return self._chips({k: self._trained(corpus_name, vocab_size, k) for k in kinds}, text)

    def replay_start(self, corpus_name, vocab_size, kind, text, n_merges):
        """The replay at 0 merges, if that BPE kind is trained at this size; nothing otherwise."""
        try:
            return self.replay(corpus_name, vocab_size, kind, text, 0)
        except ValueError:
            return gr.update(), gr.update()

    def replay(self, corpus_name, vocab_size, kind, text, n_merges):
        """The first `n_merges` merges of a BPE tokenizer applied to `text`, and the slider's new maximum."""
        if kind not in BPE_KINDS:
            raise api.LabError("Merge replay needs a BPE tokenizer: choose bpe or byte_bpe.")
        if not text or not text.strip():
            raise api.LabError("Type a word or sentence to replay the merges on.")
        result = self._trained(corpus_name, vocab_size, kind)
        total = api.merge_count(result.tokenizer)
        step = max(0, min(int(n_merges or 0), total))
        words = api.merge_replay(result.tokenizer, text, step)
        # a vocabulary of the bare alphabet (the proposed minimum) has no merges; a slider needs a maximum above 0
        return pieces_html(words, step, total), gr.update(maximum=max(total, 1), value=step)


def stats_placeholder(current=None):
    """The statistics table before anything is trained: no rows, its headers in the reader's language (Gradio would
    head an empty table "1 2 3"); a table with rows is left as it is."""
    if isinstance(current, pd.DataFrame) and len(current) and any(str(cell).strip() for cell in current.iloc[0]):
        return gr.skip()
    return pd.DataFrame(columns=[tr(f"tokenizer.{key}") for key in STATS_COLUMNS.values()])


def build(home, corpus_choices: list[str], tab=None) -> TabParts:
    """Lay out the tab inside the current Blocks (`tab`: the gr.Tab it sits in, whose opening redraws the empty
    statistics table in the reader's language). For the page: the corpus picker, which follows the Corpora tab's
    imports."""
    lab = TokenizerLab(home)
    gr.Markdown(text("tokenizer.intro"))
    with gr.Row():
        corpus = gr.Dropdown(corpus_choices, value=corpus_choices[0] if corpus_choices else None,
                             label=text("tokenizer.corpus"), scale=2)
        vocab_size = gr.Number(DEFAULT_VOCAB, precision=0, label=text("tokenizer.vocab_size"), scale=1)
        kinds = gr.CheckboxGroup(tokenizer_kind_choices(), value=list(api.TOKENIZER_KINDS),
                                 label=text("tokenizer.kinds"), scale=3)
    train_button = gr.Button(text("tokenizer.train"), variant="primary")
    status = gr.Markdown()
    use_size = gr.Button(USE_SIZE_LABEL.format(size=DEFAULT_VOCAB), variant="primary", visible=False,
                         elem_id="tokenizer-use-size")
    proposed = gr.State(None)
    sample_text = gr.Textbox(DEFAULT_TEXT, lines=2, label=text("tokenizer.text"))
    tokenize_button = gr.Button(text("tokenizer.tokenize"))
    chips = gr.HTML(label=text("tokenizer.side_by_side"))
    with gr.Accordion(text("tokenizer.replay"), open=True):
        with gr.Row():
            replay_kind = gr.Radio([(text("tokenizer.kind_bpe"), "bpe"), (text("tokenizer.kind_byte_bpe"), "byte_bpe")],
                                   value="bpe", label=text("tokenizer.replay_tokenizer"))
            replay_text = gr.Textbox("unbelievably tokenization", label=text("tokenizer.replay_text"), scale=2)
        merges = gr.Slider(0, DEFAULT_VOCAB, value=0, step=1, label=text("tokenizer.merges"))
        replay_view = gr.HTML()
    with gr.Accordion(text("tokenizer.statistics"), open=True):
        stats = gr.Dataframe(stats_placeholder(), label=text("tokenizer.stats_table"), interactive=False)
        with gr.Row():
            length_plot = gr.Plot(label=text("tokenizer.length_plot"))
            overlap_plot = gr.Plot(label=text("tokenizer.overlap_plot"))
    files = gr.File(label=text("tokenizer.files"), file_count="multiple", interactive=False)

    replay_inputs = [corpus, vocab_size, replay_kind, replay_text, merges]
    train_outputs = [status, stats, length_plot, overlap_plot, chips, files, use_size, proposed]
    trained = train_button.click(user_errors(lab.train), [corpus, vocab_size, kinds, sample_text], train_outputs,
                                 api_name="train_tokenizers")
    # After training, show the replay at 0 merges so the slider knows how many merges there are.
    trained.success(user_errors(lab.replay_start), replay_inputs, [replay_view, merges],
                    api_name="merge_replay_after_training")
    proposed_size = use_size.click(user_errors(lab.use_proposed_size), proposed, vocab_size,
                                   api_name="use_proposed_vocab_size")
    proposed_size.success(user_errors(lab.train), [corpus, vocab_size, kinds, sample_text], train_outputs,
                          api_name="train_tokenizers_at_proposed_size").success(
        user_errors(lab.replay_start), replay_inputs, [replay_view, merges],
        api_name="merge_replay_after_proposed_size")
    if tab is not None:
        tab.select(stats_placeholder, stats, stats, api_name="tokenizer_stats_placeholder_on_select",
                   show_progress="hidden")
    tokenize_button.click(user_errors(lab.tokenize), [corpus, vocab_size, kinds, sample_text], chips,
                          api_name="tokenize_text")
    merges.release(user_errors(lab.replay), replay_inputs, [replay_view, merges], api_name="merge_replay")
    replay_kind.change(user_errors(lab.replay), replay_inputs, [replay_view, merges], api_name="merge_replay_kind")
    replay_text.submit(user_errors(lab.replay), replay_inputs, [replay_view, merges], api_name="merge_replay_text")
    return TabParts(corpus_pickers=(CorpusPicker("tokenizer", lab.refresh_corpora, corpus),))
