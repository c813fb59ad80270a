from __future__ import annotations

import numpy as np
import pytest

from trtprof.errors import BadInput, BadModel
from trtprof.model.inputs import (
    make_inputs,
    parse_batch_sizes,
    parse_int_range,
    parse_shape_arg,
    resolve_shapes,
)
from trtprof.spec import TensorSpec

IMG = TensorSpec("image", "float32", ("N", 3, 32, 32))
IDS = TensorSpec("ids", "int64", ("N", "seq"))
STATIC = TensorSpec("x", "float32", (4, 10))


def test_batch_dim_replaced():
    assert resolve_shapes([IMG], 8) == {"image": (8, 3, 32, 32)}


def test_shape_override_first_dim_replaced_by_batch():
    assert resolve_shapes([IDS], 4, {"ids": (1, 128)}) == {"ids": (4, 128)}


def test_dynamic_dim_without_shape_names_the_fix():
    with pytest.raises(BadInput, match=r"--shape ids:NxN"):
        resolve_shapes([IDS], 1)


def test_static_batch_mismatch():
    assert resolve_shapes([STATIC], 4) == {"x": (4, 10)}
    with pytest.raises(BadModel, match="static batch of 4"):
        resolve_shapes([STATIC], 2)


def test_override_checks():
    with pytest.raises(BadInput, match="unknown input"):
        resolve_shapes([IMG], 1, {"other": (1, 2)})
    with pytest.raises(BadInput, match="dims given"):
        resolve_shapes([IMG], 1, {"image": (1, 3, 32)})
    with pytest.raises(BadInput, match="fixes it to 3"):
        resolve_shapes([IMG], 1, {"image": (1, 4, 32, 32)})


def test_make_inputs_dtypes_ranges_and_seed():
    specs = [IMG, IDS, TensorSpec("mask", "bool", ("N", 5)), TensorSpec("h", "float16", ("N", 2))]
    shapes = resolve_shapes(specs, 3, {"ids": (1, 7)})
    a = make_inputs(specs, shapes, seed=1, int_range=(10, 20))
    b = make_inputs(specs, shapes, seed=1, int_range=(10, 20))
    assert a["image"].dtype == np.float32 and a["image"].shape == (3, 3, 32, 32)
    assert abs(a["image"].mean()) < 0.1 and 0.9 < a["image"].std() < 1.1
    assert a["ids"].dtype == np.int64 and a["ids"].min() >= 10 and a["ids"].max() < 20
    assert a["mask"].dtype == np.bool_ and a["h"].dtype == np.float16
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = make_inputs(specs, shapes, seed=2, int_range=(10, 20))
    assert not np.array_equal(a["image"], c["image"])


def test_uint8_range_is_clipped_to_dtype():
    spec = TensorSpec("u", "uint8", ("N", 1000))
    x = make_inputs([spec], {"u": (1, 1000)}, int_range=(-50, 1000))["u"]
    assert x.min() >= 0 and x.max() <= 255


@pytest.mark.parametrize("text,expected", [("input:1x3x224x224", ("input", (1, 3, 224, 224))),
                                           ("serving_default_x:0:2x5", ("serving_default_x:0", (2, 5)))])
def test_parse_shape(text, expected):
    assert parse_shape_arg(text) == expected


@pytest.mark.parametrize("bad", ["input", "input:1xAx3", "input:0x3", ":1x2"])
def test_parse_shape_errors(bad):
    with pytest.raises(BadInput):
        parse_shape_arg(bad)


def test_parse_batch_sizes_and_int_range():
    assert parse_batch_sizes("8,1,8,32") == (1, 8, 32)
    for bad in ("", "a", "0,1", "-1"):
        with pytest.raises(BadInput):
            parse_batch_sizes(bad)
    assert parse_int_range("0,5") == (0, 5)
    with pytest.raises(BadInput):
        parse_int_range("5,5")
