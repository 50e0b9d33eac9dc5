"""Tests of the page (app/): its endpoints and tabs through gradio_client, the page's cost, and a real browser."""
