"""Real checkpoints in the lab, and the lab's runs in `transformers` (issue 14).

    inspect_checkpoint(src)            what a Hugging Face checkpoint folder holds and what it would become
    import_checkpoint(src, out)        the folder as an ordinary lab run (lab_models/interop/importer.py)
    export_run(run, out)               a lab run as a folder transformers' from_pretrained loads (exporter.py)

One converter module per Hugging Face architecture (`gpt`, `gpt2`, `bert`, `roberta`, `albert`, `electra`, `xlnet`,
`mpnet`, `t5`), found by the registry (registry.py) and imported lazily; the folder reading (checkpoint.py), the
tokenizer conversion (hf_tokenizer.py) and the shared tensor helpers (convert.py) serve them all. Nothing here
downloads: sources are folders on this machine, and `transformers` is never imported at run time (only the tests and
benchmarks compare against it).

The reference is each architecture's transformers class (listed in the converter's HF_ARCHITECTURES); the lab's
backbone implements the same function with its own names, so a conversion only renames, transposes and
concatenates tensors. Where the backbone lacked something a reference has, it became a backbone option
(`activation`, `embedding_norm`, `lm_bias`; see lab_models/nn/config.py) that training from scratch can pick too.
"""
from .exporter import export_run
from .importer import DEFAULT_CORPUS, default_run_dir, import_checkpoint, inspect_checkpoint
from .registry import ARCHITECTURES, available, reference_class

__all__ = ["ARCHITECTURES", "DEFAULT_CORPUS", "available", "default_run_dir", "export_run", "import_checkpoint",
           "inspect_checkpoint", "reference_class"]
