"""Tests of lab_models/text/: corpora and their streams, token shards, tokenizers, vocabularies fitted to any script."""
