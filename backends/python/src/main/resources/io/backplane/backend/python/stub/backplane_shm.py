"""Backplane python stub: its side of the instance's shared-memory region (SharedRegion.java is the host's).

The region is chunk files in /dev/shm. ``<prefix>-h<k>``: written by the host (chunk 0 starts with
the control block, then execution messages and inputs), mapped here on first use; the stub writes
only its own words of the control block. ``<prefix>-s<k>``: made and written by the stub (outputs,
results, BLS inputs), read by the host. The stub's chunks are one arena that grows by new chunks up
to shm_max_bytes, so nothing the host has mapped is ever remapped or moved.
"""

import bisect
import errno
import mmap
import os
import sys
import threading

import numpy as np

import triton_python_backend_utils as pb_utils
from backplane_wire import ProtocolError

ALIGN = 64
SHM_DIR = "/dev/shm"


class Futex:
    """Shared (cross-process) futexes on 32-bit words of the control block, through libc's syscall()."""

    def __init__(self, mm):
        import ctypes
        import platform
        nr = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
        if nr is None or not sys.platform.startswith("linux"):
            raise OSError("no futex on %s/%s" % (sys.platform, platform.machine()))
        fn = ctypes.CDLL(None, use_errno=True).syscall  # CDLL: the GIL is released during the call
        fn.restype = ctypes.c_long
        self._fn = fn
        self._nr = ctypes.c_long(nr)
        self._c_int = ctypes.c_int
        self._anchor = ctypes.c_char.from_buffer(mm)  # keeps the mapping's address valid
        self._base = ctypes.addressof(self._anchor)
        self._all = ctypes.c_int(0x7FFFFFFF)

    def addr(self, word):
        import ctypes
        return ctypes.c_void_p(self._base + 8 * word)  # the low half of a little-endian int64 word

    def wait(self, addr, expected):
        """Sleeps while the word's low 32 bits equal `expected`' low 32 bits (spurious returns allowed)."""
        self._fn(self._nr, addr, 0, self._c_int(expected & 0xFFFFFFFF), None)

    def wake(self, addr):
        self._fn(self._nr, addr, 1, self._all, None)


class HostChunks:
    """The host's chunks, each mapped on first use; every index, offset and length is checked before use."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.maps = {}  # k -> (mmap, uint8 view)

    def chunk(self, k):
        v = self.maps.get(k)
        if v is None:
            if k < 0 or k > 4096:
                raise ProtocolError("host chunk index %d out of range" % k)
            path = os.path.join(SHM_DIR, "%s-h%d" % (self.prefix, k))
            fd = os.open(path, os.O_RDWR)
            try:
                size = os.fstat(fd).st_size
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            v = (mm, np.frombuffer(mm, dtype=np.uint8))
            self.maps[k] = v
        return v[1]

    def slice(self, k, off, n):
        u8 = self.chunk(k)
        if off < 0 or n < 0 or off + n > u8.shape[0]:
            raise ProtocolError("host offset %d+%d outside chunk %d of %d bytes" % (off, n, k, u8.shape[0]))
        return u8[off:off + n]


def _reserve(fd, size):
    """Makes the file system really hold the file's pages (a tmpfs grants a sparse file more than it has
    room for, and a write into such a mapping kills the stub with SIGBUS); no room raises OSError (ENOSPC)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return  # a file system without fallocate: keep the sparse file, as before
        raise


def _shm_space():
    try:
        st = os.statvfs(SHM_DIR)
        return "%d of %d bytes free" % (st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize)
    except OSError as e:
        return "free space unknown: %s" % e


class Arena:
    """The stub's own shared-memory chunks (outputs and results), first-fit with coalescing."""

    def __init__(self, prefix, limit, initial):
        self.prefix = prefix
        self.limit = limit
        self.initial = initial
        self.lock = threading.Lock()
        self.chunks = []  # (mmap, uint8 view, size)
        self.free = []  # per chunk: sorted list of [offset, size]
        self.total = 0

    def _grow(self, need):
        size = max(self.initial, need, 2 * self.chunks[-1][2] if self.chunks else 0)
        size = (size + 4095) & ~4095
        if self.total + size > self.limit:
            size = ((need + 4095) & ~4095)
            if self.total + size > self.limit:
                raise pb_utils.TritonModelException(self._cannot_grow(
                    self.total + size, "the outputs need %d bytes of shared memory but the instance's limit of %d bytes "
                    "(shm_max_bytes) is reached (%d in use); raise shm_max_bytes" % (need, self.limit, self.total)))
        k = len(self.chunks)
        path = os.path.join(SHM_DIR, "%s-s%d" % (self.prefix, k))
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
                _reserve(fd, size)
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        except OSError as e:
            try:
                os.unlink(path)
            except OSError:
                pass
            raise pb_utils.TritonModelException(self._cannot_grow(
                self.total + size, "cannot create shared-memory file %s of %d bytes: %s; %s (%s) may be full: in a "
                "container, give it more room (docker run --shm-size), or lower shm_max_bytes so that requests this large "
                "are refused before they reach it" % (path, size, e, SHM_DIR, _shm_space())))
        self.chunks.append((mm, np.frombuffer(mm, dtype=np.uint8), size))
        self.free.append([[0, size]])
        self.total += size

    def _cannot_grow(self, to_bytes, hint):
        """Triton's sentence for a pool that cannot grow, then what Backplane knows of why and what to do."""
        return ("Failed to increase the shared memory pool size for key '%s' to %d bytes. (Backplane: %s)"
                % (self.prefix, to_bytes, hint))

    def alloc(self, n):
        n = max(ALIGN, (n + ALIGN - 1) & ~(ALIGN - 1))
        with self.lock:
            for _ in range(2):
                for c, fl in enumerate(self.free):
                    for i, blk in enumerate(fl):
                        if blk[1] >= n:
                            off = blk[0]
                            if blk[1] == n:
                                del fl[i]
                            else:
                                blk[0] += n
                                blk[1] -= n
                            return c, off, n
                self._grow(n)
        raise pb_utils.TritonModelException("shared-memory allocation of %d bytes failed" % n)

    def release(self, blocks):
        with self.lock:
            for c, off, n in blocks:
                fl = self.free[c]
                i = bisect.bisect_left(fl, [off, 0])
                fl.insert(i, [off, n])
                if i + 1 < len(fl) and fl[i][0] + fl[i][1] == fl[i + 1][0]:
                    fl[i][1] += fl[i + 1][1]
                    del fl[i + 1]
                if i > 0 and fl[i - 1][0] + fl[i - 1][1] == fl[i][0]:
                    fl[i - 1][1] += fl[i][1]
                    del fl[i]
