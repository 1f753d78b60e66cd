"""The soak's pure verdicts over recorded data: data in, data out, no I/O.

How the pieces relate, by role:

- The one judgement: ``judgement.judge`` takes the samples, the recorded facts (``RecordedFacts``) and
  the gates (``gates.Gates``) and returns a frozen ``Judgement``. The monitor and the matrix both call
  it; nothing else assembles what the pass table evaluates.
- The pass table: ``evaluation.evaluate`` orders the rows (``criterion``), decides the failure class
  and writes the reason (``reasons``); the rows read from the run summary are ``summary_rows``, the
  artifact's fields read from it ``summary_sections``, and the trainer's contract ``contract``.
- The run's resources: ``trends`` (each class's leak verdict), ``observation`` (whether a class had
  enough samples to be judged), ``drift`` (the trainer's env steps/s).
- Survival: ``survival`` (will the run outlive ``--must-survive``?) projects each ``exhaustion_series``
  (a class beside the limit that would end the run) with ``projection`` (the warm-up cut and a bounded
  growth rate) and ``walk`` (how the series wanders: a random walk's share of the rate's error, and
  the spread of the path a run takes to its limit).
- Per process and per rank: ``per_process`` (the trends of each long-lived process), ``first_death``
  (who died first), ``tree_deaths`` (no silent death), ``oom`` (the kernel's OOM kills), ``ranks`` (a
  job of several ranks, rank by rank).
- GPU: ``gpu`` (XID, ECC and throttle rows from the GPU record and the samples).
- While the run is live (the loop calls them): ``hang`` (start-up, stale progress and shutdown limits)
  and ``stacks`` (the stacks taken before a kill).
- Across artifacts: ``two_soaks`` (`soak compare`, two soaks of one workload) and ``merge`` (`soak merge`,
  the nodes of one job).

May import: foundation, harness.two_runs, harness.soak.verdicts.
"""
