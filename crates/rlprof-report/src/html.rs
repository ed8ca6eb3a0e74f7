//! The single-file HTML report: the [`Report`] numbers plus a decimated timeline, embedded as JSON
//! in a `<script type="application/json">` block (every `<`, `>` and `&` escaped, so no input text
//! can close the block) and shown by vanilla JavaScript that inserts all text with `textContent`.
//! Nothing is fetched: the CSS and JS are compiled into the binary.
//!
//! Decimation: structural events (steps, phases, role calls, iterations) are always kept; of the
//! content events (ops, kernels, collectives, ...) at most [`HtmlOptions::max_events`] are kept
//! over the whole report, the longest first, and every lane that lost events also carries a
//! busy-time histogram of all its events, drawn beneath the kept ones, so dense regions stay
//! visible at every zoom. The browser merges sub-pixel events per pixel column when drawing.

use crate::ReportError;
use crate::model::{Event, NONE, Profile, Track};
use crate::summary::Report;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

const CSS: &str = include_str!("../assets/report.css");
const JS: &str = include_str!("../assets/report.js");

/// Bins in a lane's busy-time histogram.
pub const HISTOGRAM_BINS: usize = 2000;
/// Events whose details are decoded together (in parallel) by the timeline.
const DETAIL_BATCH: usize = 1 << 14;
/// Deepest nesting level drawn as its own lane (deeper events share the last lane).
pub const MAX_LANE_DEPTH: usize = 8;

/// HTML options.
#[derive(Debug, Clone)]
pub struct HtmlOptions {
    /// Most content events kept in the timeline, over all profiles.
    pub max_events: usize,
    /// A job of more ranks than this is a cluster: the page opens on the ranks' overview and
    /// keeps the timeline only for rank 0, the slowest and the fastest rank, and `ranks`.
    pub max_detail_ranks: usize,
    /// Ranks whose timeline a cluster page keeps besides those.
    pub ranks: Vec<u32>,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            max_events: 400_000,
            max_detail_ranks: 8,
            ranks: Vec::new(),
        }
    }
}

/// The ranks whose timeline the page keeps: every rank, or for a cluster (more than
/// `opts.max_detail_ranks` distinct ranks) rank 0, the slowest and the fastest by mean busy
/// time per step ([`crate::summary::StepRow::busy_ns`]) and `opts.ranks`.
fn detail_ranks(report: &Report, profiles: &[&Profile], opts: &HtmlOptions) -> Option<Vec<u32>> {
    let mut ranks: Vec<u32> = profiles.iter().map(|p| p.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    if ranks.len() <= opts.max_detail_ranks {
        return None;
    }
    let mut busy: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    for r in &report.breakdown {
        let e = busy.entry(r.rank).or_default();
        e.0 += r.busy_ns();
        e.1 += 1;
    }
    let mean = |(t, n): (u64, u64)| t as f64 / n.max(1) as f64;
    let mut keep: Vec<u32> = opts.ranks.clone();
    keep.push(ranks[0]);
    if let Some((&r, _)) = busy
        .iter()
        .max_by(|a, b| mean(*a.1).total_cmp(&mean(*b.1)).then(b.0.cmp(a.0)))
    {
        keep.push(r);
    }
    if let Some((&r, _)) = busy
        .iter()
        .min_by(|a, b| mean(*a.1).total_cmp(&mean(*b.1)).then(a.0.cmp(b.0)))
    {
        keep.push(r);
    }
    keep.sort_unstable();
    keep.dedup();
    Some(keep)
}

#[derive(Serialize)]
struct Lane {
    track: Track,
    thread: String,
    depth: usize,
    /// Events in the lane before decimation.
    total: usize,
    /// Busy ns per histogram bin (empty when nothing was dropped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    busy: Vec<u64>,
}

#[derive(Serialize)]
struct TimelineProfile {
    index: usize,
    label: String,
    rank: u32,
    group: String,
    /// Offset of this profile's times on the group's common axis (ns).
    offset_ns: i64,
    /// Extent on the profile's own axis.
    start_ns: i64,
    end_ns: i64,
    events_total: usize,
    events_shown: usize,
    lanes: Vec<Lane>,
    /// Events, grouped by lane, each lane sorted by start: lane, start (delta from the previous
    /// event of the same lane), duration, name, detail (-1 none).
    l: Vec<u32>,
    s: Vec<i64>,
    d: Vec<i64>,
    n: Vec<u32>,
    x: Vec<i64>,
    strings: Vec<String>,
    /// Distinct details, each kept as its JSON text (what it serialises to): a decoded
    /// [`Detail`](crate::model::Detail) per distinct detail would be several times the size (most foreign events'
    /// details differ, by a correlation id if nothing else).
    details: Vec<Box<RawValue>>,
}

#[derive(Serialize)]
struct Data<'a> {
    report: &'a Report,
    timeline: Vec<TimelineProfile>,
    /// The ranks whose timeline is kept (absent: all).
    #[serde(skip_serializing_if = "Option::is_none")]
    detail_ranks: Option<Vec<u32>>,
}

/// Renders the HTML report ([`write_html`] into memory).
pub fn render_html(
    report: &Report,
    profiles: &[Profile],
    opts: &HtmlOptions,
) -> Result<String, ReportError> {
    let mut out = Vec::new();
    write_html(report, profiles, opts, &mut out)?;
    // Only `str`s and JSON text (UTF-8) were written, escaped by ASCII sequences.
    Ok(String::from_utf8(out).expect("the page is UTF-8"))
}

/// Writes the HTML report to `out` as it is serialised: the page is never held in memory
/// whole (it is about a quarter of a large trace's text), so a report's peak memory is the
/// loaded profiles' plus the timeline's arrays.
pub fn write_html(
    report: &Report,
    profiles: &[Profile],
    opts: &HtmlOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), ReportError> {
    let lights: Vec<&Profile> = profiles.iter().collect();
    let content: Vec<usize> = profiles
        .iter()
        .map(|p| p.events.iter().filter(|e| e.track.is_content()).count())
        .collect();
    write_page(
        report,
        &lights,
        &content,
        &|i| Ok(Cow::Borrowed(&profiles[i])),
        opts,
        out,
    )
}

/// [`write_html`] of a report made by [`crate::summary::summarise_path`]: the profiles whose
/// timeline the page shows are the ones kept, or are read again one at a time.
pub fn write_html_summarised(
    s: &crate::summary::Summarised,
    opts: &HtmlOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), ReportError> {
    let lights: Vec<&Profile> = s.inputs.iter().map(|i| &i.light).collect();
    let content: Vec<usize> = s.inputs.iter().map(|i| i.content_events).collect();
    write_page(&s.report, &lights, &content, &|i| s.profile(i), opts, out)
}

/// Input `i`'s profile, with its events.
type Fetch<'a> = dyn Fn(usize) -> Result<Cow<'a, Profile>, ReportError> + 'a;

/// The page of `report`, whose inputs are `lights` (their metadata) with `content` events
/// each; `fetch` gives a shown input's profile.
fn write_page<'a>(
    report: &Report,
    lights: &[&Profile],
    content: &[usize],
    fetch: &Fetch<'a>,
    opts: &HtmlOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), ReportError> {
    let detail = detail_ranks(report, lights, opts);
    let shown = |p: &Profile| detail.as_ref().is_none_or(|d| d.contains(&p.rank));
    let total: usize = lights
        .iter()
        .zip(content)
        .filter(|(p, _)| shown(p))
        .map(|(_, n)| n)
        .sum();
    let offsets = group_offsets(lights);
    let mut timeline = Vec::new();
    for (i, light) in lights.iter().enumerate() {
        if !shown(light) {
            continue;
        }
        let share = if total <= opts.max_events {
            usize::MAX
        } else {
            (opts.max_events as f64 * content[i] as f64 / total as f64) as usize
        };
        let p = fetch(i)?;
        timeline.push(timeline_of(i, &p, share, offsets[i]));
    }
    let io = |e| ReportError::Json(serde_json::Error::io(e));
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    w.write_all(page_head().as_bytes()).map_err(io)?;
    let mut esc = ScriptEscape {
        out: &mut w,
        pending: Vec::new(),
    };
    serde_json::to_writer(
        &mut esc,
        &Data {
            report,
            timeline,
            detail_ranks: detail,
        },
    )?;
    esc.finish().map_err(io)?;
    w.write_all(page_tail().as_bytes()).map_err(io)?;
    w.flush().map_err(io)
}

/// Escapes JSON text for a `<script>` block: `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`
/// (only ever inside JSON strings, so the JSON value is unchanged).
pub fn escape_script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 50);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// [`escape_script_json`] as a writer over JSON text written in pieces. serde_json may cut its
/// output anywhere, so a piece ending inside U+2028/U+2029's three bytes (`E2 80 A8`/`A9`) is
/// held back until the next piece says which character it is.
struct ScriptEscape<'w, W: std::io::Write> {
    out: &'w mut W,
    /// The start (`E2`, or `E2 80`) of a character not yet known.
    pending: Vec<u8>,
}

impl<W: std::io::Write> ScriptEscape<'_, W> {
    /// Writes what is held back (the text ended: it was not U+2028/U+2029).
    fn finish(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.pending)?;
        self.pending.clear();
        Ok(())
    }
}

impl<W: std::io::Write> std::io::Write for ScriptEscape<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut held = std::mem::take(&mut self.pending);
        let joined;
        let bytes: &[u8] = if held.is_empty() {
            buf
        } else {
            held.extend_from_slice(buf);
            joined = held;
            &joined
        };
        let mut done = 0;
        let mut i = 0;
        while i < bytes.len() {
            let esc: Option<(&[u8], usize)> = match bytes[i] {
                b'<' => Some((b"\\u003c", 1)),
                b'>' => Some((b"\\u003e", 1)),
                b'&' => Some((b"\\u0026", 1)),
                0xE2 => match bytes.get(i + 1..i + 3) {
                    Some([0x80, 0xA8]) => Some((b"\\u2028", 3)),
                    Some([0x80, 0xA9]) => Some((b"\\u2029", 3)),
                    Some(_) => None,
                    // Cut inside a character that may be one of the two: wait for the rest
                    // (unless what is there already rules them out).
                    None if bytes[i + 1..].iter().all(|&b| b == 0x80) => {
                        self.out.write_all(&bytes[done..i])?;
                        self.pending.extend_from_slice(&bytes[i..]);
                        return Ok(buf.len());
                    }
                    None => None,
                },
                _ => None,
            };
            match esc {
                Some((with, n)) => {
                    self.out.write_all(&bytes[done..i])?;
                    self.out.write_all(with)?;
                    i += n;
                    done = i;
                }
                None => i += 1,
            }
        }
        self.out.write_all(&bytes[done..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The page up to the data block's contents.
fn page_head() -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>rlprof report</title><style>{CSS}</style></head><body>\
<header><h1>rlprof report</h1><nav id=\"nav\"></nav></header><main id=\"app\"><p id=\"loading\">loading…</p></main>\
<script type=\"application/json\" id=\"rlprof-data\">"
    )
}

/// The page after the data block's contents.
fn page_tail() -> String {
    format!("</script><script>{JS}</script></body></html>\n")
}

/// Per profile: its origin relative to the earliest origin of its group.
fn group_offsets(profiles: &[&Profile]) -> Vec<i64> {
    let mut min: HashMap<&str, u64> = HashMap::new();
    for p in profiles {
        let m = min.entry(p.group.as_str()).or_insert(u64::MAX);
        *m = (*m).min(p.origin_ns);
    }
    profiles
        .iter()
        .map(|p| (p.origin_ns - min[p.group.as_str()]) as i64)
        .collect()
}

/// Lanes of the events in event order: (track, thread, nesting depth within that track and
/// thread), numbered as first met. Walked twice rather than kept (a lane per event would be
/// 40 MB beside a collection of 10 M events); both walks number the lanes alike.
#[derive(Default)]
struct Lanes {
    keys: Vec<(Track, u32, usize)>,
    index: HashMap<(Track, u32, usize), u32>,
    stacks: HashMap<(Track, u32), Vec<i64>>,
}

impl Lanes {
    /// The lane of `e`, the next event in event order.
    fn lane(&mut self, e: &Event) -> u32 {
        let thread = if e.track.is_structural() { 0 } else { e.thread };
        let st = self.stacks.entry((e.track, thread)).or_default();
        while st.last().is_some_and(|&end| end <= e.start) {
            st.pop();
        }
        let depth = st.len().min(MAX_LANE_DEPTH - 1);
        st.push(e.end());
        let key = (e.track, thread, depth);
        let keys = &mut self.keys;
        *self.index.entry(key).or_insert_with(|| {
            keys.push(key);
            (keys.len() - 1) as u32
        })
    }
}

/// Which events a timeline shows, a bit per event: every structural event, and the `budget`
/// longest content events (of equal durations, the first in event order).
///
/// The longest are found by a radix selection on the durations (four counting passes of 16
/// bits), so nothing is held per event but the bit: a selection over the content events'
/// indices held 80 MB per copy on a collection of 10 M events.
fn shown(p: &Profile, budget: usize) -> Vec<u64> {
    let mut bits = vec![0u64; p.events.len().div_ceil(64)];
    let content = || {
        p.events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.track.is_content())
    };
    let n = content().count();
    // The threshold duration and how many content events of exactly that duration to show.
    let (threshold, mut at_threshold) = if n <= budget {
        (0u64, usize::MAX)
    } else if budget == 0 {
        (u64::MAX, 0)
    } else {
        let (mut prefix, mut need) = (0u64, budget);
        for shift in [48u32, 32, 16, 0] {
            // Only the durations whose digits above this one are the prefix's compete.
            let above = |d: u64| d.checked_shr(shift + 16).unwrap_or(0);
            let mut count = vec![0usize; 1 << 16];
            for (_, e) in content() {
                let d = e.dur.max(0) as u64;
                if above(d) == above(prefix) {
                    count[((d >> shift) & 0xffff) as usize] += 1;
                }
            }
            // The digit, from the top, at which the longest `need` events are reached.
            let mut digit = 0xffff;
            loop {
                if count[digit] >= need || digit == 0 {
                    break;
                }
                need -= count[digit];
                digit -= 1;
            }
            prefix |= (digit as u64) << shift;
        }
        (prefix, need)
    };
    for (i, e) in p.events.iter().enumerate() {
        let show = if e.track.is_structural() {
            true
        } else if e.track.is_content() {
            let d = e.dur.max(0) as u64;
            d > threshold
                || (d == threshold && at_threshold > 0 && {
                    at_threshold = at_threshold.saturating_sub(1);
                    true
                })
        } else {
            false
        };
        if show {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    bits
}

fn timeline_of(index: usize, p: &Profile, budget: usize, offset: i64) -> TimelineProfile {
    let keep = shown(p, budget);
    let kept = |i: usize| keep[i / 64] & (1 << (i % 64)) != 0;
    let (start, end) = p.extent();
    // First walk: each lane's events, and whether the timeline leaves some of them out.
    let mut lanes = Lanes::default();
    let (mut totals, mut dropped): (Vec<usize>, Vec<bool>) = (Vec::new(), Vec::new());
    for (i, e) in p.events.iter().enumerate() {
        let l = lanes.lane(e) as usize;
        if l == totals.len() {
            totals.push(0);
            dropped.push(false);
        }
        totals[l] += 1;
        dropped[l] |= !kept(i);
    }
    let keys = lanes.keys;
    // Second walk: the busy time of the lanes with events left out, and the events shown.
    let bin_w = ((end - start) / HISTOGRAM_BINS as i64).max(1);
    let mut busy: Vec<Vec<u64>> = dropped
        .iter()
        .map(|&d| if d { vec![0; HISTOGRAM_BINS] } else { vec![] })
        .collect();
    let mut lanes = Lanes::default();
    let mut order: Vec<(u32, usize)> = Vec::new();
    for (i, e) in p.events.iter().enumerate() {
        let l = lanes.lane(e);
        let b = &mut busy[l as usize];
        if !b.is_empty() {
            add_busy(b, e, start, bin_w);
        }
        if kept(i) {
            order.push((l, i));
        }
    }
    order.sort_by_key(|&(l, i)| (l, p.events[i].start));
    let mut t = TimelineProfile {
        index,
        label: p.label(),
        rank: p.rank,
        group: p.group.clone(),
        offset_ns: offset,
        start_ns: start,
        end_ns: end,
        events_total: p.events.len(),
        events_shown: order.len(),
        lanes: keys
            .iter()
            .zip(totals)
            .zip(busy)
            .map(|((&(track, thread, depth), total), busy)| Lane {
                track,
                thread: p.threads.get(thread as usize).cloned().unwrap_or_default(),
                depth,
                total,
                busy,
            })
            .collect(),
        l: Vec::with_capacity(order.len()),
        s: Vec::with_capacity(order.len()),
        d: Vec::with_capacity(order.len()),
        n: Vec::with_capacity(order.len()),
        x: Vec::with_capacity(order.len()),
        strings: Vec::new(),
        details: Vec::new(),
    };
    fill_events(&mut t, p, &order);
    t
}

/// The distinct details' numbers by their JSON text, without a second copy of the text: a
/// hash to the first detail with it, and the text of the rare other details whose hash
/// collides.
#[derive(Default)]
struct DetailIndex {
    first: HashMap<u64, u32>,
    collisions: HashMap<String, u32>,
}

impl DetailIndex {
    /// The number of the detail with JSON text `json` in `all`, added if new.
    fn index(&mut self, json: String, all: &mut Vec<Box<RawValue>>) -> u32 {
        use std::hash::BuildHasher;
        let h = rustc_hash::FxBuildHasher.hash_one(json.as_str());
        let add = |json: String, all: &mut Vec<Box<RawValue>>| {
            // Serialised by serde_json just above: valid JSON.
            let raw = RawValue::from_string(json).expect("a serialised detail is JSON");
            all.push(raw);
            (all.len() - 1) as u32
        };
        match self.first.get(&h) {
            Some(&i) if all[i as usize].get() == json => i,
            Some(_) => {
                if let Some(&i) = self.collisions.get(&json) {
                    return i;
                }
                let i = add(json.clone(), all);
                self.collisions.insert(json, i);
                i
            }
            None => {
                let i = add(json, all);
                self.first.insert(h, i);
                i
            }
        }
    }
}

fn add_busy(b: &mut [u64], e: &Event, start: i64, w: i64) {
    let (mut s, end) = (e.start - start, e.end() - start);
    while s < end {
        let bin = ((s / w) as usize).min(b.len() - 1);
        let bin_end = if bin == b.len() - 1 {
            end
        } else {
            (bin as i64 + 1) * w
        };
        let upto = end.min(bin_end);
        b[bin] += (upto - s).max(0) as u64;
        if upto <= s {
            break;
        }
        s = upto;
    }
}

fn fill_events(t: &mut TimelineProfile, p: &Profile, order: &[(u32, usize)]) {
    let mut names: HashMap<u32, u32> = HashMap::new();
    let mut details = DetailIndex::default();
    let mut prev = (u32::MAX, 0i64);
    // Details are decoded (foreign traces keep them as text) and keyed in parallel, a batch
    // at a time (all of them at once would hold a decoded detail and its key per event, more
    // than the loaded trace); only the de-duplication below is in order.
    for batch in order.chunks(DETAIL_BATCH) {
        let decoded: Vec<Option<String>> = batch
            .par_iter()
            .map(|&(_, i)| {
                let e = &p.events[i];
                let d = (e.detail != NONE).then(|| p.detail(e)).flatten()?;
                Some(serde_json::to_string(&*d).unwrap_or_default())
            })
            .collect();
        for (&(l, i), decoded) in batch.iter().zip(decoded) {
            let e = &p.events[i];
            let base = if prev.0 == l { prev.1 } else { 0 };
            prev = (l, e.start);
            let n = *names.entry(e.name).or_insert_with(|| {
                t.strings
                    .push(crate::model::display_name(p.str(e.name)).into_owned());
                (t.strings.len() - 1) as u32
            });
            let x = match decoded {
                Some(json) => details.index(json, &mut t.details) as i64,
                None => -1,
            };
            t.l.push(l);
            t.s.push(e.start - base);
            t.d.push(e.dur);
            t.n.push(n);
            t.x.push(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The timeline shows every structural event and exactly the `budget` longest content
        /// events, the first in event order among equal durations, as a sort would pick them;
        /// durations differing only in low or only in high bits included.
        #[test]
        fn the_timeline_keeps_the_longest_content_events_whatever_their_digits(
            events in proptest::collection::vec((0u8..4, 0u8..4, 0u64..1 << 20), 0..600),
            budget in 0usize..700,
        ) {
            use crate::model::SourceFormat;
            let mut p = Profile::new("x".into(), SourceFormat::RlprofRaw, 0, "g".into());
            for (i, &(kind, track, r)) in events.iter().enumerate() {
                let dur = match kind {
                    0 => (r % 4) as i64,
                    1 => ((r % 3) << 40 | (r >> 19)) as i64,
                    2 => 70_000 + (r % 5) as i64,
                    _ => r as i64,
                };
                p.events.push(Event {
                    start: i as i64,
                    dur,
                    name: NONE,
                    detail: NONE,
                    thread: 0,
                    depth: 0,
                    track: [Track::Op, Track::Kernel, Track::Step, Track::Api][track as usize],
                });
            }
            let bits = shown(&p, budget);
            let got: Vec<usize> = (0..p.events.len())
                .filter(|&i| bits[i / 64] & (1 << (i % 64)) != 0)
                .collect();
            let mut content: Vec<usize> = (0..p.events.len())
                .filter(|&i| p.events[i].track.is_content())
                .collect();
            content.sort_by_key(|&i| (std::cmp::Reverse(p.events[i].dur), i));
            content.truncate(budget);
            let mut want: Vec<usize> = (0..p.events.len())
                .filter(|&i| p.events[i].track.is_structural())
                .chain(content)
                .collect();
            want.sort();
            proptest::prop_assert_eq!(got, want);
        }
    }

    /// The streaming escaper equals [`escape_script_json`] however the text is cut into
    /// writes, including cuts inside U+2028/U+2029 and inside other characters that start
    /// with the same byte (`€` is `E2 82 AC`, `‐` is `E2 80 90`).
    #[test]
    fn script_escape_in_pieces_equals_the_whole_escape() {
        let text = "a<b>&c\u{2028}d\u{2029}e€f‐g\u{2028}\u{2028}€";
        let want = escape_script_json(text);
        let bytes = text.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let mut out = Vec::new();
                let mut esc = ScriptEscape {
                    out: &mut out,
                    pending: Vec::new(),
                };
                for piece in [&bytes[..i], &bytes[i..j], &bytes[j..]] {
                    esc.write_all(piece).unwrap();
                }
                esc.finish().unwrap();
                assert_eq!(String::from_utf8(out).unwrap(), want, "cut at {i} and {j}");
            }
        }
    }
}
