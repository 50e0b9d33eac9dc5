"""The Claims tab: the survey's claims tested at equal FLOPs, with verdicts (tab.py, figures.py)."""
