"""Supervised data mining (the cross-attention-supervised-mining paper): classifier data,
the classifier as a method and the miner (the command `rqa mine`: :mod:`retrieval_qa.cli.mine`)."""
