"""Backplane python stub: the control socket to the host, and the stub's half of liveness (ControlChannel.java).

Frames are u32 length, u8 type, payload. Any thread queues a frame and tries a non-blocking send;
what the socket cannot take now the writer thread sends when it becomes writable. No thread holds
a lock across a blocking write, and the reader never waits to write (DESIGN P9), so a PONG or an
ACK never waits behind a model's output. The reader thread answers heartbeats itself, so a long
execute() does not look like a dead stub (the host's execute watchdog judges that). The stub ends
itself when the host goes: end of file on the socket or on its stdin pipe.
"""

import collections
import os
import select
import threading
import time

from backplane_wire import F_PING, F_PONG, ProtocolError, frame_head


class Channel:
    def __init__(self, sock):
        self.sock = sock
        self.out = collections.deque()
        self.out_head = None
        self.out_lock = threading.Lock()
        self.out_ready = threading.Event()

    def send_frame(self, ftype, payload=b""):
        """Queues a frame and sends what the socket takes now; never blocks."""
        self.out.append(frame_head.pack(len(payload) + 1, ftype) + payload)
        if not self.flush():
            self.out_ready.set()

    def flush(self):
        """Sends queued frames without blocking; False when the socket is full."""
        while self.out or self.out_head is not None:
            if not self.out_lock.acquire(False):
                return True  # the holder looks at the queue again after releasing
            try:
                full = self._drain()
            finally:
                self.out_lock.release()
            if full:
                return False
        return True

    def _drain(self):
        while True:
            buf = self.out_head
            if buf is None:
                if not self.out:
                    return False
                if len(self.out) == 1:
                    buf = memoryview(self.out.popleft())
                else:  # every frame queued so far in one send
                    parts = []
                    while self.out and len(parts) < 256:
                        parts.append(self.out.popleft())
                    buf = memoryview(b"".join(parts))
            try:
                n = self.sock.send(buf)
            except (BlockingIOError, InterruptedError):
                n = 0
            if n < len(buf):
                self.out_head = buf[n:]
                return True
            self.out_head = None

    def flush_before_exit(self, seconds=5.0):
        """Sends what is queued (the last frames before the process exits), for at most `seconds`."""
        deadline = time.monotonic() + seconds
        try:
            while not self.flush():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                select.select([], [self.sock], [], left)
        except OSError:
            pass

    def writer_loop(self):
        try:
            while True:
                self.out_ready.wait()
                self.out_ready.clear()
                while not self.flush():
                    select.select([], [self.sock], [])
        except OSError:
            os._exit(3)  # the connection is gone: the host is gone or gave up on us

    def reader_loop(self, on_frame):
        """Reads frames until the host closes the connection; PING here, every other frame to on_frame(type, payload)."""
        buf = bytearray()
        sock = self.sock
        while True:
            try:
                select.select([sock], [], [])
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                os._exit(3)  # the host closed the connection: it is gone or gave up on us
            buf += data
            while len(buf) >= 5:
                (n, ftype) = frame_head.unpack_from(buf, 0)
                if len(buf) < 4 + n:
                    break
                payload = bytes(buf[5:4 + n])
                del buf[:4 + n]
                if ftype == F_PING:
                    self.send_frame(F_PONG, payload)
                else:
                    on_frame(ftype, payload)


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        select.select([sock], [], [])
        try:
            part = sock.recv(n - len(data))
        except (BlockingIOError, InterruptedError):
            continue
        if not part:
            raise ProtocolError("host closed the connection during start-up")
        data += part
    return data


def recv_frame(sock):
    """One frame, read before the reader thread runs (the start-up handshake)."""
    (n, ftype) = frame_head.unpack(recv_exactly(sock, 5))
    return ftype, recv_exactly(sock, n - 1)


def watch_parent():
    # stdin is a pipe from the host; it reaches EOF when the host process dies (even on kill -9).
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(4)
