"""Reading dump files split by split: every line exactly once, whatever the split size."""
import bz2
import gzip

import pytest

from misbench.ingest.reader import (
    BLOCK_MAGIC,
    find_markers,
    file_size,
    open_file,
    plan_splits,
    split_lines,
)
from tests.conftest import SLICE_BZ2, SLICE_JSON, require_slice


def read_all(path, split_bytes):
    path = str(path)
    lines = []
    for split in plan_splits([(path, file_size(path))], split_bytes):
        with open_file(path) as handle:
            lines.extend(split_lines(split, handle))
    return lines


def true_lines():
    require_slice()
    lines = SLICE_JSON.read_text(encoding="utf-8").split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@pytest.mark.parametrize("split_bytes", [4_000, 37_000, 100_003, 10**9])
def test_bz2_split_anywhere_gives_each_line_once(split_bytes):
    got = read_all(SLICE_BZ2, split_bytes)
    assert [text for text, _ in got] == true_lines()
    assert all(problem is None for _, problem in got)


@pytest.mark.parametrize("split_bytes", [997, 75_000, 10**9])
def test_plain_json_split_anywhere_gives_each_line_once(split_bytes):
    assert [text for text, _ in read_all(SLICE_JSON, split_bytes)] == true_lines()


def test_multistream_bz2_and_multimember_gzip(tmp_path):
    lines = true_lines()
    half = len(lines) // 2
    parts = ["\n".join(lines[:half]) + "\n", "\n".join(lines[half:]) + "\n"]
    multi_bz2 = tmp_path / "multi.json.bz2"
    multi_bz2.write_bytes(b"".join(bz2.compress(p.encode()) for p in parts))
    multi_gz = tmp_path / "multi.json.gz"
    multi_gz.write_bytes(b"".join(gzip.compress(p.encode()) for p in parts))
    for split_bytes in (3_000, 10**9):
        assert [t for t, _ in read_all(multi_bz2, split_bytes)] == lines
    assert [t for t, _ in read_all(multi_gz, 1_000)] == lines


@pytest.mark.parametrize("fraction", [0.3, 0.62, 0.99])
@pytest.mark.parametrize("suffix, compress", [(".json.bz2", bz2.compress), (".json.gz", gzip.compress)])
def test_partial_download_keeps_complete_lines_and_flags_the_last(tmp_path, fraction, suffix, compress):
    data = compress(SLICE_JSON.read_bytes())
    partial = tmp_path / f"partial{suffix}"
    partial.write_bytes(data[: int(len(data) * fraction)])
    if suffix.endswith("bz2"):
        recovered = bz2.BZ2Decompressor().decompress(partial.read_bytes())
    else:
        recovered = __import__("zlib").decompressobj(wbits=31).decompress(partial.read_bytes())
    expected = recovered.decode("utf-8", "replace").split("\n")
    got = read_all(partial, 20_000)
    assert [t for t, _ in got[:-1]] == expected[:-1]
    assert "ends early" in got[-1][1] and got[-1][0] == expected[-1]
    assert all(problem is None for _, problem in got[:-1])


def test_markers_are_found_at_every_bit_offset():
    for shift in range(8):
        value = (0b1011 << (48 + shift)) | (BLOCK_MAGIC << shift)
        data = (value << ((-(52 + shift)) % 8)).to_bytes((52 + shift + 7) // 8 + 1, "big")
        found = find_markers(b"\x00" + data, 10)
        assert len(found) == 1 and found[0][1] == "block"
