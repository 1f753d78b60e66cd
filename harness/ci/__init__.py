"""What CI systems show of a verdict: typed test cases, JUnit XML, a bounded Markdown job summary and where they go. May import: foundation, harness.ci, harness.soak.verdicts."""
