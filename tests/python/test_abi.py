"""kolo._lib copies the C ABI by hand (enum values, function signatures): these tests
read include/kolo/kolo.h and ask the loaded library, so a value that drifts on either
side fails here rather than as a wrong dtype or a misnamed error at run time."""

import os
import re

import pytest

import kolo
from kolo import _core, _lib
from conftest import REPO

HEADER = os.path.join(REPO, "include", "kolo", "kolo.h")

# The enums of kolo.h that kolo._lib copies (KOLO_X there is _lib.X here).
ENUMS = ("kolo_status_t", "kolo_dtype_t", "kolo_op_t", "kolo_device_kind_t")


def header_text():
    with open(HEADER) as f:
        return f.read()


def header_enum(name):
    """{"KOLO_X": value} for `typedef enum name {...} name;` in kolo.h."""
    body = re.search(r"typedef enum %s \{(.*?)\} %s;" % (name, name), header_text(), re.S)
    assert body, "no enum %s in %s" % (name, HEADER)
    text = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    values = {}
    for entry in text.split(","):
        entry = entry.strip()
        if re.match(r"KOLO_\w+_M(IN|AX)_ENUM_\b", entry):
            continue  # a sentinel, not a value (kolo.h, Note [Enum ranges])
        if entry:
            m = re.fullmatch(r"(KOLO_\w+)\s*=\s*(-?\d+)", entry)
            assert m, "%s: cannot read enumerator %r (give every value explicitly)" % (name, entry)
            values[m.group(1)] = int(m.group(2))
    assert values, name
    return values


def python_name(c_name):
    return c_name[len("KOLO_"):]


@pytest.mark.parametrize("enum", ENUMS)
def test_every_enumerator_of_kolo_h_is_in_lib_with_its_value(enum):
    for c_name, value in header_enum(enum).items():
        assert hasattr(_lib, python_name(c_name)), "kolo._lib lacks %s (%s)" % (c_name, enum)
        assert getattr(_lib, python_name(c_name)) == value, \
            "kolo._lib.%s is %d, kolo.h says %s = %d" % (
                python_name(c_name), getattr(_lib, python_name(c_name)), c_name, value)


def test_every_enum_value_in_lib_is_in_kolo_h():
    known = {}
    for enum in ENUMS:
        known.update(header_enum(enum))
    pattern = re.compile(r"^(OK|IN_PROGRESS|ERR_\w+|OP_\w+|DEVICE_\w+|U?INT\d+|B?FLOAT\d+|BOOL)$")
    names = [n for n in vars(_lib) if pattern.match(n)]
    assert len(names) >= len(known)
    for name in names:
        assert "KOLO_" + name in known, "kolo._lib.%s is not in kolo.h" % name
        assert getattr(_lib, name) == known["KOLO_" + name], name


def test_the_library_names_every_status_as_kolo_h_does():
    for c_name, value in header_enum("kolo_status_t").items():
        assert _core.status_name(value) == c_name
    assert _core.status_name(max(header_enum("kolo_status_t").values()) + 1) == "KOLO_ERR_UNKNOWN"


def test_every_error_status_has_its_exception():
    for c_name, value in header_enum("kolo_status_t").items():
        if c_name.startswith("KOLO_ERR_"):
            assert value in _core._EXCEPTIONS, "no Python exception for %s" % c_name


def test_the_library_knows_every_dtype_of_kolo_h():
    sizes = {"BOOL": 1, "UINT8": 1, "INT8": 1}
    for c_name, value in header_enum("kolo_dtype_t").items():
        bits = re.search(r"(\d+)$", c_name)
        want = sizes.get(python_name(c_name)) or int(bits.group(1)) // 8
        assert _lib.load().kolo_dtype_size(value) == want, c_name


def test_every_function_of_kolo_h_has_a_signature():
    declared = set(re.findall(r"KOLO_API\s+[\w\s\*]*?\b(kolo_\w+)\s*\(", header_text()))
    assert "kolo_init" in declared and "kolo_handle_release" in declared
    assert declared == set(_lib._SIGNATURES), (
        "in kolo.h only: %s; in _lib only: %s" % (sorted(declared - set(_lib._SIGNATURES)),
                                                  sorted(set(_lib._SIGNATURES) - declared)))
    for name in declared:
        assert kolo._lib.load().has(name), "%s is not exported by %s" % (name, kolo.library_path())
