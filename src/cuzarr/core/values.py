"""Values of writes, and results of reads, as the caller gave or wants them."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.buffer import device_dtype, device_index, is_device_array, prototype_for

__all__ = [
    "as_requested",
    "as_value",
    "device_index",
    "drop_leading_ones",
    "field_names",
    "records_of",
]


def drop_leading_ones(arr: Any, ndim: int, scalar: bool = False) -> Any:
    """numpy's setitem accepts a value with extra leading length-1 axes
    (``x[::2] = [[1, 2]]``, ``x[1, 2, ...] = [[5]]``): drop them before
    broadcasting. ``scalar``: the selection is one element by integers alone
    (``x[1, 2]``), where numpy refuses any value with dimensions."""
    extra = arr.ndim - ndim
    if (ndim or not scalar) and extra > 0 and all(n == 1 for n in arr.shape[:extra]):
        return arr.reshape(arr.shape[extra:])
    return arr


def as_value(
    dt: Any,
    value: Any,
    shape: tuple[int, ...],
    keep_device: bool = False,
    basic: bool = False,
    scalar: bool = False,
) -> Any:
    """``value`` as an array of the stored data type ``dt`` (a ``DataType``)
    broadcast to ``shape``.
    ``basic``: the selection is basic (ints and slices), where numpy packs
    a scalar value by its Python value rather than casting it. ``scalar``:
    it is one element by integers alone (see ``_drop_leading_ones``)."""
    if is_device_array(value):
        ddt = device_dtype(dt.dtype)
        if keep_device and ddt is not None:
            # Chunks are built and compressed on the device (gpu/writer.py).
            xp = prototype_for(value).xp
            try:
                return xp.broadcast_to(
                    drop_leading_ones(xp.asarray(value, dtype=ddt), len(shape), scalar),
                    shape,
                )
            except ValueError as e:
                raise ValueError(
                    f"could not broadcast value of shape {value.shape} to the "
                    f"selection's shape {shape}"
                ) from e
        get = getattr(value, "get", None)
        value = get() if callable(get) else np.asarray(value)
    if dt.kind == "bytes":
        arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        if arr.dtype != object:
            arr = arr.astype(object)
    elif dt.kind == "string":
        # Python str straight to the stored dtype: via numpy's fixed-width
        # unicode, trailing NULs ("a\x00") would be dropped.
        arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=dt.dtype)
        if arr.dtype != dt.dtype:
            arr = arr.astype(dt.dtype)
    else:
        try:
            if basic and isinstance(value, np.generic) and value.dtype != dt.dtype:
                # numpy's rule for a scalar into a basic selection
                # (``x[1:3] = np.float64("nan")``):
                # packed as a Python value, so NaN into ints, out-of-range
                # ints and datetimes into ints raise instead of casting to
                # garbage as ``np.asarray(value, dtype)`` would.
                arr = np.empty((), dtype=dt.dtype)
                arr[()] = value
            else:
                arr = (
                    np.asarray(value, dtype=dt.dtype)
                    if not (isinstance(value, np.ndarray) and value.dtype == dt.dtype)
                    else value
                )
        except (TypeError, ValueError) as e:
            # Keep numpy's class (ValueError for "abc" into floats, NaN into ints).
            cls = ValueError if isinstance(e, ValueError) else TypeError
            raise cls(
                f"cannot write {type(value).__name__} into an array of {dt.dtype}: {e}"
            ) from e
    arr = drop_leading_ones(arr, len(shape), scalar)
    try:
        return np.broadcast_to(arr, shape)
    except ValueError as e:
        raise ValueError(
            f"could not broadcast value of shape {arr.shape} to the selection's shape {shape}"
        ) from e


def as_requested(arr: np.ndarray, dtype: Any, copy: Any) -> np.ndarray:
    """A freshly read host array as ``__array__(dtype, copy)`` asks for it."""
    if dtype is None or arr.dtype == dtype:
        return arr  # freshly read: never shared, so copy=False holds too
    if copy is False:  # numpy 2: a cast is a copy
        raise ValueError(
            f"Unable to avoid copy while creating an array as requested "
            f"(casting {arr.dtype} to {np.dtype(dtype)})"
        )
    return arr.astype(dtype)


def field_names(dtype: np.dtype, fields: Any) -> str | list[str]:
    """``fields`` (a name or a list of names of ``dtype``'s fields) checked."""
    names = dtype.names
    if not names:
        raise IndexError(f"invalid 'fields' argument: the array's data type {dtype} has no fields")
    if isinstance(fields, str):
        wanted = [fields]
    elif isinstance(fields, (list, tuple)):
        wanted = list(fields)
    else:
        raise IndexError(f"invalid 'fields' argument {fields!r}: a name or a list of names")
    bad = [f for f in wanted if not isinstance(f, str) or f not in names]
    if bad or len(set(wanted)) != len(wanted):
        raise IndexError(
            f"invalid 'fields' argument {fields!r}: the fields are {names}, each at most once"
        )
    return fields if isinstance(fields, str) else wanted


def records_of(
    dtype: np.dtype, value: Any, shape: tuple[int, ...], fields: str | list[str]
) -> np.ndarray:
    """``value`` written into the ``fields`` of records of ``dtype``
    shaped ``shape`` (numpy's broadcasting and casting); the other fields are
    zero and never stored (the write merges only ``fields``)."""
    if is_device_array(value):  # structured records live on the host
        value = value.get()
    records = np.zeros(shape, dtype=dtype)
    try:
        records[fields] = value
    except ValueError as e:
        raise ValueError(
            f"cannot write {np.shape(value)} values into field(s) {fields!r} of the "
            f"selection's shape {shape}: {e}"
        ) from e
    return records
