//! The first argument of `config show|check` and `train`: a config file only when it reads as
//! one; `~key`, `+key=value` and a bare `key` are overrides, as Hydra reads them (issue 27).

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rlprof");

fn rlprof(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .expect("run rlprof")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("config show JSON")
}

#[test]
fn a_first_override_is_not_read_as_the_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // The built-in config writes trainer.save_freq; `~` deletes it.
    let all = json(&rlprof(&["config", "show", "--json"], d));
    assert!(all["trainer"].get("save_freq").is_some());
    let t = json(&rlprof(
        &["config", "show", "--json", "~trainer.save_freq"],
        d,
    ));
    assert!(t["trainer"].get("save_freq").is_none(), "{}", t["trainer"]);
    let t = json(&rlprof(&["config", "show", "--json", "+trainer.note=x"], d));
    assert_eq!(t["trainer"]["note"], "x");
    // A bare key is an override without '=', refused as Hydra's grammar refuses it.
    let out = rlprof(&["config", "show", "trainer.save_freq"], d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("missing '='") && !err.contains("cannot read"),
        "{err}"
    );
    // `config check` and `train` read it the same way (train stops at the config error).
    let out = rlprof(&["config", "check", "trainer.save_freq"], d);
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing '='"));
    let out = rlprof(&["train", "--quiet", "trainer.save_freq"], d);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing '='"));
}

#[test]
fn a_file_argument_is_still_the_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("job"), "trainer: {nnodes: 3}\n").unwrap();
    std::fs::write(d.join("other.yaml"), "trainer: {nnodes: 5}\n").unwrap();
    let t = json(&rlprof(&["config", "show", "--json", "job"], d));
    assert_eq!(t["trainer"]["nnodes"], 3);
    let t = json(&rlprof(
        &["config", "show", "--json", "other.yaml", "trainer.nnodes=6"],
        d,
    ));
    assert_eq!(t["trainer"]["nnodes"], 6);
    // A missing *.yaml is a file error, not an override error.
    let out = rlprof(&["config", "show", "missing.yaml"], d);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read configuration file"));
}
