"""Which converter handles which checkpoint: one module per Hugging Face architecture, found by name and imported
only when asked for.

Each module `lab_models/interop/<name>.py` defines

    FAMILY = "gpt2"                                  the lab family the checkpoint becomes
    MODEL_TYPES = ("gpt2",)                          config.json "model_type" values it handles
    HF_ARCHITECTURES = ("GPT2LMHeadModel",)          the reference classes; the first is what export writes
    import_config(hf_config) -> (ModelConfig, settings overrides, objective weights)
    import_state(hf_config, hf_state, model) -> the lab state dict (strict-loadable)
    export_config(model) -> config.json for transformers
    export_state(model) -> {HF name: tensor}

Optional: `USES_MASK_TOKEN = False` (the family never reads [MASK]; without a mask token in the vocabulary it stands
in as the end-of-text token instead of being added) and `ROLE_CHAINS` (lab role -> the checkpoint's roles that may
play it, in order, overriding hf_tokenizer.ROLE_CHAINS), `export_companions(model)` (more folders to export
beside the main one: ELECTRA's generator), `export_tokenizer(model, tokenizer)` (the tokenizer to write, when the
export renumbers ids: MPNet) and `tokenizer_config_extras(model, tokenizer)` (more tokenizer_config.json fields: T5's
sentinels).

A module that is not in this build (`ModuleNotFoundError` for exactly that module) is reported as "not available in
this build", so adding `t5.py`, `mpnet.py` or `xlnet.py` to the package makes those architectures work with no other
change.

Worked example:

>>> module_name_for_model_type("openai-gpt"), module_name_for_family("roberta")
('gpt', 'roberta')
>>> architecture_module("bert").HF_ARCHITECTURES[0]
'BertForPreTraining'
"""
from __future__ import annotations

import importlib
from types import ModuleType

from lab_models.messages import LabError, Message

# module name -> (the config.json model_type values it handles, the lab family it makes); the module's own
# MODEL_TYPES and FAMILY are checked against these when it is imported
ARCHITECTURES: dict[str, tuple[tuple[str, ...], str]] = {
    "gpt": (("openai-gpt",), "gpt"),
    "gpt2": (("gpt2",), "gpt2"),
    "bert": (("bert",), "bert"),
    "roberta": (("roberta",), "roberta"),
    "albert": (("albert",), "albert"),
    "electra": (("electra",), "electra"),
    "xlnet": (("xlnet",), "xlnet"),
    "mpnet": (("mpnet",), "mpnet"),
    "t5": (("t5",), "t5"),
}
REQUIRED = ("FAMILY", "MODEL_TYPES", "HF_ARCHITECTURES", "import_config", "import_state", "export_config",
            "export_state")


def module_name_for_model_type(model_type: str) -> str:
    """The converter module for a config.json model_type; ValueError naming the supported ones."""
    for name, (model_types, _) in ARCHITECTURES.items():
        if model_type in model_types:
            return name
    supported = ", ".join(t for types, _ in ARCHITECTURES.values() for t in types)
    raise LabError("the lab cannot import model_type {model_type!r}: it imports {supported}",
                   model_type=model_type, supported=supported)


def module_name_for_family(family: str) -> str:
    """The converter module that exports a lab family; ValueError saying why a family has no transformers class."""
    for name, (_, module_family) in ARCHITECTURES.items():
        if module_family == family:
            return name
    raise LabError.of(no_export_reason(family))


NO_EXPORT = {
    "spanbert": Message("SpanBERT's span boundary head has no transformers class (its released weights load as plain "
                        "BERT and drop the head)"),
    "unilm": Message("UniLM has no transformers class: its one model serves four attention masks"),
    "mass": Message("MASS has no transformers class (its released code is fairseq's)"),
    "glm": Message("GLM's 2-D positions and blank infilling have no class in transformers' library (its own code is "
                   "remote code)"),
}


def no_export_reason(family: str) -> Message:
    """Why a family cannot be exported, for the error message."""
    if family in NO_EXPORT:
        why = NO_EXPORT[family]
    elif family in ("elmo", "cove", "ulmfit", "cvt"):
        why = Message("{family} is an LSTM model of the RNN era; transformers has no class for it", family=family)
    else:
        why = Message("the lab has no transformers class for family {family!r}", family=family)
    return Message("{why}, so the run cannot be exported; the lab's own run folder (safetensors + config.json) is its "
                   "format", why=why)


def architecture_module(name: str) -> ModuleType:
    """Import `lab_models.interop.<name>` (lazily); ValueError when it is not in this build or is incomplete."""
    if name not in ARCHITECTURES:
        raise LabError("unknown converter {name!r}: the lab knows {architectures}",
                       name=name, architectures=', '.join(ARCHITECTURES))
    full = f"{__package__}.{name}"
    try:
        module = importlib.import_module(full)
    except ModuleNotFoundError as error:
        if error.name != full:  # the module exists but one of its own imports is missing: a real error
            raise
        model_types, _ = ARCHITECTURES[name]
        raise LabError("{model_type} checkpoints are not available in this build of the lab (no converter "
                       "lab_models/interop/{name}.py yet)", model_type=model_types[0], name=name) from None
    missing = [attribute for attribute in REQUIRED if not hasattr(module, attribute)]
    if missing:
        raise LabError("lab_models/interop/{name}.py is incomplete: it lacks {missing}",
                       name=name, missing=', '.join(missing))
    model_types, family = ARCHITECTURES[name]
    if module.FAMILY != family or not set(model_types) <= set(module.MODEL_TYPES):
        raise LabError("lab_models/interop/{name}.py says FAMILY={module_family!r}, MODEL_TYPES="
                       "{module_model_types!r}; the registry expects {family!r} and {model_types!r}",
                       name=name, module_family=module.FAMILY, module_model_types=module.MODEL_TYPES, family=family,
                       model_types=model_types)
    return module


def reference_class(name: str) -> str:
    """The transformers class a converter's export writes (its HF_ARCHITECTURES[0])."""
    return architecture_module(name).HF_ARCHITECTURES[0]


def available() -> dict[str, bool]:
    """module name -> whether its converter is in this build (for docs/checkpoints.md's table and the page)."""
    out = {}
    for name in ARCHITECTURES:
        try:
            architecture_module(name)
            out[name] = True
        except ValueError:
            out[name] = False
    return out
