"""The attacks of bench/attacks.py, one module per class, in the order they run (and were
found: the round 5 classes last)."""

# The import order is the order the attacks register and run: no sorting here.
# isort: skip_file

from attack_classes import (  # noqa: F401 - each registers its attacks
    user_files,
    caches,
    special_files,
    bad_input,
    everyday_use,
    ownership,
    cache_keys,
    signals,
    silent_verdicts,
    parsers,
    sweeps,
    disk_full,
    bundle_data,
    built_content,
    readers,
    writers,
    locks,
    reports,
    trust,
    gates,
    user_code,
)
