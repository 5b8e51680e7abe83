"""Exports of trained models to formats other tools load (``rqa export --format ...``)."""

EXPORT_FORMATS = ("rqa", "sentence-transformers")
