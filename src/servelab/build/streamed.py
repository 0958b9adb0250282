"""BuildKit's export shaped as it comes, through a named pipe: no intermediate archive on disk.

API::

    with Streamed(shaper, store_dir, epoch=epoch) as s:   # the pipe; a thread that shapes
        proc.run([... "--output", export.output_option(s.path), ...], cancel=s.failed)
        s.writer_done()                                   # buildx has exited
        shaped = s.result()                               # -> export.Shaped, or its error

``docker buildx build --output type=oci,dest=<pipe>`` writes the OCI archive into the pipe
front to back (blobs in digest order, index.json last); :meth:`servelab.build.export.Shaper.shape`
reads it once, so the run's output directory never holds BuildKit's archive next to the
registry-shaped one (one compressed image less at the build's peak, docs/run.md "Disk"), and
a repeat that gives a layer shaped before writes nothing at all.

The pipe is opened for reading, non-blocking, before buildx starts: buildx's open never waits,
and a build that fails before its export (nothing ever written) does not leave the thread
waiting on an open. Reads wait with ``poll`` in short steps, so the thread stops when told
(the build failed, Ctrl-C). When the shaping fails, :attr:`Streamed.failed` is set: the
command runner stops buildx at once (``proc.run(cancel=...)``) instead of letting it wait on a
full pipe until its timeout.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import shutil
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from servelab.build import export
from servelab.errors import InputError
from servelab.image.blob import Cancelled

#: how long a read waits on the pipe before it looks at the stop flags again
POLL_MS = 200
#: the pipe's buffer, asked of the kernel (fewer wake-ups than the default 64 KiB)
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031


class PipeReader(io.RawIOBase):
    """The read end of a named pipe, opened without waiting for a writer; reads wait in
    :data:`POLL_MS` steps and raise :class:`Cancelled` once *stop* is set. The end of the
    stream is the writer closing it, or *ended* set with nothing left in the pipe."""

    def __init__(self, path: Path, stop: threading.Event, ended: threading.Event) -> None:
        super().__init__()
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            import fcntl

            fcntl.fcntl(self._fd, _F_SETPIPE_SZ, PIPE_BYTES)
        self._stop, self._ended = stop, ended
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN | select.POLLHUP)
        #: when the first byte came (None: not yet)
        self.first_byte: float | None = None
        self.count = 0

    def readable(self) -> bool:
        return True

    def wait(self) -> None:
        """Until the pipe has bytes, or has ended (Cancelled once told to stop)."""
        while not self._poll.poll(POLL_MS) and not self._ended.is_set():
            if self._stop.is_set():
                raise Cancelled

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        while True:
            if self._stop.is_set():
                raise Cancelled
            ready = self._poll.poll(POLL_MS)
            if not ready and not self._ended.is_set():
                continue
            try:
                n = os.readv(self._fd, [view])
            except BlockingIOError:  # a writer is there, with nothing written yet
                if self._ended.is_set() and not ready:
                    time.sleep(POLL_MS / 1000)
                continue
            if n and self.first_byte is None:
                self.first_byte = time.monotonic()
            self.count += n
            return n

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


class Streamed:
    """A named pipe in a private directory under *store_dir*, and a thread that shapes
    whatever BuildKit writes into it (:meth:`Shaper.shape`)."""

    def __init__(self, shaper: export.Shaper, store_dir: Path, *, epoch: int | None) -> None:
        self._shaper, self._store, self._epoch = shaper, store_dir, epoch
        #: set when the shaping failed: the build must stop
        self.failed = threading.Event()
        self._stop, self._ended = threading.Event(), threading.Event()
        self._dir: Path | None = None
        self._reader: PipeReader | None = None
        self._thread: threading.Thread | None = None
        self._shaped: export.Shaped | None = None
        self._error: BaseException | None = None
        #: seconds the shaping went on after buildx had exited
        self.after_s = 0.0

    @property
    def path(self) -> Path:
        if self._dir is None:
            raise RuntimeError("use Streamed as a context manager")
        return self._dir / "export.oci.tar"

    def __enter__(self) -> Streamed:
        self._dir = Path(tempfile.mkdtemp(prefix=".export-", dir=self._store))
        try:
            os.mkfifo(self.path, 0o600)
            self._reader = PipeReader(self.path, self._stop, self._ended)
        except OSError as e:
            self._remove()
            raise InputError(f"cannot make a named pipe in {self._store}: {e.strerror or e}",
                             hint="servelab streams BuildKit's export through a named pipe; "
                             "use an output directory on a local Linux file system") from e
        self._thread = threading.Thread(target=self._work, name="servelab-shape", daemon=True)
        self._thread.start()
        return self

    def _work(self) -> None:
        reader = self._reader
        if reader is None:
            return
        try:
            reader.wait()
            buffered = io.BufferedReader(reader, export.COPY_CHUNK)  # owns reader from here
            # no display of its own: it runs inside BuildKit's "sending tarball" step
            self._shaped = self._shaper.shape(buffered, epoch=self._epoch,
                                              name="the build's export")
            while buffered.read(export.COPY_CHUNK):  # what follows the tar's end, if any
                pass
        except Cancelled:
            pass
        except BaseException as e:  # handed to the caller by result()
            self._error = e
            self.failed.set()

    def writer_done(self) -> None:
        """buildx has exited: the pipe holds all it will ever hold."""
        self._ended.set()

    def result(self) -> export.Shaped:
        """The shaped archive, once the thread is done; the shaping's error if it failed."""
        t0 = time.monotonic()
        if self._thread is not None:
            self._thread.join()
        self.after_s = time.monotonic() - t0
        if self._error is not None:
            raise self._error
        if self._shaped is None:
            raise InputError("the build's export wrote nothing into servelab's pipe",
                             hint="see the build log; the build may have stopped early")
        return self._shaped

    @property
    def error(self) -> BaseException | None:
        """What stopped the shaping (None while it runs or when it did not fail)."""
        return self._error

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._reader is not None:
            self._reader.close()
        self._remove()

    def _remove(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

