"""``python -m PACKAGE.worker --store redis://HOST:PORT/DB MODULE:ATTR``: a worker process
that runs the task work of tools declared ``on_workers`` (see ``runtime/worker.py``)."""

from .runtime.worker import main

if __name__ == "__main__":
    main()
