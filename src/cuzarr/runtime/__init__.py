"""The runtime: cuzarr's event loop and its thread, the codec and I/O thread pools,
the I/O semaphores, ``sync`` and the worker loops of the engine.

The bottom layer above ``config`` and ``errors``: storage, codecs and core all
use it, and it imports none of them.
"""
