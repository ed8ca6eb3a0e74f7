//! The `rlprof` binary: the command line of [`rlprof_cli::run`].

/// Tensor memory of the CPU engine is heap memory: record it (`memory` content).
#[global_allocator]
static GLOBAL: rlprof_profiler::alloc::TrackingAllocator =
    rlprof_profiler::alloc::TrackingAllocator::system();

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(rlprof_cli::run(std::env::args_os()))
}
