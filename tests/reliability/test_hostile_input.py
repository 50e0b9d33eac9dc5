"""Reliability suite, hostile input: every named endpoint of the page, fuzzed; paths that try to leave the lab home.

What it promises, and how it proves it:
- Every named API endpoint of the running app (found from the app itself, so endpoints added later are fuzzed too)
  answers hostile input (empty, None, 1 MB strings, wrong types, negative/huge/NaN numbers, control characters, NUL
  bytes, emoji, right-to-left text, unknown families and run ids, `..` and absolute paths, uploads with hostile names
  and contents) with either a normal answer or a message a person can read: a `gr.Error` whose text has no traceback,
  no exception class name and no "Something went wrong" (the app's marker for an unexpected exception). Values of the
  right JSON type for the control must never end in Gradio's hidden "Error" (an exception nobody turned into a
  message); values of the wrong type may (Gradio refuses them before any handler runs, showing nothing internal).
  No call may hang (each has a deadline), and after each endpoint the server answers a cheap request through the
  same queue. The calls go over raw HTTP (`/gradio_api/call/<name>`), as any client on the network would send them.
  Budget: PRETRAINING_LAB_FUZZ_EXAMPLES examples per endpoint (hypothesis, derandomized; 3 in CI, raise it for a
  longer hunt, e.g. `PRETRAINING_LAB_FUZZ_EXAMPLES=40 python -m pytest tests/reliability/test_hostile_input.py`); with
  half the calls carrying the page's Chinese cookie, what a Chinese reader gets is fuzzed too
  (`PRETRAINING_LAB_FUZZ_LANGUAGE=zh` or `en` for one language only).
- Run ids, corpus names and uploads never reach outside the lab home: a canary run folder and a canary corpus are
  planted beside the lab home and every endpoint that takes a run or a corpus is called with `..`, absolute paths,
  slashes, NUL and 10,000 characters; each call is refused with a message and the canaries' contents never come back.
  A file path that was not uploaded is refused by Gradio itself. `lab_models.home`'s name checks are checked by
  resolving.
- `api.anatomy` raises ValueError (never another exception) for every family, the RNN ones included, and for any
  choice, over thousands of hypothesis-generated choices.
- Nothing is unpickled, evaluated or run through a shell: an AST scan of lab_models/, app/ and app.py.

The app under test is the real page with a stand-in trainer command (the queue, the run folders and every handler are
real; a started "run" exits at once), in its own lab home, so fuzzing `/start_training` trains nothing; two tiny runs
trained beforehand (GPT and BERT, 4 steps) give the run pickers real runs to point hostile prompts and settings at.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.launching import launch
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
FUZZ_EXAMPLES = int(os.environ.get("PRETRAINING_LAB_FUZZ_EXAMPLES", "3"))
DERANDOMIZE = "PRETRAINING_LAB_FUZZ_EXAMPLES" not in os.environ  # CI: the same examples every run; a hunt: fresh ones
CALL_DEADLINE_S = 180.0  # far above any honest answer here (the slowest, a tokenizer on stdlib-docs, takes ~15 s)
MAX_MESSAGE_CHARS = 2000
# The reader's language each call carries (the page's cookie), so that what a Chinese reader gets (the translated
# messages, the figures and tables written in Chinese) is fuzzed too: by default each call's is picked from its body
# (half the calls each, the same ones every run); `PRETRAINING_LAB_FUZZ_LANGUAGE=zh` (or en) sends one language only.
LANGUAGES = [os.environ["PRETRAINING_LAB_FUZZ_LANGUAGE"]] if "PRETRAINING_LAB_FUZZ_LANGUAGE" in os.environ else ["en", "zh"]


def language_cookie(body: bytes) -> dict:
    return {"cookie": f"lab_language={LANGUAGES[zlib.crc32(body) % len(LANGUAGES)]}"}
UNEXPECTED = ("Something went wrong", "出现意外错误")  # the app's marker for an unexpected exception, in each language
GRADIO_CHOICE_REFUSAL = "is not in the list of choices"  # Gradio refusing a value no page control offers
TECHNICAL = re.compile(
    r"Traceback|File \"/|Something went wrong|出现意外错误|\b(KeyError|IndexError|AttributeError|TypeError|RuntimeError|OSError|"
    r"ZeroDivisionError|NameError|UnboundLocalError|AssertionError|OverflowError|RecursionError|MemoryError|"
    r"FileNotFoundError|PermissionError|IsADirectoryError|NotADirectoryError|JSONDecodeError|UnicodeDecodeError|"
    r"UnicodeEncodeError|ValidationError|NotImplementedError|StopIteration)\b")
MEGABYTE = "x" * 1_000_000
HOSTILE_TEXT = [
    "", " ", "\x00", "a\x00b", "\n\t\r\x0b\x0c", "\x1b[31m", "🙂🚀🧪", "مرحبا بالعالم", "\u202eevil\u202c", "שלום",
    "../../../etc/passwd", "/etc/passwd", "..", ".", "a/b", "..\\..\\windows", "~", "C:\\x", "x" * 10_000, MEGABYTE,
    "[MASK]", "___", "nan", "NaN", "-1", "1e309", "None", "null", "{}", "[]", "<script>alert(1)</script>",
    "'; DROP TABLE runs; --", "no-such-run", "bert-tiny-20260101-000000-abcd", "elmo", "bert", "synthetic",
    "the cat sees a red ball .", "the [MASK] sees a ball .", "%s%n%x", "\ufffd\ufffd",  # what bad UTF-8 decodes to
]
HOSTILE_INTEGERS = [0, 1, -1, 2, 7, 64, 100, 10**6, 2**31, -2**31, 2**63, 10**30]
HOSTILE_FLOATS = [0.0, -0.0, 0.5, -1.5, 1e-300, 1e300, float("nan"), float("inf"), float("-inf")]
WRONG_TYPES = [None, {"a": 1}, [1, [2]], "text", 3.5, True, {"path": "/etc/passwd"}]
STANDIN_TRAINER = [sys.executable, "-c", "import sys; sys.exit(0)"]
CHEAP = ("resample_seed", [41], [42])  # endpoint, input, expected output: the server still answers


# ------------------------------------------------------------------------------------------------ a raw HTTP client
@dataclass
class Outcome:
    kind: str  # "ok", "error" (a message), "hidden" (Gradio's "Error" with no message), "timeout", "http"
    message: str | None = None
    data: object = None


def call(url: str, name: str, data: list, deadline_s: float = CALL_DEADLINE_S) -> Outcome:
    """POST /gradio_api/call/<name>, then read its event stream to the end (or the deadline)."""
    try:
        body = json.dumps({"data": data}, allow_nan=True).encode()  # NaN and Infinity as Python's json writes them
        cookie = language_cookie(name.encode() + body)
        response = httpx.post(f"{url}gradio_api/call/{name}", content=body,
                              headers={"content-type": "application/json", **cookie}, timeout=60)
    except httpx.HTTPError as error:
        return Outcome("http", str(error))
    if response.status_code != 200:
        return Outcome("http", f"{response.status_code}: {response.text[:300]}")
    event_id = response.json()["event_id"]
    stop_at = time.monotonic() + deadline_s
    event = None
    try:
        with httpx.stream("GET", f"{url}gradio_api/call/{name}/{event_id}", headers=cookie, timeout=60) as stream:
            for line in stream.iter_lines():
                if time.monotonic() > stop_at:
                    return Outcome("timeout", f"no answer within {deadline_s:.0f} s")
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    payload = json.loads(line.split(":", 1)[1]) if line[5:].strip() not in ("", "null") else None
                    if event == "complete":
                        return Outcome("ok", data=payload)
                    message = payload.get("error") if isinstance(payload, dict) else None
                    return Outcome("error" if message else "hidden", message)
    except httpx.HTTPError as error:
        return Outcome("timeout" if isinstance(error, httpx.TimeoutException) else "http", str(error))
    return Outcome("http", "the event stream ended without a result")


def problem(outcome: Outcome, well_typed: bool) -> str | None:
    """Why this outcome breaks the promise, or None."""
    if outcome.kind in ("timeout", "http"):
        return f"{outcome.kind}: {outcome.message}"
    if outcome.kind == "hidden":
        return None if not well_typed else "an unexplained error (an exception no handler turned into a message)"
    if outcome.kind == "error":
        message = outcome.message or ""
        if not message.strip():
            return "an empty error message"
        if len(message) > MAX_MESSAGE_CHARS and GRADIO_CHOICE_REFUSAL not in message:
            return f"an error message of {len(message):,} characters"  # Gradio's own refusal echoes what was sent
        if TECHNICAL.search(message):
            return f"a technical error message: {message[:300]!r}"
        return None
    text = json.dumps(outcome.data, default=str, ensure_ascii=False)
    for marker in UNEXPECTED:
        if marker in text:
            at = text.index(marker)
            return f"an unexpected exception shown in the output: {text[at:at + 300]!r}"
    return None


def upload(url: str, name: str, content: bytes) -> dict:
    """Upload one file as the page does; returns the FileData a call may refer to."""
    response = httpx.post(f"{url}gradio_api/upload", files={"files": (name, content)}, timeout=60)
    response.raise_for_status()
    path = response.json()[0]
    return {"path": path, "orig_name": name, "meta": {"_type": "gradio.FileData"}}


# ------------------------------------------------------------------------------------------------ the app under test
@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory):
    """The real page on a free loopback port, its own lab home, a stand-in trainer; queued as app.py queues it."""
    from app.main import build_app, launch_kwargs
    from lab_models import api

    root = tmp_path_factory.mktemp("fuzz")
    home = root / "home"
    jobs = api.create_job_manager(home, trainer_command=STANDIN_TRAINER, stop_timeout_s=5, poll_interval_s=0.1)
    demo = build_app(home, jobs=jobs)
    demo.queue(default_concurrency_limit=4)
    port = free_port()
    launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
           **launch_kwargs(demo))
    url = f"http://127.0.0.1:{port}/"
    yield url, demo, home
    jobs.close(timeout=5)
    demo.close()


@pytest.fixture(scope="module")
def trained_runs(fuzz_app) -> list[str]:
    """Two tiny runs with weights in the fuzz home (GPT and BERT, 4 steps each), so that hostile prompts, texts and
    decoding settings reach generation, fill-mask, the probes and fine-tuning, not only "unknown run"."""
    _, _, home = fuzz_app
    run_ids = []
    for family in ("gpt", "bert"):
        run_id = f"{family}-tiny-fuzz"
        done = subprocess.run([sys.executable, "-m", "lab_models", "train", "--family", family, "--steps", "4",
                               "--device", "cpu", "--out", str(home / "runs" / run_id), "--home", str(home)],
                              cwd=REPO, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr[-2000:]
        run_ids.append(run_id)
    return run_ids


@pytest.fixture(scope="module")
def endpoints(fuzz_app) -> dict[str, list[dict]]:
    """Every named endpoint with its parameters, as the app describes itself to API clients."""
    from gradio_client import Client

    url, _, _ = fuzz_app
    info = Client(url, verbose=False).view_api(print_info=False, return_format="dict")
    return {name.lstrip("/"): [{**parameter, "label": english_label(parameter.get("label"))}
                               for parameter in spec["parameters"]]
            for name, spec in info["named_endpoints"].items()}


def english_label(label) -> str | None:
    """A control's label as English: the page's labels are translation keys (app/i18n/language.py), which the API
    describes as {"key": ..., "_type": "translation_metadata"} or, inside a longer label, as an `__i18n__{...}`
    marker."""
    from app.i18n.language import english

    if isinstance(label, dict) and isinstance(label.get("key"), str):
        return english(label["key"])
    if isinstance(label, str) and "__i18n__" in label:
        return re.sub(r"__i18n__(\{[^{}]*\})", lambda match: english(json.loads(match.group(1))["key"]), label)
    return label


@pytest.fixture(scope="module")
def uploads(fuzz_app) -> list[dict]:
    """Files uploaded the way the page uploads them, with hostile names and contents."""
    url, _, _ = fuzz_app
    files = [("notes.txt", b"the cat sees a red ball .\nthe dog eats .\n" * 20),
             ("../../escape.csv", b"text,label\nhello,1\nworld,0\n" * 10),
             ("\u202eevil\u202c🙂.jsonl", b'{"text": "a b c"}\n' * 5),
             ("empty.txt", b""),
             ("binary.txt", bytes(range(256)) * 40),
             ("latin1.csv", "caf\xe9,label\n\xe9t\xe9,1\n".encode("latin-1")),
             ("big.md", b"word " * 300_000),
             ("nul\x00name.txt", b"a\x00b\n"),
             ("x" * 240 + ".csv", b"a,b\n1,2\n")]
    uploaded = []
    for name, content in files:
        try:
            uploaded.append(upload(url, name, content))
        except httpx.HTTPError:  # a name the upload route itself refuses is not a file an endpoint can receive
            continue
    assert len(uploaded) >= 6, "the upload route refused ordinary files"
    return uploaded


def ping(url: str) -> None:
    name, data, expected = CHEAP
    outcome = call(url, name, data, deadline_s=60)
    assert outcome.kind == "ok" and outcome.data == expected, f"the server stopped answering: {outcome}"


# ------------------------------------------------------------------------------------------------ values per control
RUN_LABEL = re.compile(r"(?i)^(run|runs|compare runs)$")


def label_of(parameter: dict) -> str:
    """A control's label in English (`english_label`), "" when it has none."""
    return english_label(parameter.get("label")) or ""


def well_typed_values(parameter: dict, uploads: list[dict], run_ids: list[str]) -> st.SearchStrategy:
    """Hostile values of the JSON type the control declares (what a page could send, and worse). A run picker gets a
    real run id half of the time, so that what follows the run's lookup is fuzzed too."""
    schema = parameter.get("type") or {}
    kind = schema.get("type")
    enum = list(schema.get("enum") or [])
    if RUN_LABEL.match(label_of(parameter)) and run_ids and kind in ("string", "array"):
        real = st.sampled_from(run_ids)
        real = st.lists(real, min_size=1, max_size=2) if kind == "array" else real
        return st.one_of(real, well_typed_values({**parameter, "label": ""}, uploads, run_ids))
    if "properties" in schema and "path" in schema.get("properties", {}):  # a File
        return st.one_of(st.none(), st.sampled_from(uploads))
    if parameter.get("component") == "Dataframe":  # a table: rows as long as its header (a page sends no other)
        cells = st.sampled_from(HOSTILE_TEXT[:20] + ["mask_rate", "0.2", "nsp", "true", "two_stream", "false"])
        return st.sampled_from([["setting", "value", "default", "what it does"], ["run id"], ["a", "b"]]).flatmap(
            lambda headers: st.builds(lambda data: {"headers": headers, "data": data},
                                      st.lists(st.lists(cells, min_size=len(headers), max_size=len(headers)),
                                               max_size=4)))
    if kind == "string":
        return st.sampled_from(HOSTILE_TEXT + enum) if enum else st.one_of(st.sampled_from(HOSTILE_TEXT),
                                                                          st.text(max_size=30))
    if kind == "integer":
        return st.one_of(st.sampled_from(HOSTILE_INTEGERS), st.integers(-10**6, 10**6))
    if kind == "number":
        return st.one_of(st.sampled_from(HOSTILE_FLOATS + HOSTILE_INTEGERS), st.floats())
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = (schema.get("items") or {}).get("enum") or []
        element = st.sampled_from(HOSTILE_TEXT[:25] + list(items)) if items else st.sampled_from(HOSTILE_TEXT)
        return st.lists(element, max_size=6)
    return st.sampled_from(HOSTILE_TEXT[:10] + WRONG_TYPES)  # a type this fuzzer does not know: anything goes


def arguments(parameters: list[dict], uploads: list[dict], run_ids: list[str]) -> st.SearchStrategy:
    """(arguments, well_typed): mostly well-typed hostile values; one time in four, one argument of the wrong type."""
    typed = st.tuples(*[well_typed_values(p, uploads, run_ids) for p in parameters]) if parameters else st.just(())

    @st.composite
    def values_and_kind(draw):
        values = list(draw(typed))
        if values and draw(st.integers(0, 3)) == 0:
            index = draw(st.integers(0, len(values) - 1))
            values[index] = draw(st.sampled_from(WRONG_TYPES))
            return values, False
        return values, True

    return values_and_kind()


def shorten(value, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


# ------------------------------------------------------------------------------------------------ the fuzz
@pytest.mark.slow
def test_every_named_endpoint_answers_hostile_input_with_a_message(fuzz_app, endpoints, uploads, trained_runs):
    url, demo, _ = fuzz_app
    assert len(endpoints) >= 60 and "explore_masks" in endpoints and "start_training" in endpoints
    failures: list[str] = []
    timings: dict[str, float] = {}
    calls = 0
    seen = set()
    for name, parameters in sorted(endpoints.items()):
        # the same handler with the same parameters behind another event (a page-load redraw run again after the
        # language switch or on a tab's select, a refresh after an import, ...) is the same code: fuzzed once
        key = (next(f.fn for f in demo.fns.values() if f.api_name == name),
               json.dumps(parameters, sort_keys=True, default=str))
        if key in seen:
            continue
        seen.add(key)
        examples = FUZZ_EXAMPLES if parameters else 1

        @settings(max_examples=examples, deadline=None, database=None, derandomize=DERANDOMIZE, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(arguments(parameters, uploads, trained_runs))
        def fuzz_one(drawn):
            nonlocal calls
            values, well_typed = drawn
            outcome = call(url, name, values)
            calls += 1
            why = problem(outcome, well_typed)
            if why:
                failures.append(f"/{name} {shorten(values)} -> {why}")

        started = time.monotonic()
        fuzz_one()
        ping(url)
        timings[name] = time.monotonic() - started
    slowest = sorted(timings.items(), key=lambda item: -item[1])[:8]
    print("slowest endpoints:", ", ".join(f"/{name} {seconds:.1f} s" for name, seconds in slowest))
    assert not failures, f"{len(failures)} of {calls} calls broke the promise:\n" + "\n".join(failures[:40])


# ------------------------------------------------------------------------------------------------ paths
CANARY = "CANARY-7f3a9c"  # planted beside the lab home; no answer may ever contain it
PATH_LABEL = re.compile(r"(?i)^(run|runs|compare runs|fine-tunings shown|corpus)$")


@pytest.fixture(scope="module")
def canaries(fuzz_app):
    """A run folder, a corpus file and a corpus folder beside the lab home, and a symlink to the run inside runs/."""
    _, _, home = fuzz_app
    outside = home.parent
    run = outside / "canary-run"
    run.mkdir(exist_ok=True)
    (run / "config.json").write_text(json.dumps({"family": "gpt", "preset": "tiny", "corpus": CANARY, "steps": 5}))
    (run / "status.json").write_text(json.dumps({"state": "finished", "step": 5, "total_steps": 5, "message": CANARY}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 5, "loss": 1.25, "note": CANARY}) + "\n")
    (run / "train.log").write_text(f"{CANARY}\n")
    corpus_folder = outside / "canary-corpus"
    corpus_folder.mkdir(exist_ok=True)
    (corpus_folder / "secret.txt").write_text(f"{CANARY} the secret words of someone else .\n" * 50)
    (outside / "canary.txt").write_text(f"{CANARY} a secret file outside the lab home .\n" * 50)
    link = home / "runs" / "linked-run"
    if not link.exists():
        link.symlink_to(run, target_is_directory=True)
    references = {  # CI: the first few of each; a hunt (PRETRAINING_LAB_FUZZ_EXAMPLES set): all
        "run": [str(run), "linked-run", "runs/../../canary-run", "x" * 10_000, "../canary-run", "../../canary-run",
                "canary-run/../../canary-run", "..", "/", "../canary-run\x00", "..\\canary-run"],
        "corpus": [str(corpus_folder), str(outside / "canary.txt"), "../canary.txt", "/etc", "../canary-corpus",
                   "~", "synthetic/../../canary.txt", "x" * 10_000],
    }
    if DERANDOMIZE:
        references = {kind: values[:4] for kind, values in references.items()}
    return outside, home, references


def _tree(folder: Path, skip: Path) -> dict[str, float]:
    """Every file under `folder` (outside `skip`) with its modification time."""
    return {str(path): path.stat().st_mtime for path in folder.rglob("*")
            if path.is_file() and skip not in path.parents and not path.is_symlink()}


def _handler_key(demo, name: str) -> str:
    fn = next(f for f in demo.fns.values() if f.api_name == name)
    return getattr(fn.fn, "__qualname__", name)


@pytest.mark.slow
def test_run_ids_and_corpus_names_never_reach_outside_the_lab_home(fuzz_app, endpoints, canaries):
    url, demo, _ = fuzz_app
    outside, home, references = canaries
    before = _tree(outside, home)
    checked, failures, seen = 0, [], set()
    for name, parameters in sorted(endpoints.items()):
        for index, parameter in enumerate(parameters):
            if not PATH_LABEL.match(label_of(parameter)):
                continue
            key = (_handler_key(demo, name), index)
            if key in seen:  # the same handler behind another event: called once
                continue
            seen.add(key)
            kind = "corpus" if label_of(parameter).lower() == "corpus" else "run"
            for reference in references[kind]:
                values = [p.get("parameter_default") if p.get("parameter_has_default") else None for p in parameters]
                values[index] = [reference] if (parameter.get("type") or {}).get("type") == "array" else reference
                outcome = call(url, name, values)
                checked += 1
                leaked = CANARY in json.dumps(outcome.data, default=str) + str(outcome.message)
                why = problem(outcome, well_typed=True) or ("the canary came back" if leaked else None)
                if why:
                    failures.append(f"/{name} {parameter['label']}={shorten(reference, 60)} -> {why}")
    assert checked >= 30, f"only {checked} calls: were the run and corpus controls renamed?"
    assert not failures, "\n".join(failures[:30])
    assert _tree(outside, home) == before, "a file outside the lab home was written"
    started = [path.read_text() for path in (home / "runs").glob("*/job.json")]
    assert not any(CANARY in text or "canary" in text for text in started), "a run was started on a canary corpus"
    ping(url)


@pytest.mark.slow
def test_a_path_that_was_not_uploaded_is_refused(fuzz_app, canaries):
    url, _, _ = fuzz_app
    outside, home, _ = canaries
    secret = {"path": str(outside / "canary.txt"), "meta": {"_type": "gradio.FileData"}}
    for name, values in (("inspect_upload", [secret]), ("import_corpus", [secret, "stolen", None]),
                         ("understand_finetune_csv_columns", [secret])):
        outcome = call(url, name, values)
        assert outcome.kind in ("hidden", "error"), (name, outcome)  # Gradio: "not uploaded by a user"
        assert CANARY not in str(outcome.message)
    assert not (home / "corpora" / "stolen").exists()


def test_safe_paths_resolve_names_inside_their_folder(tmp_path):
    from lab_models import api, home as safe_paths

    root = tmp_path / "home" / "runs"
    (root / "bert-tiny-1").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "escape").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert safe_paths.child(root, " bert-tiny-1 ") == root / "bert-tiny-1"
    for bad in ("", "..", ".", "../elsewhere", "a/b", "a\\b", "/etc", "a\x00b", "x" * 201, ".hidden", "-rf", "é",
                "escape"):
        with pytest.raises(ValueError):
            safe_paths.child(root, bad)
    with pytest.raises(ValueError, match="must be text"):
        safe_paths.plain_name(["bert"])
    folder = tmp_path / "import"
    (folder / "sub").mkdir(parents=True)
    (folder / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert api.path_inside(folder, "sub") == (folder / "sub").resolve()
    assert api.path_inside(folder, folder / "sub" / ".." / "sub") == (folder / "sub").resolve()
    for bad in ("..", "../elsewhere", "link", "link/x", str(tmp_path), "sub/../../elsewhere", "a\x00b"):
        with pytest.raises(ValueError):
            api.path_inside(folder, bad)

    store = api.RunStore(tmp_path / "home")  # a run id names a folder inside the lab home, nothing else
    assert api.run_folder("bert-tiny-1", jobs=store) == store.runs_dir / "bert-tiny-1"
    (store.runs_dir / "bert-tiny-1" / "status.json").write_text('{"state": "finished", "step": 1}')
    for bad in ("escape", "../runs/bert-tiny-1", str(store.runs_dir / "bert-tiny-1"), "x" * 10_000):
        with pytest.raises(ValueError):
            api.run_folder(bad, jobs=store)
    (tmp_path / "elsewhere" / "config.json").write_text('{"family": "gpt"}')  # a run look-alike behind the link
    from lab_models.training import runs

    assert [row["run_id"] for row in api.list_runs(store)] == ["bert-tiny-1"]
    assert [row["run_id"] for row in runs.list_runs(store.home)] == ["bert-tiny-1"]  # the leaderboard's listing


def test_the_page_takes_corpus_names_and_the_python_api_keeps_paths(tmp_path):
    from lab_models import api

    text = tmp_path / "notes.txt"
    text.write_text("the cat sees a red ball .\n" * 40)
    assert api.load_corpus(str(text)).source == "path"  # a local caller reads any file it names (docs/contract.md §1)
    assert api.load_named_corpus("synthetic", home=tmp_path / "home").name == "synthetic"
    for bad in (str(text), "../notes.txt", "", None, 3):
        with pytest.raises(ValueError, match="Unknown corpus"):
            api.load_named_corpus(bad, home=tmp_path / "home")


# ------------------------------------------------------------------------------------------------ api.anatomy
def test_anatomy_raises_value_error_for_every_family_it_cannot_draw():
    from lab_models import api

    tokens = "the cat sees a red ball".split()
    for spec in api.families():
        if spec.has_anatomy:
            assert api.anatomy(spec.name, tokens).inputs
        else:  # ELMo, CoVe, ULMFiT, CVT: a reason, not an AttributeError
            with pytest.raises(ValueError, match="RNN-era family: it has no attention mask to draw"):
                api.anatomy(spec.name, tokens)
    assert {spec.name for spec in api.families() if not spec.has_anatomy} == {"elmo", "cove", "ulmfit", "cvt"}
    for family, tokens_, options in [("nope", tokens, {}), (None, tokens, {}), ("bert", "a b", {}),
                                     ("bert", [], {}), ("bert", ["a", ""], {}), ("bert", tokens, {"seed": 2**70}),
                                     ("bert", tokens, {"seed": 1.5}), ("bert", tokens, {"order": [0]}),
                                     ("xlnet", tokens, {"settings": ["two_stream"]}),
                                     ("xlnet", tokens, {"settings": {"two_stream": "no"}}),
                                     ("mpnet", tokens, {"settings": {"random_prob": (7, 1)}})]:
        with pytest.raises(ValueError):
            api.anatomy(family, tokens_, **options)


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
                     st.sampled_from(["bidirectional", "left_to_right", "right_to_left", "seq2seq"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=6), st.tuples(inner, inner)),
                       max_leaves=10)


@st.composite
def _anatomy_request(draw):
    import dataclasses

    from lab_models import api
    from lab_models.objectives import objective_module

    family = draw(st.sampled_from([spec.name for spec in api.families()]))
    spec = api.family(family)
    names = list(spec.anatomy_choices) + ["settings", "not_a_choice"]
    choices = {name: draw(_VALUES) for name in names if draw(st.integers(0, 2)) == 0}
    fields = [f.name for f in dataclasses.fields(objective_module(family).Settings)] if spec.has_anatomy else []
    if fields and draw(st.booleans()):  # real setting names, values of any type
        choices["settings"] = draw(st.dictionaries(st.sampled_from(fields), _VALUES, max_size=2))
    tokens = draw(st.lists(st.text(min_size=1, max_size=3), min_size=0, max_size=10))
    return family, tokens, choices, draw(st.integers(-2**65, 2**65))


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("PRETRAINING_LAB_ANATOMY_EXAMPLES", "400")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(_anatomy_request())
def test_anatomy_never_raises_anything_but_value_error(request):
    from lab_models import api

    family, tokens, choices, seed = request
    try:
        anatomy = api.anatomy(family, tokens, seed=seed, **choices)
    except ValueError as error:
        assert str(error).strip()
    else:
        assert anatomy.inputs and all(m.dtype == __import__("torch").bool for m in anatomy.attention.values())


# ------------------------------------------------------------------------------------------------ the code itself
_DANGEROUS_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}
_DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__"}


def _python_files() -> list[Path]:
    return sorted([*(REPO / "lab_models").rglob("*.py"), *(REPO / "app").rglob("*.py"), REPO / "app.py"])


def _violations(path: Path) -> list[str]:
    """Unpickling, eval/exec, shells and unsafe loads in one file, found in its syntax tree (not in its comments)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if a.name.split(".")[0] in _DANGEROUS_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _DANGEROUS_MODULES:
            found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            keywords = {k.arg: k.value for k in node.keywords}
            if isinstance(func, ast.Name) and name in _DANGEROUS_CALLS:
                found.append(f"{where} calls {name}()")
            if owner == "os" and name in ("system", "popen") or owner in ("pd", "pandas") and name == "read_pickle":
                found.append(f"{where} calls {owner}.{name}()")
            shell = keywords.get("shell")
            if shell is not None and not (isinstance(shell, ast.Constant) and shell.value is False):
                found.append(f"{where} runs a subprocess with shell=...")
            if owner == "torch" and name == "load":
                weights_only = keywords.get("weights_only")
                if not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
                    found.append(f"{where} calls torch.load without weights_only=True")
            if name == "load" and owner in ("np", "numpy"):
                allow = keywords.get("allow_pickle")
                if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
                    found.append(f"{where} calls numpy.load with allow_pickle")
    return found


def test_nothing_is_unpickled_evaluated_or_run_through_a_shell():
    files = _python_files()
    assert len(files) > 40
    found = [violation for path in files for violation in _violations(path)]
    assert not found, "\n".join(found)
    planted = REPO / "tests" / "_planted_violation.py"  # the scan must see what it looks for
    try:
        planted.write_text("import pickle\nimport subprocess, torch, os\neval('1')\nsubprocess.run('ls', shell=True)\n"
                           "torch.load('x')\nos.system('ls')\nm.eval()\n")
        assert len(_violations(planted)) == 5
    finally:
        planted.unlink(missing_ok=True)
