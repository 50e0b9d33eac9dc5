"""The Compare tab: unit tests of its HTML helpers (shading, escaping, the unsupported box, the header), then the tab
driven through `gradio_client` against tiny runs of three families trained once with the CLI
(tests/support/tiny_runs.py)."""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gradio_client import Client

from app.compare.figures import (error_column_html, generation_column_html, grid_html, header_html, latest_val_bits,
                                 modes_table_markdown, produced_spans, shade_class, text_with_tokens_html, token_html)
from app.compare.tab import MAX_PROMPT_CHARS, MAX_RUNS, CompareView, build, decoding_options, run_label
from lab_models import api
from tests.support.tiny_runs import E2E_FAMILIES, trained_runs  # noqa: F401  (the module-scoped fixture)


@dataclass(frozen=True)
class FakeGeneration:
    """The fields of `api.Generation`, for the rendering tests (no model needed)."""

    run_id: str = "gpt-tiny-20260101-000000-ab12"
    family: str = "gpt"
    mode: str = "continue"
    supported: bool = True
    explanation: str = "greedy: the most likely token at each step"
    prompt: str = "the cat"
    text: str = "the cat sees a"
    new_text: str = " sees a"
    tokens: list = field(default_factory=lambda: [" sees", " a"])
    probs: list = field(default_factory=lambda: [0.91, 0.05])
    seconds: float = 0.004
    ms_per_token: float = 2.0
    step: int = 300


def columns(page: str) -> list[dict]:
    """The columns of the rendered grid: state, run and family of each, in order."""
    return [{"state": state, "run": run, "family": family}
            for state, run, family in re.findall(r'class="cmp-col" data-state="(\w+)" data-run="([^"]*)" '
                                                 r'data-family="([^"]*)"', page)]


# ------------------------------------------------------------------------------------------------ rendering helpers
def test_probabilities_are_binned_into_ten_shades():
    assert [shade_class(p) for p in (0.0, 0.05, 0.1, 0.55, 0.999, 1.0)] == [
        "cmp-p0", "cmp-p0", "cmp-p1", "cmp-p5", "cmp-p9", "cmp-p9"]
    assert shade_class(None) == shade_class(float("nan")) == shade_class(-1) == "cmp-p0"
    assert shade_class(7) == "cmp-p9"


def test_tokens_are_escaped_and_carry_their_probability():
    chip = token_html('<script>alert("x")</script>', 0.734)
    assert "<script>" not in chip and "&lt;script&gt;" in chip
    assert 'title="' in chip and "p = 0.734" in chip and "cmp-p7" in chip
    assert token_html("", 0.5).endswith(">∅</span>")  # an empty or blank token stays visible
    assert token_html(" \n", 0.5).endswith(">␣⏎</span>") and token_html(" the", 0.5).endswith("> the</span>")
    assert "p = 1.2e-04" in token_html(" x", 0.00012)


def test_continuation_is_shaded_in_place_after_the_muted_prompt():
    body = generation_column_html(FakeGeneration(), title="GPT", val_bits_per_byte=1.5)
    assert body.count('class="cmp-tok ') == 2
    assert '<span class="cmp-context">the cat</span>' in body
    assert "cmp-p9" in body and "cmp-p0" in body
    assert "<b>2</b> tokens" in body and "<b>2.0</b> ms/token" in body and "greedy: the most likely" in body


def test_infill_is_shaded_where_the_blank_was():
    assert produced_spans("the cat ___ a ball .", "the cat sees a ball .") == [(8, 12)]
    inline = text_with_tokens_html("a [MASK] c [MASK] e", "a b c d e", ["b", "d"], [0.2, 0.8])
    assert inline is not None and inline.count('class="cmp-tok ') == 2
    assert re.sub(r"<[^>]+>", "", inline) == "a b c d e"


def test_text_that_does_not_contain_the_prompt_shows_the_tokens_apart():
    translation = FakeGeneration(mode="translate", prompt="the cat sees a ball .", text="猫看见一个球。",
                                 new_text="猫看见一个球。", tokens=["猫", "看见", "一个", "球", "。"],
                                 probs=[0.5, 0.4, 0.3, 0.2, 0.1])
    body = generation_column_html(translation, title="T5")
    assert "produced tokens" in body and body.count('class="cmp-tok ') == 5 and "猫看见一个球。" in body
    # tokens that do not add up to the text are never forced into it
    assert text_with_tokens_html("the cat", "the cat sees", [" runs"], [0.5]) is None


def test_unsupported_mode_is_a_muted_explanation_not_an_error():
    unsupported = FakeGeneration(family="bert", mode="continue", supported=False, text="", new_text="", tokens=[],
                                 probs=[], explanation="BERT predicts masked tokens; it has no left-to-right <order>.")
    body = generation_column_html(unsupported, title="BERT", val_bits_per_byte=2.7)
    assert 'data-state="unsupported"' in body and "cmp-unsupported" in body
    assert "BERT cannot do continuation." in body and "&lt;order&gt;" in body
    assert "cmp-tok" not in body and "cmp-error" not in body


def test_header_shows_family_run_step_and_bits_per_byte():
    head = header_html(title="GPT-2", run_id="gpt2-tiny-x", step=1234, val_bits_per_byte=1.23456, mode="continue")
    assert "GPT-2" in head and "gpt2-tiny-x" in head and "step 1,234" in head and "<b>1.235</b> bits/byte" in head
    assert "continuation" in head
    assert "no validation yet" in header_html(title="BERT", run_id="r", step=3, val_bits_per_byte=None)
    seeded = header_html(title="BERT", run_id="r", step=3, seed=2)
    assert "seed 2 · step 3" in seeded and "seed" not in head  # a zoo's seed beside its step; none when unknown
    assert "<i>" not in header_html(title="<i>", run_id="<i>")
    assert latest_val_bits([{"split": "val", "bits_per_byte": 2.0}, {"split": "val", "loss": 1.0}]) == 2.0
    assert latest_val_bits([{"step": 1, "loss": 3.0}]) is None


def test_error_column_and_grid():
    error = error_column_html("r1", "Mark the blank with <[MASK]>.", title="T5", family="t5")
    assert 'data-state="error"' in error and "&lt;[MASK]&gt;" in error
    page = grid_html([error, generation_column_html(FakeGeneration(), title="GPT")], prompt="the cat")
    assert "cmp-cols-2" in page and "cmp-legend" in page
    assert [c["state"] for c in columns(page)] == ["error", "ok"]
    assert "press Generate" in grid_html([])


def test_modes_table_and_decoding_options():
    table = modes_table_markdown([("GPT", ["continue"]), ("T5", ["infill", "translate"])],
                                 ["continue", "infill", "translate"])
    assert "| GPT | ✓ default | · | · |" in table and "| T5 | · | ✓ default | ✓ |" in table
    greedy = decoding_options("greedy", 0.5, 10, 0.9, 4, 20, 3, 10, 0)
    assert greedy == {"strategy": "greedy", "max_new_tokens": 20, "seed": 3, "iterations": 10, "blank_length": None}
    assert decoding_options("beam", 0.5, 10, 0.9, 4, 20, 3, 10, 2)["beam_size"] == 4
    sample = decoding_options("sample", 0.5, 10, 0.9, 4, None, None, 10, 2)
    assert (sample["temperature"], sample["top_k"], sample["top_p"], sample["blank_length"]) == (0.5, 10, 0.9, 2)
    with pytest.raises(ValueError, match="Max new tokens must be a whole number"):
        decoding_options("greedy", 1, 0, 1, 1, 2.5, 0, 10, 0)
    with pytest.raises(ValueError, match="Temperature must be a number"):
        decoding_options("sample", "hot", 0, 1, 1, 5, 0, 10, 0)
    assert run_label({"run_id": "gpt-x", "family": "gpt", "step": 1200}) == "gpt-x · gpt · step 1,200"


# ------------------------------------------------------------------------------------------------ through the app
@pytest.fixture(scope="module")
def client(running_app, trained_runs):
    url, _ = running_app
    return Client(url, verbose=False)


def generate(client, run_ids, prompt, mode="auto", *, strategy="greedy", temperature=1.0, top_k=0, top_p=1.0,
             beam_size=4, max_new_tokens=8, seed=0, iterations=4, blank_length=0):
    page, details = client.predict(list(run_ids), prompt, mode, strategy, temperature, top_k, top_p, beam_size,
                                   max_new_tokens, seed, iterations, blank_length, api_name="/compare_generate")
    return page, details


def test_a_prompt_longer_than_the_models_read_is_refused_before_any_run_loads(tmp_path):
    view = CompareView(tmp_path)
    with pytest.raises(ValueError, match="The prompt is 5,001 characters long: shorten it to at most 5,000"):
        view.generate(["any-run"], "x" * (MAX_PROMPT_CHARS + 1), "auto", "greedy", 1.0, 0, 1.0, 2, 5, 0, 10, None)


def test_the_answers_come_right_after_the_inputs_and_the_examples_below_them(tmp_path):
    import gradio as gr

    with gr.Blocks() as page:
        build(tmp_path)
    config = page.get_config_file()
    components = {component["id"]: component for component in config["components"]}

    def in_order(node):
        yield node["id"]
        for child in node.get("children", []):
            yield from in_order(child)

    shown = [components[i] for i in in_order(config["layout"]) if i in components]
    where = {key: next(index for index, component in enumerate(shown) if test(component))
             for key, test in (("button", lambda c: c["props"].get("elem_id") == "compare-generate"),
                               ("answers", lambda c: c["props"].get("elem_id") == "compare-output"),
                               ("examples", lambda c: c["type"] == "dataset"))}
    assert where["button"] < where["answers"] < where["examples"]


@pytest.mark.slow
def test_the_picker_lists_runs_with_weights(lab_home_dir, trained_runs):
    view = CompareView(lab_home_dir)
    choices = dict((value, label) for label, value in view.run_choices())
    for family, run_id in trained_runs.items():
        assert choices[run_id] == f"{run_id} · {family} · step 30"
    empty = Path(lab_home_dir) / "runs" / "gpt-tiny-compare-no-weights"  # a run stopped before its first step
    empty.mkdir(parents=True, exist_ok=True)
    try:
        (empty / "status.json").write_text('{"state": "stopped", "step": 0}')
        assert empty.name in {row["run_id"] for row in api.list_runs(home=lab_home_dir)}
        assert empty.name not in {value for _, value in view.run_choices()}
    finally:
        shutil.rmtree(empty)


def test_auto_mode_gives_one_labelled_column_per_run(client, trained_runs):
    ids = [trained_runs[family] for family in E2E_FAMILIES]
    page, details = generate(client, ids, "the cat [MASK] a red ball .")
    assert [(c["run"], c["family"]) for c in columns(page)] == list(zip(ids, E2E_FAMILIES))
    assert [d["run_id"] for d in details] == ids
    # Auto gives every family a task it can do with this prompt: GPT (it only continues) continues the text before
    # the blank and its column says so; the others fill the blank with their first blank-filling mode
    gpt, *others = details
    assert gpt["supported"] and gpt["mode"] == "continue" and gpt["prompt"] == "the cat"
    assert gpt["text"].startswith("the cat") and "continues the text before the first blank" in gpt["note"]
    assert [c["state"] for c in columns(page)] == ["ok"] * len(ids) and page.count("cmp-auto-note") == 1
    for family, detail in zip(E2E_FAMILIES[1:], others):
        assert detail["supported"] and detail["title"] == api.family(family).title and detail["step"] == 30
        assert detail["mode"] == next(mode for mode in api.generation_modes(family)
                                      if mode in ("infill", "mask_predict"))
        assert detail["note"] == "" and detail["prompt"] == "the cat [MASK] a red ball ."
        assert detail["val_bits_per_byte"] > 0 and f"{detail['val_bits_per_byte']:.3f}" in page
        assert len(detail["tokens"]) == len(detail["probs"]) > 0
    assert page.count("step 30") == len(ids) and "cmp-legend" in page and page.count('class="cmp-tok ') >= 3


def test_auto_mode_answers_a_prompt_without_a_blank_in_every_column(client, trained_runs):
    """The first comparison a new user makes (the tab's default prompt, Auto): every family answers. The ones that
    only fill blanks get the prompt with a blank at its end, and their column says what was added."""
    ids = [trained_runs[family] for family in E2E_FAMILIES]
    page, details = generate(client, ids, "the beautiful horse wants")
    assert [c["state"] for c in columns(page)] == ["ok"] * len(ids)
    for family, detail in zip(E2E_FAMILIES, details):
        modes = api.generation_modes(family)
        assert detail["supported"] and len(detail["tokens"]) == len(detail["probs"]) > 0
        if "continue" in modes:
            assert detail["mode"] == "continue" and detail["note"] == ""
            assert detail["prompt"] == "the beautiful horse wants"
        else:
            assert detail["mode"] == modes[0] and detail["prompt"] == "the beautiful horse wants ___"
            assert f"{api.family(family).title} fills blanks" in detail["note"]
            # never an empty blank without a word of why
            assert detail["new_text"].strip() or "is empty" in detail["explanation"]
    assert page.count("cmp-auto-note") == sum("continue" not in api.generation_modes(f) for f in E2E_FAMILIES)


def test_continuation_shades_every_produced_token(client, trained_runs):
    page, (detail,) = generate(client, [trained_runs["gpt"]], "the cat sees", max_new_tokens=6)
    assert detail["mode"] == "continue" and detail["text"].startswith("the cat sees")
    assert 1 <= len(detail["tokens"]) <= 6 and all(0 <= p <= 1 for p in detail["probs"])
    assert page.count('class="cmp-tok ') == len(detail["tokens"]) and "ms/token" in page


def test_a_mode_the_family_cannot_do_is_explained_not_an_error(client, trained_runs):
    unsupported = next(mode for mode in api.GENERATION_MODES if mode not in api.generation_modes("bert"))
    page, details = generate(client, [trained_runs["bert"]], "the cat sat on the", unsupported)
    assert [c["state"] for c in columns(page)] == ["unsupported"]
    assert details[0]["supported"] is False and details[0]["explanation"]
    assert "cmp-unsupported" in page and "cannot do" in page


def test_translation_shows_the_output_and_its_tokens(client, trained_runs):
    if "translate" not in api.generation_modes("t5"):
        pytest.skip("T5 does not translate in this version")
    page, (detail,) = generate(client, [trained_runs["t5"]], "the cat sees a ball .", "translate")
    assert detail["supported"] and detail["mode"] == "translate" and columns(page)[0]["state"] == "ok"
    assert page.count('class="cmp-tok ') == len(detail["tokens"]) == len(detail["probs"])
    if not detail["tokens"]:
        assert "produced no tokens" in page


def test_an_empty_prompt_is_a_clear_error_and_the_app_keeps_answering(client, trained_runs):
    with pytest.raises(Exception, match="prompt is empty"):
        generate(client, [trained_runs["gpt"]], "   ")
    with pytest.raises(Exception, match="Pick at least one run"):
        generate(client, [], "the cat")
    page, _ = generate(client, [trained_runs["gpt"]], "the cat", "continue")
    assert [c["state"] for c in columns(page)] == ["ok"]


def test_more_than_four_runs_are_refused(client, trained_runs):
    ids = list(trained_runs.values()) + [f"gpt-tiny-extra-{i}" for i in range(MAX_RUNS + 1 - len(trained_runs))]
    with pytest.raises(Exception, match=f"Pick at most {MAX_RUNS} runs"):
        generate(client, ids, "the cat")


def test_an_unknown_run_gets_its_own_error_column(client, trained_runs):
    page, details = generate(client, [trained_runs["gpt"], "gpt-tiny-19990101-000000-dead"], "the cat", "continue")
    assert [c["state"] for c in columns(page)] == ["ok", "error"]
    assert "Unknown run" in details[1]["error"]


def test_the_same_seed_gives_the_same_output(client, trained_runs):
    ids = [trained_runs["gpt"]]
    first = generate(client, ids, "the cat", "continue", strategy="sample", temperature=1.5, seed=7)[1]
    again = generate(client, ids, "the cat", "continue", strategy="sample", temperature=1.5, seed=7)[1]
    assert first[0]["tokens"] == again[0]["tokens"] and first[0]["text"] == again[0]["text"]
    assert first[0]["probs"] == again[0]["probs"]
