"""The allocation hook: counts what CPython's allocators are asked for (Go's
``runtime.MemStats.Mallocs`` / ``TotalAlloc``).

A small C file, compiled on first use with the system C compiler (cached in the temp
directory, keyed by its source and the Python build) and loaded with ``ctypes``, wraps
CPython's three allocator domains with ``PyMem_SetAllocator`` (as tracemalloc does) and
counts every ``malloc``/``calloc``/``realloc`` and the bytes asked for. A ``realloc``
counts as one allocation of its new size; RAW calls made on behalf of pymalloc (big
blocks) are not counted twice. tracemalloc cannot give these figures: it tracks only
live blocks. Without a C compiler :attr:`AllocCounter.available` is False and the
figures are reported as null.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

__all__ = ["AllocCounter", "alloc_counter"]

_ALLOC_SOURCE = r"""
#include <Python.h>
#include <stdint.h>

/* Wraps CPython's allocator domains (as tracemalloc does) and counts what is asked
   of them. RAW calls made while a MEM/OBJ call is in progress (pymalloc falling back
   to PyMem_RawMalloc for big blocks) are not counted twice. */
typedef struct { PyMemAllocatorEx orig; int raw; } hook_t;
static hook_t hooks[3];
static uint64_t n_allocs, n_bytes;
static __thread int depth;
static int installed;
static const PyMemAllocatorDomain domains[3] = {
    PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};

static inline void count(int raw, size_t size) {
    if (raw && depth) return;
    __atomic_fetch_add(&n_allocs, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_bytes, (uint64_t)size, __ATOMIC_RELAXED);
}
static void *h_malloc(void *ctx, size_t size) {
    hook_t *h = (hook_t *)ctx; void *p; count(h->raw, size);
    depth++; p = h->orig.malloc(h->orig.ctx, size); depth--; return p;
}
static void *h_calloc(void *ctx, size_t n, size_t size) {
    hook_t *h = (hook_t *)ctx; void *p; count(h->raw, n * size);
    depth++; p = h->orig.calloc(h->orig.ctx, n, size); depth--; return p;
}
static void *h_realloc(void *ctx, void *ptr, size_t size) {
    hook_t *h = (hook_t *)ctx; void *p; count(h->raw, size);
    depth++; p = h->orig.realloc(h->orig.ctx, ptr, size); depth--; return p;
}
static void h_free(void *ctx, void *ptr) {
    hook_t *h = (hook_t *)ctx; depth++; h->orig.free(h->orig.ctx, ptr); depth--;
}
int bench_alloc_start(void) {
    if (installed) return -1;
    for (int i = 0; i < 3; i++) {
        PyMemAllocatorEx a;
        PyMem_GetAllocator(domains[i], &hooks[i].orig);
        hooks[i].raw = domains[i] == PYMEM_DOMAIN_RAW;
        a.ctx = &hooks[i]; a.malloc = h_malloc; a.calloc = h_calloc;
        a.realloc = h_realloc; a.free = h_free;
        PyMem_SetAllocator(domains[i], &a);
    }
    installed = 1;
    return 0;
}
int bench_alloc_stop(void) {
    if (!installed) return -1;
    for (int i = 2; i >= 0; i--) PyMem_SetAllocator(domains[i], &hooks[i].orig);
    installed = 0;
    return 0;
}
void bench_alloc_read(uint64_t *out) {
    out[0] = __atomic_load_n(&n_allocs, __ATOMIC_RELAXED);
    out[1] = __atomic_load_n(&n_bytes, __ATOMIC_RELAXED);
}
"""


class AllocCounter:
    """Counts allocations made through CPython's allocators while started."""

    def __init__(self) -> None:
        self._lib: ctypes.PyDLL | None = None
        self.why_unavailable = ""
        self._start: tuple[int, int] = (0, 0)
        try:
            self._lib = ctypes.PyDLL(str(self._build()))
        except (OSError, subprocess.CalledProcessError) as exc:
            self.why_unavailable = f"cannot build the allocation counter: {exc}"

    @staticmethod
    def _build() -> Path:
        compiler = sysconfig.get_config_var("CC") or "cc"
        compiler = compiler.split()[0]
        if shutil.which(compiler) is None:
            compiler = "cc"
        include = sysconfig.get_paths()["include"]
        key = hashlib.sha256(
            (_ALLOC_SOURCE + sys.version + include + str(os.getuid())).encode()
        ).hexdigest()[:16]
        so = Path(tempfile.gettempdir()) / f"trio_h2t_bench_alloc_{key}.so"
        if not so.exists():
            with tempfile.TemporaryDirectory() as tmp:
                src = Path(tmp) / "alloc.c"
                src.write_text(_ALLOC_SOURCE)
                out = Path(tmp) / "alloc.so"
                subprocess.run(
                    [compiler, "-O2", "-shared", "-fPIC", "-I", include, "-o", str(out), str(src)],
                    check=True,
                    capture_output=True,
                )
                os.replace(out, so)  # atomic: concurrent builders do not clash
        return so

    @property
    def available(self) -> bool:
        return self._lib is not None

    def _read(self) -> tuple[int, int]:
        assert self._lib is not None
        buf = (ctypes.c_uint64 * 2)()
        self._lib.bench_alloc_read(buf)
        return int(buf[0]), int(buf[1])

    def start(self) -> None:
        if self._lib is None:
            return
        self._lib.bench_alloc_start()
        self._start = self._read()

    def stop(self) -> tuple[int, int] | None:
        """Stop counting; return (allocations, bytes) since :meth:`start`."""
        if self._lib is None:
            return None
        end = self._read()
        self._lib.bench_alloc_stop()
        return end[0] - self._start[0], end[1] - self._start[1]


_alloc_counter: AllocCounter | None = None


def alloc_counter() -> AllocCounter:
    """The process's one :class:`AllocCounter` (built on first use)."""
    global _alloc_counter
    if _alloc_counter is None:
        _alloc_counter = AllocCounter()
    return _alloc_counter
