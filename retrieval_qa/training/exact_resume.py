"""The fit loop that resumes a checkpoint written at an epoch's end exactly as the
uninterrupted run continues, whatever stops the run (``max_steps``, ``max_epochs``, a time
limit, a stop request)."""

from __future__ import annotations

from pytorch_lightning.loops import _FitLoop, _Loop
from pytorch_lightning.loops.utilities import _is_max_limit_reached


class ExactResumeFitLoop(_FitLoop):
    """Lightning's fit loop with its reading of a checkpoint written at an epoch's end (in
    ``on_train_epoch_end``: the epoch counted processed, not yet completed) made the same
    whatever stops the run, so the resumed run continues as the uninterrupted one:

    - the epoch ran all its batches (or the run reached ``max_steps``): the run resumes at the
      next epoch's start, the epoch counted completed at once;
    - the epoch was cut short by a stop (Lightning's ``max_time``, ``trainer.should_stop``):
      the run resumes inside it, after its last step, the epoch counted processed once.

    Lightning (2.6) reads such a checkpoint by the run's stopping rule instead. With
    ``max_steps`` set it marks every restored fit loop as restarting
    (``_FitLoop.restarting``: ``... or self._iteration_based_training()``) and takes the
    finished epoch up again: its end hooks run twice and it is counted processed twice, so the
    resumed run skips an epoch against ``max_epochs`` (3 epochs of 4 steps, ``max_steps=12``,
    resumed after epoch 1: 8 steps) and, without ``max_epochs``, every later epoch draws the
    sampler order of the epoch after it (other batches: other weights). Without ``max_steps``
    it starts the next epoch also after an epoch cut short, whose remaining batches are never
    trained. Checkpoints written inside an epoch (at a step's end, after a validation) are
    left to Lightning. Set on its Trainer by
    :class:`~.resumable_checkpoints.ResumableCheckpoints` (``setup``), before
    a checkpoint is restored."""

    def run(self) -> None:
        if self._loaded_from_state_dict:  # right after a checkpoint was restored
            self.setup_data()  # the epoch's length, for the test below (run does it anyway)
            self._settle_restored_epoch()
        super().run()

    def _settle_restored_epoch(self) -> None:
        current, total = self.epoch_progress.current, self.epoch_progress.total
        if not current.ready == current.started == current.processed == current.completed + 1:
            return  # not written at an epoch's end
        steps_done = _is_max_limit_reached(self.epoch_loop.global_step, self.max_steps)
        if self.epoch_loop._num_ready_batches_reached() or steps_done:
            self.epoch_progress.increment_completed()
            _Loop.restarting.fset(self, False)
        else:  # as a checkpoint written at that step: the rest of the epoch runs
            current.processed -= 1
            total.processed -= 1
            _Loop.restarting.fset(self, True)
