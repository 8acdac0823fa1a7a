"""Files written for a user are whole or not at all: a failed write leaves what was there, a link stays a link,
and a device or pipe is written as a stream, never replaced by a regular file (``retrieval.outfile``)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from retrieval.eval.trec import write_run
from retrieval.outfile import replace_text
from retrieval.search.learned import RankerModel
from tests.helpers import finishes


def _failing(lines: int):
    """Rankings that fail after ``lines`` queries, as a stop or a full disk would in the middle of a run file."""
    for i in range(lines):
        yield f"q{i}", ["p1", "p2"]
    raise OSError(28, "No space left on device")


def test_a_run_file_that_fails_halfway_leaves_the_previous_one(tmp_path):
    """A run file was written in place: a failure halfway left half of the new run where the old one was."""
    path = tmp_path / "run.bm25.trec"
    write_run(path, [("q0", ["p9"])], "bm25")
    before = path.read_text()
    with pytest.raises(OSError, match="No space left") as failed:
        write_run(path, _failing(1000), "bm25")
    assert failed.value.filename == str(path)  # named as given, not as the temporary file
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.bm25.trec"]  # no temporary file left


def test_a_model_written_through_a_link_replaces_its_target_and_keeps_the_link(tmp_path):
    """``train --out link.json`` put a regular file where the link was, and left its target as it was."""
    model = RankerModel(("bm25_norm",), (1.0,), (1.0,), name="tiny")
    target = tmp_path / "models" / "ranker.json"
    target.parent.mkdir()
    target.write_text("{}\n")
    os.chmod(target, 0o640)
    link = tmp_path / "ranker.json"
    link.symlink_to(target)
    model.save(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert RankerModel.load(target).name == "tiny"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640  # the file's permissions kept
    assert sorted(p.name for p in target.parent.iterdir()) == ["ranker.json"]


def test_a_pipe_is_written_as_a_stream_and_stays_a_pipe(tmp_path):
    """A path that is no regular file (a named pipe here; ``/dev/null`` or ``/dev/stdout`` alike) was replaced by
    a regular file: as root, ``--out /dev/null`` would have put a file where the device was."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    try:
        replace_text(fifo, ["a\n", "b\n"])
    finally:
        if reader.is_alive():  # nothing opened the pipe for writing: open it, so the reader ends
            with open(fifo, "w"):
                pass
        reader.join(5)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got == ["a\nb\n"]


def test_standard_output_named_as_a_file_is_written_to(tmp_path):
    """``--graphml /dev/stdout``: a link to ``/proc/self/fd/1``, whose target (``pipe:[...]``) is no path; written
    there as a stream, as before files were written whole (the first version looked for the link's target)."""
    read, write = os.pipe()
    try:
        replace_text(f"/proc/self/fd/{write}", "to the pipe\n")
        os.close(write)
        write = None
        assert os.read(read, 100) == b"to the pipe\n"
    finally:
        os.close(read)
        if write is not None:
            os.close(write)


def test_a_model_written_to_a_pipe_gives_the_checksum_of_what_it_wrote():
    """``train --out /dev/stdout``: the checksum was the file's, read back, and reading a pipe's write end waited
    for ever (so the save runs in a process of its own, with a deadline)."""
    finishes(
        """
import hashlib, os
from retrieval.search.learned import RankerModel
model = RankerModel(("bm25_norm",), (1.0,), (1.0,), name="piped")
read, write = os.pipe()
digest = model.save(f"/proc/self/fd/{write}")
os.close(write)
written = b""
while chunk := os.read(read, 65536):
    written += chunk
assert written == model.to_json().encode() and digest == hashlib.sha256(written).hexdigest()
""",
        seconds=30,
    )


def test_a_folder_is_refused_as_a_file(tmp_path):
    with pytest.raises(IsADirectoryError):
        replace_text(tmp_path, "x")
