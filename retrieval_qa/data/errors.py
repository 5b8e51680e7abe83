"""Errors and reports for malformed input: every message names the file, the record and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class DataFormatError(ValueError):
    """A record of an input file is malformed.

    The message always carries the file, the record (an id, a line number or a JSON path),
    what is wrong and how to fix it, so a user can find the line and repair or skip it.
    """

    def __init__(self, path: str | Path, record: str, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.record = record
        self.problem = problem
        self.fix = fix
        message = f"{self.path}: {record}: {problem}"
        if fix:
            message += f" (fix: {fix})"
        super().__init__(message)


class DataDirNotFoundError(FileNotFoundError):
    """A data folder given explicitly (--data-dir, $RQA_DATA_DIR, data.data_dir) does not
    exist: it is never silently replaced by another folder."""

    def __init__(self, path: str | Path, given_by: str) -> None:
        self.path = str(path)
        self.given_by = given_by
        super().__init__(
            f"data folder {self.path} (from {given_by}) does not exist. Fix {given_by}, or "
            "leave it unset to use ../shared/data beside the repository.")


class DataFileNotFoundError(FileNotFoundError):
    """A data file is missing: says which file, where it looked and how to get it."""

    def __init__(self, name: str, looked: list[Path], how_to_get: str) -> None:
        self.name = name
        self.looked = [str(p) for p in looked]
        self.how_to_get = how_to_get
        places = ", ".join(self.looked) or "(no data directory configured)"
        super().__init__(
            f"data file {name!r} not found; looked in: {places}. {how_to_get} "
            "Point the project at the folder holding it with --data-dir, the RQA_DATA_DIR "
            "environment variable or `data.data_dir` in the config."
        )


@dataclass
class ReadReport:
    """What a lenient read skipped, record by record (a strict read raises instead)."""

    path: str
    skipped: list[DataFormatError] = field(default_factory=list)

    def add(self, error: DataFormatError, strict: bool) -> None:
        if strict:
            raise error
        self.skipped.append(error)

    @property
    def skipped_count(self) -> int:
        return len(self.skipped)

    def summary(self, limit: int = 10) -> dict:
        return {
            "path": self.path,
            "skipped": self.skipped_count,
            "examples": [str(e) for e in self.skipped[:limit]],
        }
