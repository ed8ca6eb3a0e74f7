//! Hostile configs through the binary (issue 28): `rlprof config show` / `config check` end
//! with a clean configuration error (exit status 1, the file or override and the limit on
//! stderr), not a panic (101) or an abort (134).

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

/// Asserts a clean configuration failure whose stderr holds every `wanted`.
fn assert_clean_error(out: &Output, wanted: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected a clean failure, got {:?}; stderr:\n{}",
        out.status,
        &stderr[..stderr.len().min(2000)]
    );
    for w in wanted {
        assert!(stderr.contains(w), "expected {w:?} in stderr:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn an_alias_bomb_fails_cleanly_in_config_show_and_check() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = format!("l0: &l0 [{}]\n", ["lol"; 9].join(", "));
    for i in 1..9 {
        let items = std::iter::repeat_n(format!("*l{}", i - 1), 9)
            .collect::<Vec<_>>()
            .join(", ");
        text.push_str(&format!("l{i}: &l{i} [{items}]\n"));
    }
    std::fs::write(tmp.path().join("laughs.yaml"), text).unwrap();
    for cmd in ["show", "check"] {
        let out = rlprof(&["config", cmd, "laughs.yaml"], tmp.path());
        assert_clean_error(&out, &["laughs.yaml", "500000"]);
    }
}

#[test]
fn a_deep_override_and_a_long_chain_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let mut chain = String::new();
    for i in 0..10_000 {
        chain.push_str(&format!("k{i}: ${{k{}}}\n", i + 1));
    }
    chain.push_str("k10000: end\n");
    std::fs::write(tmp.path().join("chain.yaml"), chain).unwrap();
    let out = rlprof(&["config", "show", "chain.yaml"], tmp.path());
    assert_clean_error(&out, &["chain.yaml", "deeper than 64 levels"]);

    std::fs::write(tmp.path().join("base.yaml"), "a0: 1\n").unwrap();
    let ov = format!("+a={}", "[".repeat(30_000));
    let out = rlprof(&["config", "check", "base.yaml", &ov], tmp.path());
    assert_clean_error(&out, &["override '+a=[[[", "deeper than 64 levels"]);
}

#[test]
fn a_nul_byte_fails_cleanly_with_its_position() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("nul.yaml"),
        "global_profiler:\n  tool: npu\0\n  steps: [1]\n",
    )
    .unwrap();
    let out = rlprof(&["config", "check", "nul.yaml"], tmp.path());
    assert_clean_error(&out, &["nul.yaml:2:12:", "unacceptable character #x0000"]);
}
