# The tests that read the real third-party profiles in ../shared/fixtures (RLPROF_FIXTURES), which
# a fresh clone does not have: `#[ignore = "needs ../shared/fixtures"]`, run here by name. And the
# torch_memory snapshots read back by Python's stdlib pickle (`#[ignore = "needs python3"]`).
cargo test --release -p rlprof-report --test real -- --ignored
cargo test --release -p rlprof-export --test memory_snapshot -- --ignored
