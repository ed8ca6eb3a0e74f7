//! The hand-written reader against serde_json: the old serde_json loader
//! (`chrome_reference.rs`) plus `serde_json::Value` (which bounds nesting, checks surrogates
//! and number range everywhere) must accept exactly the documents this loader accepts, and
//! build the same profile from them.
use super::chunk::*;
use super::detail::*;
use super::event::*;
use super::file::*;
use super::merge::*;
use super::parse::*;
use super::time::*;
use super::*;
use crate::device_names::is_comm_name;
use crate::model::{Detail, Event, MemEvent, NONE, Profile, RAW_DETAIL, SourceFormat, Track};
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

type View = (
    Vec<(Track, String, i64, i64, String, Option<Detail>)>,
    Vec<(i64, i64, u64, String, Option<i64>)>,
    Vec<String>,
    Vec<u64>,
    u64,
    u32,
);

fn view(p: &Profile) -> View {
    let events = p
        .events
        .iter()
        .map(|e| {
            (
                e.track,
                p.str(e.name).to_string(),
                e.start,
                e.dur,
                p.threads[e.thread as usize].clone(),
                p.detail(e).map(Cow::into_owned),
            )
        })
        .collect();
    let memory = p
        .memory
        .iter()
        .map(|m| (m.t, m.delta, m.addr, p.str(m.op).to_string(), m.total))
        .collect();
    (
        events,
        memory,
        p.threads.clone(),
        p.steps.clone(),
        p.origin_ns,
        p.rank,
    )
}

fn profile() -> Profile {
    Profile::new("t.json".into(), SourceFormat::TorchTrace, 0, "g".into())
}

fn ours(doc: &str, max_events: u64) -> Result<View, String> {
    let mut p = profile();
    let limits = Limits {
        max_bytes: 1 << 30,
        max_events,
    };
    read_text(doc, Path::new("t.json"), &mut p, &limits)
        .map(|()| view(&p))
        .map_err(|e| e.to_string())
}

fn reference(doc: &str, max_events: u64) -> Result<View, String> {
    serde_json::from_str::<serde_json::Value>(doc).map_err(|e| e.to_string())?;
    let mut p = profile();
    crate::chrome_reference::read_text(doc, &mut p, max_events)?;
    Ok(view(&p))
}

/// Checks one document; returns whether it was accepted.
fn check(doc: &str) -> bool {
    let want = reference(doc, u64::MAX);
    let got = ours(doc, u64::MAX);
    match (&want, &got) {
        (Ok(w), Ok(g)) => {
            assert_eq!(g, w, "{doc}");
            true
        }
        (Err(_), Err(_)) => false,
        _ => panic!("{doc}\nserde_json: {want:?}\nours: {got:?}"),
    }
}

const EV: &str = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":10.5,"dur":3,"args":{"Input Dims":[[4, 8], [8, 16]],"Input type":["float32","float32"],"External id":7}}"#;

fn corpus() -> Vec<String> {
    let wrap = |evs: &str| format!(r#"{{"traceEvents":[{evs}]}}"#);
    let mut v: Vec<String> = [
        EV,
        r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","pid":"1","tid":"2","ts":"5","dur":"100"}"#,
        r#"{"ph":"X","cat":"kernel","name":"ncclAllReduce","pid":0,"tid":7,"ts":1,"dur":2,"args":{"In msg nelems":262144,"dtype":"Float","Process Group Name":"0","z":null,"a":[1,2.50,-0,1e3]}}"#,
        r#"{"ph":"B","cat":"user_annotation","name":"generate_sequences","pid":1,"tid":1,"ts":0,"args":{"k":"v"}},{"ph":"E","pid":1,"tid":1,"ts":50}"#,
        r#"{"ph":"E","pid":1,"tid":9,"ts":50}"#,
        r#"{"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":1,"ts":10,"dur":90},{"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":1,"ts":10,"dur":80},{"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":2,"ts":20,"dur":5}"#,
        r#"{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":11,"args":{"Bytes":4096,"Addr":123,"Total Allocated":8192}},{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":12,"args":{"Bytes":-4096,"Addr":"123","Total Allocated":4096.7}}"#,
        r#"{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":12}"#,
        r#"{"ph":"I","name":"[memory]","pid":1,"tid":2,"ts":12,"args":[1]}"#,
        r#"{"ph":"M","name":"process_name","pid":5,"args":{"name":"Ascend Hardware"}},{"ph":"X","name":"MatMul","pid":5,"tid":1,"ts":1,"dur":1},{"ph":"M","name":"thread_name","pid":5,"tid":1,"args":{"labels":"stream 1"}}"#,
        r#"{"ph":"M","name":"process_name","pid":6,"args":{"name":"Overlap Analysis"}},{"ph":"X","name":"Computing","pid":6,"tid":1,"ts":1,"dur":1}"#,
        r#"["X","pos_name","cpu_op",1,2,3,4,{"Call stack":"a;b"}]"#,
        r#"["X","pos_name"]"#,
        r#"["X","n","c",1,2,3,4,{},5]"#,
        r#"{"p\u0068":"X","name":"esc\"aped\\ \u00e9 \ud83d\ude00 <script>","pid":1,"tid":1,"ts":1,"dur":1,"args":{"k\"ey":"v\u0041\/","Module Hierarchy":"a\nb"}}"#,
        r#"{"ph":"X","name":"中文 é 😀","pid":1,"tid":1,"ts":1,"dur":1,"args":"just text"}"#,
        r#"{"ph":"X","name":12,"pid":1.5,"tid":-0,"ts":1e3,"dur":-5,"args":[1,{"b":2,"a":1}]}"#,
        r#"{"ph":"X","name":null,"cat":null,"pid":null,"ts":null,"args":null}"#,
        r#"{"ph":"X","name":"dup","ph":"X"}"#,
        r#"{"ph":1,"name":"bad ph"}"#,
        r#"{"ph":"X","cat":["x"],"name":"bad cat"}"#,
        r#"{"ph":"X","name":"x","unknown":{"deep":[1,{"x":[]}]},"args":{"dup":1,"dup":2}}"#,
        r#"{"ph":"X","name":"x","args":{"n":1e400}}"#,
        r#"{"ph":"X","name":"x","ignored":1e400}"#,
        r#"{"ph":"X","name":"\ud800"}"#,
        r#"{"ph":"X","name":"x","ignored":"\ud800"}"#,
        r#"{"ph":"X","name":"ctl	tab"}"#,
        r#"1"#,
        r#"null"#,
        r#"{"ph":"X","name":"a"},"#,
        r#"{"ph":"X","name":"a"} {"ph":"X","name":"b"}"#,
        r#"{"ph":"X","name":"a",}"#,
        r#"{"ph":"X","name":"long","args":{"Call stack":"LONG"}}"#,
        // Raw details: too long to keep as text (decoded while loading), empty objects
        // with whitespace, `ph` after `args`, a `B`/`E` pair's, and a track re-assigned
        // after reading (the detail is what the track read gave).
        r#"{"ph":"X","name":"huge","args":{"Call stack":"HUGE","k":[1, 2]}}"#,
        r#"{"ph":"X","name":"huge text","args":"HUGE"}"#,
        r#"{"ph":"B","name":"huge pair","pid":1,"tid":1,"ts":0,"args":{"Input Dims":"HUGE","z":1}},{"ph":"E","pid":1,"tid":1,"ts":5}"#,
        r#"{"ph":"X","name":"empty","args":{ 	 }},{"ph":"B","name":"empty pair","pid":1,"tid":1,"ts":0,"args":{ }},{"ph":"E","pid":1,"tid":1,"ts":5}"#,
        r#"{"name":"late ph","args":{"Module Hierarchy":"m","x":[ 1 ]},"ph":"X"},{"name":"[memory]","args":{"Bytes":4,"Addr":9},"ph":"i","pid":1,"tid":2,"ts":1}"#,
        r#"{"ph":"B","name":"p1","pid":1,"tid":1,"ts":0,"args":{"a":1}},{"ph":"B","name":"p2","pid":1,"tid":1,"ts":1,"args":[2]},{"ph":"E","pid":1,"tid":1,"ts":2},{"ph":"X","name":"between","args":{"b":2}},{"ph":"E","pid":1,"tid":1,"ts":3}"#,
        r#"{"ph":"M","name":"process_name","pid":5,"args":{"name":"Communication"}},{"ph":"X","name":"hcom_allReduce_","pid":5,"tid":1,"ts":1,"dur":1,"args":{"In msg nelems":4,"dtype":"Float","Process Group Name":"g"}}"#,
        "",
    ]
    .iter()
    .map(|e| {
        wrap(
            &e.replace("LONG", &"x".repeat(5000))
                .replace("HUGE", &"y".repeat(MAX_RAW_ARGS)),
        )
    })
    .collect();
    v.extend(
        [
            r#"[]"#,
            r#"{}"#,
            r#"{"traceEvents":[]}"#,
            r#"{"traceEvents":{}}"#,
            r#"{"traceEvents":null}"#,
            r#"{"other":1}"#,
            r#"{"traceEvents":[EV],"traceEvents":[EV]}"#,
            r#"{"distributedInfo":{"rank":3,"x":[1]},"traceEvents":[EV],"baseTimeNanoseconds":1700000000000000000}"#,
            r#"{"traceEvents":[EV],"baseTimeNanoseconds":null}"#,
            r#"{"traceEvents":[EV],"baseTimeNanoseconds":-1}"#,
            r#"{"traceEvents":[EV],"baseTimeNanoseconds":1.5}"#,
            r#"{"traceEvents":[EV],"baseTimeNanoseconds":"1"}"#,
            r#"{"traceEvents":[EV],"baseTimeNanoseconds":18446744073709551616}"#,
            r#"{"traceEvents":[EV]} x"#,
            r#"{"traceEvents":[EV]}  "#,
            r#"{"traceEvents":[EV],}"#,
            r#"{"traceEvents":[EV]"#,
            r#"{"traceEvents":[EV"#,
            r#"[EV,EV]"#,
            " \n[ EV ,\n EV ] \n",
            r#"{"traceEvents":[EV],"deviceProperties":[{"a":1},{"b":2}]}"#,
            r#"{"traceEvents":[EV],"ignored":"\ud800"}"#,
            r#"{"traceEvents":[EV],"ignored":1e999}"#,
        ]
        .iter()
        .map(|d| d.replace("EV", EV)),
    );
    for depth in [120, 124, 125, 126, 127, 200] {
        let nest = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        v.push(format!(
            r#"{{"traceEvents":[{{"ph":"X","name":"a","args":{nest}}}]}}"#
        ));
        v.push(format!(
            r#"{{"traceEvents":[{{"ph":"X","name":"a","ignored":{nest}}}]}}"#
        ));
        v.push(format!(r#"{{"traceEvents":[EV],"x":{nest}}}"#).replace("EV", EV));
    }
    let whole = wrap(&[EV; 3].join(","));
    for cut in (0..whole.len()).step_by(7) {
        v.push(whole[..cut].to_string());
    }
    v
}

#[test]
fn accepts_rejects_and_loads_like_the_serde_json_loader() {
    let docs = corpus();
    let accepted = docs.iter().filter(|d| check(d)).count();
    // Both kinds are well represented.
    assert!(
        accepted >= 30 && docs.len() - accepted >= 60,
        "{accepted} of {}",
        docs.len()
    );
}

/// The checked-in PyTorch traces (hand-written and real, plain and gzipped).
#[test]
fn the_test_traces_load_like_the_serde_json_loader() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut n = 0;
    for sub in ["torch", "torch_real"] {
        for f in std::fs::read_dir(dir.join(sub)).unwrap() {
            let f = f.unwrap().path();
            let mut text = String::new();
            let file = std::fs::File::open(&f).unwrap();
            if f.extension().is_some_and(|e| e == "gz") {
                flate2::read::MultiGzDecoder::new(file).read_to_string(&mut text)
            } else {
                std::io::BufReader::new(file).read_to_string(&mut text)
            }
            .unwrap();
            let want = reference(&text, u64::MAX).unwrap();
            assert!(!want.0.is_empty());
            assert_eq!(ours(&text, u64::MAX).unwrap(), want, "{}", f.display());
            n += 1;
        }
    }
    assert!(n >= 4);
}

#[test]
fn the_event_limit_counts_like_the_serde_json_loader() {
    let doc = format!(r#"{{"traceEvents":[{}]}}"#, [EV; 10].join(","));
    for max in [0, 5, 9, 10, 11] {
        let want = reference(&doc, max).is_ok();
        let got = ours(&doc, max);
        assert_eq!(got.is_ok(), want, "{max}: {got:?}");
        if let Err(e) = got {
            assert!(
                e.contains(&format!("events exceeds the limit of {max}")),
                "{e}"
            );
        }
    }
}

/// A trace of several MB whose strings are full of `,{"` (false event boundaries), parsed
/// in chunks on 4 threads: the same profile as the sequential serde_json loader.
#[test]
fn chunked_parallel_parse_equals_the_sequential_one() {
    let evs = trap_events(30_000);
    let doc = trace_doc(&evs);
    assert!(doc.len() > 4 * CHUNK_BYTES, "{}", doc.len());
    let want = reference(&doc, u64::MAX).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let got = pool.install(|| ours(&doc, u64::MAX)).unwrap();
    assert_eq!(got, want);
    // With a `B`/`E` pair (matched across chunks) the chunks are merged one by one.
    let paired = doc
        .replacen(
            "[\n  ",
            "[\n  {\"ph\":\"B\",\"name\":\"pair\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":{\"a\":1}},",
            1,
        )
        .replacen(
            "\n]",
            ",{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":9}\n]",
            1,
        );
    assert_ne!(paired, doc);
    let want_paired = reference(&paired, u64::MAX).unwrap();
    assert_eq!(
        pool.install(|| ours(&paired, u64::MAX)).unwrap(),
        want_paired
    );
    assert_eq!(want_paired.0.len(), want.0.len() + 1);
    // On one thread the array is parsed in several waves (4 chunks each), each merged before
    // the next is parsed: a pair in the last wave only (the first merged in parallel, the last
    // one by one), and a pair across waves, load the same.
    let late = doc.replacen(
        "\n]",
        ",{\"ph\":\"B\",\"name\":\"late\",\"pid\":1,\"tid\":1,\"ts\":3,\"args\":{\"a\":2}},\
         {\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":7}\n]",
        1,
    );
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    assert!(doc.len() > 5 * CHUNK_BYTES, "{}", doc.len());
    for d in [&doc, &paired, &late] {
        assert_eq!(
            one.install(|| ours(d, u64::MAX)).unwrap(),
            reference(d, u64::MAX).unwrap()
        );
    }
    // The cut guesses did land inside strings (so the re-parse path ran).
    let first = doc.find('[').unwrap() + 4;
    let n = (doc.len() - first) / CHUNK_BYTES;
    let wrong = (1..n)
        .filter_map(|i| next_boundary(doc.as_bytes(), first + (doc.len() - first) / n * i))
        .filter(|&s| !doc[..s].ends_with(",\n  "))
        .count();
    assert!(wrong > 0);
    // An error far into the array is found, with its line.
    let bad = doc.replacen("\"op5\"", "\"op5\" x", 1);
    let err = pool.install(|| ours(&bad, u64::MAX)).unwrap_err();
    assert!(
        err.contains("not a Chrome trace: expected `,` or `}` at line"),
        "{err}"
    );
}

#[test]
fn details_are_kept_as_text_unless_too_long_and_decode_like_serde_json() {
    let huge = "y".repeat(MAX_RAW_ARGS);
    let doc = format!(
        r#"{{"traceEvents":[{EV},{{"ph":"X","name":"huge","args":{{"Call stack":"{huge}"}}}},{{"ph":"B","name":"pair","pid":1,"tid":1,"ts":0,"args":{{"k":[1, 2]}}}},{{"ph":"E","pid":1,"tid":1,"ts":5}},{{"ph":"X","name":"none","args":{{}}}}]}}"#
    );
    let mut p = profile();
    read_text(&doc, Path::new("t.json"), &mut p, &Limits::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let args = |name: &str| {
        let ev = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap();
        ev["args"].clone()
    };
    let by_name = |name: &str| *p.events.iter().find(|e| p.str(e.name) == name).unwrap();
    for (name, raw) in [("aten::mm", true), ("pair", true), ("huge", false)] {
        let e = by_name(name);
        assert_eq!(e.detail & RAW_DETAIL != 0, raw, "{name}");
        let want = detail_of_value(e.track, args(name));
        assert_eq!(p.detail(&e).unwrap().into_owned(), want, "{name}");
    }
    assert_eq!(by_name("none").detail, NONE);
    assert!(p.detail(&by_name("none")).is_none());
    // The one too long to keep is clipped, as every shown field is.
    let huge = p.detail(&by_name("huge")).unwrap();
    assert!(huge.stack.as_ref().unwrap().ends_with("… (truncated)"));
    // Kept text: the two short ones, in two arenas (the chunk's and the pairs').
    assert_eq!(p.raw_details.spans.len(), 2);
    assert_eq!(p.raw_details.arenas.len(), 2);
}

#[test]
fn times_convert_to_ns_exactly_and_like_the_float_path_where_it_is_exact() {
    let float = |tok: &str| (serde_json::from_str::<f64>(tok).unwrap() * 1000.0).round() as i64;
    let mut toks: Vec<String> = [
        "0",
        "-0",
        "-0.0",
        "1",
        "1.002",
        "1.07",
        "0.5",
        "0.0005",
        "2.5e3",
        "1E2",
        "-17.125",
        "1125899906842.623",
        "1125899906842.624",
        "1125899906842.625",
        "9007199254740.993",
        "1700000000000000.123",
        "123456789.999",
        "80.125",
        "0.001",
        "10.100",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut seed = 11u64;
    for _ in 0..20_000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let int = (seed >> 20) % [10, 100_000, 1 << 40, 1 << 51][(seed % 4) as usize];
        let decimals = (seed >> 8) % 5;
        let frac = (seed >> 12) % 10u64.pow(decimals as u32);
        let sign = if seed >> 63 == 1 { "-" } else { "" };
        toks.push(match decimals {
            0 => format!("{sign}{int}"),
            d => format!("{sign}{int}.{frac:0w$}", w = d as usize),
        });
    }
    for tok in &toks {
        let v = Some(tok.as_str());
        // Below 2^50 ns with at most 3 decimals, the float path is exact too; above, only the
        // integer one is (crate::exact_time).
        if tok.trim_start_matches('-').split('.').next().unwrap().len() < 13
            && tok.split('.').nth(1).is_none_or(|d| d.len() <= 3)
        {
            assert_eq!(us_to_ns(v), float(tok), "{tok}");
        }
        assert_eq!(Some(us_to_ns(v)), crate::exact_time::us_to_ns(tok), "{tok}");
    }
    let quoted = format!("\"{}\"", "1700000000123456.789");
    assert_eq!(us_to_ns(Some(&quoted)), 1_700_000_000_123_456_789);
    assert_eq!(us_to_ns(Some("1e3")), 1_000_000);
}

#[test]
fn memory_is_attributed_like_a_search_per_event() {
    let mut seed = 3u64;
    let mut rand = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut p = profile();
    for i in 0..3000 {
        p.events.push(Event {
            start: rand(100_000) as i64,
            dur: rand(if i % 10 == 0 { 5000 } else { 40 }) as i64,
            name: i,
            detail: NONE,
            thread: rand(3) as u32,
            depth: 0,
            track: if i % 7 == 0 { Track::Kernel } else { Track::Op },
        });
    }
    // Mostly in time order (long stretches, gaps of many ops), some out of order, some on
    // a thread without ops.
    let mut t = 0i64;
    let mut threads = Vec::new();
    for i in 0..20_000 {
        t += rand(if i % 500 == 0 { 20_000 } else { 30 }) as i64;
        let at = if i % 97 == 0 {
            rand(100_000) as i64
        } else {
            t % 100_000
        };
        p.memory.push(MemEvent {
            t: at,
            delta: 1,
            addr: 0,
            op: NONE,
            total: None,
        });
        threads.push(if i % 1000 < 900 { 1 } else { rand(4) as u32 });
    }
    let want: Vec<u32> = p
        .memory
        .iter()
        .zip(&threads)
        .map(|(m, &th)| {
            let mut ops: Vec<(i64, i64, u32)> = p
                .events
                .iter()
                .filter(|e| e.track == Track::Op && e.thread == th)
                .map(|e| (e.start, e.end(), e.name))
                .collect();
            ops.sort_unstable();
            let i = ops.partition_point(|o| o.0 <= m.t);
            let mut m = *m;
            attribute_one(&mut m, &ops[..i]);
            m.op
        })
        .collect();
    attribute_memory(&mut p, &threads);
    let got: Vec<u32> = p.memory.iter().map(|m| m.op).collect();
    assert_eq!(got, want);
    assert!(got.iter().filter(|&&o| o != NONE).count() > 1000);
}

#[test]
fn par_append_concatenates_in_order() {
    let mut out = vec![1, 2];
    let parts: Vec<Vec<u64>> = vec![vec![], (3..1000).collect(), vec![], vec![1000], vec![]];
    par_append(&mut out, parts.iter().map(|p| p.iter().copied()).collect());
    assert_eq!(out, (1..=1000).collect::<Vec<u64>>());
    par_append(&mut out, Vec::<std::vec::IntoIter<u64>>::new());
    assert_eq!(out.len(), 1000);
}

#[test]
fn a_role_call_inside_one_of_its_name_is_the_phase_not_a_second_call() {
    // rlprof's torch trace: the `update_actor` role call with the trainer's `update_actor`
    // phase inside it, and a call of the same name on another thread.
    let doc = r#"{"traceEvents":[
      {"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":1,"ts":10,"dur":90},
      {"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":1,"ts":10,"dur":80},
      {"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":1,"ts":200,"dur":50},
      {"ph":"X","cat":"user_annotation","name":"update_actor","pid":1,"tid":2,"ts":20,"dur":5}]}"#;
    let mut p = profile();
    let limits = Limits {
        max_bytes: 1 << 20,
        max_events: 100,
    };
    read_text(doc, Path::new("t.json"), &mut p, &limits).unwrap();
    let mut tracks: Vec<(i64, i64, Track)> =
        p.events.iter().map(|e| (e.start, e.dur, e.track)).collect();
    tracks.sort_by_key(|t| (t.0, std::cmp::Reverse(t.1)));
    assert_eq!(
        tracks,
        vec![
            (10_000, 90_000, Track::RoleCall),
            (10_000, 80_000, Track::Phase),
            (20_000, 5_000, Track::RoleCall),
            (200_000, 50_000, Track::RoleCall),
        ]
    );
}

#[test]
fn field_names_are_found_exactly() {
    for (i, f) in FIELDS.iter().enumerate() {
        assert_eq!(field_index(f), Some(i));
    }
    for k in [
        "", "p", "ph\0", "ph\0\0", "phx", "nam", "names", "Ph", "arg", "argss", "s", "id", "bp",
    ] {
        assert_eq!(field_index(k), None, "{k:?}");
    }
}

#[test]
fn comm_names_are_matched_ignoring_case_like_a_lower_cased_copy() {
    for n in [
        "ncclAllReduce",
        "NCCL_x",
        "hcom_allReduce__1",
        "HCOMbroadcast",
        "my_AllReduce_k",
        "allreduc",
        "gemm",
        "",
        "é_allreduce",
        "xnccl",
    ] {
        let l = n.to_lowercase();
        let want = l.starts_with("nccl") || l.starts_with("hcom") || l.contains("allreduce");
        assert_eq!(is_comm_name(n), want, "{n}");
    }
}

#[test]
fn utf8_is_checked_in_pieces_and_replaced_when_invalid() {
    let mut bytes = "é".repeat(3 * CHUNK_BYTES).into_bytes();
    assert!(matches!(text_of(&bytes), Cow::Borrowed(_)));
    let at = bytes.len() / 2 + 1;
    bytes[at] = 0xff;
    let t = text_of(&bytes);
    assert!(matches!(t, Cow::Owned(_)));
    assert!(t.contains('\u{FFFD}'));
    assert_eq!(t, String::from_utf8_lossy(&bytes));
}

/// `n` complete events (every 997th named with fake event text, so cut guesses land inside
/// strings) and a memory event every 100, as JSON texts.
fn trap_events(n: u32) -> Vec<String> {
    let fake = r#",{\"ph\":\"X\",\"name\":\"fake\"},{\"x\":1}"#.repeat(2000);
    let mut evs = Vec::new();
    for i in 0..n {
        let name = if i % 997 == 0 {
            format!("trap{fake}")
        } else {
            format!("op{}", i % 13)
        };
        evs.push(format!(
            r#"{{"ph":"X","cat":"{}","name":"{name}","pid":1,"tid":{},"ts":{}.{:03},"dur":{},"args":{{"Input Dims":[[{i}]],"n":{{"x":[{{"y":1}},{{"z":2}}]}}}}}}"#,
            if i % 3 == 0 { "cpu_op" } else { "kernel" },
            i % 4,
            i * 10,
            i % 1000,
            i % 50
        ));
        if i % 100 == 0 {
            evs.push(format!(
                r#"{{"ph":"i","name":"[memory]","pid":1,"tid":0,"ts":{},"args":{{"Bytes":{},"Addr":{}}}}}"#,
                i * 10 + 1,
                if i % 200 == 0 { 64 } else { -64 },
                i % 7
            ));
        }
    }
    evs
}

/// A trace of `n` complete events (some with names that hold fake event text, so cut guesses
/// land inside strings), memory events and a `B`/`E` pair spanning the whole array.
fn big_trace(n: u32) -> String {
    let mut evs =
        vec![r#"{"ph":"B","name":"pair","pid":1,"tid":1,"ts":0,"args":{"a":1}}"#.to_string()];
    evs.extend(trap_events(n));
    evs.push(r#"{"ph":"E","pid":1,"tid":1,"ts":9}"#.to_string());
    trace_doc(&evs)
}

/// A trace document of `evs` (one per line) with a trailing `deviceProperties` array.
fn trace_doc(evs: &[String]) -> String {
    format!(
        "{{\"traceEvents\":[\n  {}\n],\"deviceProperties\":[{{\"a\":1}},{{\"b\":2}}]}}",
        evs.join(",\n  ")
    )
}

/// Loads `doc` from a mapped `.json` file and from a `.json.gz` (gunzipped into a map given
/// back in waves) on 2 threads (waves of 8 chunks, so a large document takes several).
fn load_both(doc: &str) -> [Result<View, String>; 2] {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("t.json");
    let gz = dir.path().join("t.json.gz");
    std::fs::write(&plain, doc).unwrap();
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all(doc.as_bytes()).unwrap();
    enc.finish().unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let load = |path: &Path| {
        pool.install(|| {
            let mut p = profile();
            read_into(path, &mut p, &Limits::default())
                .map(|()| view(&p))
                .map_err(|e| e.to_string().replace(&path.display().to_string(), "PATH"))
        })
    };
    [load(&plain), load(&gz)]
}

#[test]
fn pages_given_back_while_parsing_are_never_read_as_text() {
    let doc = big_trace(70_000);
    // More than one wave of 8 chunks on 2 threads.
    assert!(doc.len() > 10 * CHUNK_BYTES, "{}", doc.len());
    let want = reference(&doc, u64::MAX).unwrap();
    let [plain, gz] = load_both(&doc);
    assert_eq!(plain.unwrap(), want);
    assert_eq!(gz.unwrap(), want);
    // An error in a late wave has the line and column of the whole text (the gunzipped
    // text before it was given back, so it is found again).
    let at = doc.rfind("\"op5\"").unwrap();
    assert!(at > 9 * CHUNK_BYTES);
    let bad = format!("{}\"op5\" x{}", &doc[..at], &doc[at + 5..]);
    let want_err = ours(&bad, u64::MAX).unwrap_err();
    let [plain, gz] = load_both(&bad);
    assert_eq!(plain.unwrap_err(), want_err.replace("t.json", "PATH"));
    assert_eq!(gz.unwrap_err(), want_err.replace("t.json", "PATH"));
}

#[test]
fn host_memory_is_split_off_in_order() {
    let mem = |t: i64| MemEvent {
        t,
        delta: 1,
        addr: 0,
        op: NONE,
        total: None,
    };
    let mut p = profile();
    p.memory = (0..5).map(mem).collect();
    // Flags shorter than the events: the rest are device memory.
    split_host_memory(&mut p, &[false, true, false, true]);
    assert_eq!(p.memory, [mem(0), mem(2), mem(4)]);
    assert_eq!(p.host_memory, [mem(1), mem(3)]);
    split_host_memory(&mut p, &[false; 3]);
    assert_eq!(p.memory.len(), 3);
}
