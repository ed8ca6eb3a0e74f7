//! Browser test: the HTML report in headless Chromium (Debian's `chromium`, driven by npm's
//! `playwright-core`). Runs when RLPROF_BROWSER_TESTS=1 (CI sets it and installs both, see
//! .ci/run); otherwise prints why it is skipped. NODE_PATH must reach playwright-core
//! (default /opt/rlprof-node/node_modules).

mod support;

use rlprof_report::{compare, load, render_html, summarise, HtmlOptions, Limits};
use std::path::Path;

#[test]
fn the_report_opens_in_chromium_and_a_clicked_event_shows_its_details() {
    if std::env::var("RLPROF_BROWSER_TESTS").as_deref() != Ok("1") {
        eprintln!("SKIP browser test: set RLPROF_BROWSER_TESTS=1 (needs /usr/bin/chromium and node with playwright-core)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("profile");
    support::collect(&save, &[1, 2], false, 4);
    // A hostile foreign trace beside our collections.
    let foreign = save.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(
        foreign.join("evil.pt.trace.json"),
        r#"{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"<script id=hostile>console.error(1)</script>","pid":1,"tid":1,"ts":0,"dur":5,"args":{"\"onload=":"<img src=x onerror=console.error(2)>"}}]}"#,
    )
    .unwrap();
    let loaded = load(&save, &Limits::default()).unwrap();
    let a = summarise(&loaded);
    let b = summarise(&load(&save.join("step2"), &Limits::default()).unwrap());
    let report = compare(a, &b, "all", "step2");
    let html = render_html(&report, &loaded.profiles, &HtmlOptions::default()).unwrap();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let page = out.join("rlprof_report_browser.html");
    let shot = out.join("rlprof_report_browser.png");
    std::fs::write(&page, html).unwrap();
    let _ = std::fs::remove_file(&shot);
    let node_path =
        std::env::var("NODE_PATH").unwrap_or_else(|_| "/opt/rlprof-node/node_modules".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/check.js");
    let res = std::process::Command::new("node")
        .arg(&script)
        .arg(&page)
        .arg(&shot)
        .arg("ProfilerStep#1")
        .arg("step1/e2e")
        .env("NODE_PATH", node_path)
        .output()
        .expect("node must be installed when RLPROF_BROWSER_TESTS=1");
    let say =
        String::from_utf8_lossy(&res.stdout).to_string() + &String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "browser check failed:\n{say}");
    assert!(say.contains("browser check passed"), "{say}");
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "screenshot written"
    );
    eprintln!("{say}screenshot: {}", shot.display());
}
