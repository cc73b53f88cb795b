"""Is a compressed dump file complete? (A partial download ends mid-stream.)

Spark is told to keep the lines it read from a file whose stream breaks off
(``spark.sql.files.ignoreCorruptFiles``); this check turns such a file into a reject row
instead of a silent loss.

- bz2: the stream ends with a 48-bit end-of-stream magic, a 32-bit CRC and 0-7 padding bits;
  reading the last bytes is enough.
- gzip: the only proof is decompressing to the end (cheap next to parsing JSON).
"""
from __future__ import annotations

import zlib

_BZ2_END_MAGIC = 0x177245385090
_TAIL_BYTES = 16


def bz2_tail_is_complete(tail: bytes) -> bool:
    """True if the bytes end with a bz2 end-of-stream marker (magic, CRC, padding)."""
    if len(tail) < 10:
        return False
    bits = int.from_bytes(tail, "big")
    total = len(tail) * 8
    for padding in range(8):
        # magic(48) + crc(32) + padding end the stream
        shift = padding + 32
        if (bits >> shift) & ((1 << 48) - 1) == _BZ2_END_MAGIC and total >= shift + 48:
            if padding == 0 or bits & ((1 << padding) - 1) == 0:
                return True
    return False


def stream_problem(uri: str) -> str | None:
    """Why the compressed file at ``uri`` is incomplete, or None if it is complete or plain."""
    import pyarrow.fs as pafs

    lowered = uri.lower()
    if not (lowered.endswith(".bz2") or lowered.endswith(".gz")):
        return None
    filesystem, path = pafs.FileSystem.from_uri(uri if "://" in uri else f"file://{uri}")
    size = filesystem.get_file_info(path).size
    if lowered.endswith(".bz2"):
        with filesystem.open_input_file(path) as handle:
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
        if bz2_tail_is_complete(tail):
            return None
        return "bz2 stream has no end-of-stream marker: the file is truncated (partial download?)"
    # Decompress to the end, member by member (a gzip file may hold several); output is
    # discarded. A member that took input but never reached its end means truncation.
    decompressor = zlib.decompressobj(wbits=31)
    member_open = False
    with filesystem.open_input_stream(path, compression=None) as handle:
        while True:
            data = handle.read(1024 * 1024)
            if not data:
                break
            while data:
                try:
                    decompressor.decompress(data)
                except zlib.error as exc:
                    return f"gzip stream is corrupt ({exc})"
                member_open = True
                if decompressor.eof:
                    data = decompressor.unused_data
                    decompressor = zlib.decompressobj(wbits=31)
                    member_open = False
                else:
                    data = b""
    if member_open:
        return "gzip stream ends early: the file is truncated (partial download?)"
    return None
