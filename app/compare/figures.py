"""HTML for the Compare tab: one column per run, its produced tokens shaded by probability.

Presentation only. Every column is drawn from an `api.Generation` (run_id, family, mode, supported, explanation,
prompt, text, new_text, tokens, probs, seconds, ms_per_token, step, note: what Auto mode did to the prompt) and a few facts about its run (the family's title,
the latest validation bits per byte). Nothing here decodes anything; the shading classes `cmp-p0` ... `cmp-p9` are
styled in assets/lab.css.

A column looks like this (classes in brackets):

    [cmp-head]   GPT                                   continuation
                 gpt-tiny-20260101-120000-ab12
                 step 300 · val 1.588 bits/byte
    [cmp-auto-note] BERT fills blanks ..., so a blank (___) was added   <- Auto mode only, when it changed the prompt
    [cmp-text]   the small cat sees a| red ball .       <- the prompt muted, the produced tokens shaded in place
    [cmp-foot]   4 tokens · 3.1 ms/token · greedy: the most likely token at each step

A family that cannot do the mode gets a muted box with the backend's explanation (`cmp-unsupported`); a run whose
generation failed on a bad input gets a red box with the message (`cmp-error`).

The words are the reader's (`app.i18n.language.tr`, area `compare`): a Chinese reader gets the column's words, the
backend's explanation and its error messages (app/i18n/messages.py, clause by clause) in Chinese; run ids,
family names, tokens and the generated text stay as they are.
"""
from __future__ import annotations

import difflib
import html
import math

from app.i18n.language import tr
from app.i18n.messages import translate

SHADES = 10  # probability bins: cmp-p0 is [0, 0.1), ..., cmp-p9 is [0.9, 1]
MODE_TITLES = {  # mode -> the key of its title ("continuation", "infilling", "mask-predict", "translation")
    "continue": "compare.title_continue",
    "infill": "compare.title_infill",
    "mask_predict": "compare.title_mask_predict",
    "translate": "compare.title_translate",
}


def mode_title(mode: str | None) -> str:
    """"mask_predict" -> "mask-predict" (in the reader's language); a mode added later shows as its name with spaces.

    >>> mode_title("mask_predict"), mode_title("continue"), mode_title("write_poem")
    ('mask-predict', 'continuation', 'write poem')
    """
    if not mode:
        return ""
    return tr(MODE_TITLES[mode]) if mode in MODE_TITLES else str(mode).replace("_", " ")


def shade_class(prob) -> str:
    """The shading class of a probability: 0.05 -> "cmp-p0", 0.734 -> "cmp-p7", 1.0 -> "cmp-p9"; junk -> "cmp-p0".

    >>> shade_class(0.05), shade_class(0.734), shade_class(1.0), shade_class(float("nan"))
    ('cmp-p0', 'cmp-p7', 'cmp-p9', 'cmp-p0')
    """
    try:
        prob = float(prob)
    except (TypeError, ValueError):
        return "cmp-p0"
    if not math.isfinite(prob):
        return "cmp-p0"
    return f"cmp-p{min(SHADES - 1, max(0, int(prob * SHADES)))}"


def format_prob(prob) -> str:
    """0.73412 -> "0.734", 0.00012 -> "1.2e-04", None -> "?"."""
    try:
        prob = float(prob)
    except (TypeError, ValueError):
        return "?"
    if not math.isfinite(prob):
        return "?"
    return f"{prob:.3f}" if prob >= 0.001 or prob == 0 else f"{prob:.1e}"


def token_html(token: str, prob) -> str:
    """One produced token, shaded by `prob`, with the probability in its tooltip. The token is escaped and its
    whitespace kept (the stylesheet sets `white-space: pre-wrap`); a token that is only whitespace shows it as ␣ / ⏎ /
    ⇥, an empty token as ∅.

    >>> token_html(" <b>", 0.5)
    '<span class="cmp-tok cmp-p5" data-p="0.500" title="&#x27; &lt;b&gt;&#x27; · p = 0.500"> &lt;b&gt;</span>'
    """
    if not token:
        shown = "∅"
    elif token.isspace():  # a token that is only whitespace would be an invisible sliver: show its characters
        shown = html.escape(token.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥"))
    else:
        shown = html.escape(token)
    tooltip = html.escape(f"{token!r} · p = {format_prob(prob)}", quote=True)
    return (f'<span class="cmp-tok {shade_class(prob)}" data-p="{format_prob(prob)}" title="{tooltip}">'
            f"{shown}</span>")


def tokens_html(tokens, probs) -> str:
    """Every produced token as a shaded span, in order (a missing probability reads "?")."""
    probs = list(probs or [])
    return "".join(token_html(token, probs[i] if i < len(probs) else None) for i, token in enumerate(tokens or []))


def produced_spans(prompt: str, text: str) -> list[tuple[int, int]] | None:
    """Where in `text` the model's output sits: the stretches of `text` that are not the prompt, as (start, end).

    Found by aligning the prompt with the text (difflib), so a continuation is one stretch at the end and an infill
    is one stretch per blank. None when the text does not contain the prompt's words in order (e.g. a translation).

    >>> produced_spans("the cat ___ a ball .", "the cat sees a ball .")
    [(8, 12)]
    >>> produced_spans("the cat", "the cat sees a")
    [(7, 14)]
    """
    if not text:
        return None
    matcher = difflib.SequenceMatcher(None, prompt or "", text, autojunk=False)
    spans, kept = [], 0
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            kept += a1 - a0
        elif op in ("replace", "insert") and b1 > b0:
            spans.append((b0, b1))
    if not spans or kept < len((prompt or "").replace("[MASK]", "").replace("___", "").strip()) * 0.6:
        return None
    return spans


def text_with_tokens_html(prompt: str, text: str, tokens, probs) -> str | None:
    """The result text with the produced tokens shaded where they stand, the rest muted; None when the tokens
    cannot be placed exactly (then the caller shows the text and the tokens separately).

    >>> text_with_tokens_html("a ___ c", "a b c", ["b"], [0.9]).count("cmp-tok ")
    1
    """
    tokens = list(tokens or [])
    spans = produced_spans(prompt, text)
    if spans is None or not tokens or "".join(text[a:b] for a, b in spans) != "".join(tokens):
        return None
    probs = list(probs or [])
    parts, cursor, index = [], 0, 0
    for start, end in spans:
        if start > cursor:
            parts.append(f'<span class="cmp-context">{html.escape(text[cursor:start])}</span>')
        position = start
        while position < end:
            if index >= len(tokens):
                return None
            token = tokens[index]
            if not token:  # an empty token takes no room in the text
                index += 1
                continue
            if text[position:position + len(token)] != token or position + len(token) > end:
                return None  # a token straddles two stretches: not placeable
            parts.append(token_html(token, probs[index] if index < len(probs) else None))
            position += len(token)
            index += 1
        cursor = end
    if any(tokens[index:]):
        return None
    if cursor < len(text):
        parts.append(f'<span class="cmp-context">{html.escape(text[cursor:])}</span>')
    return "".join(parts)


def legend_html() -> str:
    """The shading scale: what a darker token means, and that hovering shows the exact probability."""
    cells = "".join(f'<span class="cmp-legend-cell cmp-p{i}" title="p in [{i / SHADES:.1f}, {(i + 1) / SHADES:.1f})">'
                    "</span>" for i in range(SHADES))
    muted = f'<span class="cmp-context">{html.escape(tr("compare.legend_muted"))}</span>'
    return (f'<div class="cmp-legend"><span>{html.escape(tr("compare.legend_title"))}</span>'
            f'<span class="cmp-legend-scale"><span>0</span>{cells}<span>1</span></span>'
            f'<span class="cmp-legend-note">{tr("compare.legend_note", muted=muted)}</span></div>')


def latest_val_bits(rows) -> float | None:
    """The bits per byte of the run's latest validation row (metrics rows with "split": "val"); None when none has it.

    >>> latest_val_bits([{"split": "val", "step": 5, "bits_per_byte": 2.5}, {"step": 6, "loss": 3.0},
    ...                  {"split": "val", "step": 10, "bits_per_byte": 2.25}])
    2.25
    """
    for row in reversed(list(rows or [])):
        if row.get("split") == "val" and format_bits(row.get("bits_per_byte")) is not None:
            return float(row["bits_per_byte"])
    return None


def format_bits(value) -> str | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return f"{value:.3f}" if math.isfinite(value) else None


def header_html(*, title: str, run_id: str, step=None, val_bits_per_byte=None, mode: str | None = None,
                seed=None) -> str:
    """A column's head: the family title, the run id, the run's seed (two runs of a zoo differ by it), the step of the
    weights and the latest validation bits per byte ("no validation yet" when the run has none)."""
    bits = format_bits(val_bits_per_byte)
    facts = []
    if seed is not None:
        facts.append(html.escape(tr("compare.header_seed", seed=seed)))
    if step is not None:
        facts.append(tr("compare.header_step", step=f"{int(step):,}"))
    facts.append(tr("compare.header_val_bits", bits=bits) if bits is not None
                 else html.escape(tr("compare.header_no_validation")))
    badge = f'<span class="cmp-mode">{html.escape(mode_title(mode))}</span>' if mode else ""
    return (f'<div class="cmp-head"><div class="cmp-title"><span class="cmp-family">{html.escape(title)}</span>'
            f'{badge}</div><div class="cmp-run" title="{html.escape(tr("compare.header_run_id"), quote=True)}">'
            f'{html.escape(run_id)}</div>'
            f'<div class="cmp-meta">{" · ".join(facts)}</div></div>')


def footer_html(generation) -> str:
    """"N tokens · X ms/token", then how it was decoded (the backend's one-line explanation)."""
    count = len(generation.tokens or [])
    numbers = [tr("compare.footer_tokens" if count != 1 else "compare.footer_token", count=count)]
    try:
        ms = float(generation.ms_per_token)
        if math.isfinite(ms):
            numbers.append(f"<b>{ms:.1f}</b> ms/token" if ms < 100 else f"<b>{ms:,.0f}</b> ms/token")
    except (TypeError, ValueError):
        pass
    how = (f'<div class="cmp-how">{html.escape(translate(generation.explanation))}</div>'
           if generation.explanation else "")
    return f'<div class="cmp-foot"><div class="cmp-numbers">{" · ".join(numbers)}</div>{how}</div>'


def generation_body_html(generation) -> str:
    """The result of a supported generation: the text with the produced tokens shaded in place, or (when they cannot
    be placed, e.g. a translation) the text, then the produced tokens on their own line."""
    if not generation.tokens:
        text = generation.text or generation.prompt or ""
        return (f'<div class="cmp-text">{html.escape(text)}</div>'
                f'<div class="cmp-note">{html.escape(tr("compare.no_tokens"))}</div>')
    inline = text_with_tokens_html(generation.prompt, generation.text, generation.tokens, generation.probs)
    if inline is not None:
        return f'<div class="cmp-text">{inline}</div>'
    text = generation.text or generation.new_text or ""
    return (f'<div class="cmp-text cmp-plain">{html.escape(text)}</div>'
            f'<div class="cmp-tokens-label">{html.escape(tr("compare.produced_tokens"))}</div>'
            f'<div class="cmp-text">{tokens_html(generation.tokens, generation.probs)}</div>')


def generation_column_html(generation, *, title: str, val_bits_per_byte=None, seed=None) -> str:
    """One run's column: header, then the shaded text and the footer, or a muted box saying why the family cannot
    do this mode."""
    head = header_html(title=title, run_id=generation.run_id, step=generation.step,
                       val_bits_per_byte=val_bits_per_byte, mode=generation.mode, seed=seed)
    attributes = (f'data-run="{html.escape(generation.run_id, quote=True)}" '
                  f'data-family="{html.escape(generation.family, quote=True)}" '
                  f'data-mode="{html.escape(generation.mode or "", quote=True)}"')
    note = getattr(generation, "note", "")
    if note:  # Auto mode changed the prompt for this family: say what and why, above the answer
        head += f'<div class="cmp-auto-note">{html.escape(translate(note))}</div>'
    if not generation.supported:
        mode = mode_title(generation.mode)
        refusal = (tr("compare.cannot_do", title=title, mode=mode) if mode
                   else tr("compare.cannot_do_this", title=title))
        body = (f'<div class="cmp-unsupported"><b>{html.escape(refusal)}</b> '
                f'{html.escape(translate(generation.explanation or ""))}</div>')
        return f'<div class="cmp-col" data-state="unsupported" {attributes}>{head}{body}</div>'
    body = generation_body_html(generation) + footer_html(generation)
    return f'<div class="cmp-col" data-state="ok" {attributes}>{head}{body}</div>'


def error_column_html(run_id: str, message: str, *, title: str = "", family: str = "", step=None,
                      val_bits_per_byte=None, seed=None) -> str:
    """A column for a run whose generation was refused (a bad input, a run without weights): the message in red,
    in the reader's language (`message` is the backend's English)."""
    head = header_html(title=title or family or tr("compare.run_fallback"), run_id=run_id, step=step,
                       val_bits_per_byte=val_bits_per_byte, seed=seed)
    message = translate(message)
    message = message[:1].upper() + message[1:]  # the backend's messages may start in lower case
    return (f'<div class="cmp-col" data-state="error" data-run="{html.escape(run_id, quote=True)}" '
            f'data-family="{html.escape(family or "", quote=True)}">{head}'
            f'<div class="cmp-error">{html.escape(message)}</div></div>')


def grid_html(columns: list[str], *, prompt: str | None = None) -> str:
    """The columns side by side (up to 4; narrower screens wrap), under the shading legend."""
    if not columns:
        return empty_html(tr("compare.empty_output"))
    count = min(len(columns), 4)
    prompt_line = (f'<div class="cmp-prompt"><span>{html.escape(tr("compare.prompt_tag"))}</span> '
                   f'{html.escape(prompt)}</div>'
                   if prompt is not None else "")
    return (f'<div class="cmp-result">{prompt_line}{legend_html()}'
            f'<div class="cmp-grid cmp-cols-{count}">{"".join(columns)}</div></div>')


def empty_html(message: str) -> str:
    return f'<div class="cmp-result cmp-empty">{html.escape(message)}</div>'


def modes_table_markdown(rows: list[tuple[str, list[str]]], modes) -> str:
    """Which family can do which mode, as a Markdown table: rows are (family title, its modes, default first).

    >>> print(modes_table_markdown([("GPT", ["continue"])], ["continue", "infill"]))
    | family | continuation | infilling |
    | --- | --- | --- |
    | GPT | ✓ default | · |
    """
    modes = list(modes)
    lines = [f"| {tr('compare.table_family')} | " + " | ".join(mode_title(m) for m in modes) + " |",
             "| --- | " + " | ".join("---" for _ in modes) + " |"]
    for title, supported in rows:
        cells = []
        for mode in modes:
            if supported and mode == supported[0]:
                cells.append(tr("compare.table_default"))
            elif mode in supported:
                cells.append("✓")
            else:
                cells.append("·")
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
