"""One ``rqa train`` at a time writes a run folder: :class:`WriterLock`, an ``fcntl`` lock on
the folder's ``rqa-train.lock`` held for the run's life; a second command into the folder is
refused (:class:`RunFolderInUse`) naming the folder, the holder's pid and the fix."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from ..errors import UsageError

#: the lock file of the run's one writer (:class:`WriterLock`)
LOCK = "rqa-train.lock"


class RunFolderInUse(UsageError):
    """A run folder that another ``rqa train`` process is writing (:class:`WriterLock`).

    Args:
        folder: the run folder.
        holder: the process that writes it, in words.
    """

    def __init__(self, folder: Path, holder: str) -> None:
        self.folder, self.holder = str(folder), holder
        super().__init__(
            f"run folder {folder} is in use by another rqa train ({holder}); two runs writing "
            f"one folder would mix their checkpoints and result, so this one did not start "
            f"and wrote nothing (fix: wait for that run to end and run this command again, or "
            f"give this run a folder of its own: output_dir=DIR)")


class WriterLock:
    """The lock of a run folder's one writer, held from before the folder is read until the
    run's report is written (a context manager): an ``fcntl`` record lock
    (``fcntl.lockf``) on ``<folder>/rqa-train.lock``, which holds the holder's pid. A second
    process is refused at once (:class:`RunFolderInUse`, naming the holder's pid); it does not
    wait.

    The kernel releases the lock when its process dies, however it dies (SIGKILL, a crash),
    so a lock file left by a dead run is no obstacle: the next run locks it again and writes
    its own pid. A record lock, not ``flock``: the loader worker processes a run forks do not
    inherit it, so workers a killed run leaves behind cannot keep its folder locked. (Record
    locks are per process: a second lock taken by the same process succeeds; ``rqa train``
    takes one per command.)

    A folder the lock created (the run's first command) is removed again on exit when nothing
    but the lock file was written there (a bad setting refused before the run began), with the
    folders above it that it created.

    Args:
        folder: the run folder (:func:`~.run_folder.run_dir`).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._fd: int | None = None
        self._created: Path | None = None  # the highest folder this lock created

    def __enter__(self) -> WriterLock:
        missing = [p for p in (self.folder, *self.folder.parents) if not p.exists()]
        self.folder.mkdir(parents=True, exist_ok=True)
        self._created = missing[-1] if missing else None
        try:
            self._fd = self._acquire(self.folder / LOCK)
        except BaseException:
            self._remove_created()
            raise
        return self

    def _acquire(self, path: Path) -> int:
        for _ in range(5):  # the file may be replaced between open and lock: lock the new one
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _holder(fd)
                os.close(fd)
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    raise RunFolderInUse(self.folder, holder) from None
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                pid = f"{os.getpid()}\n".encode()
                if os.pread(fd, 64, 0) != pid:  # unchanged when it is already ours
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, pid, 0)
                return fd
            os.close(fd)
        raise RunFolderInUse(self.folder, "its lock file keeps being replaced")

    def _remove_created(self) -> None:
        if self._created is None:
            return
        folder = self.folder
        if any(p.name != LOCK for p in folder.iterdir()):
            return
        (folder / LOCK).unlink(missing_ok=True)
        while True:  # up to the highest folder the lock created, each when empty
            try:
                folder.rmdir()
            except OSError:
                return
            if folder == self._created:
                return
            folder = folder.parent

    def __exit__(self, *exc) -> None:
        if self._fd is None:
            return
        try:
            self._remove_created()
        finally:
            os.close(self._fd)  # releases the lock
            self._fd = None


def _holder(fd: int) -> str:
    """Who holds a lock, from its file (the pid its holder wrote)."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"
