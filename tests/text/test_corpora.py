"""Tests for lab_models.text.corpora and lab_models.text.synthetic: built-ins, uploads, splits and cards.

Every test passes an explicit lab home under pytest's tmp_path, so nothing touches ~/.pretraining-lab.
"""
from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab_models.text import synthetic
from lab_models.text.corpora import (BUILTIN_CORPORA, Corpus, corpus_card, import_corpus, list_corpora, load_corpus,
                                     split_train_validation)
from lab_models.text.corpus_files import DEFAULT_MAX_UPLOAD_BYTES, inspect_file, max_upload_bytes
from lab_models.text.stdlib_docs import prose_paragraphs
from lab_models.text.synthetic import (ENTAILMENT_LABELS, NOUN_TOPICS, SENTIMENT_LABELS, SENTIMENT_LEXICON, TAGS,
                                       TOPICS, SyntheticData, synthetic_dataset)
from tests.support.files import write


def has_cjk(text: str) -> bool:
    return any("\u4e00" <= character <= "\u9fff" for character in text)


def corpora_entries(home) -> list[str]:
    folder = home / "corpora"
    return sorted(os.listdir(folder)) if folder.exists() else []


def is_subsequence(short: list[str], long: list[str]) -> bool:
    remaining = iter(long)
    return all(word in remaining for word in short)


# ------------------------------------------------------------------------------------------------- synthetic
@pytest.fixture(scope="module")
def dataset() -> SyntheticData:
    return synthetic_dataset(seed=0, n_sentences=3000)


def test_synthetic_is_deterministic_from_the_seed_and_differs_across_seeds():
    first, again, other = synthetic_dataset(7, 400), synthetic_dataset(7, 400), synthetic_dataset(8, 400)
    assert first == again
    assert [example.english for example in first.examples] != [example.english for example in other.examples]
    assert first.next_sentence_pairs() == again.next_sentence_pairs()


def test_synthetic_size_and_vocabulary_suit_a_tiny_model():
    data = synthetic_dataset()
    assert len(data.examples) == 8000 == len(data.pairs) == len(data.story_ids)
    used_words = {token for example in data.examples for token in example.tokens}
    assert 150 <= len(used_words) <= 600
    assert used_words <= set(synthetic.vocabulary())


def test_synthetic_translation_follows_the_documented_rules():
    # A hand-built derivation: the golden example of the module docstring.
    cat = synthetic._Noun("cat", "猫", "只")
    ball = synthetic._Noun("ball", "球", "个")
    small, red = synthetic._Word("small", "小"), synthetic._Word("red", "红")
    beautiful = synthetic._Word("beautiful", "美丽", 1)
    sees = next(verb for verb in synthetic._VERBS if verb.base == "see")
    clause = synthetic._Clause("animals", synthetic._NounPhrase(cat, "the", small), sees, False,
                               synthetic._NounPhrase(ball, "a", red), None, None)
    assert clause.english() == "the small cat sees a red ball ."
    assert clause.chinese() == "小猫看见一个红球。"
    park = synthetic._Place("in", "park", "在公园里")
    negated = synthetic._Clause("animals", synthetic._NounPhrase(cat, None), sees, True,
                                synthetic._NounPhrase(ball, "my", beautiful), None, park)
    assert negated.english() == "it does not see my beautiful ball in the park ."
    assert negated.chinese() == "它在公园里没看见我的美丽的球。"
    assert [tag for _, tag in negated.english_words()] == [
        "PRON", "AUX", "NEG", "VERB", "DET", "ADJ", "NOUN", "PREP", "DET", "NOUN", "PUNCT"]
    assert negated.sentiment() == "positive"  # beautiful (+1), see (0)


def test_synthetic_labels_are_aligned_and_in_their_documented_sets(dataset):
    for example in dataset.examples:
        assert example.tokens == tuple(example.english.split())
        assert len(example.tags) == len(example.tokens)
        assert set(example.tags) <= set(TAGS)
        assert example.tokens[-1] == "." and example.tags[-1] == "PUNCT"
        assert example.sentiment in SENTIMENT_LABELS
        assert example.topic in TOPICS
        assert example.chinese.endswith("。") and has_cjk(example.chinese)
        for token, tag in zip(example.tokens, example.tags):
            if tag == "DET":
                assert token in synthetic.DETERMINERS
            if tag == "PRON":
                assert token in synthetic.PRONOUNS
            if tag == "NEG":
                assert token == "not"
    assert {example.sentiment for example in dataset.examples} == set(SENTIMENT_LABELS)
    assert {example.topic for example in dataset.examples} == set(TOPICS)


def test_synthetic_sentiment_and_topic_can_be_recomputed_from_the_words(dataset):
    for example in dataset.examples:
        negated = "NEG" in example.tags
        score = 0
        for token, tag in zip(example.tokens, example.tags):
            if tag in ("ADJ", "ADV"):
                score += SENTIMENT_LEXICON[token]
            elif tag == "VERB":
                score += -SENTIMENT_LEXICON[token] if negated else SENTIMENT_LEXICON[token]
        expected = "positive" if score > 0 else "negative" if score < 0 else "neutral"
        assert example.sentiment == expected, example.english
        nouns = [token for token, tag in zip(example.tokens, example.tags) if tag == "NOUN"]
        assert nouns and {NOUN_TOPICS[noun] for noun in nouns} == {example.topic}, example.english


def test_synthetic_entailment_pairs_are_decidable_from_the_grammar(dataset):
    labels = [pair.label for pair in dataset.pairs]
    assert set(labels) == set(ENTAILMENT_LABELS)
    assert min(labels.count(label) for label in ENTAILMENT_LABELS) > len(labels) / 6
    for pair in dataset.pairs:
        premise, hypothesis = pair.premise.split(), pair.hypothesis.split()
        premise_negated, hypothesis_negated = "not" in premise, "not" in hypothesis
        assert premise != hypothesis
        if pair.label == "contradiction":
            assert premise_negated != hypothesis_negated
        elif pair.label == "entailment":
            assert premise_negated == hypothesis_negated
            if premise_negated:  # negation: the hypothesis adds a restriction
                assert is_subsequence(premise, hypothesis) and len(hypothesis) > len(premise)
            else:  # affirmative: the hypothesis drops modifiers
                assert is_subsequence(hypothesis, premise) and len(hypothesis) < len(premise)
        else:
            assert premise_negated == hypothesis_negated
            assert not is_subsequence(hypothesis, premise)


def test_synthetic_parallel_and_next_sentence_pairs(dataset):
    parallel = dataset.parallel_pairs()
    assert len(parallel) == len(dataset.examples)
    assert all(not has_cjk(english) and has_cjk(chinese) for english, chinese in parallel)
    stories = dataset.stories()
    stories_containing: dict[str, set[int]] = {}
    for story_index, story in enumerate(stories):
        for example in story:
            stories_containing.setdefault(example.english, set()).add(story_index)
    # one pair per consecutive (first, following) in story order
    expected = [(story_index, first.english, following.english)
                for story_index, story in enumerate(stories) for first, following in zip(story, story[1:])]
    pairs = dataset.next_sentence_pairs()
    assert len(pairs) == len(expected)
    assert {pair.is_next for pair in pairs} == {True, False}
    for pair, (story_index, first, following) in zip(pairs, expected):
        assert pair.first == first
        if pair.is_next:
            assert pair.second == following
        else:  # drawn from another story
            assert stories_containing[pair.second] - {story_index}
    assert dataset.next_sentence_pairs(seed=5) != pairs


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_synthetic_rejects_a_bad_size(bad):
    with pytest.raises(ValueError, match="n_sentences"):
        synthetic_dataset(0, bad)


def test_synthetic_corpus_is_bilingual_with_translations_in_the_same_split(tmp_path):
    corpus = load_corpus("synthetic", home=tmp_path)
    assert corpus.source == "builtin" and corpus.name == "synthetic"
    for split in (corpus.train, corpus.validation):
        assert split and len(split) % 2 == 0
        assert not any(has_cjk(document) for document in split[0::2])
        assert all(has_cjk(document) for document in split[1::2])
        # sentence counts agree between a story and its translation
        assert all(english.count(" .") == chinese.count("。") for english, chinese in zip(split[0::2], split[1::2]))
    assert load_corpus("synthetic", home=tmp_path) == corpus
    card = corpus_card(corpus)
    assert card["language_mix"]["latin"] > 0.5 and card["language_mix"]["cjk"] > 0.1
    assert card["language_mix"]["other"] == 0
    assert sum(card["language_mix"].values()) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------- stdlib-docs
@pytest.fixture(scope="module")
def stdlib_home(tmp_path_factory):
    return tmp_path_factory.mktemp("stdlib-home")


@pytest.fixture(scope="module")
def stdlib_docs(stdlib_home) -> Corpus:
    return load_corpus("stdlib-docs", home=stdlib_home)


@pytest.mark.slow
def test_stdlib_docs_is_substantial_clean_and_deduplicated(stdlib_docs):
    texts = stdlib_docs.texts
    assert len(texts) > 3000
    assert sum(map(len, texts)) > 500_000
    assert len(set(texts)) == len(texts)
    for paragraph in texts:
        assert len(paragraph) >= 40
        assert "\n" not in paragraph and "  " not in paragraph
        assert ">>>" not in paragraph
        assert not paragraph.startswith((".. ", "===", "---", "***"))
    card = corpus_card(stdlib_docs)
    assert card["language_mix"]["latin"] > 0.95
    assert card["words"] > 50_000


@pytest.mark.slow
def test_stdlib_docs_split_is_deterministic_and_cached(stdlib_docs, stdlib_home):
    assert stdlib_docs.validation and len(stdlib_docs.train) > 10 * len(stdlib_docs.validation)
    assert not set(stdlib_docs.train) & set(stdlib_docs.validation)
    ordered = list(stdlib_docs.train + stdlib_docs.validation)
    assert split_train_validation(ordered) == (stdlib_docs.train, stdlib_docs.validation)
    cache_files = list((stdlib_home / "corpora" / "_builtin").glob("stdlib-docs-*.json"))
    assert len(cache_files) == 1
    again = load_corpus("stdlib-docs", home=stdlib_home)  # from the cache
    assert again == stdlib_docs
    assert "_builtin" not in list_corpora(home=stdlib_home)


@pytest.mark.slow
def test_stdlib_docs_rebuilds_a_corrupted_cache(stdlib_docs, stdlib_home):
    cache_file = next((stdlib_home / "corpora" / "_builtin").glob("stdlib-docs-*.json"))
    cached = json.loads(cache_file.read_text(encoding="utf-8"))
    cached["train"][0] = "tampered"
    cache_file.write_text(json.dumps(cached), encoding="utf-8")
    assert load_corpus("stdlib-docs", home=stdlib_home) == stdlib_docs


def test_prose_paragraphs_drops_doctests_code_and_markup():
    text = (
        "Title of the section\n====================\n\n"
        "Returns the sum of the\nvalues in the ``iterable``, starting at zero.\n\n"
        ">>> sum([1, 2])\n3\n\n"
        "Use it like this::\n\n    total = sum(values)\n    print(total)\n\n"
        ".. versionadded:: 3.2\n   Some directive body text that is long enough to count.\n\n"
        "A short one.\n\n"
        "The results are well-\nknown to everyone who reads the documentation carefully."
    )
    assert prose_paragraphs(text) == [
        "Returns the sum of the values in the iterable, starting at zero.",
        "The results are well-known to everyone who reads the documentation carefully.",
    ]


# ----------------------------------------------------------------------------------------------------- splits
def test_split_is_by_content_not_order():
    documents = [f"document number {index}" for index in range(200)]
    train, validation = split_train_validation(documents, validation_fraction=0.1)
    shuffled = documents[:]
    random.Random(1).shuffle(shuffled)
    train_2, validation_2 = split_train_validation(shuffled, validation_fraction=0.1)
    assert set(train) == set(train_2) and set(validation) == set(validation_2)
    assert 5 <= len(validation) <= 40
    assert list(train) == [document for document in documents if document in set(train)]  # order kept


def test_split_guarantees_one_validation_and_one_train_document():
    assert split_train_validation(["only one"]) == (("only one",), ())
    train, validation = split_train_validation(["first", "second"])
    assert len(train) == 1 and len(validation) == 1
    train, validation = split_train_validation(["a", "b", "c"], validation_fraction=0.99)
    assert len(train) >= 1 and len(validation) >= 1
    assert split_train_validation(["a", "b"], validation_fraction=0) == (("a", "b"), ())
    assert split_train_validation([]) == ((), ())


@pytest.mark.parametrize("fraction", [1.0, -0.1, "0.1"])
def test_split_rejects_a_bad_fraction(fraction):
    with pytest.raises(ValueError, match="validation_fraction"):
        split_train_validation(["a", "b"], validation_fraction=fraction)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=20), max_size=30), st.randoms(use_true_random=False))
def test_split_property_partitions_and_ignores_order(documents, rng):
    train, validation = split_train_validation(documents)
    assert sorted(train + validation) == sorted(documents)
    shuffled = documents[:]
    rng.shuffle(shuffled)
    train_2, validation_2 = split_train_validation(shuffled)
    assert sorted(train_2) == sorted(train) and sorted(validation_2) == sorted(validation)
    if len(set(documents)) >= 2:
        assert train and validation


# ---------------------------------------------------------------------------------------------------- uploads
BAD_UPLOADS = [
    # (file name, content, keyword arguments, fragments the message must contain)
    ("big.txt", b"word " * 400, {"max_bytes": 1000}, ["over the upload limit", "max_bytes",
                                                    "PRETRAINING_LAB_MAX_UPLOAD_MB"]),
    ("empty.txt", b"", {}, ["empty"]),
    ("blank.md", b"  \n\t\r\n \n", {}, ["empty", "whitespace"]),
    ("blank_unicode.txt", "\u3000\u00a0\n".encode(), {}, ["whitespace"]),
    ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", {}, ["binary", "byte offset 8"]),
    ("controls.txt", bytes(range(1, 9)) * 50 + b"some text", {}, ["binary", "control"]),
    ("latin1.txt", b"hello\ncaf\xe9 au lait\n", {}, ["not valid UTF-8", "byte offset 9", "line 2", "re-save"]),
    ("wide.txt", "hello".encode("utf-16"), {}, ["UTF-16", "UTF-8"]),
    ("notes.pdf", b"some text", {}, ["unsupported", ".txt", ".csv"]),
    ("noext", b"some text", {}, ["unsupported", "(no extension)"]),
    ("table.csv", b"id,text,label\n1,hello there,pos\n", {"text_column": "body"}, ["'body'", "available: text, label"]),
    ("header_only.csv", b"text,label\n", {}, ["no rows"]),
    ("numbers.csv", b"a,b\n1,2\n3,4\n", {}, ["no column holding text"]),
    ("quote.csv", b'text\n"unterminated\n', {}, ["CSV error", "line"]),
    ("rows.jsonl", b'{"text": "a"}\n{"body": "b"}\n', {"text_column": "content"},
     ["'content'", "available: text, body"]),
    ("broken.jsonl", b'{"text": "fine"}\n{"text": "oops"\n', {}, ["line 2", "not valid JSON"]),
    ("list.jsonl", b'["not", "an", "object"]\n', {}, ["line 1", "not an object"]),
    ("no_strings.jsonl", b'{"n": 1}\n{"n": 2}\n', {}, ["no field holding text"]),
    ("empty_field.jsonl", b'{"text": ""}\n{"text": "  "}\n', {}, ["no non-empty text", "'text'"]),
    ("plain.txt", b"some text", {"text_column": "text"}, ["plain text", ".csv"]),
    ("good.txt", b"some text", {"name": "../escape"}, ["not allowed", "letters, digits"]),
    ("good.txt", b"some text", {"name": "_builtin"}, ["not allowed"]),
    ("good.txt", b"some text", {"name": "synthetic"}, ["built-in"]),
]


@pytest.mark.parametrize("file_name, content, kwargs, fragments", BAD_UPLOADS,
                         ids=[case[0] + ":" + ",".join(case[2]) for case in BAD_UPLOADS])
def test_bad_upload_raises_a_helpful_error_and_leaves_nothing_behind(tmp_path, file_name, content, kwargs,
                                                                     fragments):
    home = tmp_path / "home"
    existing = import_corpus(write(tmp_path / "keep.txt", b"an existing corpus\n\nwith two paragraphs"), home=home)
    before = corpora_entries(home)
    upload = write(tmp_path / "uploads" / file_name, content)
    with pytest.raises(ValueError) as raised:
        import_corpus(upload, home=home, **kwargs)
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, message
    assert corpora_entries(home) == before
    assert load_corpus("keep", home=home) == existing
    if set(kwargs) <= {"max_bytes"}:  # inspect_file runs the same file validation (it takes no name or column)
        with pytest.raises(ValueError) as inspected:
            inspect_file(upload, **kwargs)
        assert str(inspected.value) == message


def test_missing_file_and_folder_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        import_corpus(tmp_path / "missing.txt", home=tmp_path / "home")
    with pytest.raises(ValueError, match="not a file"):
        inspect_file(tmp_path)


def test_upload_cap_honours_the_environment_variable(tmp_path, monkeypatch):
    upload = write(tmp_path / "words.txt", b"word " * 400)  # 2000 bytes
    monkeypatch.delenv("PRETRAINING_LAB_MAX_UPLOAD_MB", raising=False)
    assert max_upload_bytes() == DEFAULT_MAX_UPLOAD_BYTES
    monkeypatch.setenv("PRETRAINING_LAB_MAX_UPLOAD_MB", "0.001")  # 1048 bytes
    with pytest.raises(ValueError, match="over the upload limit of 1.0 KB"):
        import_corpus(upload, home=tmp_path / "home")
    assert import_corpus(upload, home=tmp_path / "home", max_bytes=5000).name == "words"  # the argument wins
    monkeypatch.setenv("PRETRAINING_LAB_MAX_UPLOAD_MB", "lots")
    with pytest.raises(ValueError, match="PRETRAINING_LAB_MAX_UPLOAD_MB"):
        import_corpus(upload, home=tmp_path / "home")


def test_utf8_bom_is_accepted_and_text_is_split_into_paragraphs(tmp_path):
    upload = write(tmp_path / "notes.md", b"\xef\xbb\xbf# Title\r\nFirst paragraph  \r\n\r\nSecond one\n\n\n")
    corpus = import_corpus(upload, home=tmp_path / "home")
    assert sorted(corpus.texts) == ["# Title\nFirst paragraph", "Second one"]
    assert inspect_file(upload) == {"format": "md", "columns": [], "suggested_column": None,
                                    "bytes": len(upload.read_bytes()), "documents": 2}
    one_per_line = write(tmp_path / "lines.txt", b"line one\nline two\nline three\n")
    assert sorted(import_corpus(one_per_line, home=tmp_path / "home").texts) == ["line one", "line three",
                                                                                  "line two"]


def test_csv_column_picking(tmp_path):
    upload = write(tmp_path / "reviews.csv",
                   b'id,title,review,stars\n1,Fine,"Loved it, would buy again.\nTwice!",5\n'
                   b'2,Meh,"Broke after a week, sadly.",1\n3,,,\n')
    info = inspect_file(upload)
    assert info["format"] == "csv" and info["columns"] == ["title", "review"]  # numeric columns are not offered
    assert info["suggested_column"] == "review" and info["documents"] == 2
    corpus = import_corpus(upload, home=tmp_path / "home")
    assert sorted(corpus.texts) == ["Broke after a week, sadly.", "Loved it, would buy again.\nTwice!"]
    titles = import_corpus(upload, name="titles", text_column="title", home=tmp_path / "home")
    assert sorted(titles.texts) == ["Fine", "Meh"]
    semicolons = write(tmp_path / "semi.csv", "name;text\nA;Bonjour, le monde\nB;Grüß Gott\n".encode())
    assert sorted(import_corpus(semicolons, home=tmp_path / "home").texts) == ["Bonjour, le monde", "Grüß Gott"]


def test_jsonl_field_picking(tmp_path):
    upload = write(tmp_path / "chat.jsonl",
                   b'{"id": 1, "speaker": "ann", "utterance": "Good morning to all of you"}\n\n'
                   b'{"id": 2, "speaker": "bob", "utterance": "Hi", "extra": null}\n'
                   b'{"id": 3, "speaker": "cy"}\n')
    info = inspect_file(upload)
    assert info == {"format": "jsonl", "columns": ["speaker", "utterance"], "suggested_column": "utterance",
                    "bytes": len(upload.read_bytes()), "documents": 2}
    corpus = import_corpus(upload, home=tmp_path / "home")
    assert sorted(corpus.texts) == ["Good morning to all of you", "Hi"]
    speakers = import_corpus(upload, text_column="speaker", name="speakers", home=tmp_path / "home")
    assert sorted(speakers.texts) == ["ann", "bob", "cy"]


def test_import_stores_the_corpus_and_reimport_replaces_it(tmp_path):
    home = tmp_path / "home"
    first = import_corpus(write(tmp_path / "My Notes (2024).txt", b"alpha\n\nbeta\n\ngamma"), home=home)
    assert first.name == "my-notes-2024" and first.source == "upload"
    folder = home / "corpora" / "my-notes-2024"
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["fingerprint"] == first.fingerprint and meta["documents"] == 3
    assert load_corpus("my-notes-2024", home=home) == first
    second = import_corpus(write(tmp_path / "other.txt", b"delta\n\nepsilon"), name="my-notes-2024", home=home)
    assert sorted(load_corpus("my-notes-2024", home=home).texts) == ["delta", "epsilon"]
    assert second.fingerprint != first.fingerprint
    assert corpora_entries(home) == ["my-notes-2024"]  # no temporary or set-aside folders remain
    import_corpus(write(tmp_path / "synthetic.txt", b"zeta\n\neta"), home=home)
    import_corpus(write(tmp_path / "Another.txt", b"theta\n\niota"), home=home)
    assert list_corpora(home=home) == ["stdlib-docs", "synthetic", "stories", "another", "my-notes-2024",
                                       "synthetic-upload"]
    assert list(BUILTIN_CORPORA) == ["stdlib-docs", "synthetic", "stories"]


def test_a_failure_while_writing_leaves_the_previous_corpus_and_no_temporary_folder(tmp_path, monkeypatch):
    from lab_models.text import corpora as corpora_module

    home = tmp_path / "home"
    previous = import_corpus(write(tmp_path / "notes.txt", b"alpha\n\nbeta"), home=home)
    before = corpora_entries(home)

    def failing_write(path, obj):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(corpora_module, "atomic_write_json", failing_write)
    with pytest.raises(OSError):
        import_corpus(write(tmp_path / "new.txt", b"gamma\n\ndelta"), name="notes", home=home)
    assert corpora_entries(home) == before
    assert load_corpus("notes", home=home) == previous


def test_interrupted_reimport_is_recovered(tmp_path):
    home = tmp_path / "home"
    corpus = import_corpus(write(tmp_path / "notes.txt", b"alpha\n\nbeta"), home=home)
    corpora = home / "corpora"
    os.replace(corpora / "notes", corpora / ".previous-notes")  # as if killed between the two renames
    assert list_corpora(home=home)[-1] == "notes"
    assert load_corpus("notes", home=home) == corpus


def test_a_damaged_imported_corpus_is_reported(tmp_path):
    home = tmp_path / "home"
    import_corpus(write(tmp_path / "notes.txt", b"alpha\n\nbeta"), home=home)
    (home / "corpora" / "notes" / "documents.jsonl").write_text('{"split": "train", "text": "changed"}\n')
    with pytest.raises(ValueError, match="damaged; import the file again"):
        load_corpus("notes", home=home)


def test_folder_path_loads_supported_files_recursively_in_sorted_order(tmp_path):
    folder = tmp_path / "texts"
    write(folder / "b.txt", b"bravo paragraph\n\nbravo second")
    write(folder / "a" / "z.md", b"alpha markdown")
    write(folder / "c.jsonl", b'{"text": "charlie json"}\n')
    write(folder / "d.csv", b"text\ndelta csv\n")
    write(folder / "empty.txt", b"\n")
    write(folder / "ignored.pdf", b"not read")
    write(folder / ".hidden" / "secret.txt", b"not read either")
    corpus = load_corpus(str(folder), home=tmp_path / "home")
    assert corpus.source == "path" and corpus.name == "texts"
    expected = ["alpha markdown", "bravo paragraph", "bravo second", "charlie json", "delta csv"]
    assert sorted(corpus.texts) == expected
    assert [text for text in expected if text in corpus.train] == list(corpus.train)  # file order, then in-file
    single = load_corpus(str(folder / "b.txt"), home=tmp_path / "home")
    assert single.name == "b" and sorted(single.texts) == ["bravo paragraph", "bravo second"]
    write(folder / "zz.txt", b"\xff\xfe\xfa broken")
    with pytest.raises(ValueError, match="zz.txt"):
        load_corpus(str(folder), home=tmp_path / "home")
    write(tmp_path / "pdfs" / "paper.pdf", b"%PDF-1.4")
    with pytest.raises(ValueError, match="has no .txt"):
        load_corpus(str(tmp_path / "pdfs"), home=tmp_path / "home")


def test_unknown_corpus_lists_the_choices(tmp_path):
    home = tmp_path / "home"
    import_corpus(write(tmp_path / "mine.txt", b"some words here"), home=home)
    with pytest.raises(ValueError) as raised:
        load_corpus("no-such-corpus", home=home)
    for choice in ("stdlib-docs", "synthetic", "mine"):
        assert choice in str(raised.value)
    with pytest.raises(ValueError, match="expected a corpus name"):
        load_corpus("", home=home)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200), st.sampled_from(["txt", "md", "jsonl", "csv"]))
def test_any_bytes_either_import_or_raise_value_error(tmp_path, content, extension):
    upload = write(tmp_path / f"fuzz.{extension}", content)
    home = tmp_path / "fuzz-home"
    try:
        info = inspect_file(upload)
    except ValueError:
        with pytest.raises(ValueError):
            import_corpus(upload, home=home)
        return
    corpus = import_corpus(upload, home=home)
    assert info["documents"] == len(corpus.texts) and all(text.strip() for text in corpus.texts)


# ------------------------------------------------------------------------------------------------------ cards
def test_corpus_card_counts(tmp_path):
    long_document = "x" * 1000
    corpus = Corpus("demo", "path", ("Hello world\nsecond line", "你好世界"), (long_document,), "f" * 64)
    card = corpus_card(corpus)
    assert card["name"] == "demo" and card["source"] == "path"
    assert (card["documents"], card["train_documents"], card["validation_documents"]) == (3, 2, 1)
    assert card["lines"] == 4
    assert card["characters"] == 23 + 4 + 1000
    assert card["bytes"] == 23 + 12 + 1000
    assert card["words"] == 4 + 4 + 1
    letters = 20 + 4 + 1000
    assert card["language_mix"] == pytest.approx({"latin": 1020 / letters, "cjk": 4 / letters, "other": 0.0})
    assert card["sample"][:2] == ["Hello world\nsecond line", "你好世界"]
    assert card["sample"][2].endswith("…") and len(card["sample"][2]) <= 301
    greek = corpus_card(Corpus("g", "path", ("αβγ abc",), (), "0" * 64))
    assert greek["language_mix"] == pytest.approx({"latin": 0.5, "cjk": 0.0, "other": 0.5})
    with pytest.raises(ValueError, match="expects a Corpus"):
        corpus_card("synthetic")


def test_corpus_rejects_empty_content():
    with pytest.raises(ValueError, match="no documents"):
        Corpus("empty", "path", (), (), "0" * 64)
    with pytest.raises(ValueError, match="source"):
        Corpus("x", "web", ("text",), (), "0" * 64)


@pytest.mark.slow
def test_the_corpora_tab_describes_every_built_in_corpus_in_both_languages():
    """The tab's opening text (app/i18n/locales/*/corpora.json "intro") lists the built-in corpora with
    `api.BUILTIN_CORPORA`'s descriptions: a new built-in corpus must be described there too."""
    from app.corpora.tab import DESCRIBED_CORPORA, corpora_intro
    from app.i18n.language import english, translations
    from lab_models import api

    assert tuple(api.BUILTIN_CORPORA) == DESCRIBED_CORPORA
    assert "corpora.intro" in str(corpora_intro())
    for name, description in api.BUILTIN_CORPORA.items():
        assert f"- **{name}**: {description}" in english("corpora.intro")
        assert f"- **{name}**：" in translations()["zh"]["corpora"]["intro"]


def test_the_corpus_cards_sample_reads_as_written(tmp_path):
    """Markdown does not eat a sample's punctuation (the stdlib docs' `__debug__` was drawn as a bold "debug")."""
    from app.corpora.tab import CorporaView, verbatim

    assert verbatim("if __debug__: x = [1] * 2") == "if \\_\\_debug\\_\\_: x = \\[1\\] \\* 2"
    upload = tmp_path / "code.txt"
    upload.write_text("\n\n".join(f"line {i}: if __debug__ then *stars*." for i in range(40)), encoding="utf-8")
    view = CorporaView(tmp_path)
    view.import_file(str(upload), "code-notes", None)
    _, sample = view.card("code-notes")
    assert "> line 0: if \\_\\_debug\\_\\_ then \\*stars\\*\\." in sample
