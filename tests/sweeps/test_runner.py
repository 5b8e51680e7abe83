"""retrieval_qa/sweeps/runner.py, the one runner under `rqa sweep`, the queue files and the
device checklist: finished steps skipped, refused and waiting ones reported, the deadline
obeyed (no start past it; with a grace, SIGTERM to the running steps, the rest left), parallel
steps at once, one record per step."""

from __future__ import annotations

import sys
import time

from retrieval_qa.sweeps import runner as R


class Fake(R.Step):
    def __init__(self, name, code=0, done=False, refuse=None, waits=None, estimate=0.0,
                 argv=None, parallel=False, log=None):
        self.name, self.code, self._done, self.refuse = name, code, done, refuse
        self.waits, self.estimate_s, self.argv, self.parallel = waits, estimate, argv, parallel
        self.log = log if log is not None else []

    def done(self):
        if self.refuse:
            raise R.Refused(self.refuse)
        return self._done

    def ready(self):
        return self.waits

    def start(self):
        self.log.append(("start", self.name))
        if self.argv:
            return R.Process([R.Action(self.argv)], new_session=True)
        return R.Call(lambda: self.code)

    def end(self, job, record):
        self.log.append(("end", self.name, record.state))

    def passed(self, record):
        self.log.append((record.state, self.name))


def test_each_step_gets_one_record_in_order():
    log = []
    steps = [Fake("reused", done=True, log=log), Fake("refused", refuse="other settings", log=log),
             Fake("waits", waits="waits for x", log=log), Fake("ok", log=log),
             Fake("bad", code=3, log=log), Fake("big", estimate=1e9, log=log),
             Fake("after", log=log)]
    report = R.run_steps(steps, deadline_at=time.monotonic() + 3600)
    assert [(r.step, r.state, r.code, r.reason) for r in report.records] == [
        ("reused", "reused", None, None), ("refused", "refused", None, "other settings"),
        ("waits", "waiting", None, "waits for x"), ("ok", "finished", 0, None),
        ("bad", "failed", 3, None), ("big", "left", None, "deadline"),
        ("after", "finished", 0, None)]
    assert log[:3] == [("reused", "reused"), ("refused", "refused"), ("waiting", "waits")]
    assert ("end", "ok", "finished") in log and report.signal is None


def test_a_stopped_call_starts_nothing_after_it():
    report = R.run_steps([Fake("a", code=143), Fake("b")])
    assert report.states() == {"a": "stopped", "b": "left"} and report.signal == 15


def test_past_the_deadline_nothing_starts():
    report = R.run_steps([Fake("a"), Fake("b", done=True)], deadline_at=time.monotonic() - 1)
    assert report.states() == {"a": "left", "b": "reused"}


def test_parallel_steps_run_at_once_and_the_deadline_cuts_them():
    sleep = [sys.executable, "-c", "import time; time.sleep(1.5)"]
    steps = [Fake(n, argv=sleep, parallel=True) for n in ("a", "b", "c")]
    t0 = time.monotonic()
    report = R.run_steps(steps, jobs=3, poll_s=0.05)
    assert report.states() == {"a": "finished", "b": "finished", "c": "finished"}
    assert time.monotonic() - t0 < 4.0                  # three at once, not one after another
    forever = [sys.executable, "-c", "import time; time.sleep(60)"]
    t0 = time.monotonic()
    report = R.run_steps([Fake("long", argv=forever), Fake("next")],
                         deadline_at=time.monotonic() + 2, grace=1.0, poll_s=0.05)
    assert time.monotonic() - t0 < 3.0 and report.cut
    assert report.states() == {"long": "stopped", "next": "left"}
    assert report.records[-1].reason == "cut" and report.records[0].code != 0


def test_process_actions_skip_made_ones_and_a_failed_call_stops_the_rest(tmp_path):
    made = tmp_path / "made"
    made.touch()
    ran = []
    actions = [R.Action([sys.executable, "-c", "print(1)"], skip_if=made),
               R.Action(call=lambda: (ran.append("carry"), False)[1], shown="carry x"),
               R.Action([sys.executable, "-c", "print(2)"])]
    job = R.Process(actions, stdout=lambda n: tmp_path / f"{n}.out")
    while not job.poll():
        time.sleep(0.05)
    assert ran == ["carry"] and job.commands == ["carry x"] and job.code == 1
    assert job.outputs == []                            # the skipped and the last never ran
