"""retrieval-qa: sentence-level answer retrieval experiments."""
__version__ = "0.1.0"
