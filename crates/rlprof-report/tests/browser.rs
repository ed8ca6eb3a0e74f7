//! Browser test: the HTML report in headless Chromium (Debian's `chromium`, driven by npm's
//! `playwright-core`). `#[ignore = "needs ..."]`: CI installs both and runs it by name (see
//! .ci/run). NODE_PATH must reach playwright-core
//! (default /opt/rlprof-node/node_modules).

mod support;

use rlprof_report::{HtmlOptions, Limits, compare, load, render_html, summarise};
use std::path::Path;

/// Runs `tests/browser/{script}` with `args` under node (NODE_PATH reaching playwright-core);
/// fails unless it exits cleanly, and gives what it printed.
fn node(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let node_path =
        std::env::var("NODE_PATH").unwrap_or_else(|_| "/opt/rlprof-node/node_modules".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(script);
    let res = std::process::Command::new("node")
        .arg(&script)
        .args(args)
        .env("NODE_PATH", node_path)
        .output()
        .expect("node must be installed for the browser test");
    let say =
        String::from_utf8_lossy(&res.stdout).to_string() + &String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "browser check failed:\n{say}");
    say
}

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
    let say = node(
        "check.js",
        &[
            page.as_os_str(),
            shot.as_os_str(),
            "ProfilerStep#1".as_ref(),
            group1.as_ref(),
        ],
    );
    assert!(say.contains("browser check passed"), "{say}");
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "screenshot written"
    );
    eprintln!("{say}screenshot: {}", shot.display());
}

/// A cluster of 64 ranks (PyTorch traces with memory events), read one rank at a time and its
/// page written with its shown ranks read again: the page opens on the overview (the time is
/// printed) and builds each rank's memory detail only when asked.
#[test]
#[ignore = "needs /usr/bin/chromium and node with playwright-core (NODE_PATH)"]
fn a_cluster_page_opens_on_its_overview_and_builds_rank_detail_on_demand() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..64u32 {
        let dur = 400 + 13 * rank;
        let trace = format!(
            r#"{{"distributedInfo": {{"rank": {rank}, "world_size": 64}}, "traceEvents": [
 {{"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":{step}}},
 {{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":5,"dur":{dur}}},
 {{"ph":"X","cat":"kernel","name":"MatMul","pid":2,"tid":7,"ts":10,"dur":{dur}}},
 {{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":6,"args":{{"Bytes":4096,"Addr":1,"Total Allocated":{a}}}}},
 {{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":9,"args":{{"Bytes":-4096,"Addr":1,"Total Allocated":{b}}}}}]}}"#,
            step = dur + 100,
            a = 8192 + rank,
            b = 4096 + rank
        );
        let d = tmp.path().join(format!("rank{rank}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("r{rank}.pt.trace.json")), trace).unwrap();
    }
    let s = rlprof_report::summary::summarise_path(
        tmp.path(),
        &Limits::default(),
        rlprof_report::summary::Keep::None,
    )
    .unwrap();
    assert_eq!(s.report.memory.len(), 64);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let page = out.join("rlprof_report_cluster.html");
    let mut f = std::fs::File::create(&page).unwrap();
    rlprof_report::html::write_html_summarised(&s, &HtmlOptions::default(), &mut f).unwrap();
    drop(f);
    let say = node("cluster.js", &[page.as_os_str()]);
    assert!(say.contains("cluster browser check passed"), "{say}");
    eprintln!("{say}");
}
