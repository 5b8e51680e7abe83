"""Frozen base embeddings (residual-embedding paper, 3.1): word vectors mean-pooled over a
text's tokens, optionally IDF-weighted, computed once and cached on disk with their source."""
