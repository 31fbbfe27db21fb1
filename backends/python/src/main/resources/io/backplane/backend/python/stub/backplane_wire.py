"""Backplane python stub: the protocol's constants and struct layouts (Wire.java is the host's side).

Every number here must equal its Java twin: frame types, control-block word indices, datatype and
error-code ordinals. Only constants, structs and tiny helpers live here, so that every other stub
module can import them without importing each other.
"""

import struct

import numpy as np

# Frame types, host -> stub
F_INIT, F_PING, F_WAKE, F_ACK, F_FINALIZE = 1, 2, 3, 4, 5
# Frame types, stub -> host
F_HELLO, F_INIT_OK, F_INIT_ERR, F_PONG, F_WAKE_HOST, F_RESPONSE, F_LOG, F_FINALIZED = 20, 21, 22, 23, 24, 25, 26, 27

# Control block words (int64 each) at the start of host chunk 0.
W_MAGIC, W_TO_STUB_SEQ, W_MSG_CHUNK, W_MSG_OFF, W_MSG_LEN, W_STUB_WAITING = 0, 1, 2, 3, 4, 5
W_REPLY_SEQ, W_REPLY_CHUNK, W_REPLY_OFF, W_REPLY_LEN, W_HOST_WAITING, W_REPLY_EXEC = 6, 7, 8, 9, 10, 11
W_HOST_FUTEX, W_STUB_FUTEX, W_STUB_SPIN_NS = 12, 13, 14
# Stub-written counters (diagnostics and tests): how often the main thread went to sleep for an
# execution, and how often a blocking call of that sleep returned.
W_STUB_SLEEPS, W_STUB_WAKEUPS = 15, 16
WAITING_SOCKET, WAITING_FUTEX = 1, 2
# How much longer than spin_us a side spins after it had to wake the other (HandOff.AFTER_WAKE_SPIN_FACTOR).
AFTER_WAKE_SPIN_FACTOR = 4
MAGIC = 0x42504C4E50594731  # "BPLNPYG1"

# Wire datatype codes: io.backplane.spi.DataType ordinals.
WIRE_TO_NUMPY = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
                 np.float16, np.uint16, np.float32, np.float64, np.object_]
WIRE_BYTES = 13
WIRE_BF16 = 10
WIRE_DTYPES = [np.dtype(t) for t in WIRE_TO_NUMPY]
NUMPY_TO_WIRE = {np.dtype(t): i for i, t in enumerate(WIRE_TO_NUMPY) if i not in (10, WIRE_BYTES)}

# pb_utils.TritonError code -> wire error code (io.backplane.spi.ErrorCode ordinal)
EC_INVALID, EC_NOT_FOUND, EC_UNAVAILABLE, EC_EXHAUSTED, EC_CANCELLED, EC_DEADLINE, EC_UNSUPPORTED, EC_TOO_LARGE, \
    EC_INTERNAL, EC_UNKNOWN, EC_ALREADY_EXISTS = range(11)
TRITON_TO_WIRE_ERROR = {0: EC_UNKNOWN, 1: EC_INTERNAL, 2: EC_NOT_FOUND, 3: EC_INVALID, 4: EC_UNAVAILABLE,
                        5: EC_UNSUPPORTED, 6: EC_ALREADY_EXISTS, 7: EC_CANCELLED}

u32 = struct.Struct("<I")
u64 = struct.Struct("<Q")
u16 = struct.Struct("<H")
frame_head = struct.Struct("<IB")
exec_head = struct.Struct("<IQH")
req_mid = struct.Struct("<IQH")
in_tail = struct.Struct("<IQQ")
out_tail = struct.Struct("<IQQ")
result_head = struct.Struct("<IQH")
_shape_structs = [struct.Struct("<%dq" % n) for n in range(9)]


def shape_struct(ndim):
    """The struct of a shape of ndim int64 dimensions (cached for the common ranks)."""
    return _shape_structs[ndim] if ndim < len(_shape_structs) else struct.Struct("<%dq" % ndim)


class ProtocolError(Exception):
    pass


def w_str(out, s):
    b = s.encode("utf-8")
    out += u32.pack(len(b))
    out += b
