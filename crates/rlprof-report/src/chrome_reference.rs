//! The serde_json-based Chrome-trace loader that `chrome.rs` replaced, kept (tests only) as the
//! oracle the hand-written reader is checked against: on the same text both must accept or
//! reject, and build the same profile.

use crate::chrome_reader::{MAX_ARGS_TEXT, classify};
use crate::model::{Detail, Event, MemEvent, NONE, Profile, Track};
use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::HashMap;

/// Parses a whole Chrome-trace text into `p`.
pub(crate) fn read_text(text: &str, p: &mut Profile, max_events: u64) -> Result<(), String> {
    let mut sink = Sink::new(p, max_events);
    let mut de = serde_json::Deserializer::from_str(text);
    let res = TopSeed { sink: &mut sink }
        .deserialize(&mut de)
        .and_then(|()| de.end());
    drop(de);
    let limit_hit = sink.limit_hit;
    sink.finish();
    if limit_hit {
        return Err("event limit".into());
    }
    res.map_err(|e| e.to_string())
}

/// One trace event as found in the file (unused fields are skipped unparsed).
#[derive(Deserialize)]
struct RawEvent {
    #[serde(default)]
    ph: Option<String>,
    #[serde(default)]
    name: Option<serde_json::Value>,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    pid: Option<serde_json::Value>,
    #[serde(default)]
    tid: Option<serde_json::Value>,
    // Raw text, so that decimal microseconds are read exactly (a `Value` would hold an f64).
    #[serde(default)]
    ts: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    dur: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    args: Option<serde_json::Value>,
}

/// A `B` event waiting for its `E`: start, name, args, category.
type OpenBegin = (i64, u32, Option<serde_json::Value>, Option<String>);

/// Converts events into the profile as they stream by.
struct Sink<'a> {
    p: &'a mut Profile,
    max_events: u64,
    events: u64,
    limit_hit: bool,
    threads: HashMap<(String, String), u32>,
    thread_pid: Vec<String>,
    process_names: HashMap<String, String>,
    thread_names: HashMap<(String, String), String>,
    open: HashMap<u32, Vec<OpenBegin>>,
    mem_thread: Vec<u32>,
    mem_host: Vec<bool>,
    base_ns: Option<u64>,
    dist_rank: Option<u32>,
}

impl<'a> Sink<'a> {
    fn new(p: &'a mut Profile, max_events: u64) -> Sink<'a> {
        Sink {
            p,
            max_events,
            events: 0,
            limit_hit: false,
            threads: HashMap::new(),
            thread_pid: Vec::new(),
            process_names: HashMap::new(),
            thread_names: HashMap::new(),
            open: HashMap::new(),
            mem_thread: Vec::new(),
            mem_host: Vec::new(),
            base_ns: None,
            dist_rank: None,
        }
    }

    fn thread(&mut self, pid: &Option<serde_json::Value>, tid: &Option<serde_json::Value>) -> u32 {
        let key = (id_text(pid), id_text(tid));
        if let Some(&t) = self.threads.get(&key) {
            return t;
        }
        let t = self.thread_pid.len() as u32;
        self.thread_pid.push(key.0.clone());
        self.threads.insert(key, t);
        t
    }

    /// Takes one event; returns false when the event limit is reached.
    fn push(&mut self, ev: RawEvent) -> bool {
        self.events += 1;
        if self.events > self.max_events {
            self.limit_hit = true;
            return false;
        }
        let name = ev.name.as_ref().map(value_text).unwrap_or_default();
        let ph = ev.ph.as_deref().unwrap_or("");
        match ph {
            "X" => {
                let t = self.thread(&ev.pid, &ev.tid);
                let start = us_to_ns(ev.ts.as_deref());
                let dur = us_to_ns(ev.dur.as_deref()).max(0);
                self.add_event(t, &name, ev.cat.as_deref(), start, dur, ev.args);
            }
            "B" => {
                let t = self.thread(&ev.pid, &ev.tid);
                let start = us_to_ns(ev.ts.as_deref());
                let n = self.p.intern(&name);
                self.open
                    .entry(t)
                    .or_default()
                    .push((start, n, ev.args, ev.cat));
            }
            "E" => {
                let t = self.thread(&ev.pid, &ev.tid);
                let end = us_to_ns(ev.ts.as_deref());
                if let Some((start, n, args, cat)) = self.open.get_mut(&t).and_then(|v| v.pop()) {
                    let name = self.p.str(n).to_string();
                    self.add_event(t, &name, cat.as_deref(), start, (end - start).max(0), args);
                }
            }
            "i" | "I" if name == "[memory]" => self.add_memory(&ev),
            "M" => self.add_meta(&ev, &name),
            _ => {}
        }
        true
    }

    fn add_event(
        &mut self,
        thread: u32,
        name: &str,
        cat: Option<&str>,
        start: i64,
        dur: i64,
        args: Option<serde_json::Value>,
    ) {
        if crate::chrome_reader::is_whole_trace(cat) {
            return;
        }
        let track = classify(cat, name);
        if track == Track::Step
            && let Some(n) = name
                .strip_prefix("ProfilerStep#")
                .and_then(|s| s.parse().ok())
            && !self.p.steps.contains(&n)
        {
            self.p.steps.push(n);
        }
        let detail = args
            .map(|a| detail_of(track, a))
            .filter(|d| *d != Detail::default())
            .map(|d| self.p.add_detail(d))
            .unwrap_or(NONE);
        let name = self.p.intern(name);
        self.p.events.push(Event {
            start,
            dur,
            name,
            detail,
            thread,
            depth: 0,
            track,
        });
    }

    fn add_memory(&mut self, ev: &RawEvent) {
        let Some(args) = ev.args.as_ref() else { return };
        let num = |k: &str| args.get(k).and_then(value_i64);
        let t = self.thread(&ev.pid, &ev.tid);
        self.mem_thread.push(t);
        self.mem_host.push(num("Device Type") == Some(0));
        self.p.memory.push(MemEvent {
            t: us_to_ns(ev.ts.as_deref()),
            delta: num("Bytes").unwrap_or(0),
            addr: num("Addr").unwrap_or(0) as u64,
            op: NONE,
            total: num("Total Allocated"),
        });
    }

    fn add_meta(&mut self, ev: &RawEvent, name: &str) {
        let label = ev
            .args
            .as_ref()
            .and_then(|a| a.get("name").or_else(|| a.get("labels")))
            .map(value_text);
        let Some(label) = label else { return };
        match name {
            "process_name" => {
                self.process_names.insert(id_text(&ev.pid), label);
            }
            "thread_name" => {
                self.thread_names
                    .insert((id_text(&ev.pid), id_text(&ev.tid)), label);
            }
            _ => {}
        }
    }

    /// Applies what is known only at the end: process names (Ascend's device processes),
    /// thread names, memory attribution, the rank and the time base.
    fn finish(self) {
        let Sink {
            p,
            threads,
            thread_pid,
            process_names,
            thread_names,
            mem_thread,
            mem_host,
            base_ns,
            dist_rank,
            ..
        } = self;
        crate::chrome_reader::demote_nested_role_calls(&mut p.events);
        let proc_of = |t: u32| {
            process_names
                .get(&thread_pid[t as usize])
                .map(String::as_str)
                .unwrap_or("")
        };
        let tid_of = |t: u32| {
            threads
                .iter()
                .find(|(_, n)| **n == t)
                .and_then(|(k, _)| thread_names.get(k))
                .map(String::as_str)
                .unwrap_or("")
        };
        crate::processes::apply(&mut p.events, &p.strings, proc_of, tid_of);
        let mut names = vec![String::new(); thread_pid.len()];
        for ((pid, tid), t) in &threads {
            let proc_name = process_names
                .get(pid)
                .cloned()
                .unwrap_or(format!("pid {pid}"));
            let th = thread_names
                .get(&(pid.clone(), tid.clone()))
                .cloned()
                .unwrap_or(format!("tid {tid}"));
            names[*t as usize] = format!("{proc_name} / {th}");
        }
        p.threads = names;
        p.origin_ns = base_ns.unwrap_or(0);
        if let Some(r) = dist_rank {
            p.rank = r;
        }
        p.steps.sort_unstable();
        crate::chrome_reader::rl_steps(p);
        attribute_memory(p, &mem_thread);
        crate::chrome_reader::split_host_memory(p, &mem_host);
        p.sort();
    }
}

/// Sets each memory event's op to the innermost host op open on its thread at that time.
fn attribute_memory(p: &mut Profile, mem_thread: &[u32]) {
    let mut ops: HashMap<u32, Vec<(i64, i64, u32)>> = HashMap::new();
    for e in p.events.iter().filter(|e| e.track == Track::Op) {
        ops.entry(e.thread)
            .or_default()
            .push((e.start, e.end(), e.name));
    }
    for v in ops.values_mut() {
        v.sort_unstable();
    }
    for (m, t) in p.memory.iter_mut().zip(mem_thread) {
        let Some(v) = ops.get(t) else { continue };
        let i = v.partition_point(|o| o.0 <= m.t);
        m.op = v[..i]
            .iter()
            .rev()
            .take(256)
            .find(|o| o.1 >= m.t)
            .map(|o| o.2)
            .unwrap_or(NONE);
    }
}

fn detail_of(track: Track, args: serde_json::Value) -> Detail {
    let serde_json::Value::Object(mut m) = args else {
        return Detail {
            args: Some(clip(value_text(&args))),
            ..Detail::default()
        };
    };
    let mut take = |k: &str| m.remove(k).map(|v| clip(value_text(&v)));
    let mut d = Detail {
        shapes: take("Input Dims"),
        dtypes: take("Input type"),
        stack: take("Call stack"),
        module: take("Module Hierarchy"),
        ..Detail::default()
    };
    if track == Track::Comm {
        let n = m.get("In msg nelems").and_then(value_i64);
        let size = m.get("dtype").map(value_text).and_then(|t| dtype_size(&t));
        d.bytes = n.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        let out = m.get("Out msg nelems").and_then(value_i64);
        d.out_bytes = out.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        d.group_size = m
            .get("Group size")
            .and_then(value_i64)
            .and_then(|g| u32::try_from(g).ok());
        d.group = m.get("Process Group Name").map(value_text);
    }
    if !m.is_empty() {
        d.args = Some(clip(serde_json::Value::Object(m).to_string()));
    }
    d
}

fn dtype_size(t: &str) -> Option<u64> {
    Some(match t {
        "Float" | "Int" | "float32" | "int32" => 4,
        "Half" | "BFloat16" | "Short" | "float16" | "bfloat16" => 2,
        "Double" | "Long" | "float64" | "int64" => 8,
        "Byte" | "Char" | "Bool" | "uint8" | "int8" => 1,
        _ => return None,
    })
}

fn clip(mut s: String) -> String {
    if s.len() > MAX_ARGS_TEXT {
        let mut cut = MAX_ARGS_TEXT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("… (truncated)");
    }
    s
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn id_text(v: &Option<serde_json::Value>) -> String {
    v.as_ref().map(value_text).unwrap_or_default()
}

fn value_i64(v: &serde_json::Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Microseconds (number or numeric string) to nanoseconds.
fn us_to_ns(v: Option<&serde_json::value::RawValue>) -> i64 {
    let Some(raw) = v else { return 0 };
    let text = raw.get();
    let text = if text.starts_with('"') {
        match serde_json::from_str::<String>(text) {
            Ok(s) => s.trim().to_string(),
            Err(_) => return 0,
        }
    } else {
        text.to_string()
    };
    crate::exact_time::us_to_ns(&text).unwrap_or(0)
}

struct TopSeed<'s, 'a> {
    sink: &'s mut Sink<'a>,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Chrome trace object with traceEvents, or an array of events")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut saw_events = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => {
                    saw_events = true;
                    map.next_value_seed(EventsSeed {
                        sink: &mut *self.sink,
                    })?
                }
                "baseTimeNanoseconds" => {
                    self.sink.base_ns = map.next_value::<Option<u64>>()?;
                }
                "distributedInfo" => {
                    let v: serde_json::Value = map.next_value()?;
                    self.sink.dist_rank = v.get("rank").and_then(|r| r.as_u64()).map(|r| r as u32);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !saw_events {
            return Err(serde::de::Error::custom("no traceEvents array"));
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        EventsSeed { sink: self.sink }.visit_seq(seq)
    }
}

struct EventsSeed<'s, 'a> {
    sink: &'s mut Sink<'a>,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(ev) = seq.next_element::<RawEvent>()? {
            if !self.sink.push(ev) {
                return Err(serde::de::Error::custom("event limit reached"));
            }
        }
        Ok(())
    }
}
