"""PNG card import: our chunk walker against Pillow on a 30 MiB card, in one run.

Generates a 30 MiB card PNG (incompressible pixels, IDAT in 64 KiB pieces) whose ``chara`` chunk
comes *after* the image data, as some writers put it. Each contender then runs in its own fresh
child process, so peak memory is not polluted by the other:

- ``walker``   — ``innkeeper_tavern.pure.formats.png.read_card_text``: walk chunks, check every CRC,
  decode the card chunk; no pixel is inflated;
- ``import``   — ``innkeeper_tavern.pure.formats.card.parse_card_bytes``: the walker plus JSON, card
  normalization and the SHA-256 of the file (what a card import costs);
- ``stdlib``   — the baseline a good engineer writes first: a plain loop over the chunks with
  ``struct`` and ``zlib.crc32`` on a ``memoryview`` (same work as the walker: every CRC checked,
  the ``chara`` payload base64-decoded), no library;
- ``pillow``   — ``PIL.Image.open`` + ``load()`` + ``.text``: Pillow only reaches text chunks that
  follow IDAT by decoding the image (a straw man for speed, kept for memory).

Each child resets its resident-set high-water mark (Linux ``/proc/self/clear_refs``), reads the
file, runs once and reports the peak growth (so the file's own bytes count), then times further
runs and reports the median. Goals
(issue 4): walker ≥ 10× faster than Pillow; walker peak memory ≤ 1.5× the file size. The ratio
that matters is walker / stdlib (≈ 1 means the walker's checks and bounds cost nothing extra).

    uv run --no-sync python tools/bench_png.py [--size-mib 30] [--runs 5]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

CONTENDERS = ("walker", "import", "stdlib", "pillow")


def stdlib_walk(data: bytes) -> bytes:
    """A plain stdlib PNG text-chunk walker: every CRC checked, ``chara`` decoded."""
    view = memoryview(data)
    if bytes(view[:8]) != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    offset = 8
    found: bytes | None = None
    while offset + 12 <= len(view):
        (length,) = struct.unpack_from(">I", view, offset)
        end = offset + 12 + length
        if end > len(view):
            raise ValueError("truncated chunk")
        body = view[offset + 4 : offset + 8 + length]  # type + payload
        (crc,) = struct.unpack_from(">I", view, offset + 8 + length)
        if zlib.crc32(body) != crc:
            raise ValueError("bad CRC")
        ctype = bytes(body[:4])
        if ctype == b"tEXt":
            keyword, _, text = bytes(body[4:]).partition(b"\x00")
            if keyword == b"chara":
                found = base64.b64decode(text)
        elif ctype == b"IEND":
            break
        offset = end
    if found is None:
        raise ValueError("no chara chunk")
    return found


def _chunk(ctype: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + ctype
        + payload
        + struct.pack(">I", zlib.crc32(ctype + payload))
    )


def make_card_png(size_mib: int) -> bytes:
    """An RGB PNG of about ``size_mib`` MiB with a V2 card chunk after the image data.

    The pixels are low-entropy noise stored with the "Sub" row filter and deflate level 6, so a
    decoder does real work (inflate + unfilter) as it would for a large illustration; pure random
    noise would be stored uncompressed and decode at memcpy speed, which no real card does.
    """
    rng = random.Random(1234)
    mask = bytes(b & 0x1F for b in range(256))  # 5 bits of entropy per byte
    sample = rng.randbytes(1 << 20).translate(mask)
    ratio = len(zlib.compress(sample, 6)) / len(sample)
    side = int(((size_mib << 20) / ratio / 3) ** 0.5)
    row_bytes = 1 + 3 * side
    raw = bytearray(rng.randbytes(row_bytes * side).translate(mask))
    raw[::row_bytes] = b"\x01" * side  # filter type 1 ("Sub") on every row
    idat = zlib.compress(bytes(raw), 6)
    del raw
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Bench",
            "description": "lorem ipsum " * 8_000,
            "first_mes": "Hello.",
            "extensions": {},
        },
    }
    text = b"chara\x00" + base64.b64encode(json.dumps(card).encode())
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    parts = [b"\x89PNG\r\n\x1a\n", _chunk(b"IHDR", header)]
    parts += [_chunk(b"IDAT", idat[i : i + 65536]) for i in range(0, len(idat), 65536)]
    parts += [_chunk(b"tEXt", text), _chunk(b"IEND", b"")]
    return b"".join(parts)


def _operation(name: str) -> Callable[[bytes], object]:
    if name == "walker":
        from innkeeper_tavern.pure.formats.png import read_card_text

        return read_card_text
    if name == "import":
        from innkeeper_tavern.pure.formats.card import parse_card_bytes

        return parse_card_bytes
    if name == "stdlib":
        return stdlib_walk
    import io

    from PIL import Image

    def pillow(data: bytes) -> object:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return image.text["chara"]

    return pillow


def _reset_peak() -> None:
    # Linux >= 4.0: "5" resets VmHWM to the current RSS, so the peak is this measurement's own.
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(name: str, path: str, runs: int) -> None:
    """Run one contender and print ``{"peak": bytes, "median": seconds}``.

    ``peak`` is the resident-set high-water mark growth from before the file is read to after the
    first run: the file's own bytes count, as they would in a server receiving the upload.
    """
    operation = _operation(name)
    _reset_peak()
    before = _status_kib("VmRSS")
    data = Path(path).read_bytes()
    start = time.perf_counter()
    operation(data)
    first = time.perf_counter() - start
    peak = (_status_kib("VmHWM") - before) * 1024
    times = [first]
    for _ in range(runs - 1):
        start = time.perf_counter()
        operation(data)
        times.append(time.perf_counter() - start)
    print(json.dumps({"peak": peak, "median": statistics.median(times)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.path, args.runs)
        return

    data = make_card_png(args.size_mib)
    size = len(data)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "card.png")
        Path(path).write_bytes(data)
        del data
        results = {}
        for name in CONTENDERS:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    name,
                    "--path",
                    path,
                    "--runs",
                    str(args.runs),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            results[name] = json.loads(out.stdout)

    mib = 1 << 20
    print(f"card PNG: {size / mib:.1f} MiB, chara chunk after {size // 65536} IDAT chunks")
    print(f"{'contender':<10} {'median ms':>10} {'peak RSS MiB':>13} {'peak/file':>10}")
    for name in CONTENDERS:
        r = results[name]
        ms, peak = r["median"] * 1000, r["peak"]
        print(f"{name:<10} {ms:>10.1f} {peak / mib:>13.1f} {peak / size:>10.2f}")
    walker, card, plain, pillow = (results[n] for n in CONTENDERS)
    print(
        f"walker vs stdlib walker: {walker['median'] / plain['median']:.2f}x the time, "
        f"{walker['peak'] / max(1, plain['peak']):.2f}x the peak memory"
    )
    speed = pillow["median"] / walker["median"]
    import_speed = pillow["median"] / card["median"]
    print(f"walker vs Pillow: {speed:.1f}x faster (goal >= 10x)")
    print(f"card import vs Pillow: {import_speed:.1f}x faster")
    print(f"walker peak memory: {walker['peak'] / size:.2f}x the file size (goal <= 1.5x)")
    print(f"Pillow peak memory: {pillow['peak'] / size:.2f}x the file size")


if __name__ == "__main__":
    main()
