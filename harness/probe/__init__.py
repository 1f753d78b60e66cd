"""The phase probe: CLI, worker process, physics limit, statistics, compare, history and its page. May import: foundation, runtime, harness.context, harness.compare, harness.ci, harness.probe."""
