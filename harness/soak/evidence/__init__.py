"""The evidence a soak writes: the schema-versioned artifact, the HTML report and its plots, the live panel. May import: foundation, harness.soak.verdicts, harness.soak.evidence."""
