"""Capability queries return what Horovod's return (issue 14 item 8): nccl_built() is
the NCCL version as an int (NCCL_VERSION_CODE), 0 without NCCL; the others are bools."""

import pytest

import kolo
import kolo.torch as hvd

BOOLS = ("mpi_built", "mpi_enabled", "mpi_threads_supported", "gloo_built", "gloo_enabled",
         "cuda_built", "rocm_built", "ddl_built", "ccl_built", "is_homogeneous",
         "is_initialized")


def test_nccl_built_is_the_nccl_version_code_or_zero():
    v = hvd.nccl_built()
    assert type(v) is int
    headers = kolo.build_info()["build"].get("nccl_headers")
    if not headers:
        assert v == 0
        return
    major, minor, patch = (int(p) for p in headers.split(".")[:3])
    assert v == major * (10000 if (major, minor) >= (2, 9) else 1000) + minor * 100 + patch
    assert v > 2000  # what `if hvd.nccl_built() >= 2xxx` in Horovod programs expects


def test_nccl_version_code_encoding():
    assert hvd._nccl_version_code("2.28.9") == 22809
    assert hvd._nccl_version_code("2.9.6") == 20906
    assert hvd._nccl_version_code("2.8.4") == 2804


@pytest.mark.parametrize("name", BOOLS)
def test_the_other_queries_are_bools(name):
    assert type(getattr(hvd, name)()) is bool, name


def test_values():
    assert hvd.mpi_built() and hvd.mpi_enabled() and hvd.mpi_threads_supported()
    assert not hvd.gloo_built() and not hvd.gloo_enabled()
    assert not hvd.rocm_built() and not hvd.ddl_built() and not hvd.ccl_built()
    assert hvd.cuda_built() == (hvd.nccl_built() != 0)
