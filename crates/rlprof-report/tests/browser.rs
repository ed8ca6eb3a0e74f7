//! Browser test: the HTML report in headless Chromium (Debian's `chromium`, driven by npm's
//! `playwright-core`). `#[ignore = "needs ..."]`: CI installs both and runs it by name (see
//! .ci/run). NODE_PATH must reach playwright-core
//! (default /opt/rlprof-node/node_modules).

mod support;

use rlprof_report::{HtmlOptions, Limits, compare, load, render_html, summarise};
use std::path::Path;

#[test]
#[ignore = "needs /usr/bin/chromium and node with playwright-core (NODE_PATH)"]
fn the_report_opens_in_chromium_and_a_clicked_event_shows_its_details() {
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
    // Step 2's collection (verl's layout: every step's collection under `train/`), and the
    // timeline group of step 1's.
    let of_step = |n: u64| {
        loaded
            .profiles
            .iter()
            .find(|p| p.steps == [n])
            .expect("a collection of the step")
    };
    let step2 = of_step(2).source.parent().and_then(Path::parent).unwrap();
    let group1 = of_step(1).group.clone();
    let b = summarise(&load(step2, &Limits::default()).unwrap());
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
        .arg(&group1)
        .env("NODE_PATH", node_path)
        .output()
        .expect("node must be installed for the browser test");
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
