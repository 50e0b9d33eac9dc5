"""training.jobs: the app's job manager and the read-only view of the job folders under a lab home.

    manager.py     `JobManager`: a lock-protected queue that runs `python -m lab_models <command>` in worker processes,
                   one per device at a time, and stops, resumes and watches them
    store.py       `RunStore`: the job folders under `<home>/runs/`, `finetunes/`, `sweeps/` as the page reads them
    files.py       what the two share: a job folder's file names, the worker's command, statuses, ETAs
    unwritten.py   the manager's memory of statuses it could not write because the disk was full
    tokenizing.py  `TokenizeJobs`: `python -m lab_models tokenize` workers for the Corpora tab, their status and Stop

May import: what `training/` may, and `training/`'s own modules.
"""
