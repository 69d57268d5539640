#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make-corpus.py - writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/).

    python3 tests/fuzz/make-corpus.py [DIR]     (DIR defaults to tests/fuzz/corpus)

Python's standard library only, so the files are the same wherever it runs; the output is
committed, and this script documents how each file was made. A file named ok-* must load (the call
under test must succeed) and one named bad-* must fail: tests/fuzz/replay checks both in
'make check'. Regression inputs found by fuzzing are added by hand, named after the bug.
"""
import json
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors -----------------------------------------------------------------------------

ST_FMT = {"F32": "f", "F64": "d", "I32": "i", "I64": "q", "U8": "B", "BOOL": "B"}


def st_file(header, data=b"", pad=True):
    """8-byte little-endian length, the header text (padded with spaces to 8), the data."""
    if not isinstance(header, (bytes, str)):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8", "surrogatepass")
    if pad:
        header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def st_tensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, values); back to back in this order."""
    header, data = {}, b""
    for name, dtype, shape, values in tensors:
        raw = struct.pack("<%d%s" % (len(values), ST_FMT[dtype]), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    return st_file(header, data)


def safetensors():
    w = lambda name, data: write("safetensors", name, data)
    w("ok-empty.safetensors", st_file({}))
    w("ok-f32.safetensors", st_tensors([("w", "F32", [2, 3], [1.5, -2, 0, 3.25, 1e30, -0.0])]))
    w("ok-all-dtypes.safetensors", st_tensors([
        ("a", "F32", [2], [1.0, 2.0]), ("b", "F64", [1, 2], [3.0, -4.5]),
        ("c", "I32", [3], [1, -2, 2**31 - 1]), ("d", "I64", [2], [-2**63, 2**63 - 1]),
        ("e", "U8", [2, 2], [0, 1, 254, 255]), ("f", "BOOL", [3], [1, 0, 1])]))
    w("ok-scalar.safetensors", st_tensors([("s", "F64", [], [42.0])]))
    w("ok-zero-size.safetensors", st_tensors([("z", "F32", [0, 5], []), ("x", "U8", [1], [7])]))
    w("ok-metadata-cpu.safetensors",
      st_tensors([("w", "I32", [2], [1, 2])], {"clt.device.w": "cpu", "format": "pt"}))
    # Where the file names cl:0 or a device no machine has, map_location=cpu still loads it.
    w("ok-metadata-cl0.safetensors", st_tensors([("w", "F32", [2], [1, 2])], {"clt.device.w": "cl:0"}))
    w("ok-metadata-cl99.safetensors", st_tensors([("w", "F32", [1], [1])], {"clt.device.w": "cl:99"}))
    w("ok-escaped-names.safetensors", st_file(
        '{"caf\\u00e9":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"q\\"\\\\\\/\\b\\f\\n\\r\\t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},'
        '"\\ud83d\\ude00":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},'
        '"\u00fcml\u00e4ut":{"dtype":"U8","shape":[],"data_offsets":[3,4]}}', b"\x01\x02\x03\x04"))
    w("ok-reverse-order.safetensors", st_file(
        '{"b":{"data_offsets":[4,8],"shape":[1],"dtype":"F32"},'
        '"a":{"shape":[1],"dtype":"I32","data_offsets":[0,4]}}', b"\x01\x00\x00\x00\x00\x00\x80\x3f"))
    w("ok-whitespace.safetensors", st_file(
        ' \t\r\n{ "a" : { "dtype" : "U8" , "shape" : [ 2 ] , "data_offsets" : [ 0 , 2 ] } } \n',
        b"\x05\x06"))
    w("ok-unpadded.safetensors", st_file('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
                                         b"\x09", pad=False))
    w("ok-8-dims.safetensors", st_tensors([("a", "U8", [1, 1, 1, 1, 1, 1, 1, 2], [1, 2])]))

    # Files of other kinds, recognized and named (issue 14): zip archives (PyTorch, NumPy .npz),
    # .npy, a pickle, a sharded checkpoint's index (only clt_load, given its path, follows one).
    zip_entry = lambda name: b"PK\x03\x04\x14" + b"\x00" * 21 + struct.pack("<HH", len(name), 0) + name
    w("bad-pytorch-zip.safetensors", zip_entry(b"archive/data.pkl") + b"\x00" * 16)
    w("bad-npz.safetensors", zip_entry(b"w.npy") + b"\x00" * 16)
    w("bad-npy.safetensors", b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False}")
    w("bad-pickle.safetensors", b"\x80\x02}q\x00.")
    w("bad-index.safetensors", json.dumps({"metadata": {"total_size": 8},
                                           "weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    w("ok-header-length-123-blanks.safetensors",
      st_file(" " * 70 + '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x01", pad=False))
    w("bad-short.safetensors", b"\x02\x00\x00")
    w("bad-header-cap.safetensors", struct.pack("<Q", 2**63) + b"{}")
    w("bad-header-past-end.safetensors", struct.pack("<Q", 100) + b"{}")
    w("bad-not-json.safetensors", st_file("not json"))
    w("bad-not-object.safetensors", st_file("[1, 2]"))
    w("bad-text-after.safetensors", st_file("{} {}"))
    good = '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
    w("bad-trailing-bytes.safetensors", st_file(good, b"\x01\x02\x03"))
    w("bad-truncated-data.safetensors", st_file(good, b"\x01"))
    w("bad-no-tensors-but-data.safetensors", st_file("{}", b"\x01"))
    w("bad-hole.safetensors", st_file(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}', b"\x01\x02\x03"))
    w("bad-overlap.safetensors", st_file(
        '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
        '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"\x01\x02\x03"))
    w("bad-duplicate-name.safetensors", st_file(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\x01\x02"))
    one = lambda dtype, shape, offsets, data=b"\x00" * 4: st_file(
        '{"a":{"dtype":"%s","shape":%s,"data_offsets":%s}}' % (dtype, shape, offsets), data)
    w("ok-dtype-f16.safetensors", one("F16", "[2]", "[0,4]"))
    w("ok-dtype-bf16.safetensors", one("BF16", "[2]", "[0,4]"))
    w("bad-dtype-i16.safetensors", one("I16", "[2]", "[0,4]"))
    w("bad-dtype-unknown.safetensors", one("Q7", "[1]", "[0,4]"))
    w("bad-shape-negative.safetensors", one("U8", "[-4]", "[0,4]"))
    w("bad-shape-overflow.safetensors", one("F32", "[4611686018427387904,4611686018427387904]",
                                            "[0,4]"))
    w("bad-shape-huge-entry.safetensors", one("U8", "[99999999999999999999]", "[0,4]"))
    w("bad-shape-9-dims.safetensors", one("U8", "[1,1,1,1,1,1,1,1,4]", "[0,4]"))
    w("bad-shape-leading-zero.safetensors", one("U8", "[04]", "[0,4]"))
    w("bad-shape-fraction.safetensors", one("U8", "[4.0]", "[0,4]"))
    w("bad-shape-mismatch.safetensors", one("I32", "[2]", "[0,4]"))
    w("bad-offsets-reversed.safetensors", one("U8", "[0]", "[4,0]"))
    w("bad-offsets-one.safetensors", one("U8", "[4]", "[4]"))
    w("bad-bool-2.safetensors", one("BOOL", "[4]", "[0,4]", b"\x00\x01\x02\x01"))
    w("bad-missing-field.safetensors", st_file('{"a":{"dtype":"U8","shape":[1]}}', b"\x00"))
    w("bad-extra-field.safetensors", st_file(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}', b"\x00"))
    w("bad-field-twice.safetensors", st_file(
        '{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
    w("bad-empty-name.safetensors", st_file('{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
                                            b"\x00"))
    w("bad-nul-escape.safetensors", st_file(
        '{"a\\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
    w("bad-lone-surrogate.safetensors", st_file(
        '{"\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
    w("bad-invalid-utf8.safetensors", st_file(
        b'{"\xc3\x28":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
    w("bad-control-char.safetensors", st_file(
        '{"a\tb":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
    w("bad-unterminated-string.safetensors", st_file('{"abc'))
    w("bad-backslash-at-end.safetensors", st_file('{"abc\\', pad=False))
    w("bad-metadata-number.safetensors", st_file('{"__metadata__":{"a":1}}'))
    w("bad-metadata-twice.safetensors", st_file('{"__metadata__":{},"__metadata__":{}}'))
    w("bad-metadata-duplicate-key.safetensors", st_file('{"__metadata__":{"k":"a","k":"b"}}'))


# ---- npy -------------------------------------------------------------------------------------

def npy(header, data=b"", version=(1, 0), raw_len=None):
    """A .npy file with the header dict text padded (spaces, newline) to a multiple of 64."""
    h = header.encode("latin-1")
    lenbytes = 2 if version == (1, 0) else 4
    pre = 6 + 2 + lenbytes
    h += b" " * (-(pre + len(h) + 1) % 64) + b"\n"
    n = len(h) if raw_len is None else raw_len
    size = struct.pack("<H", n) if lenbytes == 2 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes(version) + size + h + data


def npy_array(descr, shape, values, fortran=False, version=(1, 0)):
    order = ">" if descr[0] == ">" else "<"
    code = {"f4": "f", "f8": "d", "i4": "i", "i8": "q", "u1": "B", "b1": "B"}[descr[1:]]
    data = struct.pack("%s%d%s" % (order, len(values), code), *values)
    shape_text = "(%s)" % ("".join("%d, " % d for d in shape)[:-2] + ("," if len(shape) == 1 else ""))
    return npy("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"
               % (descr, "True" if fortran else "False", shape_text), data, version)


def npy_files():
    w = lambda name, data: write("npy", name, data)
    w("ok-f4.npy", npy_array("<f4", [2, 3], [1, 2, 3, 4.5, -5, 6]))
    w("ok-f8.npy", npy_array("<f8", [3], [1e300, -0.0, 2.5]))
    w("ok-i4.npy", npy_array("<i4", [2, 2], [1, -1, 2**31 - 1, -2**31]))
    w("ok-i8.npy", npy_array("<i8", [2], [2**63 - 1, -2**63]))
    w("ok-u1.npy", npy_array("|u1", [4], [0, 1, 128, 255]))
    w("ok-b1.npy", npy_array("|b1", [3], [1, 0, 1]))
    w("ok-big-endian-f4.npy", npy_array(">f4", [2], [1.0, -2.0]))
    w("ok-big-endian-i8.npy", npy_array(">i8", [3], [1, -2, 3]))
    w("ok-fortran.npy", npy_array("<i4", [2, 3], [1, 4, 2, 5, 3, 6], fortran=True))
    w("ok-fortran-3d.npy", npy_array("<f8", [2, 2, 2], list(range(8)), fortran=True))
    w("ok-scalar.npy", npy_array("<f8", [], [3.5]))
    w("ok-zero-size.npy", npy_array("<f4", [0, 3], []))
    w("ok-version-2.npy", npy_array("<i4", [2], [7, 8], version=(2, 0)))
    w("ok-version-3.npy", npy_array("|u1", [1], [9], version=(3, 0)))
    w("ok-native-order.npy", npy("{'descr': '=i4', 'fortran_order': False, 'shape': (1,), }",
                                 b"\x05\x00\x00\x00"))
    w("ok-python2-longs.npy", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1L, 2L), }",
                                  b"\x00" * 8))
    w("ok-double-quotes.npy", npy('{"shape": (2,), "fortran_order": False, "descr": "|u1"}',
                                  b"\x01\x02"))
    w("ok-8-dims.npy", npy_array("|u1", [1, 1, 1, 1, 1, 1, 1, 2], [3, 4]))

    w("bad-short.npy", b"\x93NUMPY\x01")
    w("bad-magic.npy", b"\x93NUMPZ\x01\x00\x10\x00" + b" " * 16)
    w("bad-version.npy", npy_array("<f4", [1], [1])[:6] + b"\x04\x00" + npy_array("<f4", [1], [1])[8:])
    w("bad-header-past-end.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                                     b"", raw_len=60000))
    w("bad-truncated-data.npy", npy_array("<f4", [4], [1, 2, 3, 4])[:-3])
    w("bad-trailing-bytes.npy", npy_array("<f4", [1], [1]) + b"\x00")
    w("ok-dtype-f2.npy", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                             b"\x00\x3c\x00\xc0"))
    w("bad-dtype-i2.npy", npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }",
                              b"\x00" * 4))
    w("bad-dtype-pipe-f4.npy", npy("{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }",
                                   b"\x00" * 4))
    w("bad-structured.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                                b"\x00" * 4))
    w("bad-shape-negative.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (-1,), }"))
    w("bad-shape-overflow.npy", npy(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"))
    w("bad-shape-huge-entry.npy", npy(
        "{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999,), }"))
    w("bad-shape-9-dims.npy", npy(
        "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", b"\x00"))
    w("bad-shape-not-tuple.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1), }",
                                     b"\x00"))
    w("bad-no-fortran-order.npy", npy("{'descr': '|u1', 'shape': (1,), }", b"\x00"))
    w("bad-extra-key.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                               b"\x00"))
    w("bad-key-twice.npy", npy("{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, "
                               "'shape': (1,)}", b"\x00"))
    w("bad-fortran-not-bool.npy", npy("{'descr': '|u1', 'fortran_order': 0, 'shape': (1,), }",
                                      b"\x00"))
    w("bad-bool-2.npy", npy_array("|b1", [2], [1, 2]))
    w("bad-not-dict.npy", npy("['descr', '|u1']"))
    w("bad-unterminated.npy", npy("{'descr': '|u1"))


# ---- device names ----------------------------------------------------------------------------

def device_names():
    w = lambda name, data: write("device_name", name, data)
    w("ok-cpu", "cpu")
    w("ok-host", "host")
    w("ok-cpu-nul-junk", b"cpu\x00cl:0")  # the name ends at the NUL
    w("cl-0", "cl:0")  # present or not, depending on the machine: no ok-/bad- expectation
    w("cl-1", "cl:1")
    w("cl-15", "cl:15")
    w("bad-empty", "")
    w("bad-cpu-upper", "CPU")
    w("bad-cpu-space", "cpu ")
    w("bad-cl-leading-zero", "cl:00")
    w("bad-cl-plus", "cl:+0")
    w("bad-cl-space", "cl: 0")
    w("bad-cl-negative", "cl:-1")
    w("bad-cl-empty", "cl:")
    w("bad-cl-huge", "cl:99999999999999999999")
    w("bad-cl-int-wrap", "cl:4294967296")
    w("bad-gpu", "gpu")
    w("bad-cuda", "cuda:0")
    w("bad-nul-first", b"\x00cpu")
    w("bad-op-name", "add")
    w("bad-long", "cl:" + "9" * 5000)
    w("bad-utf8", "c\u00e9u")
    w("bad-percent", "%s%s%n")


# ---- shapes ----------------------------------------------------------------------------------
# The input of fuzz_shape is a byte program (see its header comment). A dimension byte below 0xc0
# is its value mod 5, 0xc0+v is v + 5, and 0xe0..0xef are special values:

SPECIAL = {-1: 0xe0, -2: 0xe1, "INT64_MIN": 0xe2, "INT64_MAX": 0xe3, 2**31: 0xe4, 2**32: 0xe5,
           2**40: 0xe6, 2**62: 0xe7, 2**62 + 1: 0xe8, 3037000500: 0xe9, 2**31 - 1: 0xea,
           2**61: 0xeb, 65536: 0xec, 2**20: 0xed, 2**52: 0xee, 2**60 + 1: 0xef}


def D(v):
    if v in SPECIAL:
        return bytes([SPECIAL[v]])
    if 0 <= v <= 4:
        return bytes([v])
    if 5 <= v <= 36:
        return bytes([0xc0 + v - 5])
    return b"\xf0" + struct.pack("<q", v)


def S(*dims):
    """A shape as fuzz_shape's shape_small reads it: ndim, then the dimensions."""
    return bytes([len(dims)]) + b"".join(D(d) for d in dims)


F32, F64, I32, I64, U8, BOOL = range(6)


def shapes():
    w = lambda name, data: write("shape", name, bytes(data))
    # mode 0: create. ndim byte, dtype byte, how byte (creator = (how & 7) % 7; how >= 0xe0: NULL shape;
    # bit 3: the value of clt_full), dims.
    create = lambda ndim, dt, how, *dims: bytes([0, ndim, dt, how]) + b"".join(D(d) for d in dims)
    w("ok-create-empty-f32", create(2, F32, 0, 2, 3))
    w("ok-create-zeros-i64", create(3, I64, 1, 2, 1, 4))
    w("ok-create-ones-bool", create(1, BOOL, 2, 7))
    w("ok-create-full-u8", create(2, U8, 3 + 8, 3, 3))
    w("ok-create-from-host-i32", create(2, I32, 4, 4, 5))
    w("ok-create-rand-f64", create(1, F64, 5, 10))
    w("ok-create-randn-f32", create(0, F32, 6))
    w("ok-create-scalar-null-shape", create(0, F32, 0xe0))
    w("ok-create-zero-dim", create(2, F32, 1, 0, 3))
    w("ok-create-zero-huge-dims", create(3, F32, 0, 2**62, 2**62, 0))
    w("ok-create-zero-first-huge", create(3, F64, 1, 0, 2**62, 2**62))
    w("ok-create-8-dims", create(8, U8, 1, 1, 2, 1, 2, 1, 2, 1, 2))
    w("bad-create-negative", create(2, F32, 0, -1, 3))
    w("bad-create-int64-min", create(1, I32, 1, "INT64_MIN"))
    w("bad-create-overflow", create(2, F32, 0, 2**62, 2**62))
    w("bad-create-bytes-overflow", create(1, F64, 0, 2**61))
    w("bad-create-ndim-9", bytes([0, 0xf1, F32, 0]) + D(1) * 9)
    w("bad-create-ndim-negative", bytes([0, 0xf0, F32, 1]))
    w("bad-create-ndim-int-min", bytes([0, 0xf3, F32, 1]))
    w("bad-create-dtype", bytes([0, 1, 0xf0, 0]) + D(2))
    w("ok-create-dtype-6-f16", bytes([0, 1, 0xf1, 1]) + D(2))
    w("ok-create-dtype-7-bf16", bytes([0, 1, 0xf2, 2]) + D(2))
    w("bad-create-dtype-8", bytes([0, 1, 0xff, 1]) + D(2))
    w("bad-create-rand-f16", bytes([0, 1, 0xf1, 5]) + D(3))
    w("bad-create-null-shape", create(2, F32, 0xe1, 2, 2))
    w("bad-create-rand-i32", create(1, I32, 5, 3))
    w("bad-create-out-of-memory", create(1, F32, 0, 2**52))
    w("bad-create-out-of-memory-2d", create(2, U8, 1, 2**40, 2**20))
    # mode 1: reshape. base shape, dtype byte, ndim byte, flags byte (>= 0xf0: NULL shape), dims.
    reshape = lambda base, dt, ndim, *dims: (bytes([1]) + base + bytes([dt, ndim, 0]) +
                                             b"".join(D(d) for d in dims))
    w("ok-reshape", reshape(S(2, 3), F32, 3, 3, 1, 2))
    w("ok-reshape-infer", reshape(S(2, 3, 4), I32, 2, -1, 4))
    w("ok-reshape-scalar", reshape(S(1, 1), F64, 0))
    w("ok-reshape-zero-huge", reshape(S(0), F32, 3, 2**62, 2**62, 0))
    w("ok-reshape-zero-huge-base", reshape(S(2**62, 0, 2**62), U8, 1, 0))
    w("bad-reshape-count", reshape(S(2, 3), F32, 1, 5))
    w("bad-reshape-two-infer", reshape(S(2, 3), F32, 2, -1, -1))
    w("bad-reshape-negative", reshape(S(2, 3), F32, 2, -2, 3))
    w("bad-reshape-infer-zero", reshape(S(0, 3), F32, 2, -1, 0))
    w("bad-reshape-infer-uneven", reshape(S(2, 3), F32, 2, -1, 4))
    w("bad-reshape-overflow", reshape(S(2, 3), F32, 2, 2**62, 2**62))
    w("bad-reshape-overflow-then-negative", reshape(S(2, 3), F32, 3, 2**62, 2**62, -2))
    w("bad-reshape-ndim-9", bytes([1]) + S(2) + bytes([F32, 0xf1, 0]) + D(1) * 9)
    w("bad-reshape-null-shape", bytes([1]) + S(2) + bytes([F32, 1, 0xf0]) + D(2))
    # mode 2: broadcasting. op byte (0 add 1 sub 2 mul 3 maximum 4 eq 5 lt 6 where 7 add_ 8 add_out),
    # then per operand a seed byte (dtype = seed % 8) and a shape.
    bc = lambda op, *operands: bytes([2, op]) + b"".join(bytes([dt]) + s for dt, s in operands)
    w("ok-add-broadcast", bc(0, (F32, S(2, 1)), (I32, S(3))))
    w("ok-sub-u8-wraps", bc(1, (U8, S(4)), (U8 + 6, S(4))))
    w("ok-mul-scalar", bc(2, (I64, S()), (F64, S(2, 3))))
    w("ok-maximum-bool", bc(3, (BOOL, S(2, 1)), (BOOL + 6, S(1, 2))))
    w("ok-eq", bc(4, (I32, S(3, 1, 2)), (U8, S(4, 1))))
    w("ok-lt-8-dims", bc(5, (F32, S(2, 1, 2, 1, 2, 1, 2, 1)), (I32, S(1, 2, 1, 2, 1, 2, 1, 2))))
    w("ok-where", bc(6, (BOOL, S(2, 1, 1)), (F32, S(3, 1)), (I32, S(4))))
    w("ok-add-inplace", bc(7, (F32, S(2, 3)), (I32, S(3))))
    w("ok-add-out", bc(8, (I32, S(2, 1)), (I32, S(2))) + bytes([I32]) + S(2, 2))
    w("ok-add-zero-huge", bc(0, (F32, S(0, 2**62, 2**62)), (F32, S(1))))
    w("ok-add-zero-huge-both", bc(0, (F32, S(2**62, 1, 0)), (F32, S(2**62, 0))))
    w("bad-add-mismatch", bc(0, (F32, S(2, 3)), (F32, S(4))))
    w("bad-sub-bool", bc(1, (BOOL, S(2)), (BOOL, S(2))))
    w("bad-where-cond-f32", bc(6, (0xf0, S(2)), (F32, S(2)), (F32, S(2))))
    w("bad-add-inplace-grows", bc(7, (F32, S(3)), (F32, S(2, 3))))
    w("bad-add-inplace-dtype", bc(7, (I32, S(3)), (F32, S(3))))
    w("bad-add-out-shape", bc(8, (F32, S(2, 3)), (F32, S(3))) + bytes([F32]) + S(3, 2))
    w("bad-add-out-dtype", bc(8, (F32, S(2)), (F32, S(2))) + bytes([F64]) + S(2))
    w("bad-add-out-huge-result", bc(8, (F32, S(300, 1)), (F32, S(1, 300))) + bytes([F32]) + S(1))
    # mode 3: matmul. per operand a seed byte (< 0xe0: f32 or f64 by its low bit, the second
    # following the first; >= 0xe0: dtype = seed % 8) and a shape of at most 4 dimensions.
    mm = lambda a, b: bytes([3]) + bytes([a[0]]) + a[1] + bytes([b[0]]) + b[1]
    w("ok-matmul", mm((0, S(2, 3)), (0, S(3, 4))))
    w("ok-matmul-f64-batch", mm((1, S(2, 2, 3)), (1, S(2, 3, 2))))
    w("ok-matmul-broadcast", mm((0, S(4, 2, 3)), (0, S(3, 5))))
    w("ok-matmul-k-zero", mm((0, S(2, 0)), (0, S(0, 3))))
    w("bad-matmul-inner", mm((0, S(2, 3)), (0, S(4, 2))))
    w("bad-matmul-batch", mm((0, S(2, 2, 3)), (0, S(3, 3, 2))))
    w("ok-matmul-1d", mm((0, S(3)), (0, S(3))))  # torch.matmul's dot: a 0-d result
    w("ok-matmul-4d", mm((0, S(1, 1, 2, 2)), (0, S(2, 2))))
    w("ok-matmul-vector-batch", mm((1, S(3)), (1, S(2, 3, 2))))
    w("ok-matmul-batches-broadcast", mm((0, S(2, 1, 2, 3)), (0, S(3, 3, 2))))
    w("bad-matmul-0d", mm((0, S()), (0, S(2, 2))))
    w("bad-matmul-batches", mm((0, S(2, 2, 2, 3)), (0, S(3, 3, 2))))
    # batches that broadcast to more matrices than fit, and to none (a batch dimension of 0)
    w("bad-matmul-batches-huge", mm((0, S(2**62, 1, 0, 3)), (0, S(4, 3, 2))))
    w("ok-matmul-batches-zero", mm((0, S(2**62, 0, 1, 3)), (0, S(1, 3, 2))))
    w("bad-matmul-i32", mm((0xe2, S(2, 2)), (0xe2, S(2, 2))))
    w("ok-matmul-f16", mm((0xe6, S(2, 3)), (0xe6, S(3, 2))))
    w("ok-matmul-bf16", mm((0xe7, S(2, 3)), (0xe7, S(3, 2))))
    w("bad-matmul-f32-f64", mm((0xe4, S(2, 2)), (0xe5, S(2, 2))))
    w("bad-matmul-zero-huge-batch", mm((0, S(2**62, 2**62, 0)), (0, S(0, 2))))
    w("bad-matmul-zero-huge-m", mm((0, S(2**40, 0)), (0, S(0, 3))))
    # mode 4: reductions and transpose. op byte (0 sum_dim 1 mean_dim 2 max_dim 3 argmax_dim
    # 4 sum 5 transpose), seed byte (dtype = seed % 8), shape, dim and dim1 bytes (b % 20 - 10
    # below 0xf8), keepdim byte.
    red = lambda op, dt, s, dim, dim1=0, keep=0: (bytes([4, op, dt]) + s +
                                                  bytes([(dim + 10) % 20, (dim1 + 10) % 20, keep]))
    w("ok-sum-dim", red(0, I32, S(2, 3), 1))
    w("ok-sum-dim-keepdim", red(0, F32, S(2, 3, 4), -2, keep=1))
    w("ok-mean-dim", red(1, F64, S(3, 2), 0))
    w("ok-max-dim", red(2, U8, S(2, 3), -1))
    w("ok-argmax-dim", red(3, I64, S(4, 2), 0, keep=1))
    w("ok-sum-whole", red(4, BOOL, S(2, 2, 2), 0))
    w("ok-transpose", red(5, F32, S(2, 3, 4), 0, -1))
    w("ok-transpose-scalar", red(5, I32, S(), -1, 0))
    w("ok-sum-dim-scalar", red(0, F32, S(), 0))
    w("bad-max-empty-of-empty", red(2, F32, S(0, 0), 1))  # refused, as PyTorch and NumPy
    w("ok-sum-zero-dim", red(0, F32, S(2, 0), 1))
    w("bad-sum-dim-range", red(0, F32, S(2, 3), 2))
    w("bad-sum-dim-range-negative", red(0, F32, S(2, 3), -3))
    w("bad-sum-dim-int-min", bytes([4, 0, F32]) + S(2) + bytes([0xf8, 0, 0]))
    w("bad-mean-int", red(1, I32, S(2), 0))
    w("bad-max-empty", red(2, F32, S(2, 0), 1))
    w("bad-argmax-empty", red(3, F32, S(0, 3), 0))
    w("bad-transpose-range", red(5, F32, S(2, 3), 0, 2))
    w("bad-sum-dim-zero-huge", red(0, F32, S(2**62, 2**62, 0), 2))
    w("ok-sum-dim-zero-huge", red(0, F32, S(2**62, 0, 2**62), 2))
    w("ok-transpose-zero-huge", red(5, F32, S(0, 2**62, 2**62), 0, 2))
    # mode 5: clt_linear. a byte (odd: with a bias), then x, weight (and bias) as for matmul.
    lin = lambda *ops: (bytes([5, 1 if len(ops) == 3 else 0]) +
                        b"".join(bytes([sd]) + sh for sd, sh in ops))
    w("ok-linear", lin((0, S(2, 3)), (0, S(4, 3)), (0, S(4))))
    w("ok-linear-batch-no-bias", lin((1, S(2, 2, 3)), (1, S(5, 3))))
    w("ok-linear-empty-batch", lin((0, S(0, 3)), (0, S(2, 3)), (0, S(2))))
    w("bad-linear-in", lin((0, S(2, 3)), (0, S(4, 2)), (0, S(4))))
    w("bad-linear-bias", lin((0, S(2, 3)), (0, S(4, 3)), (0, S(3))))
    w("bad-linear-1d", lin((0, S(3)), (0, S(4, 3))))
    w("bad-linear-i32", lin((0xe2, S(2, 3)), (0xe2, S(4, 3))))
    w("bad-linear-huge-out", lin((0, S(2, 0)), (0, S(2**62, 0))))


safetensors()
npy_files()
device_names()
shapes()
