"""Corpora read in place, of any size (lab_models/text/corpus_streams.py, corpus_sources.py): the streamed reader
gives exactly the documents of the in-memory one, reads every format a user has (.txt, a folder, .jsonl, .csv,
.parquet, a `datasets` save_to_disk folder), and turns bad input into counts or clear errors: an empty or binary file
in a folder (skipped and counted), mixed encodings (replaced and counted; UTF-16 refused with advice), a line far
longer than the limit (cut; the 2 GB line simulated with a limit of a few hundred characters), a Parquet file
without the named column. Also: the bounded, seeded tokenizer sample, the cached fingerprint, linked corpora."""
from __future__ import annotations

import json
import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab_models.text import corpus_sources
from lab_models.text.corpora import (document_split, link_corpus, linked_corpus, list_corpora, load_corpus,
                                     split_train_validation)
from lab_models.text.corpus_files import extract_documents, text_documents
from lab_models.text.corpus_sources import FileSource, open_corpus, sample_documents
from lab_models.text.corpus_streams import ReadLimits, ReadReport, find_corpus_files, iter_documents
from tests.support.files import write

SMALL = ReadLimits(block_bytes=64, max_document_chars=10**6, probe_bytes=32)  # many blocks, every boundary case


def streamed(path, limits=SMALL, text_column=None):
    report = ReadReport()
    return list(iter_documents(find_corpus_files(path, text_column, limits=limits), report, limits)), report


# ------------------------------------------------------------------------------------------------ the same documents
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["a", "bb", " ", "\t", "\n", "\r", "\r\n", "\n\n", " \n", "\u3000", "é", "猫", "😀"]),
                min_size=1, max_size=80), st.integers(16, 40))
def test_streamed_text_is_split_exactly_as_the_whole_file_is(tmp_path, parts, block):
    text = "".join(parts)
    path = write(tmp_path / "x.txt", text.encode())
    limits = ReadLimits(block_bytes=block, max_document_chars=10**6, probe_bytes=16)
    if not text.encode().strip():  # only ASCII whitespace: an empty file (as an upload says, corpus_files.py)
        with pytest.raises(ValueError, match="empty"):
            streamed(path, limits)
        return
    assert streamed(path, limits)[0] == text_documents(text)


def test_tables_give_the_documents_an_upload_gives(tmp_path):
    rows = [{"id": i, "text": f"row {i} says something", "extra": None} for i in range(30)]
    rows[4]["text"] = ""
    jsonl = write(tmp_path / "t.jsonl", "\n".join(json.dumps(row) for row in rows).encode() + b"\n")
    csv = write(tmp_path / "t.csv", b'id,review,stars\n1,"Loved it, twice.\nReally!",5\n2,Broke fast,1\n3,,\n')
    for path in (jsonl, csv):
        documents, report = streamed(path)
        assert documents == list(extract_documents(path, None, None).documents)
        assert report.skipped_rows == 1  # the row without text, counted
        assert sorted(load_corpus(str(path)).texts) == sorted(documents)  # the in-memory path reads the same way


def test_a_folder_reads_every_format_in_path_order(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder = tmp_path / "mixed"
    write(folder / "b.txt", b"bravo one\n\nbravo two")
    write(folder / "a" / "z.md", b"alpha markdown")
    write(folder / "c.jsonl", b'{"text": "charlie json"}\n')
    write(folder / "d.csv", b"text\ndelta csv\n")
    pq.write_table(pa.table({"text": ["echo parquet", None, "foxtrot parquet"], "n": [1, 2, 3]}), folder / "e.parquet")
    documents, report = streamed(folder)
    assert documents == ["alpha markdown", "bravo one", "bravo two", "charlie json", "delta csv", "echo parquet",
                         "foxtrot parquet"]
    assert report.files_read == 5 and report.skipped_rows == 1


# ------------------------------------------------------------------------------------------------ bad input
def test_empty_and_binary_files_in_a_folder_are_skipped_and_counted(tmp_path):
    folder = tmp_path / "texts"
    write(folder / "a.txt", b"first document\n\nsecond document")
    write(folder / "b.txt", b"")
    write(folder / "c.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    write(folder / "d.txt", bytes(range(1, 9)) * 50)
    write(folder / "e.txt", b"third document")
    documents, report = streamed(folder)
    assert documents == ["first document", "second document", "third document"]
    assert report.skipped_files == 3
    assert [name for name, _ in report.skipped_file_examples] == ["b.txt", "c.txt", "d.txt"]
    assert report.skipped_file_examples[0][1] == "empty" and "NUL byte at byte offset 8" in \
        report.skipped_file_examples[1][1] and "control characters" in report.skipped_file_examples[2][1]
    assert report.notes()[0].startswith("3 files skipped (b.txt: empty; c.txt: binary: a NUL byte")
    corpus = load_corpus(str(folder))  # the in-memory path reads the same way
    assert sorted(corpus.texts) == sorted(documents)
    for single, fragment in ((folder / "b.txt", "is empty"), (folder / "c.txt", "looks like a binary file")):
        with pytest.raises(ValueError, match=fragment):
            streamed(single)


def test_mixed_encodings_are_replaced_and_counted_and_utf16_is_refused_with_advice(tmp_path):
    mixed = write(tmp_path / "mixed" / "a.txt", "naïve café\n\n".encode() + b"caf\xe9 au lait\n\n" + "猫".encode())
    documents, report = streamed(mixed)
    assert documents == ["naïve café", "caf\ufffd au lait", "猫"]
    assert report.replaced_characters == 1 and report.files_with_replacements == 1
    assert "1 bytes that are not UTF-8 replaced by U+FFFD in 1 file" in report.notes()
    write(tmp_path / "mixed" / "b.txt", "wide text".encode("utf-16"))
    with pytest.raises(ValueError, match=r"b.txt is UTF-16 encoded; re-save it as UTF-8"):
        streamed(tmp_path / "mixed")


def test_a_line_longer_than_the_limit_is_cut_into_documents(tmp_path):
    """The 2 GB line, simulated: a limit of 500 characters and a line of 20,000."""
    words = " ".join(f"w{i}" for i in range(4000))  # 19,889 characters, no newline
    limits = ReadLimits(block_bytes=256, max_document_chars=500, probe_bytes=64)
    path = write(tmp_path / "long.txt", words.encode() + b"\n\nshort paragraph")
    documents, report = streamed(path, limits)
    assert documents[-1] == "short paragraph" and all(len(document) <= 500 for document in documents)
    assert " ".join(documents[:-1]) == words  # cut at spaces: nothing lost, nothing split inside a word
    assert report.cuts == len(documents) - 2 >= 39  # the long line's pieces, less one
    chinese = write(tmp_path / "zh.txt", ("猫" * 1700).encode())  # no space to cut at: cut at the limit
    documents, _ = streamed(chinese, limits)
    assert [len(document) for document in documents] == [500, 500, 500, 200]
    jsonl = write(tmp_path / "long.jsonl", json.dumps({"text": words}).encode() + b'\n{"text": "kept"}\n')
    documents, report = streamed(jsonl, limits)
    assert documents == ["kept"] and report.skipped_rows == 1 and "longer than 500" in report.skipped_row_examples[0]
    csv = write(tmp_path / "long.csv", b"text\n" + words.encode() + b"\n")
    with pytest.raises(ValueError, match="line 2 is longer than 500 characters"):
        streamed(csv, limits)


def test_malformed_json_lines_are_skipped_and_counted(tmp_path):
    path = write(tmp_path / "rows.jsonl", b'{"text": "one"}\n{"text": "tw\n["x"]\n{"text": 3}\n{"text": "four"}\n')
    documents, report = streamed(path)
    assert documents == ["one", "four"]
    assert report.skipped_rows == 3
    assert report.skipped_row_examples[0].startswith("rows.jsonl line 2: not valid JSON")


def test_parquet_without_the_named_column_is_a_clear_error(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "shard.parquet"
    pq.write_table(pa.table({"content": ["a document", "another one"], "url": ["u1", "u2"]}), path)
    assert streamed(path)[0] == ["a document", "another one"]  # "content" is a usual text column name
    with pytest.raises(ValueError, match=r"shard.parquet has no column 'text'; its columns: content, url"):
        find_corpus_files(path, "text")
    assert streamed(path, text_column="url")[0] == ["u1", "u2"]


def test_a_datasets_save_to_disk_folder_is_read_memory_mapped(tmp_path):
    datasets = pytest.importorskip("datasets")
    texts = [f"document number {i} of the saved dataset" for i in range(50)]
    single = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": texts, "label": list(range(50))}).save_to_disk(str(single))
    files = find_corpus_files(single)
    assert files.layout == "datasets" and files.text_column == "text" and files.formats() == ["arrow"]
    assert streamed(single)[0] == texts
    both = tmp_path / "dict"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"body": texts[:40]}),
                          "test": datasets.Dataset.from_dict({"body": texts[40:]})}).save_to_disk(str(both))
    assert streamed(both)[0] == texts
    with pytest.raises(ValueError, match="has no column 'text'; its columns: body"):
        find_corpus_files(both, "text")


# ------------------------------------------------------------------------------------------------ sources
def test_the_tokenizer_sample_is_bounded_seeded_and_in_corpus_order():
    documents = [f"document {i} " + "x" * (i % 50) for i in range(2000)]
    first = sample_documents(documents, 10_000, torch.Generator().manual_seed(0))
    again = sample_documents(iter(documents), 10_000, torch.Generator().manual_seed(0))
    other = sample_documents(documents, 10_000, torch.Generator().manual_seed(1))
    assert first == again != other
    assert 9_000 < sum(len(text.encode()) for text in first) <= 10_000
    assert first == [text for text in documents if text in set(first)]  # corpus order
    assert sample_documents(documents[:10], 10_000, torch.Generator()) == documents[:10]  # all of it, when it fits


def test_a_big_corpus_streams_with_the_split_rule_and_a_cached_fingerprint(tmp_path, monkeypatch):
    rng = random.Random(0)
    lines = [" ".join(rng.choice(["cat", "dog", "sees", "a", "red", "ball"]) for _ in range(8)) + f" {i}"
             for i in range(3000)]
    path = write(tmp_path / "big.txt", "\n".join(lines).encode())
    monkeypatch.setattr(corpus_sources, "IN_MEMORY_MAX_BYTES", 1000)  # this 100 KB file counts as big
    source = open_corpus(str(path), home=tmp_path / "home")
    assert isinstance(source, FileSource) and source.reference == str(path.resolve())
    pairs = list(source.documents(ReadReport()))
    assert [text for _, text in pairs] == lines
    assert [split for split, _ in pairs] == [document_split(text) for text in lines]
    assert 0 < sum(split == "validation" for split, _ in pairs) < 300
    fingerprint = source.fingerprint()

    def no_reading(*args, **kwargs):
        raise AssertionError("the files were read again")

    monkeypatch.setattr(corpus_sources, "files_digest", no_reading)
    assert open_corpus(str(path), home=tmp_path / "home").fingerprint() == fingerprint  # cached by path, size, time
    sample = source.tokenizer_corpus(budget=20_000)
    assert sample.validation == () and 18_000 < sum(len(t.encode()) for t in sample.train) <= 20_000
    assert all(document_split(text) == "train" for text in sample.train)
    path.write_bytes(path.read_bytes() + b"\nnew line")  # changed: read and hashed again
    monkeypatch.undo()
    monkeypatch.setattr(corpus_sources, "IN_MEMORY_MAX_BYTES", 1000)
    assert open_corpus(str(path), home=tmp_path / "home").fingerprint() != fingerprint


def test_a_small_path_is_split_exactly_as_before(tmp_path):
    path = write(tmp_path / "few.txt", b"one\n\ntwo\n\nthree")
    source = open_corpus(str(path), home=tmp_path / "home")
    corpus = load_corpus(str(path))
    assert source.corpus == corpus and split_train_validation(corpus.texts)  # the in-memory split, its edge rule too
    assert corpus.validation  # three documents: split_train_validation moves one so that neither split is empty


def test_a_linked_corpus_is_read_in_place_by_name(tmp_path):
    home = tmp_path / "home"
    folder = write(tmp_path / "data" / "notes.txt", b"alpha\n\nbeta\n\ngamma").parent
    meta = link_corpus(folder, name="notes", home=home)
    assert meta["link"] == str(folder.resolve()) and meta["files"] == 1 and meta["bytes"] == 18
    assert "notes" in list_corpora(home=home) and linked_corpus("notes", home=home)["layout"] == "folder"
    assert not (home / "corpora" / "notes" / "documents.jsonl").exists()  # nothing copied
    assert sorted(load_corpus("notes", home=home).texts) == ["alpha", "beta", "gamma"]
    assert open_corpus("notes", home=home).reference == "notes"
    with pytest.raises(ValueError, match="does not exist"):
        link_corpus(tmp_path / "missing", home=home)
