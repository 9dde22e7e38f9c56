"""The thread pool cuzarr's codec work, blocking store calls and event loop use."""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["_Pool"]

T = TypeVar("T")


class _Pool(ThreadPoolExecutor):
    """A thread pool that keeps serving while the interpreter shuts down.

    concurrent.futures' ``ThreadPoolExecutor`` refuses new work and stops its
    threads as soon as the main thread ends, before Python waits for the other
    non-daemon threads: a user thread still reading or writing then failed
    with "cannot schedule new futures after interpreter shutdown". These
    threads are daemons that only :meth:`shutdown`, or the pool being garbage
    collected, stops. (A ``ThreadPoolExecutor`` subclass, so that it can be an
    event loop's default executor; none of the base class's machinery is used.)
    """

    def __init__(self, max_workers: int, thread_name_prefix: str = "") -> None:
        self._n = max(1, int(max_workers))
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        # when the pool is collected (a resized one, once no call holds it)
        weakref.finalize(self, self._queue.put, None)

    @staticmethod
    def _work(q: queue.SimpleQueue[Any]) -> None:
        while True:
            item = q.get()
            if item is None:
                q.put(None)  # wake the next thread: they all stop
                return
            fut, fn, args, kwargs = item
            if fut.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as e:
                    fut.set_exception(e)
                    del e
                else:
                    fut.set_result(result)
                    del result
            del item, fut, fn, args, kwargs  # an idle thread holds no buffers

    def start(self) -> None:
        """Start every thread now (they start on first use otherwise): Python
        refuses to start threads once it is shutting down, while threads it
        waits for at exit may still call cuzarr."""
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        if self._threads or self._closed:
            return
        for i in range(self._n):
            t = threading.Thread(
                target=self._work,
                args=(self._queue,),
                name=f"{self._prefix}_{i}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        fut: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._start_locked()
            self._queue.put((fut, fn, args, kwargs))
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        self._queue.put(None)
        if wait:
            for t in threads:
                if t is not threading.current_thread():
                    t.join()
