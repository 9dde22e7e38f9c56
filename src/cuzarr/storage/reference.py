"""A read-only store over kerchunk references.

A reference set maps Zarr keys to where their bytes live, so an HDF5, netCDF,
TIFF or GRIB archive described by kerchunk reads as a Zarr hierarchy without
conversion. Two JSON layouts are read:

- version 0: ``{"key": value, ...}``
- version 1: ``{"version": 1, "templates": {"u": "https://..."}, "refs": {...},
  "gen": [...]}``

Each value is one of: a ``str`` (the literal content, UTF-8 encoded), a
``"base64:..."`` string (decoded bytes), ``[url]`` (the whole target file) or
``[url, offset, length]`` (a byte range of it). ``{{name}}`` in a URL is
replaced by the template of that name. Targets are local paths or any URL that
fsspec reads (``s3://``, ``https://``...); requests to one target run
concurrently under the global I/O limit, and the store itself never lists a
target.

The ``gen`` section generates references: each entry's ``key``, ``url``,
``offset`` and ``length`` are Jinja-style templates expanded over the product
of its ``dimensions`` (``{"i": {"start": 0, "stop": 5, "step": 1}}`` or
``{"i": [values]}``), as fsspec's ``ReferenceFileSystem`` expands them with
``simple_templates=False``. jinja2 is not used: ``{{ expr }}`` may hold names
(dimensions and templates), int, float and string literals, parentheses, unary
``-``/``+`` and ``+ - * / // %`` (``%`` with a string on the left formats, as
``'%03d' % i``); anything else (filters, statements, calls) is refused.

A directory (or a URL ending in ``parq``/``parquet``/``/``, or with a
``.zmetadata`` below it) holds Parquet references, read lazily: see
:mod:`cuzarr.storage.reference_parquet`.

A malformed reference raises :class:`~cuzarr.errors.MetadataError` naming its
key when the store is made. Reading a key whose target is gone raises
``FileNotFoundError``; one whose target ends before the referenced range raises
``MetadataError`` (a short read would decode as other values); both name the key.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import binascii
import itertools
import json
import operator
import os
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

from cuzarr.errors import CuzarrError, MetadataError
from cuzarr.storage.base import (
    ByteRequest,
    RangeByteRequest,
    Store,
    gather_or_cancel,
    range_bounds,
    slice_bytes,
)
from cuzarr.storage.reference_parquet import ParquetReferences, parquet_root

__all__ = ["ReferenceStore"]

_TEMPLATE = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4")  # read through fsspec's codecs


def _load_refs(fo: Any, target_options: dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(fo, Mapping):
        return dict(fo)
    if isinstance(fo, (bytes, bytearray)):
        return _parse_refs(fo, "references")
    s = os.fspath(fo)
    options = dict(target_options or {})
    if s.lower().endswith(_COMPRESSED):
        # a compressed reference file (refs.json.gz, .zst...): as fsspec's
        # ReferenceFileSystem reads it with target_options={"compression": "infer"}
        options.setdefault("compression", "infer")
    if ("://" in s and not s.startswith("file://")) or options:
        import fsspec

        with fsspec.open(s, "rb", **options) as f:
            return _parse_refs(f.read(), s)
    if s.startswith("file://"):
        s = s[len("file://") :]
    with open(s, "rb") as f:
        return _parse_refs(f.read(), s)


def _parse_refs(raw: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    # ValueError: also an int past Python's digit limit; RecursionError: nesting
    except (ValueError, RecursionError) as e:
        raise MetadataError(f"{where}: not a JSON reference file ({e})") from None
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: references must be a JSON object")
    return doc


def _parse_ref(key: str, value: Any, templates: dict[str, str]) -> Any:
    """One reference -> bytes (inline data) or ``(url, offset, length)``."""
    if isinstance(value, dict):
        # Some writers keep metadata documents as JSON objects.
        return json.dumps(value).encode()
    if isinstance(value, list):
        if len(value) not in (1, 3) or not (value[0] is None or isinstance(value[0], str)):
            raise MetadataError(
                f"reference {key!r}: expected [url] or [url, offset, length], got {value!r}"
            )
        url = value[0]
        if url is not None:
            url = _TEMPLATE.sub(lambda m: templates.get(m.group(1), m.group(0)), url)
        if len(value) == 1:
            return (url, None, None)
        offset, length = (_nonnegative_int(key, v) for v in value[1:])
        return (url, offset, length)
    if isinstance(value, str):
        if value.startswith("base64:"):
            text = "".join(value[len("base64:") :].split())
            try:
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError) as e:
                raise MetadataError(f"reference {key!r}: invalid base64 data ({e})") from None
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise MetadataError(f"reference {key!r}: unsupported value {value!r}")


def _nonnegative_int(key: str, v: Any) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise MetadataError(
            f"reference {key!r}: offset and length must be non-negative integers, got {v!r}"
        )
    return v


# -- the 'gen' section -------------------------------------------------------------

_EXPR = re.compile(r"\{\{(.*?)\}\}", re.S)
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# Bounds on what one reference file may make the evaluator build: a string (and
# a '%' field width or precision) of at most _MAX_TEXT characters, a number of at
# most _MAX_BITS bits, and at most _MAX_GENERATED references in all gen entries.
_MAX_TEXT = 1 << 16
_MAX_BITS = 1 << 12
_MAX_GENERATED = 10_000_000
_SCALARS = (int, float, str)
# a '%' conversion's flags, width and precision; '%%' is matched on its own
_FORMAT = re.compile(r"%(?:%|[-+ #0]*(\d*)(?:\.(\d*))?)")


def _check_expr(node: ast.AST, where: str, text: str) -> None:
    """Refuse, before anything is expanded, what the evaluator does not do."""
    ok = (
        (isinstance(node, ast.Constant) and type(node.value) in (int, float, str))
        or isinstance(node, ast.Name)
        or (isinstance(node, ast.BinOp) and type(node.op) in _BINOPS)
        or (isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY)
    )
    if not ok:
        raise MetadataError(
            f"{where}: unsupported template expression {text!r} (names, numbers, strings, "
            "parentheses and + - * / // % only; jinja2 is not used)"
        )
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.operator, ast.unaryop, ast.expr_context)):
            _check_expr(child, where, text)


def _eval_expr(node: ast.AST, names: Mapping[str, Any], where: str, text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            # (Jinja would render an undefined name as "", silently)
            raise MetadataError(f"{where}: {text!r} names {node.id!r}, no dimension or template")
        return names[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _eval_expr(node.operand, names, where, text)
        if isinstance(value, str):
            raise MetadataError(f"{where}: {text!r}: a sign on a string")
        return _UNARY[type(node.op)](value)
    assert isinstance(node, ast.BinOp)
    left = _eval_expr(node.left, names, where, text)
    right = _eval_expr(node.right, names, where, text)
    formats = isinstance(node.op, ast.Mod) and isinstance(left, str)
    # (a list or an object from a dimension's values would repeat or format
    # without bound: 'i * 1000000000', '%(a)s%(a)s...' % i; they are only formatted
    # whole, as '%s' % i)
    if not isinstance(left, _SCALARS) or not (
        isinstance(right, _SCALARS) or (formats and not isinstance(right, dict))
    ):
        raise MetadataError(
            f"{where}: {text!r}: operands must be numbers or strings, got "
            f"{type(left).__name__} and {type(right).__name__}"
        )
    if isinstance(node.op, ast.Mult) and (isinstance(left, str) or isinstance(right, str)):
        # a repeated string can be made arbitrarily large by one entry
        raise MetadataError(f"{where}: {text!r}: repeating a string is not supported")
    if formats:
        for m in _FORMAT.finditer(left):
            if any(len(g) > 5 or int(g) > _MAX_TEXT for g in m.groups() if g):
                raise MetadataError(
                    f"{where}: {text!r}: a field width or precision over {_MAX_TEXT}"
                )
    try:
        value = _BINOPS[type(node.op)](left, right)
    except (TypeError, ValueError, ArithmeticError) as e:
        raise MetadataError(f"{where}: {text!r} failed: {e}") from None
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        raise MetadataError(f"{where}: {text!r} makes a string over {_MAX_TEXT} characters")
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise MetadataError(f"{where}: {text!r} makes a number over {_MAX_BITS} bits")
    return value


def _compile_template(value: Any, where: str, field: str) -> list[Any]:
    """Field ``field`` of a gen entry as literal strings and parsed ``{{ }}``
    expressions."""
    if field in ("offset", "length") and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise MetadataError(f"{where}: {field!r} must be a string template, got {value!r}")
    if "{%" in value or "{#" in value:
        raise MetadataError(f"{where}: Jinja statements and comments are not supported")
    parts: list[Any] = []
    pos = 0
    for m in _EXPR.finditer(value):
        parts.append(value[pos : m.start()])
        text = m.group(0)
        try:
            tree = ast.parse(m.group(1).strip(), mode="eval")
        except SyntaxError:
            raise MetadataError(f"{where}: unsupported template expression {text!r}") from None
        _check_expr(tree.body, where, text)
        parts.append((tree.body, text))
        pos = m.end()
    parts.append(value[pos:])
    if any(isinstance(p, str) and "{{" in p for p in parts):
        raise MetadataError(f"{where}: unclosed '{{{{' in {value!r}")
    return parts


def _render(parts: list[Any], names: Mapping[str, Any], where: str) -> str:
    return "".join(
        p if isinstance(p, str) else _text(_eval_expr(p[0], names, where, p[1]), where, p[1])
        for p in parts
    )


def _text(value: Any, where: str, text: str) -> str:
    try:
        return str(value)
    except ValueError as e:  # an int past Python's digit limit
        raise MetadataError(f"{where}: {text!r} failed: {e}") from None


def _dimension(name: str, spec: Any, where: str) -> Sequence[Any]:
    if isinstance(spec, list):
        return spec
    if isinstance(spec, dict) and "stop" in spec and set(spec) <= {"start", "stop", "step"}:
        bounds = [spec.get("start", 0), spec["stop"], spec.get("step", 1)]
        if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds) and bounds[2]:
            return range(*bounds)  # (not listed: its length is checked first)
    raise MetadataError(
        f"{where}: dimension {name!r} must be a list of values or "
        f'{{"start": int, "stop": int, "step": int (not 0)}}, got {spec!r}'
    )


def _product_size(axes: list[Sequence[Any]]) -> int:
    """How many references the dimensions ``axes`` make, capped past the bound."""
    sizes = []
    for axis in axes:
        try:
            sizes.append(len(axis))
        except OverflowError:  # len() of a range past sys.maxsize
            sizes.append(_MAX_GENERATED + 1)
    size = 1
    for n in sizes:
        size = min(size * n, _MAX_GENERATED + 1)
    return 0 if 0 in sizes else size


def _expand_gen(gens: Any, templates: dict[str, str]) -> dict[str, Any]:
    """The references of a version 1 ``gen`` section, ``key -> (url, offset, length)``."""
    if not isinstance(gens, list):
        raise MetadataError(f"kerchunk 'gen' must be a list of entries, got {gens!r}")
    out: dict[str, Any] = {}
    total = 0
    for n, gen in enumerate(gens):
        where = f"kerchunk 'gen' entry {n}"
        if not isinstance(gen, dict) or not {"key", "url", "dimensions"} <= set(gen):
            raise MetadataError(f"{where}: needs 'key', 'url' and 'dimensions', got {gen!r}")
        where = f"kerchunk 'gen' entry {n} ({gen['key']!r})"
        unknown = set(gen) - {"key", "url", "offset", "length", "dimensions"}
        if unknown:
            raise MetadataError(f"{where}: unsupported fields {sorted(unknown)}")
        if ("offset" in gen) != ("length" in gen):
            raise MetadataError(f"{where}: 'offset' and 'length' go together")
        dims = gen["dimensions"]
        if not isinstance(dims, dict):
            raise MetadataError(f"{where}: 'dimensions' must be an object, got {dims!r}")
        clash = sorted(set(dims) & set(templates))
        if clash:
            raise MetadataError(f"{where}: dimensions {clash} are also template names")
        axes = [_dimension(name, spec, where) for name, spec in dims.items()]
        size = _product_size(axes)
        total += size
        if total > _MAX_GENERATED:
            raise MetadataError(
                f"{where}: the 'gen' section makes over {_MAX_GENERATED} references "
                "(the product of each entry's dimensions, added up)"
            )
        key_t, url_t = (_compile_template(gen[f], where, f) for f in ("key", "url"))
        ranged = "offset" in gen
        if ranged:
            off_t, len_t = (_compile_template(gen[f], where, f) for f in ("offset", "length"))
        if size == 0:  # (product() would list the other dimensions first)
            continue
        for values in itertools.product(*axes):
            names = {**templates, **dict(zip(dims, values))}
            key = _render(key_t, names, where)
            url = _render(url_t, names, where)
            if not ranged:
                out[key] = (url, None, None)
                continue
            rendered = [_render(t, names, where) for t in (off_t, len_t)]
            try:
                offset, length = (int(r) for r in rendered)
            except ValueError:
                offset = length = -1
            if offset < 0 or length < 0:
                raise MetadataError(
                    f"{where}: offset and length of {key!r} must render as non-negative "
                    f"integers, got {rendered!r}"
                )
            out[key] = (url, offset, length)
    return out


class ReferenceStore(Store):
    """Zarr keys resolved through kerchunk references (read-only).

    Parameters
    ----------
    fo
        The references: a dict (v0 or v1 layout), a path / URL of a JSON file,
        or a path / URL of a Parquet reference directory (fsspec's lazy format,
        see :mod:`cuzarr.storage.reference_parquet`; needs the ``kerchunk`` extra).
    target_options
        fsspec options to read ``fo`` when it is a URL.
    remote_protocol, remote_options
        Options for the filesystem that holds the targets (``storage_options``
        of the :class:`~cuzarr.storage.fsspec.FsspecStore` built for remote URLs).
        Relative target paths resolve against the directory that holds ``fo``
        when it is a local file or directory.
    cache_size
        Parquet references: how many record files stay decoded in memory (as
        fsspec's ``cache_size``).

    Raises
    ------
    MetadataError
        A malformed reference (naming its key), ``gen`` entry or ``.zmetadata``.
    ImportError
        ``fo`` is a Parquet reference directory and pyarrow (the ``kerchunk``
        extra) is not installed.
    """

    supports_writes = False
    supports_deletes = False

    def __init__(
        self,
        fo: Any,
        *,
        target_options: dict[str, Any] | None = None,
        remote_protocol: str | None = None,
        remote_options: dict[str, Any] | None = None,
        cache_size: int = 128,
        read_only: bool = True,
    ) -> None:
        super().__init__(read_only=True)
        self._base = None
        if isinstance(fo, (str, os.PathLike)):
            local = os.fspath(fo)
            local = local[len("file://") :] if local.startswith("file://") else local
            if "://" not in local:
                # (a directory's trailing "/" would make it its own parent)
                self._base = os.path.dirname(os.path.abspath(local.rstrip("/") or "/"))
        self.remote_protocol = remote_protocol
        self.remote_options = dict(remote_options or {})
        self._remote: dict[str, Any] = {}
        self._refs: dict[str, Any] = {}
        self._lazy: ParquetReferences | None = None
        root = parquet_root(fo, target_options)
        if root is not None:
            self._lazy = ParquetReferences(root, target_options, cache_size)
            return
        raw = _load_refs(fo, target_options)
        gen: dict[str, Any] = {}
        if "version" in raw and "refs" in raw:
            if raw["version"] != 1:
                raise MetadataError(f"unsupported kerchunk reference version {raw['version']!r}")
            refs = raw["refs"]
            templates = {k: str(v) for k, v in (raw.get("templates") or {}).items()}
            if raw.get("gen") is not None:
                gen = _expand_gen(raw["gen"], templates)
        else:
            refs, templates = raw, {}
        if not isinstance(refs, Mapping):
            raise MetadataError(f"kerchunk 'refs' must be a JSON object, got {type(refs).__name__}")
        for key, value in refs.items():
            self._refs[key] = _parse_ref(key, value, templates)
        self._refs.update(gen)  # generated keys win, as in fsspec

    def __repr__(self) -> str:
        if self._lazy is not None:
            return f"ReferenceStore(<Parquet references at {self._lazy.root}>)"
        return f"ReferenceStore(<{len(self._refs)} refs>)"

    def with_read_only(self, read_only: bool = False) -> Store:
        return self

    # -- target access -------------------------------------------------------------
    def _remote_store(self, url: str) -> Any:
        from cuzarr.storage.fsspec import FsspecStore

        protocol = url.split("://", 1)[0]
        store = self._remote.get(protocol)
        if store is None:
            store = FsspecStore.from_url(f"{protocol}://", storage_options=self.remote_options)
            self._remote[protocol] = store
        return store

    def _local_path(self, url: str) -> str:
        if url.startswith("file://"):
            url = url[len("file://") :]
        if not os.path.isabs(url) and self._base is not None:
            url = os.path.join(self._base, url)
        return url

    @staticmethod
    def _read_local(path: str, offset: int | None, length: int | None) -> bytes:
        with open(path, "rb") as f:
            if offset is None:
                return f.read()
            f.seek(offset)
            return f.read(length)

    async def _read_target(self, url: str, offset: int | None, length: int | None) -> bytes:
        if url is None:
            raise MetadataError("reference with a null URL and no default target")
        is_url = "://" in url and not url.startswith("file://")
        if is_url or self.remote_protocol not in (None, "file"):
            if "://" not in url and self.remote_protocol:
                url = f"{self.remote_protocol}://{url}"
            store = self._remote_store(url)
            rng = None if offset is None else RangeByteRequest(offset, offset + (length or 0))
            data = await store._retrying("read", url, store._fetch, url, rng)
            if data is None:
                raise FileNotFoundError("not found")
            return data
        return await asyncio.to_thread(self._read_local, self._local_path(url), offset, length)

    # -- store interface -----------------------------------------------------------
    async def _lookup(self, key: str) -> Any:
        if self._lazy is not None:
            return await self._lazy.resolve(key)
        return self._refs.get(key)

    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        return await self._read_ref(key, await self._lookup(key), byte_range)

    async def get_partial_values(
        self, prototype: Any, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[bytes | None]:
        key_ranges = list(key_ranges)
        if self._lazy is None or type(self).get is not ReferenceStore.get:
            return await super().get_partial_values(prototype, key_ranges)
        from cuzarr.runtime.sync import io_semaphore

        # one lookup per record file for the whole batch, then the reads
        refs = await self._lazy.resolve_many([k for k, _ in key_ranges])
        sem = io_semaphore()

        async def one(key: str, ref: Any, rng: ByteRequest | None) -> bytes | None:
            if ref is None or isinstance(ref, bytes):
                return await self._read_ref(key, ref, rng)
            async with sem:
                return await self._read_ref(key, ref, rng)

        return await gather_or_cancel(*(one(k, ref, r) for (k, r), ref in zip(key_ranges, refs)))

    async def _read_ref(self, key: str, ref: Any, byte_range: ByteRequest | None) -> bytes | None:
        if ref is None:
            return None
        if isinstance(ref, bytes):
            return slice_bytes(ref, byte_range)
        url, offset, length = ref
        try:
            if byte_range is not None and offset is not None and length is not None:
                # Narrow the request instead of fetching the whole referenced range.
                start, stop = range_bounds(byte_range, length)
                if stop <= start:
                    return b""
                return await self._read_checked(key, url, offset + start, stop - start)
            data = await self._read_checked(key, url, offset, length)
        except FileNotFoundError as e:
            # a listed key whose bytes are gone is an error, not a missing chunk
            # (which would read as the fill value): say which key
            raise FileNotFoundError(f"key {key!r}: reference target {url} is missing ({e})") from e
        except CuzarrError as e:
            if isinstance(e, MetadataError):
                raise
            raise type(e)(f"key {key!r}: reference target {url}: {e}") from e
        except OSError as e:
            # (errno picks the subclass again: IsADirectoryError, PermissionError...)
            raise OSError(
                e.errno, f"key {key!r}: reading reference target {url} failed: {e.strerror or e}"
            ) from e
        return slice_bytes(data, byte_range)

    async def _read_checked(
        self, key: str, url: str, offset: int | None, length: int | None
    ) -> bytes:
        """The referenced bytes; a target that ends before them is an error (a
        short read would decode as another chunk, or as garbage)."""
        data = await self._read_target(url, offset, length)
        if length is not None and len(data) != length:
            raise MetadataError(
                f"key {key!r}: the reference asks for bytes {offset}-{offset + length} of "
                f"{url}, which ends before them (got {len(data)} of {length} bytes): "
                "the reference or its target is out of date"
            )
        return data

    async def exists(self, key: str) -> bool:
        if self._lazy is not None:
            return await self._lazy.resolve(key) is not None
        return key in self._refs

    async def set(self, key: str, value: bytes) -> None:
        self._check_writable()

    async def delete(self, key: str) -> None:
        self._check_writable()

    def list(self) -> AsyncIterator[str]:
        if self._lazy is not None:
            return self._lazy.list_prefix("")

        async def gen() -> AsyncIterator[str]:
            for key in list(self._refs):
                yield key

        return gen()

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        if self._lazy is not None:
            return self._lazy.list_prefix(prefix)
        return super().list_prefix(prefix)

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        if self._lazy is not None:
            return self._lazy.list_dir(prefix)
        return super().list_dir(prefix)
