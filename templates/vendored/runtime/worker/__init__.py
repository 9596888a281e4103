"""Task work on worker processes (Docket): the worker's side."""
