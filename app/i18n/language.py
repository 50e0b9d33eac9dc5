"""The page's two languages, English and Chinese (中文), through Gradio's own i18n (`gr.I18n`).

Every label, help text, legend and message that the page shows is a key here: `text("train.steps")` in the UI code, its
English in `app/i18n/locales/en/<area>.json` and its Chinese in `app/i18n/locales/zh/<area>.json` (one folder per
language; one file per tab or panel, the `<area>` part of the key). The browser picks the language from its own
settings; the header's language switch (`LANGUAGE_SWITCH_JS`) changes it in place. Family names and paper terms (MLM,
NSP, span, Switch, ...) stay as the papers write them, in both languages.

Texts that the server computes (a run's status line, a figure's title, axes and legend, an error message) cannot be
translated by the frontend, so the server writes them in the reader's language: `tr("train.fig_loss_title")` while a
handler runs. The reader's language is the `lab_language` cookie that the page sets (from the browser's language or
the switch), else the request's Accept-Language, else English; API clients that send neither read English.
`app/i18n/messages.py` translates the backend's (`lab_models`) English messages the same way.

Deviation: a figure or status line already on the page keeps its language when the switch is used; the next one the
server draws is in the new language.
"""
from __future__ import annotations

import contextlib
import json
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

import gradio as gr
from gradio.i18n import I18nData

LOCALES = Path(__file__).resolve().parent / "locales"
LANGUAGES = {"en": "English", "zh": "中文"}
FALLBACK = "en"


def _read_language(language: str) -> dict[str, dict[str, str]]:
    """`app/i18n/locales/<language>/*.json` as {area: {name: text}}; an area's file is a flat {name: text} object."""
    areas = {}
    for path in sorted((LOCALES / language).glob("*.json")):
        entries = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
            raise ValueError(f"{path} must be one JSON object of name -> text.")
        areas[path.stem] = entries
    return areas


@lru_cache(maxsize=1)
def translations() -> dict[str, dict[str, dict[str, str]]]:
    """{language: {area: {name: text}}} for every language in LANGUAGES (read once)."""
    return {language: _read_language(language) for language in LANGUAGES}


@lru_cache(maxsize=1)
def lab_i18n() -> gr.I18n:
    """The `gr.I18n` that `Blocks.launch(i18n=...)` gets. Chinese is registered as "zh" and as the browser tags
    "zh-CN", "zh-TW", "zh-HK" and "zh-SG" so that every Chinese browser finds it."""
    texts = translations()
    by_locale = {language: _nested(areas) for language, areas in texts.items()}
    for tag in ("zh-CN", "zh-TW", "zh-HK", "zh-SG"):
        by_locale[tag] = by_locale["zh"]
    return gr.I18n(**by_locale)


def _nested(areas: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {area: dict(entries) for area, entries in areas.items()}


def text(key: str):
    """The translatable text `key` ("area.name"), for a component's label, info, placeholder or value (a Button's
    text, a Markdown's body). KeyError when English has no such text, so a typo fails when the page is built."""
    area, _, name = key.partition(".")
    if name not in translations()[FALLBACK].get(area, {}):
        raise KeyError(f"no English text {key!r} in app/i18n/locales/en/{area}.json")
    return lab_i18n()(key)


def english(key: str) -> str:
    """The English of `key` (for texts the server has to write itself, such as a note in a Markdown update)."""
    area, _, name = key.partition(".")
    return translations()[FALLBACK][area][name]


COOKIE = "lab_language"
_forced_language: ContextVar[str | None] = ContextVar("lab_forced_language", default=None)


def request_language(request) -> str:
    """"zh" or "en" for a `gr.Request` (or None): the page's cookie, else the first language of Accept-Language that
    the lab has, else English."""
    if request is None:
        return FALLBACK
    try:
        cookies = dict(getattr(request, "cookies", None) or {})
        headers = {str(name).lower(): value for name, value in dict(getattr(request, "headers", None) or {}).items()}
    except (AttributeError, TypeError, ValueError):
        return FALLBACK
    if cookies.get(COOKIE) in LANGUAGES:
        return cookies[COOKIE]
    for part in str(headers.get("accept-language", "")).split(","):
        tag = part.split(";")[0].strip().lower()
        if tag.startswith("zh"):
            return "zh"
        if tag.startswith("en"):
            return "en"
    return FALLBACK


def current_language() -> str:
    """The reader's language while a handler runs ("zh" or "en"; see `request_language`): Gradio keeps the current
    request in a context variable around every call of a handler, generators' steps included. Outside a handler
    (a test, a CLI) it is English, or what `reading_language` set."""
    forced = _forced_language.get()
    if forced is not None:
        return forced
    from gradio.context import LocalContext  # Gradio's per-call context; it is None outside an event
    return request_language(LocalContext.request.get(None))


@contextlib.contextmanager
def reading_language(language: str):
    """Within the block, `tr` and the message translation write `language` ("en" or "zh"), whoever asks."""
    if language not in LANGUAGES:
        raise ValueError(f"Unknown language {language!r}: choose one of {', '.join(LANGUAGES)}.")
    token = _forced_language.set(language)
    try:
        yield
    finally:
        _forced_language.reset(token)


def tr(key: str, **fields) -> str:
    """The text of `key` in the reader's language (`current_language`), with `fields` filled in (`{name}` in the
    text): for what the server writes itself (figures, status lines, table headers, messages).

    >>> tr("header.language"), tr("header.language") == english("header.language")
    ('Language', True)
    """
    area, _, name = key.partition(".")
    english_text = english(key)  # KeyError for an unknown key in either language
    texts = translations().get(current_language(), {}).get(area, {})
    template = texts.get(name, english_text)
    return template.format(**fields) if fields else template


def marker(key: str) -> str:
    """`text(key)` as a plain string (its `__i18n__{...}` marker), for what a handler returns: the page translates it
    like a static text, and Gradio's `/call/` route, which serializes outputs with plain `json`, can send it."""
    return str(text(key))


def english_examples(examples: gr.Examples) -> gr.Examples:
    """Gradio's examples table shows its column headers (the inputs' labels) and a Radio's choice labels as they are,
    without translating them: give it their English instead of the raw translation markers."""
    def plain(value):
        return english(value.key) if isinstance(value, I18nData) else value

    dataset = examples.dataset
    if dataset.headers:
        dataset.headers = [plain(header) for header in dataset.headers]
    dataset.component_props = [
        {**props, **({"choices": [(plain(label), value) for label, value in props["choices"]]}
                     if props.get("choices") else {})}
        for props in dataset.component_props]
    return examples


def reader_examples(examples: gr.Examples):
    """`english_examples(examples)` for the page as built, and the function for a load event that writes the table's
    column headers and choice labels in the reader's language (a `gr.Dataset` update for `examples.dataset`)."""
    headers = list(examples.dataset.headers or [])
    props = [dict(entry) for entry in examples.dataset.component_props]
    english_examples(examples)

    def local(value):
        return tr(value.key) if isinstance(value, I18nData) else value

    def local_props(entry: dict) -> dict:
        # every text in the reader's language (a label, an info, a choice's label): an API client's `/call/` route
        # serializes the update with plain json, which a translation marker object would break
        entry = {name: local(value) for name, value in entry.items()}
        if entry.get("choices"):
            entry["choices"] = [(local(label), value) for label, value in entry["choices"]]
        return entry

    def for_reader() -> gr.Dataset:
        return gr.Dataset(headers=[local(header) for header in headers],
                          component_props=[local_props(entry) for entry in props])

    return for_reader


STORAGE_KEY = "pretraining-lab-language"

# The browser-side switch. Gradio keeps its locale in its frontend module (the one that exports `changeLocale`); the
# page has loaded it already, so importing its URL again returns that same instance. The built-in Chinese texts load
# lazily, hence the short wait. A tab's name in a tab bar is redrawn only when the tab itself is updated: the switch is
# followed by `relabel_tabs_js`, which updates every tab with its own label in the browser (no server call), so no tab
# has to be shown (showing every tab once would run every tab's select events: 92 s on a loaded page). The shown tab's
# server-drawn views are redrawn at once, every other tab's when it is next opened (`redraw_shown_tab_js`,
# `redraw_stale_tab_js`; app/main.py `redraw_after_language_switch`).
_SET_LANGUAGE = """
async function setLabLanguage(code) {
  const urls = performance.getEntriesByType("resource").map((entry) => entry.name)
    .filter((name) => /\\/assets\\/core-[^/]*\\.js$/.test(name));
  for (const url of urls) {
    const module = await import(url);
    if (typeof module.changeLocale !== "function") { continue; }
    module.changeLocale(code === "zh" ? "zh-CN" : "en");  // zh-CN: Gradio's own texts have it too
    // Gradio flips the locale once its built-in texts for it have loaded (lazily, the first time): the page is in
    // the new language when the switch's own label is, and the events after this draw in it
    const label = %s[code];
    const shown = () => ((document.getElementById("lab-language") || {}).textContent || "").includes(label);
    for (let waited = 0; waited < 1000 && !shown(); waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return true;
  }
  return false;
}
""" % json.dumps({language: areas["header"]["language"] for language, areas in translations().items()},
                 ensure_ascii=False)


def relabel_tabs_js(labels: list[str]) -> str:
    """The browser-only step after a language change: every tab (in the order of the event's outputs) updated with
    its own label (a translation marker), which makes its tab bar draw the name in the new language. It waits for
    the switch's change of Gradio's locale (`window.labLanguageFlip`, LANGUAGE_SWITCH_JS), which runs beside the
    server's redraws: a label drawn before it would stay in the old language."""
    return """
async () => {
  await (window.labLanguageFlip || Promise.resolve());
  return %s.map((label) => ({"__type__": "update", "label": label}));
}
""" % json.dumps(labels, ensure_ascii=False)


# The language the page's server-drawn texts are in now: the cookie the switch and the page's load set.
_PAGE_LANGUAGE = '(document.cookie.match(/(?:^|; )%s=(\\w+)/) || [])[1] || "en"' % COOKIE


def redraw_shown_tab_js(panels: list[str]) -> str:
    """The browser-only step after the language switch: of the top-level tab panels `panels`, the one shown is
    redrawn now (its hidden buttons of class `<panel>-redraw-now` clicked, app/main.py
    `redraw_after_language_switch`) and remembered as drawn in the new language; the others are redrawn when next
    selected (`redraw_stale_tab_js`)."""
    return """
() => {
  const code = %s;
  const drawn = (window.labDrawnLanguage = window.labDrawnLanguage || {});
  for (const panel of %s) {
    const element = document.getElementById(panel);
    if (element === null || element.getClientRects().length === 0) { continue; }
    drawn[panel] = code;
    document.querySelectorAll("." + panel + "-redraw-now").forEach((button) => button.click());
  }
}
""" % (_PAGE_LANGUAGE, json.dumps(panels))


def redraw_stale_tab_js(panel: str) -> str:
    """The browser-only step on selecting the top-level tab `panel`: if it was last drawn in another language than
    the page's (the page's first language until a switch redraws it), its buttons of class `<panel>-redraw-stale`
    are clicked."""
    return """
() => {
  const code = %s;
  const drawn = (window.labDrawnLanguage = window.labDrawnLanguage || {});
  const before = drawn[%s] || window.labPageLanguage || code;
  drawn[%s] = code;
  if (before !== code) {
    document.querySelectorAll(%s).forEach((button) => button.click());
  }
}
""" % (_PAGE_LANGUAGE, json.dumps(panel), json.dumps(panel), json.dumps("." + panel + "-redraw-stale"))


# The header's switch: set the language now and remember it for the next visit.
LANGUAGE_SWITCH_JS = """
async (language) => {
  %(set)s
  const code = language === "%(zh)s" ? "zh" : "en";
  try { window.localStorage.setItem("%(key)s", code); } catch (error) {}
  document.cookie = "%(cookie)s=" + code + "; path=/; max-age=31536000; SameSite=Lax";  // the server writes in it too
  // Gradio's re-translation of the page takes the browser a fifth of a second (more into Chinese): it starts in the
  // next task, after this event has returned and its follow-ups (the server's redraws, which read the cookie) have
  // been sent, so the server draws while the browser translates; the tab names wait for it (relabel_tabs_js)
  window.labLanguageFlip = new Promise((resolve) => setTimeout(() => resolve(setLabLanguage(code)), 0));
  return language;
}
""" % {"set": _SET_LANGUAGE, "key": STORAGE_KEY, "zh": LANGUAGES["zh"], "cookie": COOKIE}

# On load: the browser's language, unless the switch was used before (then that choice); the switch shows it.
LANGUAGE_ON_LOAD_JS = """
async () => {
  %(set)s
  const browser = (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
  let code = browser;
  try { code = window.localStorage.getItem("%(key)s") || browser; } catch (error) {}
  document.cookie = "%(cookie)s=" + code + "; path=/; max-age=31536000; SameSite=Lax";
  window.labPageLanguage = code;  // what the page's load events draw in (redraw_stale_tab_js)
  if (code !== browser) { await setLabLanguage(code); }
  return code === "zh" ? "%(zh)s" : "%(en)s";
}
""" % {"set": _SET_LANGUAGE, "key": STORAGE_KEY, "zh": LANGUAGES["zh"], "en": LANGUAGES["en"], "cookie": COOKIE}
