"""Public API functions: ``asynchronous`` (coroutines) and ``synchronous``."""
