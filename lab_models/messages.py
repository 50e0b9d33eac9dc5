"""Messages that keep their template: the lab's errors, status lines, notes and explanations are English text (the
library's language) that also remembers the `str.format` template and the fields it was made from, so that a reader
in another language can be shown the message translated first and formatted after (gettext's convention: the English
template is the message's id). It imports nothing of the lab and every module may import it (the bottom of the stack,
below `families`, `batch` and `home`).

    >>> message = Message("Unknown family {family!r}: choose one of {choices}.", family="gpx", choices="gpt, bert")
    >>> message
    "Unknown family 'gpx': choose one of gpt, bert."
    >>> message.template, message.fields["family"]
    ('Unknown family {family!r}: choose one of {choices}.', 'gpx')

- `Message(template, **fields)` is a `str` equal to `template.format(**fields)`, so whatever reads the English (a
  test, a log, `json.dumps`, a `str` method) reads plain English; `str(message)` is that English as a plain `str`.
  A field that is itself to be translated (a control's name such as "Steps", a run's own failure inside
  "gpt-1: ...") is a `Message` too; other fields (numbers, paths, what the user typed, family names) are shown as
  they are; an exception is what it says (`message_of`). Composition is explicit:
  `Message("{run}: {error}", run=run_id, error=message_of(error))`.
- `Joined(parts, separator)`: messages joined by a separator, such as an explanation's clauses ("; ", `clauses`) or
  sentences (" "); a translation joins the translated parts with its own language's separator.
- `LabError(template, **fields)`: a `ValueError` whose text is a `Message` (`.message`, `.template`, `.fields`); bad
  input anywhere in the lab raises one, and `except ValueError` catches it. `LabError.of(message)` raises a message
  made elsewhere (a helper's refusal, a run's failure read back from its status file).
- `to_record()` / `Message.from_record(record)`: a message as JSON-able data and back (nested messages included), for
  texts that cross a process boundary or a file (a trainer's status.json line). `with_records(data)` and
  `messages_restored(data)` do it for a whole JSON document: an entry `key` that holds a message keeps its English,
  for any reader, beside `key_record`, from which a reader of the lab gets the message back.
- A field's format spec `capitalized` writes it with a capital first letter ("{what:capitalized} is empty").

Deviation from gettext: nothing is marked for extraction; the templates are the literal first arguments of the calls of
`Message` and `LabError` (tests/support/message_templates.py finds them by reading the source, the page's catalogue
holds their translations: app/i18n/messages.py).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

JSON_SCALARS = (str, int, float, bool, type(None))
CAPITALIZED = "capitalized"  # the format spec of a message field that starts an English sentence


class Message(str):
    """English text made from `template` (a `str.format` template with named fields) and `fields`."""

    template: str
    fields: dict

    def __new__(cls, template: str, /, **fields) -> Message:
        # an exception as a field stands for what it says: a LabError's message, translated with the rest
        fields = {name: message_of(value) if isinstance(value, BaseException) else value
                  for name, value in fields.items()}
        message = super().__new__(cls, template.format(**fields))
        message.template = template
        message.fields = fields
        return message

    @classmethod
    def verbatim(cls, text: str) -> Message:
        """The message whose English is `text` itself, braces included (its template is `text` with each brace
        doubled): a text written elsewhere than in a template literal, such as a settings field's comment.

        >>> Message.verbatim("p(n) ∝ 1/n; {a, b}").template
        'p(n) ∝ 1/n; {{a, b}}'
        """
        return cls(text.replace("{", "{{").replace("}", "}}"))

    def __reduce__(self):
        # the text as written and the attributes as they are: a copy or an unpickled message is the same message,
        # whatever its class (a `Joined`, one rebuilt from a record)
        return restored_message, (type(self), str(self), dict(self.__dict__))

    def __repr__(self) -> str:
        return repr(str(self))

    def __format__(self, spec: str) -> str:
        """As a field of another message: `{what:capitalized}` is this message with its first letter in upper case
        (an English sentence that starts with a field, "{what:capitalized} is empty"); any other spec as a `str`'s."""
        if spec == CAPITALIZED:
            return self[:1].upper() + self[1:]
        return format(str(self), spec)

    def to_record(self) -> dict:
        """This message as JSON-able data: {"text", "template", "fields"}, each field a JSON value, a nested
        message's record, or a list of them; a field of another type (a path, a tuple) is kept as its text. The
        English text is kept too, so that the message reads the same after `from_record` whatever its fields were.

        >>> Message("{count:,} steps in {run}", count=1200, run="gpt-1").to_record()
        {'text': '1,200 steps in gpt-1', 'template': '{count:,} steps in {run}',
         'fields': {'count': 1200, 'run': 'gpt-1'}}
        """
        return {"text": str(self), "template": self.template,
                "fields": {name: field_record(value) for name, value in self.fields.items()}}

    @classmethod
    def from_record(cls, record: dict) -> Message:
        """The message that `to_record` wrote (its class included: a `Joined` comes back a `Joined`).

        >>> Message.from_record(Message("{count:,} steps", count=1200).to_record()).template
        '{count:,} steps'
        """
        if "separator" in record:
            return Joined((field_from_record(part) for part in record["parts"]), record["separator"])
        fields = {name: field_from_record(value) for name, value in dict(record.get("fields") or {}).items()}
        template = str(record["template"])
        text = record.get("text")
        if text is None:
            return Message(template, **fields)
        return restored_message(Message, str(text), {"template": template, "fields": fields})


class Joined(Message):
    """Messages (or plain texts) joined by `separator`: an explanation's clauses joined by "; ", sentences joined by
    " ". Its template joins one field per part (`{part_1}; {part_2}`), so it is a `Message` like any other; a
    translation joins the translated parts with its own language's separator instead.

    >>> clauses = Joined([Message("greedy"), Message("stopped at {token}", token="[EOS]")], "; ")
    >>> clauses, clauses.template
    ('greedy; stopped at [EOS]', '{part_1}; {part_2}')
    """

    parts: tuple
    separator: str

    def __new__(cls, parts: Iterable[str], separator: str = "; ") -> Joined:
        parts = tuple(parts)
        names = [f"part_{index}" for index in range(1, len(parts) + 1)]
        template = separator.replace("{", "{{").replace("}", "}}").join("{%s}" % name for name in names)
        message = super().__new__(cls, template, **dict(zip(names, parts)))
        message.parts = parts
        message.separator = separator
        return message

    def to_record(self) -> dict:
        return {"text": str(self), "separator": self.separator, "parts": [field_record(part) for part in self.parts]}


def clauses(*parts: Message | str) -> Joined:
    """The clauses of an explanation, the empty ones left out, joined by "; " (a translation joins them with its own
    language's joiner).

    >>> clauses(Message("greedy"), "", Message("stopped at {token}", token="[EOS]"))
    'greedy; stopped at [EOS]'
    """
    return Joined([part for part in parts if part], "; ")


def fields_mapped(message: Message | str, change: Callable) -> Message | str:
    """`message` made again with `change(value)` for each of its plain fields (the fields of its nested messages and
    the parts of a `Joined` included); a plain text is `change(text)`.

    >>> fields_mapped(Message("cannot read {path}", path="/tmp/x/config.json"), lambda v: v.replace("/tmp/x", "~"))
    'cannot read ~/config.json'
    """
    if isinstance(message, Joined):
        return Joined((fields_mapped(part, change) for part in message.parts), message.separator)
    if isinstance(message, Message):
        return Message(message.template, **{name: fields_mapped(value, change) if isinstance(value, Message)
                                            else change(value) for name, value in message.fields.items()})
    return change(message)


def restored_message(cls: type, text: str, attributes: dict) -> Message:
    """A `cls` message with exactly `text` and `attributes` (how `Message.__reduce__` and records rebuild one)."""
    message = str.__new__(cls, text)
    message.__dict__.update(attributes)
    return message


def field_record(value):
    """A field as JSON-able data: a message as its record, a list or tuple item by item, a JSON scalar as it is,
    anything else as its text."""
    if isinstance(value, Message):
        return value.to_record()
    if isinstance(value, (list, tuple)):
        return [field_record(item) for item in value]
    return value if isinstance(value, JSON_SCALARS) else str(value)


def field_from_record(value):
    """The inverse of `field_record`: a record (a dict with a template or a separator) becomes a message again."""
    if isinstance(value, dict) and ("template" in value or "separator" in value):
        return Message.from_record(value)
    if isinstance(value, list):
        return [field_from_record(item) for item in value]
    return value


class LabError(ValueError):
    """Bad input, said in a `Message` a person can act on: `LabError(template, **fields)`, or `LabError.of(message)`
    for a message made elsewhere. `str(error)` is the English; `.message`, `.template` and `.fields` are the message's.

    >>> error = LabError("Steps must be a whole number from {low:,} to {high:,}, got {value!r}.", low=1,
    ...                  high=10000, value="2.5")
    >>> str(error), error.fields["value"], isinstance(error, ValueError)
    ("Steps must be a whole number from 1 to 10,000, got '2.5'.", '2.5', True)
    """

    def __init__(self, template: str, /, **fields):
        self._say(Message(template, **fields))

    @classmethod
    def of(cls, message: Message | str) -> LabError:
        """The error that says `message`, a `Message` made elsewhere (or a library's English text, `as_message`).

        >>> LabError.of(Message("Choose a corpus.")).template
        'Choose a corpus.'
        """
        error = cls.__new__(cls)
        LabError._say(error, as_message(message))
        return error

    def _say(self, message: Message) -> None:
        super().__init__(message)
        self.message = message

    @property
    def template(self) -> str:
        return self.message.template

    @property
    def fields(self) -> dict:
        return self.message.fields

    def __str__(self) -> str:
        return str(self.message)

    def __reduce__(self):
        return restored_error, (type(self), self.message, dict(self.__dict__))


def restored_error(cls: type, message: Message, attributes: dict) -> LabError:
    """A `cls` error with `message` and `attributes`, whatever `cls.__init__` takes (how `LabError.__reduce__`
    rebuilds one: a subclass may take other arguments than a template)."""
    error = cls.of(message)
    error.__dict__.update(attributes)
    return error


def as_message(text: Message | str) -> Message:
    """`text` as a `Message`: a message as it is; any other text (a library's error, in English only) as the message
    `{untranslated}` that holds it, which a translation shows with a word that it is English.

    >>> as_message("expected str, got int").template
    '{untranslated}'
    """
    return text if isinstance(text, Message) else Message("{untranslated}", untranslated=str(text))


def message_of(error: BaseException) -> Message | str:
    """What `error` says: a `LabError`'s message (or the message another exception of the lab carries as its
    argument, such as a stop), else the exception's text as it is (a library's error, English only), for composing it
    into another message.

    >>> message_of(LabError("Choose a corpus.")).template, message_of(KeyError("x"))
    ('Choose a corpus.', "'x'")
    """
    if isinstance(error, LabError):
        return error.message
    if len(error.args) == 1 and isinstance(error.args[0], Message):
        return error.args[0]
    return str(error)


RECORD_SUFFIX = "_record"


def holds_message(value) -> bool:
    return isinstance(value, Message) or (isinstance(value, (list, tuple)) and any(map(holds_message, value)))


def with_records(data):
    """`data` (JSON-able, with messages in it) as plain JSON data: every message as its English text, and beside each
    entry `key` of a dict that holds a message (or a list of them), `key_record` with its record.

    >>> with_records({"state": "stopped", "message": Message("stopped at step {step}", step=3)})["message_record"]
    {'text': 'stopped at step 3', 'template': 'stopped at step {step}', 'fields': {'step': 3}}
    """
    if isinstance(data, dict):
        plain = {}
        for key, value in data.items():
            plain[key] = with_records(value)
            if holds_message(value):
                plain[f"{key}{RECORD_SUFFIX}"] = field_record(value)
        return plain
    if isinstance(data, (list, tuple)):
        return [with_records(value) for value in data]
    return str(data) if isinstance(data, Message) else data


def messages_restored(data):
    """The inverse of `with_records`: each entry with a `key_record` beside it is the message again (the record
    entries go); data written without records (by an older lab, or by hand) reads as it is.

    >>> status = messages_restored(with_records({"message": Message("stopped at step {step}", step=3)}))
    >>> status["message"].template, list(status)
    ('stopped at step {step}', ['message'])
    """
    if isinstance(data, dict):
        restored = {}
        for key, value in data.items():
            if key.endswith(RECORD_SUFFIX) and key[:-len(RECORD_SUFFIX)] in data:
                continue
            restored[key] = messages_restored(value)
            record = data.get(f"{key}{RECORD_SUFFIX}")
            if record is not None:
                try:
                    message = field_from_record(record)
                except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                    continue  # a damaged record: the English stays
                if holds_message(message):
                    restored[key] = message
        return restored
    if isinstance(data, list):
        return [messages_restored(value) for value in data]
    return data
