"""Tests of lab_models/messages.py: messages that keep their template and fields, and the errors that carry them."""
