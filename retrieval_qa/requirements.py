"""Version floors checked at run time, where a feature needs a newer release than an older
install may have: the error names the package, the version found, the one needed and what
needs it, instead of failing later inside the package. pyproject.toml declares the same
floors for installation."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

from .errors import UsageError


class VersionError(UsageError, ImportError):
    """An installed package older than a feature needs (an ImportError too: the callers that
    treat a missing optional package so treat this the same)."""

    __str__ = BaseException.__str__


def release(text: str) -> tuple[int, ...]:
    """The numeric release of a version string: "2.13.0+cpu" -> (2, 13, 0), "6.0.0rc1" ->
    (6, 0, 0).

    Args:
        text: the version string.
    """
    parts = []
    for piece in text.split("+")[0].split("."):
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
        if match.end() < len(piece):  # 0rc1: a pre-release of this number; stop here
            break
    return tuple(parts)


def require(dist: str, minimum: str, needed_for: str) -> str:
    """The installed version of ``dist``; a :class:`VersionError` when it is older than
    ``minimum`` or absent.

    Args:
        dist: the distribution's name (as pip installs it).
        minimum: the oldest version that works.
        needed_for: the feature that needs it (named in the error).
    """
    try:
        found = version(dist)
    except PackageNotFoundError:
        raise VersionError(f"{needed_for} needs the package {dist} >= {minimum}, which is not "
                           f"installed (fix: pip install '{dist}>={minimum}')") from None
    if release(found) < release(minimum):
        raise VersionError(f"{needed_for} needs {dist} >= {minimum}; {found} is installed "
                           f"(fix: pip install -U '{dist}>={minimum}')")
    return found
