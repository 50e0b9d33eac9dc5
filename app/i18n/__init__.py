"""The page's two languages in one place: `language` (the texts of the page by key, the reader's language, the
language switch), `messages` (the backend's English messages in the reader's language), `explanations` (the backend's
explanations, clause by clause) and `locales/` (the texts themselves: `en/` and `zh/`, one JSON file per tab or panel,
and `zh/messages/`, the catalogue of the backend's messages).

These modules import Gradio and each other only: no tab, no other app module, no `lab_models`."""
