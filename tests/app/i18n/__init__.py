"""Tests of the page's two languages: the UI texts, the messages the code raises, and what each tab writes for a Chinese
reader."""
