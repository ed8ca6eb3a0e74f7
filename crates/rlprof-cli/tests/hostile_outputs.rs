//! Outputs and streams under hostile conditions (issue 28): `report -o` writes only regular
//! files, even with `--force`; a full standard output ends a command with a message and status 1,
//! never a panic (101).

use std::os::unix::fs::FileTypeExt;
use std::process::{Command, Stdio};

fn rlprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rlprof"))
}

fn mkfifo(p: &std::path::Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn report_never_replaces_a_fifo_or_a_device_even_with_force() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("out.html");
    mkfifo(&fifo);
    // A link to a device: what `-o /dev/null --force` would hit, without risking /dev/null.
    let dev = tmp.path().join("dev.html");
    std::os::unix::fs::symlink("/dev/null", &dev).unwrap();
    for out in [&fifo, &dev] {
        let o = rlprof()
            .args(["report", tmp.path().to_str().unwrap(), "--force", "-o"])
            .arg(out)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(
        std::fs::symlink_metadata(&dev)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[test]
fn a_full_stdout_ends_with_a_message_not_a_panic() {
    for args in [
        &["config", "show"][..],
        &["config", "show", "--json"][..],
        &["config", "check"][..],
    ] {
        let full = std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = rlprof().args(args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("No space left"), "{args:?}: {err}");
    }
}

/// `rlprof train ... | head -2`: the reader goes away while training runs. Training goes on to
/// its end (status 0, no panic), says once that its output is gone, and leaves every collection
/// finished: none is left as `.tmp`.
#[test]
fn train_goes_on_when_its_reader_goes_away() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = rlprof()
        .args(["train", "--quiet"])
        .args([
            format!(
                "global_profiler.save_path={}",
                tmp.path().join("prof").display()
            ),
            "global_profiler.steps=[1,2,3]".into(),
            "trainer.total_training_steps=4".into(),
            "trainer.sft_warmup_steps=0".into(),
            "trainer.n_gpus_per_node=1".into(),
            format!(
                "trainer.default_local_dir={}",
                tmp.path().join("ckpt").display()
            ),
            "data.train_batch_size=4".into(),
            "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
            "actor_rollout_ref.rollout.n=2".into(),
            "actor_rollout_ref.model.hidden_size=32".into(),
            "actor_rollout_ref.model.num_hidden_layers=2".into(),
            "actor_rollout_ref.model.intermediate_size=64".into(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first line, then go away (as `head -1` does).
    let mut first = [0u8; 1];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("training goes on"), "{err}");
    let mut stack = vec![tmp.path().join("prof")];
    let mut finished = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".tmp"),
                "left unfinished: {}",
                e.path().display()
            );
            if e.file_type().unwrap().is_dir() {
                finished += usize::from(name.ends_with("_ascend_pt"));
                stack.push(e.path());
            }
        }
    }
    assert!(finished >= 3, "{finished} collections");
}
