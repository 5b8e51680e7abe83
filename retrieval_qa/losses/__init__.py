"""Training losses, one per module."""

from .in_batch_softmax import InBatchSoftmaxLoss as InBatchSoftmaxLoss
from .quadratic_conditional import QuadraticConditionalLoss as QuadraticConditionalLoss
from .triplet import BatchHardTripletLoss as BatchHardTripletLoss
