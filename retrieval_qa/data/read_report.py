"""What a lenient read of a data file skipped, record by record (a strict read raises)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DataFormatError


@dataclass
class ReadReport:
    """What a lenient read skipped, record by record (a strict read raises instead).

    Attributes:
        path: the file read.
        skipped: the errors of the records skipped.
    """

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
