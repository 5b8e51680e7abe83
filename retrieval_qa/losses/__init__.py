"""Training losses, one per module."""

from .in_batch_softmax import InBatchSoftmaxLoss as InBatchSoftmaxLoss
