"""Tests of lab_models/objectives/: masks, batch builders (golden examples, properties, statistics), add-ons,
translation."""
