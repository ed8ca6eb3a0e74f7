//! Test-only fault injection for multi-rank tests, read from the environment:
//! - `RLPROF_TEST_SLOW_RANK=R:D` makes rank `R` sleep `D` (`200ms`, `1.5s`) at the start of
//!   every RL step, inside the step's profiling scope (a rank that is slow to compute);
//! - `RLPROF_TEST_FAIL_RANK=R:S` makes rank `R` fail with an error at the start of RL step `S`
//!   (the rank stops and tells its peers); `R:S:exit` makes the process exit at once with
//!   status 3, telling nobody (a crash).
//!
//! Unset (the normal case) they cost one environment lookup per step.

use crate::error::{Result, TrainerError};
use std::time::Duration;

/// Slow rank variable.
pub const SLOW_RANK_ENV: &str = "RLPROF_TEST_SLOW_RANK";
/// Failing rank variable.
pub const FAIL_RANK_ENV: &str = "RLPROF_TEST_FAIL_RANK";

/// Applies the configured faults of `rank` at the start of RL step `step`.
pub fn at_step_start(rank: usize, step: u64) -> Result<()> {
    if let Some((r, delay)) = slow_rank()
        && r == rank
    {
        std::thread::sleep(delay);
    }
    match fail_rank() {
        Some((r, s, exit)) if r == rank && s == step => {
            if exit {
                eprintln!("rank {rank}: {FAIL_RANK_ENV}: exiting at step {step} (simulated crash)");
                // `_exit`, not `exit`: a crash runs no atexit handlers or destructors, and libc's
                // `exit` with MPI progress threads alive can hang in those handlers.
                // SAFETY: ends the process; nothing runs after it.
                unsafe { libc::_exit(3) };
            }
            Err(TrainerError::InjectedFault { rank, step })
        }
        _ => Ok(()),
    }
}

fn slow_rank() -> Option<(usize, Duration)> {
    let v = std::env::var(SLOW_RANK_ENV).ok()?;
    let (r, d) = v.split_once(':')?;
    Some((r.trim().parse().ok()?, parse_duration(d.trim())?))
}

fn fail_rank() -> Option<(usize, u64, bool)> {
    let v = std::env::var(FAIL_RANK_ENV).ok()?;
    let mut it = v.split(':');
    let r = it.next()?.trim().parse().ok()?;
    let s = it.next()?.trim().parse().ok()?;
    Some((r, s, it.next() == Some("exit")))
}

/// `200ms`, `1.5s` or a bare number of milliseconds.
fn parse_duration(s: &str) -> Option<Duration> {
    let secs = if let Some(ms) = s.strip_suffix("ms") {
        ms.parse::<f64>().ok()? / 1000.0
    } else if let Some(sec) = s.strip_suffix('s') {
        sec.parse::<f64>().ok()?
    } else {
        s.parse::<f64>().ok()? / 1000.0
    };
    (secs >= 0.0 && secs.is_finite()).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("200ms"), Some(Duration::from_millis(200)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("50"), Some(Duration::from_millis(50)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("fast"), None);
    }
}
