//! Hostile foreign input: markup, control characters and invalid UTF-8 render as inert text;
//! huge or deeply nested input fails with a clear error naming the limit, in bounded memory.

use rlprof_report::chrome_reader::{load_trace, read_stream};
use rlprof_report::model::{Profile, SourceFormat};
use rlprof_report::{HtmlOptions, Limits, load, render_html, render_json, render_text, summarise};
use std::io::Read;
use std::path::Path;

const EVIL: &str = "<script>alert(1)</script>\"onload=alert(2) <img src=x onerror=alert(3)>";

fn hostile_trace() -> Vec<u8> {
    let name = serde_json::to_string(&format!("{EVIL}\u{1}\u{1b}[31m")).unwrap();
    let mut t = format!(
        r#"{{"traceEvents":[
{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100}},
{{"ph":"X","cat":"cpu_op","name":{name},"pid":1,"tid":1,"ts":1,"dur":50,"args":{{"Input Dims":{name},"</script><script>x()</script>":1}}}},
{{"ph":"X","cat":"cpu_op","name":"bad-"#
    )
    .into_bytes();
    t.extend_from_slice(b"\xff\xfe\xc3");
    t.extend_from_slice(br#"-utf8","pid":1,"tid":1,"ts":60,"dur":10}]}"#);
    t
}

#[test]
fn markup_control_characters_and_invalid_utf8_are_inert_text() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("<script>alert(4)<");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("x<script>.pt.trace.json");
    std::fs::write(&f, hostile_trace()).unwrap();
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    let report = summarise(&loaded);
    let names: Vec<&str> = report.top.iter().map(|r| r.name.as_str()).collect();
    assert!(names.iter().any(|n| n.starts_with(EVIL)), "{names:?}");
    assert!(
        names.contains(&"bad-\u{FFFD}\u{FFFD}\u{FFFD}-utf8"),
        "{names:?}"
    );

    let html = render_html(&report, &loaded.profiles, &HtmlOptions::default()).unwrap();
    let lower = html.to_lowercase();
    assert_eq!(
        lower.matches("<script").count(),
        2,
        "only our two script blocks"
    );
    assert_eq!(lower.matches("</script").count(), 2);
    assert!(!html.contains("<img"));
    assert!(html.contains("\\u003cscript\\u003ealert(1)"));
    // The embedded data is valid JSON that round-trips the hostile name.
    let start = html.find("id=\"rlprof-data\">").unwrap() + "id=\"rlprof-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let v: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    assert!(v["report"]["top"].to_string().contains("alert(1)"));
    // The viewer never uses innerHTML or similar sinks.
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!html.contains(sink), "{sink} in the page");
    }
    let text = render_text(&report);
    assert!(!text.contains('\u{1b}') && !text.contains('\u{1}'));
    assert!(text.contains("\\u{1b}[31m"));
    let json = render_json(&report).unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
}

/// An endless trace: `{"traceEvents":[` then the same event forever.
struct Endless {
    head: bool,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let chunk: &[u8] = if self.head {
            self.head = false;
            b"{\"traceEvents\":["
        } else {
            b"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1},"
        };
        let n = chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&chunk[..n]);
        Ok(n)
    }
}

fn profile() -> Profile {
    Profile::new("t".into(), SourceFormat::TorchTrace, 0, "g".into())
}

#[test]
fn an_endless_stream_stops_at_the_size_limit() {
    let limits = Limits {
        max_bytes: 4 << 20,
        max_events: u64::MAX,
    };
    let mut p = profile();
    let err = read_stream(
        Endless { head: true },
        Path::new("endless.json"),
        &mut p,
        &limits,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("uncompressed size in bytes exceeds the limit of 4194304"),
        "{err}"
    );
    assert!(err.contains("endless.json"));
}

#[test]
fn the_event_limit_is_enforced() {
    // Input is held in memory up to `max_bytes` (1 GiB by default) before parsing, so the event
    // limit is tested on a finite stream of 50,000 events under a byte limit it does not reach.
    let limits = Limits {
        max_bytes: 64 << 20,
        max_events: 1000,
    };
    let mut p = profile();
    let event = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":1}"#;
    let mut text = String::from(r#"{"traceEvents":["#);
    text.push_str(&vec![event; 50_000].join(","));
    text.push_str("]}");
    let input = std::io::Cursor::new(text.into_bytes());
    let err = read_stream(input, Path::new("e.json"), &mut p, &limits)
        .unwrap_err()
        .to_string();
    assert!(err.contains("events exceeds the limit of 1000"), "{err}");
    assert!(p.events.len() <= 1000);
}

#[test]
fn a_2_gib_file_is_refused_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("huge.pt.trace.json");
    std::fs::File::create(&f).unwrap().set_len(2 << 30).unwrap(); // sparse: no disk used
    let err = load_trace(&f, "g", &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("exceeds the limit of 1073741824"), "{err}");
    // Through discovery it is listed as skipped, by name.
    let err = load(tmp.path(), &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("huge.pt.trace.json"), "{err}");
}

#[test]
fn deep_nesting_is_a_clear_error_not_a_stack_overflow() {
    let depth = 200_000;
    let mut t = String::from(r#"{"traceEvents":[{"ph":"X","name":"a","args":"#);
    t.push_str(&"[".repeat(depth));
    t.push_str(&"]".repeat(depth));
    t.push_str("}]}");
    let mut p = profile();
    let err = read_stream(
        t.as_bytes(),
        Path::new("deep.json"),
        &mut p,
        &Limits::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("JSON nesting depth exceeds the limit of 128"),
        "{err}"
    );
}

#[test]
fn unknown_and_malformed_files_are_skipped_by_name_and_the_rest_is_shown() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("broken.pt.trace.json"), b"[{\"ph\":").unwrap();
    std::fs::write(tmp.path().join("ok.pt.trace.json"), hostile_trace()).unwrap();
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 1);
    assert_eq!(loaded.skipped.len(), 1);
    assert!(loaded.skipped[0].path.ends_with("broken.pt.trace.json"));
}
