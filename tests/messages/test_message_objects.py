"""lab_models/messages.py: a `Message` is its English for every reader of a `str` and keeps its template and fields
through a copy, a pickle (a process boundary) and a JSON file; a `LabError` is a ValueError that says a message."""
from __future__ import annotations

import copy
import json
import pickle

import pytest

from lab_models.messages import (Joined, LabError, Message, as_message, clauses, fields_mapped, message_of,
                                 messages_restored, with_records)
from lab_models.text.tokenization import VocabSizeTooSmall


def nested() -> Message:
    return Message("{run}: {error}", run="gpt-1", error=Message("{name} must be at most {high:,}, got {value!r}.",
                                                               name=Message("Steps"), high=10_000, value="2.5"))


def test_a_message_is_its_english_and_keeps_its_template_and_fields():
    message = nested()
    assert message == "gpt-1: Steps must be at most 10,000, got '2.5'." and isinstance(message, str)
    assert str(message) == message and type(str(message)) is str and f"{message}" == message
    assert message.template == "{run}: {error}" and message.fields["error"].fields["name"].template == "Steps"
    assert json.dumps({"m": message}) == json.dumps({"m": str(message)})  # a reader of the English sees no change
    assert repr(message) == repr(str(message))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_message_survives_a_pickle_and_a_copy(protocol):
    message = nested()
    for copied in (pickle.loads(pickle.dumps(message, protocol)), copy.deepcopy(message), copy.copy(message)):
        assert copied == message and type(copied) is Message and copied.template == message.template
        assert copied.fields["error"].fields["name"].template == "Steps"
    joined = clauses(Message("greedy"), "", message)
    restored = pickle.loads(pickle.dumps(joined, protocol))
    assert type(restored) is Joined and restored.separator == "; " and restored.parts[1].template == "{run}: {error}"


def test_a_message_round_trips_through_its_json_record():
    message = nested()
    record = json.loads(json.dumps(message.to_record()))
    again = Message.from_record(record)
    assert again == message and again.template == message.template
    assert again.fields["error"].fields["name"].template == "Steps"
    # a field that is not JSON (a path, a tuple) travels as its text; the English stays exactly the same
    from pathlib import Path
    shaped = Message("{path!r} has shape {shape}", path=Path("/tmp/x"), shape=(2, 3))
    assert Message.from_record(json.loads(json.dumps(shaped.to_record()))) == shaped
    joined = Joined([Message("greedy"), "plain text"], " ")
    assert type(Message.from_record(json.loads(json.dumps(joined.to_record())))) is Joined


def test_a_json_document_keeps_its_messages_beside_their_english():
    status = {"state": "failed", "message": nested(), "notes": [Message("empty"), "plain"], "step": 3,
              "inner": {"reason": Message("no text")}}
    written = json.loads(json.dumps(with_records(status)))
    assert written["message"] == str(nested()) and written["message_record"]["template"] == "{run}: {error}"
    assert written["notes"] == ["empty", "plain"] and written["inner"]["reason_record"]["template"] == "no text"
    read = messages_restored(written)
    assert set(read) == {"state", "message", "notes", "step", "inner"}
    assert read["message"].template == "{run}: {error}" and read["notes"][0].template == "empty"
    assert read["inner"]["reason"].template == "no text" and read["notes"][1] == "plain"
    # an older file, with no record, reads as its English; a damaged record leaves the English
    assert messages_restored({"message": "finished 2 steps"}) == {"message": "finished 2 steps"}
    assert messages_restored({"message": "x", "message_record": {"fields": 3}}) == {"message": "x"}


def test_a_lab_error_is_a_value_error_that_says_a_message():
    error = LabError("Unknown family {name!r}: choose one of {families}.", name="gpx", families="gpt")
    assert isinstance(error, ValueError) and str(error) == "Unknown family 'gpx': choose one of gpt."
    assert error.template == "Unknown family {name!r}: choose one of {families}." and error.fields["name"] == "gpx"
    with pytest.raises(ValueError, match="choose one of gpt"):
        raise error
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is LabError and again.message.template == error.template and str(again) == str(error)
    said = LabError.of(nested())
    assert said.message is not None and said.template == "{run}: {error}"
    assert LabError.of("a library's words").template == "{untranslated}"


def test_a_lab_error_subclass_keeps_its_own_arguments_through_a_pickle():
    error = VocabSizeTooSmall("bpe", 100, 947)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is VocabSizeTooSmall and again.minimum == 947 and str(again) == str(error)
    assert again.template.startswith("vocab_size {requested} is too small")


def test_what_an_exception_says_and_an_exception_as_a_field():
    assert message_of(LabError("Choose a corpus.")).template == "Choose a corpus."
    assert message_of(KeyError("x")) == "'x'" and not isinstance(message_of(KeyError("x")), Message)
    assert message_of(RuntimeError(Message("stopped at step {step}", step=3))).template == "stopped at step {step}"
    message = Message("bad --set {key}: {error}", key="k", error=LabError("Choose a corpus."))
    assert message.fields["error"].template == "Choose a corpus." and message == "bad --set k: Choose a corpus."
    assert as_message("text").template == "{untranslated}" and as_message(message) is message


def test_the_capitalized_spec_and_a_verbatim_text():
    message = Message("{what:capitalized} is empty.", what=Message("the prompt"))
    assert message == "The prompt is empty." and message.fields["what"] == "the prompt"
    assert Message.verbatim("a {b} c") == "a {b} c" and Message.verbatim("a {b} c").template == "a {{b}} c"
    with pytest.raises(KeyError):
        Message("a {b} c")  # a template's field needs its value


def test_fields_mapped_changes_the_plain_fields_of_nested_messages():
    message = Message("cannot read {path}: {error}", path="/snap/x/config.json",
                      error=Message("{path} is not a file", path="/snap/x"))
    mapped = fields_mapped(message, lambda value: str(value).replace("/snap/x", "the snapshot folder"))
    assert mapped == "cannot read the snapshot folder/config.json: the snapshot folder is not a file"
    assert mapped.template == message.template and mapped.fields["error"].template == "{path} is not a file"
