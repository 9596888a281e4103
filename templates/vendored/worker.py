"""``python -m PACKAGE.worker --store redis://HOST:PORT/DB MODULE:ATTR``: a worker process
that runs the task work of tools declared ``on_workers`` (see ``runtime/worker/run.py``)."""

from .runtime.worker.run import main

if __name__ == "__main__":
    main()
