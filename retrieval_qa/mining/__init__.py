"""Supervised data mining (the cross-attention-supervised-mining paper): classifier data,
the classifier as a method, the miner, and the CLI command `rqa mine`."""
