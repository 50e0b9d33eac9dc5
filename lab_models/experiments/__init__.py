"""experiments: many runs composed from the stages below, queued on the job manager like any run.

    zoo.py    one run of every chosen family on one corpus at one budget (`python -m lab_models zoo`, the page's
              "Train the demo zoo")
    sweep.py  one family at several sizes, dense and with Switch layers, and the power law of its validation loss
              (`python -m lab_models sweep`, the Scaling tab)

May import: every stage below it; nothing but `api` and `__main__` imports it.
"""
