"""Read Wikidata dump files as lines, one byte range (split) per Spark task.

Why not Spark's text source: it decodes bz2 with Hadoop's pure-Java codec (about half the
speed of libbz2), ships every line through the JVM to Python, and fails the whole job on a
partial download. Here each task reads its own split with libbz2/zlib in the Python worker
that parses it.

Which split reads a line (as Hadoop's line reader does): a split owns every line whose
preceding newline lies in its data, plus the file's first line if it holds the file's start.
It skips the partial line it starts in and reads past its end to finish its last line, so
each line is read exactly once.

- plain ``.json``: splits are byte ranges.
- ``.bz2``: a split owns the compressed blocks whose 48-bit start marker lies in its byte
  range. Blocks are not byte-aligned: each run of owned blocks is shifted into a fresh
  ``BZh9`` stream and decoded; the input stops before the next marker, so no stream CRC is
  ever checked against a partial stream. Concatenated (multi-stream) files work too.
- ``.gz``: not splittable; one split per file.

A compressed stream that ends early (partial download) yields its partial last line with a
reason, so the caller records a reject instead of failing or silently dropping it.
"""
from __future__ import annotations

import bz2
import hashlib
import re
import zlib
from dataclasses import dataclass
from typing import Iterator, Sequence

BLOCK_MAGIC = 0x314159265359
END_MAGIC = 0x177245385090
_MASK48 = (1 << 48) - 1
_WINDOW = 1024 * 1024  # marker search reads ahead this far past a split; small keeps overlap cheap
_CHUNK = 1024 * 1024
_BLOCK, _END = "block", "end"


class TruncatedStream(Exception):
    """The compressed stream ends before its end-of-stream marker."""


@dataclass(frozen=True)
class Split:
    source_file: str
    start: int
    end: int
    size: int


def compression_of(path: str) -> str | None:
    lowered = path.lower()
    if lowered.endswith(".bz2"):
        return "bz2"
    if lowered.endswith(".gz"):
        return "gz"
    return None


def plan_splits(files_and_sizes: list[tuple[str, int]], split_bytes: int) -> list[Split]:
    """Byte-range splits of each file; gzip files stay whole."""
    splits = []
    for source_file, size in files_and_sizes:
        if compression_of(source_file) == "gz" or size <= split_bytes:
            splits.append(Split(source_file, 0, size, size))
            continue
        for start in range(0, size, split_bytes):
            splits.append(Split(source_file, start, min(size, start + split_bytes), size))
    return splits


def _filesystem(source_file: str):
    """(pyarrow filesystem, path) for a local path or any URI pyarrow knows (s3://, gs://, hdfs://)."""
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri(source_file if "://" in source_file else f"file://{source_file}")


def open_file(source_file: str):
    """A random-access file for the dump file."""
    filesystem, path = _filesystem(source_file)
    return filesystem.open_input_file(path)


# Eight digits that read as a date 2001-2099 and are not part of a longer number.
_DATE_IN_NAME = re.compile(r"(?<!\d)(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?!\d)")


def dump_identity(paths: Sequence[str]) -> str:
    """The dump's identity (``dump_version``): the date (YYYYMMDD) its file names carry, as
    Wikidata names its dumps (``wikidata-20250106-all.json.bz2``), else ``sha256-`` and the
    first 16 hex digits of the files' bytes in name order (read once, on the driver)."""
    dates = set()
    for path in paths:
        found = _DATE_IN_NAME.search(path.rstrip("/").rsplit("/", 1)[-1])
        dates.add("".join(found.groups()) if found else None)
    if len(dates - {None}) > 1:
        raise ValueError(f"the dump files carry different dates ({', '.join(sorted(dates - {None}))}): "
                         "ingest one dump at a time")
    if len(dates) == 1 and None not in dates:
        return dates.pop()
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open_file(path) as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return "sha256-" + digest.hexdigest()[:16]


def file_size(source_file: str) -> int:
    import pyarrow.fs as pafs

    filesystem, path = _filesystem(source_file)
    info = filesystem.get_file_info(path)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(f"no dump file at '{source_file}'")
    return info.size


def split_lines(split: Split, handle) -> Iterator[tuple[str, str | None]]:
    """(line, problem) for each line the split owns; problem is set only on the partial last
    line of a stream that ends early."""
    kind = compression_of(split.source_file)
    if kind == "bz2":
        source = _Bz2Source(handle, split.size)
        owned = source.decoded(split.start, split.end)
        following = source.decoded(split.end)
        holds_file_start = split.start == 0  # the first block follows the 4-byte header
    elif kind == "gz":
        owned, following, holds_file_start = _gzip_chunks(handle), iter(()), True
    else:
        owned = _plain_chunks(handle, split.start, split.end)
        following = _plain_chunks(handle, split.end, split.size)
        holds_file_start = split.start == 0
    yield from _owned_lines(owned, following, holds_file_start)


def _owned_lines(owned: Iterator[bytes], following: Iterator[bytes], holds_file_start: bool):
    pending = b""
    skipping = not holds_file_start
    try:
        for chunk in owned:
            if skipping:
                newline = chunk.find(b"\n")
                if newline < 0:
                    continue  # all of it belongs to a line an earlier split owns
                chunk, skipping = chunk[newline + 1:], False
            pieces = (pending + chunk).split(b"\n")
            pending = pieces.pop()
            for piece in pieces:
                yield _text(piece), None
        if skipping:
            return  # no line starts in this split
        for chunk in following:
            newline = chunk.find(b"\n")
            if newline >= 0:
                yield _text(pending + chunk[:newline]), None
                return
            pending += chunk
    except TruncatedStream as exc:
        if not skipping:
            yield _text(pending), str(exc)
        return
    if pending:
        yield _text(pending), None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r")


def _plain_chunks(handle, start: int, end: int) -> Iterator[bytes]:
    position = start
    while position < end:
        data = handle.read_at(min(_CHUNK, end - position), position)
        if not data:
            return
        position += len(data)
        yield data


def _gzip_chunks(handle) -> Iterator[bytes]:
    """Decompressed data of all gzip members; TruncatedStream if the last one is cut off."""
    decompressor = zlib.decompressobj(wbits=31)
    member_open = False
    handle.seek(0)
    while True:
        data = handle.read(_CHUNK)
        if not data:
            break
        while data:
            try:
                out = decompressor.decompress(data)
            except zlib.error as exc:
                raise TruncatedStream(f"gzip stream is corrupt ({exc})") from None
            member_open = True
            if out:
                yield out
            if decompressor.eof:
                data = decompressor.unused_data
                decompressor = zlib.decompressobj(wbits=31)
                member_open = False
            else:
                data = b""
    if member_open:
        raise TruncatedStream("gzip stream ends early: the file is truncated (partial download?)")


def _magic_patterns(magic: int) -> list[tuple[int, bytes]]:
    """For each bit offset s of a marker inside its first byte, the 5 bytes it fully covers."""
    return [(s, (magic << (8 - s)).to_bytes(7, "big")[1:6]) for s in range(8)]


_PATTERNS = [(kind, s, pattern) for kind, magic in ((_BLOCK, BLOCK_MAGIC), (_END, END_MAGIC))
             for s, pattern in _magic_patterns(magic)]


def find_markers(buffer: bytes, base_byte: int, ends: bool = True) -> list[tuple[int, str]]:
    """(absolute bit position, kind) of every block marker in ``buffer``, and of every
    end-of-stream marker if ``ends``."""
    found = []
    for kind, shift, pattern in _PATTERNS:
        if kind == _END and not ends:
            continue
        magic = BLOCK_MAGIC if kind == _BLOCK else END_MAGIC
        index = buffer.find(pattern, 1)
        while index >= 0:
            first = index - 1
            window = buffer[first:first + 7]
            if len(window) == 7 and (int.from_bytes(window, "big") >> (8 - shift)) & _MASK48 == magic:
                found.append(((base_byte + first) * 8 + shift, kind))
            index = buffer.find(pattern, index + 1)
    return sorted(found)


class _Bz2Source:
    def __init__(self, handle, size: int):
        self.handle = handle
        self.size = size

    def markers_from(self, start_byte: int) -> Iterator[tuple[int, str]]:
        """Markers at or after start_byte, in order, reading the file window by window."""
        position = start_byte
        last = -1
        while position < self.size:
            # Windows overlap by 7 bytes so that no marker straddles a gap.
            buffer = self.handle.read_at(min(_WINDOW + 7, self.size - position), position)
            # A stream ends only at the end of the file or just before the byte-aligned
            # header of the next stream ("BZh" + level): elsewhere skip half the patterns.
            ends = position + len(buffer) >= self.size or b"BZh" in buffer
            for bit, kind in find_markers(buffer, position, ends):
                if bit > last and bit >= start_byte * 8:
                    last = bit
                    yield bit, kind
            position += _WINDOW

    def _runs(self, markers: Iterator[tuple[int, str]], owned_end_bit: int | None):
        """(start_bit, end_bit, truncated) for each run of consecutive blocks: a run ends at
        an end-of-stream marker or, with owned_end_bit, at the first block not owned."""
        run_start = None
        for bit, kind in markers:
            beyond = owned_end_bit is not None and bit >= owned_end_bit
            if kind == _BLOCK and not beyond:
                if run_start is None:
                    run_start = bit
                continue
            if run_start is not None:
                yield run_start, bit, False
                run_start = None
            if beyond:
                return
        if run_start is not None:
            yield run_start, self.size * 8, True

    def decoded(self, start: int, end: int | None = None) -> Iterator[bytes]:
        """Decoded data of the blocks whose markers lie in [start, end) bytes; without
        ``end``, of every block from ``start`` on (to finish a split's last line)."""
        owned_end_bit = None if end is None else end * 8
        for run_start, run_end, truncated in self._runs(self.markers_from(start), owned_end_bit):
            yield from self._decode(run_start, run_end, truncated)

    def _decode(self, start_bit: int, end_bit: int, truncated: bool) -> Iterator[bytes]:
        """Decode the blocks in [start_bit, end_bit) as a stream of their own."""
        decompressor = bz2.BZ2Decompressor()
        decompressor.decompress(b"BZh9")
        shift = start_bit % 8
        total_bytes = (end_bit - start_bit + 7) // 8
        done = 0
        while done < total_bytes:
            take = min(_CHUNK, total_bytes - done)
            source_bit = start_bit + done * 8
            data = self.handle.read_at(take + 1, source_bit // 8)
            bits = len(data) * 8
            aligned = (int.from_bytes(data, "big") << shift) & ((1 << bits) - 1)
            # Keep the bits before end_bit, zero-padded to whole bytes: libbz2 rejects a
            # whole zero byte where it expects the next marker, but waits on fewer bits.
            usable = min(take * 8, end_bit - source_bit)
            aligned >>= bits - usable
            aligned <<= take * 8 - usable
            try:
                out = decompressor.decompress(aligned.to_bytes(take, "big"))
                while out:
                    yield out
                    # CPython returns at most one buffer once the input is used up; pump.
                    out = decompressor.decompress(b"")
            except OSError as exc:
                raise TruncatedStream(
                    f"bz2 stream is corrupt near byte {source_bit // 8} ({exc})"
                ) from None
            done += take
        if truncated:
            raise TruncatedStream(
                "bz2 stream ends early: the file is truncated (partial download?)"
            )
