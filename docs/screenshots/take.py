"""Take the README's screenshots of the web pages: a real ``uvicorn`` server on a free loopback port over an index,
and headless Chromium's own ``--screenshot``. Not a test; run it again when the pages change:

    retrieval build --from ../shared/data/hepth/papers.jsonl --db hepth.db
    python docs/screenshots/take.py --db hepth.db

Writes ``search.png``, ``paper.png`` and ``explain.png`` beside this file, reduced to 128 colours (Pillow, which
the ``test`` and ``eval`` extras install) so that each stays well under 300 KB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGES = {
    "search.png": "/?q=black+hole+entropy",
    "paper.png": "/paper/hep-th/9711200",
    "explain.png": "/explain-view?q=black+hole+entropy",
}
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(db: str, port: int) -> subprocess.Popen:
    code = (
        "import sys, uvicorn; from retrieval.interfaces.http.app import create_app; "
        "from retrieval.interfaces.service import Service; "
        "uvicorn.run(create_app(Service(sys.argv[1])), host='127.0.0.1', port=int(sys.argv[2]), log_level='warning')"
    )
    server = subprocess.Popen([sys.executable, "-c", code, db, str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"the server exited with {server.returncode}") from None
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not answer within 30 s")


def shoot(chromium: str, url: str, out: Path, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}",
             f"--window-size=1280,{height}", url],
            check=True, timeout=90, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip


def shrink(path: Path) -> None:
    try:
        from PIL import Image
    except ImportError:
        print(f"{path.name}: Pillow is not installed, kept as Chromium wrote it", file=sys.stderr)
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an index of the hepth corpus")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM") or shutil.which("chromium") or "chromium")
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()
    port = free_port()
    server = serve(args.db, port)
    try:
        for name, path in PAGES.items():
            out = HERE / name
            shoot(args.chromium, f"http://127.0.0.1:{port}{path}", out, args.height)
            shrink(out)
            print(f"{out.name}: {out.stat().st_size / 1024:.0f} KB")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
