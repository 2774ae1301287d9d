"""The test app: every case, exported per core, checked stage by stage, reported."""
