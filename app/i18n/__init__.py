"""The page's two languages in one place: `language` (the texts of the page by key, the reader's language, the
language switch), `messages` (the backend's messages, errors and explanations alike, in the reader's language) and
`locales/` (the texts themselves: `en/` and `zh/`, one JSON file per tab or panel, and `zh/messages/`, the catalogue of
the backend's message templates).

These modules import Gradio, each other and `lab_models.api` (for its `Message` and `LabError`) only: no tab, no other
app module."""
