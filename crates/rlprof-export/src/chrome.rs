//! Streaming Chrome trace-event writer shared by the `torch` trace and the npu `trace_view.json`.
//!
//! Events are formatted by hand into a reusable buffer (no per-event JSON tree), names are
//! escaped once per id, and times are microseconds with 3 decimals relative to a base, so a
//! trace of millions of events is written at disk speed with bounded memory.

use crate::attrib::{OpRef, Out, RangeInfo};
use crate::decode::{CommEv, Event, Index, KernelEv, MemEv};
use crate::memory::MemTracker;
use rlprof_profiler::record::RangeCat;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;

/// Which consumer family the trace is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// PyTorch profiler (kineto) layout: `traceEvents` object, `cpu_op`, `kernel`, `ac2g` flows.
    Torch,
    /// Ascend `trace_view.json`: a bare array; device process named `Ascend Hardware`.
    Ascend,
}

/// Appends `s` as a JSON string literal (with quotes).
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `ns` as microseconds with 3 decimals.
pub fn us3(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

/// Pids and tids of the trace's tracks.
#[derive(Debug, Clone, Copy)]
pub struct Tracks {
    /// Host process id.
    pub host_pid: u64,
    /// Device process id (kernels).
    pub device_pid: u64,
    /// Communication track's pid.
    pub comm_pid: u64,
}

/// Writes one trace's events.
pub struct ChromeWriter<W: Write> {
    out: W,
    buf: String,
    first: bool,
    base_ns: u64,
    flavor: Flavor,
    tracks: Tracks,
    names: HashMap<u32, Box<str>>,
    /// Events written (excluding metadata).
    pub events: u64,
    /// Sum of durations of complete events by category name.
    pub dur_by_cat: HashMap<&'static str, u64>,
    streams: std::collections::BTreeSet<u16>,
}

impl<W: Write> ChromeWriter<W> {
    /// Starts a trace; `prefix` is written before the first event (`{"...": ..., "traceEvents": [`
    /// or `[`).
    pub fn new(
        mut out: W,
        prefix: &str,
        base_ns: u64,
        flavor: Flavor,
        tracks: Tracks,
    ) -> std::io::Result<Self> {
        out.write_all(prefix.as_bytes())?;
        Ok(ChromeWriter {
            out,
            buf: String::with_capacity(1 << 16),
            first: true,
            base_ns,
            flavor,
            tracks,
            names: HashMap::new(),
            events: 0,
            dur_by_cat: HashMap::new(),
            streams: Default::default(),
        })
    }

    fn sep(&mut self) {
        if !self.first {
            self.buf.push_str(",\n");
        }
        self.first = false;
    }

    fn name(&mut self, idx: &Index, id: u32) {
        let e = self.names.entry(id).or_insert_with(|| {
            let mut s = String::new();
            json_str(&mut s, idx.name(id));
            s.into_boxed_str()
        });
        self.buf.push_str(e);
    }

    fn ts(&mut self, ns: u64) {
        us3(&mut self.buf, ns.saturating_sub(self.base_ns));
    }

    fn maybe_flush(&mut self) -> std::io::Result<()> {
        if self.buf.len() > 1 << 16 {
            self.out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A metadata event (`process_name`, `thread_name`, `process_labels`, ...).
    pub fn metadata(&mut self, name: &str, pid: u64, tid: Option<u64>, key: &str, value: &str) {
        self.sep();
        let _ = write!(
            self.buf,
            "{{\"ph\":\"M\",\"name\":\"{name}\",\"pid\":{pid},"
        );
        if let Some(t) = tid {
            let _ = write!(self.buf, "\"tid\":{t},");
        }
        let _ = write!(self.buf, "\"ts\":0,\"args\":{{\"{key}\":");
        json_str(&mut self.buf, value);
        self.buf.push_str("}}");
    }

    /// Writes the metadata naming the host threads and processes.
    pub fn track_metadata(&mut self, idx: &Index) {
        let t = self.tracks;
        let (host, device, comm) = match self.flavor {
            Flavor::Torch => ("python", "CPU engine", "Communication"),
            Flavor::Ascend => ("Python", "Ascend Hardware", "Communication"),
        };
        let rank = idx.meta.rank;
        self.metadata("process_name", t.host_pid, None, "name", host);
        self.metadata(
            "process_labels",
            t.host_pid,
            None,
            "labels",
            &format!("CPU rank {rank}"),
        );
        self.metadata("process_sort_index", t.host_pid, None, "sort_index", "0");
        self.metadata("process_name", t.device_pid, None, "name", device);
        self.metadata(
            "process_labels",
            t.device_pid,
            None,
            "labels",
            &format!("{} 0", self.device_label(idx)),
        );
        if self.flavor == Flavor::Ascend {
            self.metadata("process_name", t.comm_pid, None, "name", comm);
        }
        for (tid, name) in idx.threads.clone() {
            self.metadata("thread_name", t.host_pid, Some(tid as u64), "name", &name);
        }
    }

    fn device_label(&self, _idx: &Index) -> &'static str {
        match self.flavor {
            Flavor::Torch => "CPU engine",
            Flavor::Ascend => "NPU",
        }
    }

    /// Writes one attributed event.
    pub fn push(&mut self, idx: &Index, out: &Out, mem: &MemTracker) -> std::io::Result<()> {
        match out {
            Out::Range(r) => self.range(idx, r),
            Out::Kernel(k, op) => self.kernel(idx, k, op.as_ref()),
            Out::Other(Event::Comm(c)) => self.comm(idx, c),
            Out::Other(Event::Memory(m)) => self.memory(m, mem),
            Out::Other(Event::Instant(t, ts, name, v)) => self.instant(idx, *t, *ts, *name, *v),
            Out::Other(Event::Counter(t, ts, name, v)) => self.counter(idx, *t, *ts, *name, *v),
            Out::Other(_) => {}
        }
        self.maybe_flush()
    }

    fn complete_head(&mut self, cat: &'static str, pid: u64, tid: u64, start: u64, end: u64) {
        self.sep();
        self.events += 1;
        *self.dur_by_cat.entry(cat).or_default() += end - start;
        let _ = write!(
            self.buf,
            "{{\"ph\":\"X\",\"cat\":\"{cat}\",\"pid\":{pid},\"tid\":{tid},\"ts\":"
        );
        self.ts(start);
        self.buf.push_str(",\"dur\":");
        us3(&mut self.buf, end - start);
        self.buf.push_str(",\"name\":");
    }

    fn range(&mut self, idx: &Index, ri: &RangeInfo) {
        let r = &ri.r;
        let cat = match RangeCat::from_u8(r.cat) {
            Some(RangeCat::Op) => "cpu_op",
            Some(RangeCat::Api) => match self.flavor {
                Flavor::Torch => "cuda_runtime",
                Flavor::Ascend => "api",
            },
            Some(RangeCat::Runtime) => "runtime",
            Some(RangeCat::Span) => "python_function",
            _ => "user_annotation",
        };
        self.complete_head(cat, self.tracks.host_pid, r.thread as u64, r.start, r.end);
        self.name(idx, r.name);
        self.buf.push_str(",\"args\":{");
        if ri.ext_id != 0 {
            let _ = write!(self.buf, "\"External id\":{}", ri.ext_id);
            if r.shapes != 0 {
                self.buf.push_str(",\"Input Dims\":");
                input_dims(&mut self.buf, idx.name(r.shapes));
            }
            if r.dtypes != 0 {
                self.buf.push_str(",\"Input type\":");
                string_list(&mut self.buf, idx.name(r.dtypes));
            }
            if r.stack != 0 {
                self.buf.push_str(",\"Call stack\":");
                json_str(&mut self.buf, idx.name(r.stack));
            }
            if r.module != 0 {
                self.buf.push_str(",\"Module Hierarchy\":");
                json_str(&mut self.buf, idx.name(r.module));
            }
            if ri.dev_self > 0 {
                self.flow_start(r.thread as u64, r.start, ri.ext_id);
            }
            self.buf.push('}');
        } else {
            if let Some(it) = r.iter_id {
                let _ = write!(self.buf, "\"iteration\":{it}");
            }
            self.buf.push('}');
        }
        self.buf.push('}');
    }

    fn flow_start(&mut self, tid: u64, ts: u64, id: u64) {
        // Closes the args and event of the op first: the flow is a separate event.
        self.buf.push_str("}}");
        self.sep();
        let cat = self.flow_cat();
        let _ = write!(
            self.buf,
            "{{\"ph\":\"s\",\"id\":{id},\"pid\":{},\"tid\":{tid},\"ts\":",
            self.tracks.host_pid
        );
        self.ts(ts);
        let _ = write!(self.buf, ",\"cat\":\"{cat}\",\"name\":\"{cat}\"");
        // The caller closes with "}" twice; make them close this flow event cleanly.
        self.buf.push_str(",\"args\":{");
    }

    fn flow_cat(&self) -> &'static str {
        match self.flavor {
            Flavor::Torch => "ac2g",
            Flavor::Ascend => "HostToDevice",
        }
    }

    fn kernel(&mut self, idx: &Index, k: &KernelEv, op: Option<&OpRef>) {
        self.streams.insert(k.stream);
        let cat = "kernel";
        self.complete_head(cat, self.tracks.device_pid, k.stream as u64, k.start, k.end);
        self.name(idx, k.name);
        let _ = write!(
            self.buf,
            ",\"args\":{{\"device\":0,\"stream\":{},\"correlation\":{}",
            k.stream,
            op.map_or(0, |o| o.ext_id)
        );
        if let Some(o) = op {
            let _ = write!(self.buf, ",\"External id\":{}", o.ext_id);
        }
        if k.flops > 0 {
            let _ = write!(self.buf, ",\"flops\":{}", k.flops);
        }
        if k.bytes > 0 {
            let _ = write!(self.buf, ",\"bytes\":{}", k.bytes);
        }
        self.buf.push_str("}}");
        if let Some(o) = op {
            self.sep();
            let cat = self.flow_cat();
            let _ = write!(
                self.buf,
                "{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                o.ext_id, self.tracks.device_pid, k.stream
            );
            self.ts(k.start);
            let _ = write!(self.buf, ",\"cat\":\"{cat}\",\"name\":\"{cat}\"}}");
        }
    }

    fn comm(&mut self, idx: &Index, c: &CommEv) {
        let (pid, tid) = match self.flavor {
            Flavor::Torch => (self.tracks.host_pid, c.thread as u64),
            Flavor::Ascend => (self.tracks.comm_pid, 0),
        };
        self.complete_head("cpu_op", pid, tid, c.start, c.end);
        match self.flavor {
            Flavor::Torch => self.buf.push_str("\"record_param_comms\""),
            Flavor::Ascend => self.name(idx, c.name),
        }
        self.buf.push_str(",\"args\":{\"Collective name\":");
        self.name(idx, c.name);
        self.buf.push_str(",\"Process Group Name\":");
        self.name(idx, c.group);
        let _ = write!(
            self.buf,
            ",\"Group size\":{},\"Bytes\":{},\"Wait Time(us)\":",
            idx.meta.world_size, c.bytes
        );
        us3(&mut self.buf, c.wait_ns);
        if let Some(p) = c.peer {
            let _ = write!(self.buf, ",\"Peer rank\":{p}");
        }
        self.buf.push_str("}}");
    }

    fn memory(&mut self, m: &MemEv, mem: &MemTracker) {
        self.sep();
        self.events += 1;
        let _ = write!(
            self.buf,
            "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"pid\":{},\"tid\":{},\"ts\":",
            self.tracks.host_pid, m.thread
        );
        self.ts(m.ts);
        let signed = if m.free {
            -(m.bytes as i64)
        } else {
            m.bytes as i64
        };
        let _ = write!(
            self.buf,
            ",\"args\":{{\"Device Type\":0,\"Device Id\":{},\"Addr\":{},\"Bytes\":{signed},\"Total Allocated\":{},\"Total Reserved\":{}}}}}",
            m.device, m.addr, mem.allocated, mem.reserved()
        );
    }

    fn instant(&mut self, idx: &Index, t: u32, ts: u64, name: u32, v: u64) {
        self.sep();
        self.events += 1;
        let _ = write!(
            self.buf,
            "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"instant\",\"pid\":{},\"tid\":{t},\"ts\":",
            self.tracks.host_pid
        );
        self.ts(ts);
        self.buf.push_str(",\"name\":");
        self.name(idx, name);
        let _ = write!(self.buf, ",\"args\":{{\"value\":{v}}}}}");
    }

    fn counter(&mut self, idx: &Index, _t: u32, ts: u64, name: u32, v: u64) {
        self.sep();
        self.events += 1;
        let _ = write!(
            self.buf,
            "{{\"ph\":\"C\",\"pid\":{},\"ts\":",
            self.tracks.host_pid
        );
        self.ts(ts);
        self.buf.push_str(",\"name\":");
        self.name(idx, name);
        let _ = write!(self.buf, ",\"args\":{{\"value\":{v}}}}}");
    }

    /// Writes `suffix` (`]` or `], ...}`) and returns the inner writer.
    pub fn finish(mut self, suffix: &str) -> std::io::Result<W> {
        self.buf.push_str(suffix);
        self.out.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        Ok(self.out)
    }

    /// Names the device streams seen (call before `finish`).
    pub fn stream_metadata(&mut self) {
        let streams: Vec<u16> = self.streams.iter().copied().collect();
        for s in streams {
            let pid = self.tracks.device_pid;
            self.metadata(
                "thread_name",
                pid,
                Some(s as u64),
                "name",
                &format!("stream {s}"),
            );
        }
    }
}

/// `"32,64;64,128"` -> `[[32,64],[64,128]]` (an empty string gives `[]`).
pub fn input_dims(out: &mut String, shapes: &str) {
    out.push('[');
    for (i, s) in shapes.split(';').filter(|s| !s.is_empty()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        let dims: Vec<&str> = s.split(',').filter(|d| d.parse::<u64>().is_ok()).collect();
        out.push_str(&dims.join(","));
        out.push(']');
    }
    out.push(']');
}

/// `"float32;int64"` -> `["float32","int64"]`.
pub fn string_list(out: &mut String, list: &str) {
    out.push('[');
    for (i, s) in list.split(';').filter(|s| !s.is_empty()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, s);
    }
    out.push(']');
}
