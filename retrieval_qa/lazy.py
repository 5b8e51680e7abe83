"""Packages whose names are imported on first use (PEP 562): ``import retrieval_qa.losses``
costs nothing until a name of it is asked for, so a command that needs one light module of a
package does not pay for the heavy ones (torch, torchmetrics)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_names(package: str, where: Mapping[str, str]
               ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``: a name of ``where`` is
    imported from its submodule when first asked for, then kept in the package.

    Args:
        package: the package's ``__name__``.
        where: ``{name: submodule}`` of the names the package offers.

    Example:

        >>> getattr_, dir_ = lazy_names("retrieval_qa.losses", {"InBatchSoftmaxLoss":
        ...                                                      "in_batch_softmax"})
        >>> getattr_("InBatchSoftmaxLoss").__name__, "InBatchSoftmaxLoss" in dir_()
        ('InBatchSoftmaxLoss', True)
    """
    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{where[name]}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
