//! A reader that goes away (`rlprof config check | head -1`) ends a read-only command quietly, as
//! it ends any Unix tool: no panic message, no exit code 101.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

#[test]
fn config_check_into_a_closed_pipe_ends_without_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlprof"))
        .args(["config", "check"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rlprof");
    // Close the read end before the child has printed its plan.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}\n{err}",
        out.status
    );
}
