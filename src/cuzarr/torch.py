"""PyTorch data loading: a map-style ``Dataset`` over cuzarr arrays.

``ArrayDataset(images, labels)`` yields samples along axis 0 of every array.
PyTorch's ``DataLoader`` fetches a whole batch through ``__getitems__``; cuzarr
answers it with one planned read (``cuzarr.read_many``) in which every chunk is
fetched and decoded once, however many samples of the batch it holds. Arrays
pickle by reference (store + path), so ``num_workers > 0`` works: each worker
process opens the arrays itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from cuzarr.buffer import gpu_available
from cuzarr.core.lazy import read_many

__all__ = ["ArrayDataset", "PrefetchingLoader"]


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("cuzarr.torch needs PyTorch (pip install torch)") from e
    return torch


def _to_tensor(x: Any, device: Any) -> Any:
    torch = _torch()
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        t = torch.from_dlpack(x)  # CuPy on the GPU path: no copy
    else:
        x = np.asarray(x)
        if not x.dtype.isnative:
            # torch holds native byte order only (a v2 or N5 array may be big-endian)
            x = x.astype(x.dtype.newbyteorder("="))
        elif not x.flags.writeable:
            x = x.copy()
        ext = _torch_extension_dtype(torch, x.dtype)
        if ext is not None:
            # bfloat16 / float8 (ml_dtypes): torch.from_numpy refuses them; the
            # bits are the same, so reinterpret through an unsigned int of that size.
            t = torch.from_numpy(x.view(f"u{x.dtype.itemsize}")).view(ext)
        else:
            t = torch.from_numpy(x)
    return t.to(device) if device is not None else t


def _torch_extension_dtype(torch: Any, dtype: np.dtype) -> Any:
    """The torch dtype of an ml_dtypes dtype (``bfloat16``, ``float8_e4m3fn``, ...)
    of the same name and size, or ``None``."""
    if dtype.fields is not None or not dtype.name.startswith(("bfloat16", "float8_")):
        return None
    ext = getattr(torch, dtype.name, None)
    if isinstance(ext, torch.dtype) and ext.itemsize == dtype.itemsize:
        return ext
    return None


class ArrayDataset:
    """Samples along axis 0 of one or more equally long arrays.

    Parameters
    ----------
    *arrays : cuzarr.Array
        Arrays with the same length along axis 0 (e.g. images and labels).
    device : torch.device or str, optional
        Where tensors go. ``None`` keeps CPU tensors (or device tensors when
        ``cuzarr.config.enable_gpu()`` is on). A CUDA device makes batches decode
        on the GPU (CuPy + nvCOMP, when installed) and reach torch through DLPack
        without a copy; other devices get CPU tensors moved there.
    transform : callable, optional
        Applied to each sample tuple after reading.
    """

    def __init__(self, *arrays: Any, device: Any = None, transform: Any = None) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        n = {len(a) for a in arrays}
        if len(n) != 1:
            raise ValueError(f"arrays differ in length along axis 0: {sorted(n)}")
        self.arrays = tuple(arrays)
        self.device = device
        self.transform = transform
        self._gpu: bool | None = None
        self._len = n.pop()

    def __len__(self) -> int:
        return self._len

    def _prototype(self) -> Any:
        """``"gpu"`` when tensors go to a CUDA device and the GPU path is usable."""
        if self.device is None or "cuda" not in str(self.device):
            return None
        if self._gpu is None:
            self._gpu = gpu_available()
        return "gpu" if self._gpu else None

    def read_batch(self, indices: Sequence[int], prototype: Any = None) -> list[Any]:
        """Arrays of the samples at ``indices`` (one planned read): numpy, or CuPy
        with ``prototype="gpu"``."""
        idx = np.asarray(indices, dtype=np.intp)
        if idx.size and (idx.min() < -self._len or idx.max() >= self._len):
            raise IndexError(f"sample index out of range for a dataset of {self._len}")
        idx = np.where(idx < 0, idx + self._len, idx)
        views = [a.lazy[idx] for a in self.arrays]
        return list(read_many(views, prototype=prototype))

    def __getitems__(self, indices: Sequence[int]) -> list[tuple[Any, ...]]:
        # DataLoader's batched fetch: one read for the batch, then split per sample.
        cols = [
            _to_tensor(c, self.device) for c in self.read_batch(indices, self._prototype())
        ]
        samples = [tuple(c[i] for c in cols) for i in range(len(indices))]
        if self.transform is not None:
            samples = [self.transform(s) for s in samples]
        return samples

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        return self.__getitems__([i])[0]


class PrefetchingLoader:
    """Batches of a dataset in sampler order, reading the next batch while the
    current one is used (one background thread).

    Yields tuples of batched tensors (one per array).
    """

    def __init__(self, dataset: ArrayDataset, batch_size: int, *, shuffle: bool = False, seed: int | None = None, drop_last: bool = False) -> None:
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self._rng = np.random.default_rng(seed)

    def _batches(self) -> list[np.ndarray]:
        n = len(self.dataset)
        order = self._rng.permutation(n) if self.shuffle else np.arange(n)
        out = [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        if self.drop_last and out and len(out[-1]) < self.batch_size:
            out.pop()
        return out

    def __len__(self) -> int:
        # Arithmetic, not len(self._batches()): that would draw a permutation
        # and shift the shuffled order of the next epoch.
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        batches = self._batches()
        result: dict[int, Any] = {}

        def fetch(k: int) -> None:
            try:
                result[k] = self.dataset.read_batch(batches[k], self.dataset._prototype())
            except BaseException as e:  # handed to the consumer
                result[k] = e

        thread: threading.Thread | None = None
        if batches:
            thread = threading.Thread(target=fetch, args=(0,), daemon=True)
            thread.start()
        for k in range(len(batches)):
            assert thread is not None
            thread.join()
            cols = result.pop(k)
            if isinstance(cols, BaseException):
                raise cols
            if k + 1 < len(batches):
                thread = threading.Thread(target=fetch, args=(k + 1,), daemon=True)
                thread.start()
            yield tuple(_to_tensor(c, self.dataset.device) for c in cols)
