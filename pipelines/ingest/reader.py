"""Bounded, streaming reads of plain, gzip and zstd log files, cut into blocks of whole lines.
Decompression is bounded in size and ratio, and truncated archives keep what was readable;
both are reported as ``ReadIssue`` rows, never raised."""

from __future__ import annotations

import hashlib
import io
import os
import queue
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import zstandard

from ..lake.storage import ObjectPath

BLOCK_SIZE = 8 << 20
MAX_LINE_BYTES = 1 << 20  # longer physical lines are quarantined, only a preview is kept
PREVIEW_BYTES = 512
CR_SNIFF_BYTES = 64 << 10
MAX_DECOMPRESSED_BYTES = 64 << 30
MAX_RATIO = 200  # decompressed / compressed


@dataclass
class ReadIssue:
    """Something about the file (not one line) that could not be read as-is."""

    line_no: int  # the physical line where it happened (the line after the last complete one)
    reason: str
    detail: str


@dataclass
class Block:
    """Whole lines: ``head`` (the first line, complete) then ``body`` minus its first line.
    ``body`` is the chunk as read (no copy): its first line is the tail of ``head``, and with
    ``drop_last`` its last line is partial and continues in the next block."""

    head: bytes
    body: bytes = b""
    drop_last: bool = False
    first_line_no: int = 1
    head_overlong: int = 0  # > 0: head is only a preview of a line this long

    def isascii(self) -> bool:
        return self.head.isascii() and self.body.isascii()


@dataclass
class ReadStats:
    bytes_read: int = 0  # bytes of (decompressed) content
    compressed_bytes: int = 0
    issues: list[ReadIssue] = field(default_factory=list)
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)  # of the (decompressed) content


class _GzipStream:
    """Incremental gzip (multi-member) that hands out what it decoded before a truncation."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.d, self.buf, self.done = raw, zlib.decompressobj(wbits=31), b"", False

    def read(self, n: int) -> bytes:
        while len(self.buf) < n and not self.done:
            comp = self.raw.read(1 << 16)
            if not comp:
                self.done = True
                if not self.d.eof and (self.buf or self.d.unconsumed_tail is not None):
                    self.buf += self.d.flush()
                    if not self.d.eof:
                        self._truncated = True
                break
            try:
                self.buf += self.d.decompress(comp)
                while self.d.eof and self.d.unused_data:
                    rest = self.d.unused_data
                    self.d = zlib.decompressobj(wbits=31)
                    self.buf += self.d.decompress(rest)
            except zlib.error as exc:  # junk after a member, or corruption: hand out
                self.done, self._error = True, exc  # what was decoded first, raise after
                break
        out, self.buf = self.buf[:n], self.buf[n:]
        if not out and getattr(self, "_error", None) is not None:
            exc, self._error = self._error, None
            raise exc
        if not out and getattr(self, "_truncated", False):
            self._truncated = False
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        return out

    def close(self) -> None:
        self.raw.close()


class _ZstdStream:
    """Incremental zstd (multi-frame); raises ``EOFError`` when the input ends mid-frame, after
    handing out what it decoded. Input is fed in small pieces so one call expands to a bounded
    size whatever the archive, and the size bound stays effective."""

    PIECE = 1 << 10

    def __init__(self, raw: BinaryIO):
        self.raw, self.buf, self.pos, self.done = raw, b"", 0, False
        self.d = zstandard.ZstdDecompressor().decompressobj()
        self.pending = b""  # compressed input not fed yet
        self.in_frame = False  # input fed since the last complete frame

    def read(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n and not self.done:
            if not self.pending:
                self.pending = self.raw.read(1 << 16)
                if not self.pending:
                    self.done = True
                    break
            piece, self.pending = self.pending[: self.PIECE], self.pending[self.PIECE :]
            got = []
            while piece:
                self.in_frame = True
                got.append(self.d.decompress(piece))
                if not self.d.eof:
                    break
                piece, self.in_frame = self.d.unused_data, False
                self.d = zstandard.ZstdDecompressor().decompressobj()
            self.buf, self.pos = self.buf[self.pos :] + b"".join(got), 0
        out = self.buf[self.pos : self.pos + n]
        self.pos += len(out)
        if not out and self.done and self.in_frame:
            self.in_frame = False
            raise EOFError("compressed file ended before the end of its last frame")
        return out

    def close(self) -> None:
        self.raw.close()


class _Bounded(io.RawIOBase):
    """Wraps a decompressing stream; stops (and records why) past the size/ratio bound."""

    def __init__(self, inner: BinaryIO, limit: int, what: str):
        self.inner, self.limit, self.what, self.total = inner, limit, what, 0
        self.error: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.error:
            return 0
        want = min(len(b), self.limit - self.total + 1, 1 << 16)
        try:
            chunk = self.inner.read(want)
        except (EOFError, OSError, zlib.error, zstandard.ZstdError) as exc:
            self.error = f"truncated or corrupt {self.what}: {exc}"
            return 0
        if self.total + len(chunk) > self.limit:
            self.error = (
                f"decompression bound reached ({self.limit} bytes); "
                f"possible decompression bomb, rest of {self.what} skipped"
            )
            chunk = chunk[: self.limit - self.total]
        n = len(chunk)
        b[:n] = chunk
        self.total += n
        return n


def open_log(
    path: str | os.PathLike, *, max_bytes: int = MAX_DECOMPRESSED_BYTES, max_ratio: int = MAX_RATIO
) -> tuple[BinaryIO, _Bounded | None, int]:
    """Open a log for binary reading; returns (stream, bound-tracker or None, on-disk size).
    ``path`` may be a ``storage.ObjectPath``: the object is streamed with ranged reads through the
    same decompression and bounds, never downloaded whole."""
    if isinstance(path, ObjectPath):
        size = path.stat().st_size
        raw = path.open("rb", block_size=BLOCK_SIZE)
        name = path.name
    else:
        name = path = os.fspath(path)
        size = os.path.getsize(path)
        raw = open(path, "rb")
    head = raw.read(4)
    raw.seek(0)
    if head[:2] == b"\x1f\x8b" or name.endswith(".gz"):
        inner: BinaryIO = _GzipStream(raw)
        what = "gzip archive"
    elif head == b"\x28\xb5\x2f\xfd" or name.endswith(".zst"):
        inner = _ZstdStream(raw)
        what = "zstd archive"
    else:
        return raw, None, size
    limit = min(max_bytes, max(max_ratio * max(size, 1), 1 << 20))
    bounded = _Bounded(inner, limit, what)
    return io.BufferedReader(bounded, 1 << 20), bounded, size


def _prefetch(stream: BinaryIO, size: int, digest=None) -> Iterator[bytes]:
    """Read ahead in a thread: I/O, decompression and the content hash overlap with parsing
    (all three drop the GIL)."""
    q: queue.Queue = queue.Queue(maxsize=2)

    def produce() -> None:
        try:
            while True:
                chunk = stream.read(size)
                if digest is not None:
                    digest.update(chunk)
                q.put(chunk)
                if not chunk:
                    return
        except BaseException as exc:  # handed to the consumer, never lost
            q.put(exc)

    threading.Thread(target=produce, daemon=True, name="faultline-read").start()
    while True:
        item = q.get()
        if isinstance(item, BaseException):
            raise item
        yield item
        if not item:
            return


def iter_blocks(
    stream: BinaryIO, stats: ReadStats, *, block_size: int = BLOCK_SIZE, max_line: int = MAX_LINE_BYTES
) -> Iterator[Block]:
    """Yield blocks of whole lines; CR-only files are read as if CR were the line end. A line
    longer than ``max(block_size, max_line)`` is never held whole: its block carries a preview
    and ``head_overlong`` its real length."""
    limit = max(block_size, max_line)
    carry = b""
    overlong = 0
    cr_mode: bool | None = None
    sniff = b""  # undecided start: CR-only is decided on >= 64 KiB or EOF
    for chunk in _prefetch(stream, block_size, stats.digest):
        if cr_mode is None:
            sniff += chunk
            if chunk and b"\n" not in sniff and len(sniff) < CR_SNIFF_BYTES:
                continue
            cr_mode = b"\r" in sniff and b"\n" not in sniff
            chunk, sniff = sniff, b""
        if cr_mode and chunk:
            chunk = chunk.replace(b"\r", b"\n")
        stats.bytes_read += len(chunk)
        if not chunk:
            break
        nl = chunk.find(b"\n")
        if nl < 0:
            if overlong:
                overlong += len(chunk)
            else:
                carry += chunk
                if len(carry) > limit:
                    overlong, carry = len(carry), carry[:PREVIEW_BYTES]
            continue
        if overlong:
            head, head_long = carry, overlong + nl
            overlong = 0
        else:
            head, head_long = carry + chunk[: nl + 1], 0
        cut = chunk.rfind(b"\n")
        carry = chunk[cut + 1 :]
        yield Block(head=head, body=chunk, drop_last=cut + 1 < len(chunk), head_overlong=head_long)
    if carry or overlong:
        yield Block(head=carry, head_overlong=overlong)


def physical_lines(data: bytes) -> int:
    """How many lines the reader promises for ``data``: LF lines, or CR lines when there is
    no LF at all (a reference for tests and fuzzing; the reader itself never splits in Python)."""
    if not data:
        return 0
    sep = b"\r" if b"\n" not in data and b"\r" in data else b"\n"
    parts = data.split(sep)
    return len(parts) - (parts[-1] == b"")
