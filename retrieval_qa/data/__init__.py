"""Readers, builders and caches for ReQA and MultiReQA pools."""

from ..errors import DataDirNotFoundError, DataFileNotFoundError, DataFormatError
from .loading import load_pool
from .sources import DATASETS, default_pool
from .types import Candidate, QAPair, RetrievalPool

__all__ = ["DATASETS", "Candidate", "DataDirNotFoundError", "DataFileNotFoundError", "DataFormatError", "QAPair",
           "RetrievalPool", "default_pool", "load_pool"]
