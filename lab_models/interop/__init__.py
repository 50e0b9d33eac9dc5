"""interop: real checkpoints in the lab, and the lab's runs in `transformers`.

    importer.py   inspect_checkpoint(src): what a Hugging Face checkpoint folder holds and what it would become;
                  import_checkpoint(src, out): the folder as an ordinary lab run
    exporter.py   export_run(run, out): a lab run as a folder transformers' from_pretrained loads; export_archive
                  also zips it, export_problem says why a run cannot be exported
    cache.py      cached_checkpoints(): the Hugging Face cache's model repositories (huggingface_hub's scanner, no
                  network), each with whether the lab imports it or why not
    cli.py        `python -m lab_models import-hf` and `export-hf`

One converter module per Hugging Face architecture (`gpt`, `gpt2`, `bert`, `roberta`, `albert`, `electra`, `xlnet`,
`mpnet`, `t5`), found by the registry (registry.py) and imported lazily; the folder reading (checkpoint.py), the
tokenizer conversion (hf_tokenizer.py) and the shared tensor helpers (convert.py) serve them all. Nothing here
downloads: sources are folders on this machine, and `transformers` is never imported at run time (only the tests and
benchmarks compare against it).

The reference is each architecture's transformers class (listed in the converter's HF_ARCHITECTURES); the lab's
backbone implements the same function with its own names, so a conversion only renames, transposes and
concatenates tensors. Where the backbone lacked something a reference has, it became a backbone option
(`activation`, `embedding_norm`, `lm_bias`; see lab_models/nn/config.py) that training from scratch can pick too.

May import: every stage below it (`training/` for the run folder, `inference/` to load a run for export).
"""
