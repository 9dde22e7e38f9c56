"""The ``gen`` section of version 1 kerchunk references, against fsspec's
expansion of it (``ReferenceFileSystem(simple_templates=False)``, which renders
with jinja2) and zarr-python reading through that; and the entries it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import cuzarr
from _reference_helpers import zarray
from cuzarr.errors import MetadataError
from cuzarr.runtime.sync import sync
from cuzarr.storage import ReferenceStore

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("jinja2")  # fsspec's renderer: the oracle only


async def _collect(store):
    return [k async for k in store.list()]


def _doc(tmp_path):
    """Three arrays whose chunks come from ``gen`` entries: ranges of one blob,
    ranges of zero-padded part files, and whole files; plus plain refs."""
    x = np.arange(4 * 4, dtype="<i4")  # 4 chunks of 4, 16 bytes each after an 8-byte header
    (tmp_path / "blob.bin").write_bytes(b"HEADER!!" + x.tobytes())
    y = np.arange(2 * 9, dtype="<i4").reshape(2, 9)  # chunks (1, 3): a part file per row
    for i in range(2):
        (tmp_path / f"part_{i:02d}.bin").write_bytes(y[i].tobytes())
    w = np.array([5, 6, 7, 8], dtype="<i4")  # chunks of 2: one whole file each
    for k in range(2):
        (tmp_path / f"w{k}.bin").write_bytes(w[2 * k : 2 * k + 2].tobytes())
    z = np.array([1, 2, 3, 4], dtype="<i4")  # stepping down a dimension
    (tmp_path / "z.bin").write_bytes(z.tobytes())
    doc = {
        "version": 1,
        "templates": {"u": str(tmp_path / "blob.bin"), "d": str(tmp_path)},
        "refs": {
            ".zgroup": '{"zarr_format": 2}',
            "x/.zarray": zarray([16], [4]),
            "y/.zarray": zarray([2, 9], [1, 3]),
            "w/.zarray": zarray([4], [2]),
            "z/.zarray": zarray([4], [2]),
            "x/3": ["{{u}}", 0, 16],  # replaced by the generated key, as in fsspec
        },
        "gen": [
            {
                "key": "x/{{i}}",
                "url": "{{u}}",
                "offset": "{{ 8 + i * 16 }}",
                "length": "16",
                "dimensions": {"i": {"stop": 4}},
            },
            {
                "key": "y/{{i}}.{{j}}",
                "url": "{{d}}/part_{{ '%02d' % i }}.bin",
                "offset": "{{j*12}}",
                "length": "12",
                "dimensions": {"i": [0, 1], "j": {"start": 0, "stop": 3, "step": 1}},
            },
            {"key": "w/{{k}}", "url": "{{d}}/w{{k}}.bin", "dimensions": {"k": {"stop": 2}}},
            {
                "key": "z/{{ (10 - n) // 3 }}",
                "url": "{{d}}/z.bin",
                "offset": "{{ (10 - n) // 3 * 8 }}",
                "length": "{{ 4 + 4 }}",
                "dimensions": {"n": {"start": 10, "stop": 4, "step": -3}},
            },
        ],
    }
    return doc, {"x": x, "y": y, "w": w, "z": z}


def test_gen_expands_as_fsspec_expands_it(tmp_path):
    doc, expected = _doc(tmp_path)
    fs = fsspec.filesystem("reference", fo=json.loads(json.dumps(doc)), simple_templates=False)
    (tmp_path / "refs.json").write_text(json.dumps(doc))
    path = tmp_path / "refs.json"
    for fo in (ReferenceStore(doc), ReferenceStore(str(path)), f"reference://{path}"):
        g = cuzarr.open_group(fo, mode="r")
        for name, want in expected.items():
            np.testing.assert_array_equal(g[name][...], want)
    store = ReferenceStore(doc)
    keys = sorted(sync(_collect(store)))
    assert keys == sorted(fs.references)
    for key in keys:
        assert sync(store.get(key)) == fs.cat_file(key), key
    # zarr-python reading through fsspec's expansion
    afs = fsspec.filesystem(
        "reference", fo=json.loads(json.dumps(doc)), simple_templates=False, asynchronous=True
    )
    theirs = zarr.open_group(
        zarr.storage.FsspecStore(afs, read_only=True, path=""),
        mode="r",
        zarr_format=2,
        use_consolidated=False,
    )
    for name in expected:
        np.testing.assert_array_equal(g[name][...], theirs[name][...])


def test_gen_renders_like_jinja(tmp_path):
    """Expressions, side by side with fsspec's rendering of the same entries."""
    (tmp_path / "f.bin").write_bytes(bytes(range(256)))
    gen = [
        {
            "key": "a/{{ i }}-{{ -i + 10 }}-{{ i / 2 }}-{{ i % 3 }}-{{ +i }}",
            "url": "{{ p + '/f.bin' }}",
            "offset": "{{ (i + 1) * 10 - 10 }}",
            "length": "{{ 3 }}",
            "dimensions": {"i": {"start": 1, "stop": 8, "step": 3}},
        },
        {
            "key": "b/{{ s }}{{ '%03d' % n }}",
            "url": "{{p}}/f.bin",
            "dimensions": {"s": ["x", "y"], "n": [7, 12]},
        },
    ]
    doc = {"version": 1, "templates": {"p": str(tmp_path)}, "refs": {}, "gen": gen}
    fs = fsspec.filesystem("reference", fo=json.loads(json.dumps(doc)), simple_templates=False)
    store = ReferenceStore(doc)
    keys = sorted(sync(_collect(store)))
    assert keys == sorted(fs.references) and len(keys) == 7
    assert "a/4-6-2.0-1-4" in keys and "b/x012" in keys
    for key in keys:
        assert sync(store.get(key)) == fs.cat_file(key), key


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"key": "k/{{ i | string }}"}, "unsupported template expression"),
        ({"key": "k/{{ f(i) }}"}, "unsupported template expression"),
        ({"key": "k/{{ i.real }}"}, "unsupported template expression"),
        ({"key": "k/{{ i ** 2 }}"}, "unsupported template expression"),
        ({"key": "k/{{ i if i else 1 }}"}, "unsupported template expression"),
        ({"key": "k/{% for a in b %}{{a}}{% endfor %}"}, "statements and comments"),
        ({"key": "k/{{ i ~ 'x' }}"}, "unsupported template expression"),
        ({"key": "k/{{ nope }}"}, "names 'nope', no dimension or template"),
        ({"key": "k/{{ 'ab' * 1000 }}"}, "repeating a string"),
        ({"key": "k/{{ i + 'a' }}"}, "failed"),
        ({"key": "k/{{ i // 0 }}"}, "failed"),
        ({"key": "k/{{ i"}, r"unclosed '\{\{'"),
        ({"offset": "{{ i / 2 }}", "length": "4"}, r"non-negative integers, got \['0\.0', '4'\]"),
        ({"offset": "{{ i - 1 }}", "length": "4"}, r"non-negative integers, got \['-1', '4'\]"),
        ({"offset": "0"}, "'offset' and 'length' go together"),
        ({"dimensions": {"i": {"start": 0}}}, "dimension 'i' must be"),
        ({"dimensions": {"i": {"stop": 2, "step": 0}}}, "dimension 'i' must be"),
        ({"dimensions": {"i": {"stop": 2.5}}}, "dimension 'i' must be"),
        ({"dimensions": {"u": [1]}}, r"dimensions \['u'\] are also template names"),
        ({"dimensions": [1, 2]}, "'dimensions' must be an object"),
        ({"extra": 1}, r"unsupported fields \['extra'\]"),
        ({"url": 5}, "'url' must be a string template, got 5"),
        ({"key": None}, "'key' must be a string template"),
    ],
)
def test_unsupported_gen_entries_are_refused_naming_the_entry(entry, message):
    base = {"key": "k/{{i}}", "url": "f.bin", "dimensions": {"i": {"stop": 2}}}
    gen = [{"key": "ok/{{i}}", "url": "f.bin", "dimensions": {"i": [0]}}, {**base, **entry}]
    doc = {"version": 1, "templates": {"u": "x"}, "refs": {}, "gen": gen}
    with pytest.raises(MetadataError, match=rf"'gen' entry 1 \(.*\).*{message}"):
        ReferenceStore(doc)


def test_malformed_gen_sections():
    for gen, message in [
        ({"key": "a"}, "'gen' must be a list"),
        ([["a"]], "'gen' entry 0: needs 'key', 'url' and 'dimensions'"),
        ([{"key": "a", "url": "b"}], "'gen' entry 0: needs"),
    ]:
        with pytest.raises(MetadataError, match=message):
            ReferenceStore({"version": 1, "refs": {}, "gen": gen})
    # an empty or null section generates nothing, and an entry without dimensions one key
    for gen in ([], None):
        assert sync(_collect(ReferenceStore({"version": 1, "refs": {"a": "1"}, "gen": gen}))) == [
            "a"
        ]
    one = ReferenceStore(
        {"version": 1, "refs": {}, "gen": [{"key": "k", "url": "f.bin", "dimensions": {}}]}
    )
    assert sync(_collect(one)) == ["k"]
