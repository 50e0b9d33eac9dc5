"""App tests through `gradio_client`: the page's endpoints, driven as a program would drive them."""
from __future__ import annotations

import pytest

import app as app_script  # noqa: F401  (the package `app/`; the launcher is tested through its parser below)


def test_launcher_binds_loopback_and_never_shares_by_default():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("launcher", Path(__file__).resolve().parents[2] / "app.py")
    launcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launcher)
    args = launcher.parse_args([])
    assert (args.host, args.port) == ("127.0.0.1", 7860)
    assert launcher.parse_args(["--host", "0.0.0.0", "--port", "9000"]).port == 9000


def test_every_event_has_an_api_name(running_app):
    _, demo = running_app
    names = [fn.api_name for fn in demo.fns.values()]
    assert names and all(isinstance(n, str) and n for n in names), names
    for expected in ("train_tokenizers", "tokenize_text", "merge_replay", "explore_masks", "import_corpus",
                     "corpus_card"):
        assert expected in names


def test_header_shows_the_compute_device(running_app):
    import httpx

    url, _ = running_app
    page = httpx.get(url, timeout=30).text
    assert "compute device" in page and "CPU" in page


def test_train_tokenizers_then_tokenize_and_replay(client):
    status, table, length_plot, overlap_plot, chips, files = client.predict(
        "synthetic", 500, ["bpe", "byte_bpe", "wordpiece", "unigram"], "the small cat 小猫 🙂 3.14",
        api_name="/train_tokenizers")
    assert "Trained 4 tokenizer(s)" in status
    kinds = [row[0] for row in table["data"]]
    assert kinds == ["bpe", "byte_bpe", "wordpiece", "unigram"]
    assert len(files) == 4 and all(str(f["path"] if isinstance(f, dict) else f).endswith("tokenizer.json")
                                   for f in files)
    assert chips.count('class="tok-row"') == 4 and "id " in chips

    chips_again = client.predict("synthetic", 500, ["wordpiece"], "the cat", api_name="/tokenize_text")
    assert chips_again.count('class="tok-row"') == 1

    from lab_models import api

    corpus = api.load_corpus("synthetic")
    bpe = api.cached_tokenizer("bpe", corpus.train, 500, corpus_fingerprint=corpus.fingerprint)
    assert bpe.from_cache  # trained by the endpoint above, into the same lab home
    total = api.merge_count(bpe.tokenizer)
    html_zero, _ = client.predict("synthetic", 500, "bpe", "the cat", 0, api_name="/merge_replay")
    html_all, step = client.predict("synthetic", 500, "bpe", "the cat", total, api_name="/merge_replay")
    assert "after <b>0</b>" in html_zero and f"after <b>{total}</b> of {total} merges" in html_all
    # with every merge applied the replay shows exactly the tokenizer's own pieces
    real = bpe.tokenizer.encode("the cat").tokens
    assert html_all.count('class="tok-chip"') == len(real) < html_zero.count('class="tok-chip"')


@pytest.mark.parametrize("vocab_size, kinds, text, message", [
    (0, ["bpe"], "x", "ocabulary"),
    (500, [], "x", "at least one tokenizer kind"),
    (500, ["bpe"], "   ", "Type some text"),
])
def test_tokenizer_bad_input_gives_a_clear_error(client, vocab_size, kinds, text, message):
    with pytest.raises(Exception, match=message):
        client.predict("synthetic", vocab_size, kinds, text, api_name="/tokenize_text")


def test_explore_masks_draws_each_family(client):
    result = client.predict("the quick brown fox jumps over the lazy dog", "whitespace",
                            ["bert", "xlnet", "glm", "t5"], 0, "1, 4", None, None, "", None, "1:3, 5:6", False,
                            api_name="/explore_masks")
    headers = [result[i] for i in range(0, 12, 3)]
    assert any("BERT" in str(h) for h in headers) and any("GLM" in str(h) for h in headers)


def test_explore_masks_shows_the_two_stream_leak(client):
    """Unticking XLNet's two streams draws one stream ("self") in which every target row attends its own token; the
    header then carries the leak note (a Gradio i18n marker: the page shows it in the reader's language)."""
    from app.i18n.language import english
    from app.explorer.tab import LEAK_NOTE

    common = ("a b c d e f", "whitespace", ["xlnet"], 0, "", None, None, "3 0 5 1 4 2", 2, "", True)
    two = client.predict(*common, True, api_name="/explore_masks")
    leak = client.predict(*common, False, api_name="/explore_masks")
    assert "content:" in str(two[0]) and LEAK_NOTE not in str(two[0])
    assert LEAK_NOTE in str(leak[0]) and english("explorer.leak_note").startswith("**Two streams off: the leak.**")
    assert "query stream" in str(two[1]) and "query stream" not in str(leak[1]) and "self-attention" in str(leak[1])


def test_explore_masks_bad_spans_error(client):
    with pytest.raises(Exception, match="Write spans as start:end"):
        client.predict("a b c d", "whitespace", ["glm"], 0, "", None, None, "", None, "oops", True,
                       api_name="/explore_masks")


def test_upload_corpus_through_the_page(client, tmp_path):
    from gradio_client import handle_file

    good = tmp_path / "notes.csv"
    good.write_text("id,body\n1,The first note is about cats.\n2,The second note is about dogs.\n"
                    "3,A third note about birds and trees.\n", encoding="utf-8")
    column_update, note = client.predict(handle_file(str(good)), api_name="/inspect_upload")
    assert "csv" in note
    status, corpus_choice, card, sample = client.predict(handle_file(str(good)), "my-notes", "body",
                                                         api_name="/import_corpus")
    assert "Imported **my-notes**" in status
    fields = dict((row[0], row[1]) for row in card["data"])
    assert fields["name"] == "my-notes" and int(fields["documents"]) == 3

    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02binary\x00" * 50)
    with pytest.raises(Exception, match="(?i)binary"):
        client.predict(handle_file(str(binary)), "blob", None, api_name="/import_corpus")
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n", encoding="utf-8")
    with pytest.raises(Exception, match="(?i)empty"):
        client.predict(handle_file(str(empty)), "", None, api_name="/import_corpus")
