"""The block reader: exact line reconstruction, odd line ends, giant lines, bounded archives."""

import gzip
import io

import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from faultline.ingest import reader
from faultline.ingest.parse import lines_frame


def _lines(data: bytes, block_size: int) -> list[str]:
    stats = reader.ReadStats()
    out, n = [], 0
    for b in reader.iter_blocks(io.BytesIO(data), stats, block_size=block_size):
        b.first_line_no = n + 1
        f = lines_frame(b)
        assert f["line_no"].to_list() == list(range(n + 1, n + 1 + f.height))
        n += f.height
        out += f["raw"].to_list()
    return out


def _expected(data: bytes) -> list[str]:
    if not data:
        return []
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()
    return [p.rstrip(b"\r").decode("utf-8", "replace") for p in parts]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"a", b"xyz", b"\n", b"\r\n", b"\n\n", b"\xff", b"\x00", b"\x1f", b"\xe2\x82\xac", b" "]),
        max_size=60,
    ),
    st.integers(min_value=1, max_value=16),
)
def test_blocks_rebuild_every_line_exactly(pieces, block_size):
    data = b"".join(pieces)
    if b"\r" in data and b"\n" not in data:
        data += b"\n"  # CR-only files are a separate mode, tested below
    assert _lines(data, block_size) == _expected(data)


def test_cr_only_line_ends_are_lines():
    assert _lines(b"one\rtwo\rthree", 4) == ["one", "two", "three"]


def test_line_longer_than_a_block_keeps_only_a_preview():
    giant = b"x" * 5000
    stats = reader.ReadStats()
    blocks = list(reader.iter_blocks(io.BytesIO(b"a\n" + giant + b"\nb\n"), stats, block_size=1000, max_line=1000))
    longs = [b for b in blocks if b.head_overlong]
    assert len(longs) == 1 and longs[0].head_overlong == 5000
    assert len(longs[0].head) <= reader.PREVIEW_BYTES
    assert _lines(b"a\n" + giant + b"\nb\n", 1000)[0] == "a"


def test_truncated_gzip_keeps_what_was_readable(tmp_path):
    body = b"".join(b"line %d\n" % i for i in range(20000))
    blob = gzip.compress(body)
    p = tmp_path / "k.log.gz"
    p.write_bytes(blob[: len(blob) // 2])
    stream, bounded, _ = reader.open_log(p)
    lines = []
    for b in reader.iter_blocks(stream, reader.ReadStats(), block_size=4096):
        lines += lines_frame(b)["raw"].to_list()
    assert bounded.error and "truncated or corrupt gzip" in bounded.error
    assert 0 < len(lines) < 20000 and lines[0] == "line 0"


def test_decompression_is_bounded(tmp_path):
    bomb = gzip.compress(b"\n" * (50 << 20))  # 50 MB of newlines in ~50 KB
    p = tmp_path / "bomb.log.gz"
    p.write_bytes(bomb)
    stream, bounded, _ = reader.open_log(p, max_bytes=4 << 20, max_ratio=10)
    total = sum(len(b.body) + len(b.head) for b in reader.iter_blocks(stream, reader.ReadStats()))
    assert total <= (4 << 20) and "decompression bomb" in bounded.error


def test_zstd_and_plain_read_the_same(tmp_path):
    body = b"".join(b"Nov 24 03:14:%02d n1 kernel: hello %d\n" % (i % 60, i) for i in range(5000))
    (tmp_path / "a.log").write_bytes(body)
    (tmp_path / "a.log.zst").write_bytes(zstandard.ZstdCompressor().compress(body))
    out = []
    for name in ("a.log", "a.log.zst"):
        stream, _, _ = reader.open_log(tmp_path / name)
        out.append(
            [
                x
                for b in reader.iter_blocks(stream, reader.ReadStats(), block_size=777)
                for x in lines_frame(b)["raw"].to_list()
            ]
        )
    assert out[0] == out[1] and len(out[0]) == 5000
