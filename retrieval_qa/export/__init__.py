"""Exports of trained models to formats other tools load (``rqa export --format ...``)."""

EXPORT_FORMATS = ("rqa", "sentence-transformers")
#: modules of a sentence-transformers folder: sentence-transformers' own where they express
#: the towers (else the custom module), only those (else an error), or the custom module
ST_MODULES = ("auto", "native", "custom")
