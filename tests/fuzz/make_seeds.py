#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (tests/fuzz/corpus/<target>/seed-*).

Deterministic: running it again gives the same files. Each seed starts with the
mode byte its target reads first (see the target's header). The wire seeds are
messages in the layout src/core/wire.h documents. Files the fuzzer found and
kept (tests/fuzz/corpus/<target>/<sha1>) are left as they are.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed-" + name), "wb") as f:
        f.write(data)


def wire_item(name, collective=0, dtype=8, op=0, device=0, count=4, pre=1.0, post=1.0,
              root=-1, row_count=1, send_rows=(), member_counts=(), names_hash=0, shapes=(),
              member_row_counts=()):
    b = struct.pack("<I", len(name)) + name
    b += struct.pack("<BiiiqddiqI", collective, dtype, op, device, count, pre, post, root,
                     row_count, len(send_rows))
    b += b"".join(struct.pack("<q", s) for s in send_rows)
    b += struct.pack("<I", len(member_counts))
    b += b"".join(struct.pack("<q", s) for s in member_counts)
    b += struct.pack("<Q", names_hash) + struct.pack("<I", len(shapes))
    b += b"".join(struct.pack("<q", s) for s in shapes) + struct.pack("<I", len(member_row_counts))
    return b + b"".join(struct.pack("<q", s) for s in member_row_counts)


def wire_header(kind, count):
    return struct.pack("<IBBI", 0x4F4C4F4B, 4, kind, count)  # wire version 4


def wire_seeds():
    write("wire", "requests-empty", b"\0" + wire_header(1, 0))
    write("wire", "requests-two", b"\0" + wire_header(1, 2) + wire_item(b"layer1/grad", shapes=(2, 2, 2)) +
          wire_item(b"a2a", collective=3, dtype=5, count=6, row_count=2, send_rows=(1, 2)))
    write("wire", "requests-group", b"\0" + wire_header(1, 1) +
          wire_item(b"group", collective=8, count=10, member_counts=(4, 6),
                    member_row_counts=(2, 3), shapes=(2, 2, 2, 2, 2, 3), names_hash=7))
    resp = (wire_item(b"w", collective=1, count=8, row_count=4) + struct.pack("<iI", 0, 0) +
            struct.pack("<I", 2) + struct.pack("<qq", 1, 1) + struct.pack("<Ii", 0, -1))
    resp += (wire_item(b"x") + struct.pack("<iI", 6, 9) + b"mismatch!" +
             struct.pack("<I", 0) + struct.pack("<Ii", 0, -1))
    write("wire", "responses-two", b"\0" + wire_header(2, 2) + resp)
    write("wire", "truncated", b"\0" + wire_header(1, 1) + wire_item(b"t")[:-3])
    rng = random.Random(13)
    for i in range(4):
        write("wire", "requests-random-%d" % i,
              bytes([1]) + bytes(rng.randrange(256) for _ in range(40 + 60 * i)))
        write("wire", "responses-random-%d" % i,
              bytes([3]) + bytes(rng.randrange(256) for _ in range(40 + 80 * i)))


def knobs_seeds():
    texts = [b"64M", b" 1KiB\t", b"512kB", b"0", b"1b", b"1Bi", b"9223372036854775807",
             b"8589934591G", b"8589934592G", b"18446744073709551616", b"-1", b"0x10", b"1e3",
             b"true", b" OFF ", b"Warning", b"fatal", b"", b"\xff\x00"]
    for i, t in enumerate(texts):
        write("knobs", "text-%02d" % i, b"\0" + t)
    rng = random.Random(14)
    for i in range(6):
        write("knobs", "config-%d" % i,
              bytes([1]) + bytes(rng.randrange(256) for _ in range(30 + 40 * i)))
    # KOLO_FUSION_THRESHOLD (knob 0) = "4G", KOLO_CYCLE_TIME_MS (knob 1) = "2.5".
    pick = lambda k: struct.pack("<Q", k)
    write("knobs", "config-named", bytes([1]) + struct.pack("<Q", 2) + pick(0) + b"\x02" +
          b"4G" + pick(1) + b"\x03" + b"2.5")


def planner_seeds():
    rng = random.Random(15)
    for i in range(8):
        write("fusion_planner", "random-%d" % i,
              bytes(rng.randrange(256) for _ in range(8 + 50 * i)))
    # Threshold 100 (kind 100: a u16 follows), one class, 5 items of 40 bytes.
    items = b"".join(b"\x00" + struct.pack("<H", 40) + b"\x00" for _ in range(5))
    write("fusion_planner", "forty-by-five", bytes([100]) + struct.pack("<H", 100) +
          bytes([0, 5]) + items)


def schedule_seeds():
    rng = random.Random(16)
    for i in range(8):
        write("schedule", "random-%d" % i, bytes(rng.randrange(256) for _ in range(8 + 4 * i)))
    # 3 ranks (in_range(1, 64) of 2), count 10, segments of 3.
    write("schedule", "three-ranks", struct.pack("<Q", 2) + bytes([0]) + struct.pack("<Q", 10) +
          bytes([0]) + struct.pack("<Q", 2))


def frame(kind, payload, sender=0, generation=0, flags=0, length=None):
    """A socket-world frame (transports/socket/frame.h): the 24-byte header, then the payload."""
    n = len(payload) if length is None else length
    return struct.pack("<IBBHiIQ", 0x31736F6B, 1, kind, flags, sender, n, generation) + payload


def lstr(b):
    return struct.pack("<I", len(b)) + b


def frame_seeds():
    hello = bytes([0]) + lstr(b"job-token") + struct.pack("<ii", 4, 1234) + lstr(b"node-a")
    write("frame", "hello", b"\0" + frame(1, hello, sender=2, generation=3))
    write("frame", "hello-store", b"\0" + frame(1, bytes([1]) + hello[1:], sender=-1))
    write("frame", "reject", b"\0" + frame(2, b"rank 1 has world size 4, rank 0 has 2"))
    write("frame", "store-set", b"\0" + frame(3, bytes([1]) + lstr(b"kolo/g0/w0/rank/1") +
                                              lstr(b"size=2\nport=4000\n")))
    write("frame", "store-wait", b"\0" + frame(3, bytes([3]) + struct.pack("<I", 2) + lstr(b"a") +
                                               lstr(b"b")))
    write("frame", "store-add", b"\0" + frame(3, bytes([4]) + lstr(b"n") + struct.pack("<q", -5)))
    write("frame", "store-cas", b"\0" + frame(3, bytes([5]) + lstr(b"k") + lstr(b"") + lstr(b"v")))
    write("frame", "store-reply-value", b"\0" + frame(4, bytes([0]) + lstr(b"value")))
    write("frame", "store-reply-number", b"\0" + frame(4, bytes([0]) + struct.pack("<q", 7)))
    write("frame", "store-reply-error", b"\0" + frame(4, bytes([2]) + lstr(b"not an integer")))
    write("frame", "heartbeat", b"\0" + frame(5, b""))
    write("frame", "bye", b"\0" + frame(6, b""))
    write("frame", "verdict", b"\0" + frame(7, b"a peer failed: rank 3 closed its connection"))
    write("frame", "ring", b"\0" + frame(8, struct.pack("<IQ", 0, 41)))
    write("frame", "control", b"\0" + frame(9, struct.pack("<IQ", 0, (5 << 16) | 1) + b"\xff" * 16))
    write("frame", "eager", b"\0" + frame(10, struct.pack("<Ii", 0, 0x6B72) + b"\x01\x02\x03\x04"))
    write("frame", "rts", b"\0" + frame(11, struct.pack("<IiQQ", 1, 7, 9, 1 << 20)))
    write("frame", "cts", b"\0" + frame(12, struct.pack("<QQ", 9, 12)))
    write("frame", "data", b"\0" + frame(13, struct.pack("<QQ", 12, 0) + b"\x00" * 64))
    write("frame", "truncated-payload", b"\0" + frame(9, b"\x00" * 20, length=40))
    write("frame", "oversized", b"\0" + frame(1, b"", length=1 << 20))
    write("frame", "bad-flags", b"\0" + frame(5, b"", flags=1))
    write("frame", "garbage", b"\0" + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    rng = random.Random(17)
    for i in range(4):
        write("frame", "structured-%d" % i,
              bytes([1]) + bytes(rng.randrange(256) for _ in range(40 + 60 * i)))


if __name__ == "__main__":
    wire_seeds()
    knobs_seeds()
    planner_seeds()
    schedule_seeds()
    frame_seeds()
