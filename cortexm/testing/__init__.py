"""The test app: every case, exported per core, checked stage by stage, reported.

What enters: cases (cortexm.cases), cores, simulators. What leaves: a result per case
and core, cross-core checks, JSON and JUnit reports (app, crosscore, summary), and
kernel coverage (coverage). Around it: seeded sweeps with shrinking (sweep), shards and
their merge (shards, merge), ExecuTorch's own suite on these runners (upstream,
pytest_plugin), and the export cache (cache)."""
