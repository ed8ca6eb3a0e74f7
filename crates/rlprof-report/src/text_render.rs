//! The terminal form: plain tables. Control characters in names are shown escaped (`\u{1b}`),
//! so a hostile trace cannot drive the terminal.

use crate::summary::Report;
use std::fmt::Write;

/// Renders the report as text tables.
pub fn render_text(r: &Report) -> String {
    let mut o = String::new();
    inputs(r, &mut o);
    jobs(r, &mut o);
    breakdown(r, &mut o);
    render_coverage(&r.coverage, &mut o);
    top(r, &mut o);
    memory(r, &mut o);
    comm(r, &mut o);
    compare(r, &mut o);
    o
}

/// Escapes control characters.
pub(crate) fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Milliseconds with 3 decimals.
fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn opt_ms(ns: Option<u64>) -> String {
    ns.map(ms).unwrap_or_else(|| "-".into())
}

fn inputs(r: &Report, o: &mut String) {
    let _ = writeln!(o, "== inputs ({}) ==", r.inputs.len());
    for i in &r.inputs {
        let _ = writeln!(
            o,
            "[{}] rank {} {} ({:?}, {} events, {} memory events): {}",
            i.index,
            i.rank,
            clean(&i.group),
            i.format,
            i.events,
            i.memory_events,
            clean(&i.path.display().to_string())
        );
        for n in &i.notes {
            let _ = writeln!(o, "    note: {}", clean(n));
        }
        for w in &i.open_with {
            let _ = writeln!(o, "    {}", clean(w));
        }
    }
    for s in &r.skipped {
        let _ = writeln!(
            o,
            "skipped {}: {}",
            clean(&s.path.display().to_string()),
            clean(&s.reason)
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {}", clean(n));
    }
}

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}%")).unwrap_or_else(|| "-".into())
}

/// Jobs and, per rank, the device time (HTA's temporal breakdown, overlap, kernel types).
fn jobs(r: &Report, o: &mut String) {
    if r.jobs.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n== jobs and device time per rank (ms) ==");
    for j in &r.jobs {
        let _ = writeln!(
            o,
            "{}: world size {}{} ({}), {} rank(s) found",
            j.id,
            j.world_size,
            if j.world_size_declared {
                ""
            } else {
                " (ranks found)"
            },
            clean(&j.key),
            j.ranks.len()
        );
        let _ = writeln!(
            o,
            "{:>5} {:>12} {:>12} {:>12} {:>12} {:>12} {:>7} {:>7} {:>7} {:>8} {:>6}  types",
            "rank",
            "kernel",
            "comm",
            "memcpy",
            "busy",
            "idle",
            "idle",
            "comp",
            "noncomp",
            "overlap",
            "steps"
        );
        for k in &j.ranks {
            let d = &k.device;
            let types: Vec<String> = k
                .kernel_types
                .iter()
                .map(|t| format!("{}={:.1}%", t.kind, t.pct))
                .collect();
            let _ = writeln!(
                o,
                "{:>5} {:>12} {:>12} {:>12} {:>12} {:>12} {:>7} {:>7} {:>7} {:>8} {:>6}  {}",
                k.rank,
                ms(d.kernel_ns),
                ms(d.comm_ns),
                ms(d.memcpy_ns),
                ms(d.busy_ns),
                ms(d.idle_ns),
                pct(k.temporal.idle_pct),
                pct(k.temporal.compute_pct),
                pct(k.temporal.non_compute_pct),
                pct(k.overlap.ratio.map(|x| x * 100.0)),
                k.steps.len(),
                types.join(" ")
            );
        }
    }
}

fn breakdown(r: &Report, o: &mut String) {
    if r.breakdown.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n== per-step breakdown (ms) ==");
    let _ = writeln!(
        o,
        "{:<6} {:<12} {:>6} {:>5} {:>12} {:>12} {:>12} {:>12} {:>12}  roles",
        "job", "run", "step", "rank", "step", "rollout", "log_prob", "update", "other"
    );
    for s in &r.breakdown {
        // Without role calls (foreign traces), the step's device time is the split shown.
        let split = if s.roles.is_empty() && !s.device.is_empty() {
            &s.device
        } else {
            &s.roles
        };
        let roles: Vec<String> = split
            .iter()
            .map(|(k, v)| format!("{}={}", clean(k), ms(*v)))
            .collect();
        let _ = writeln!(
            o,
            "{:<6} {:<12} {:>6} {:>5} {:>12} {:>12} {:>12} {:>12} {:>12}  {}{}",
            clean(&s.job),
            clean(&s.run),
            clean(&s.step),
            s.rank,
            opt_ms(s.step_ns),
            ms(s.rollout_ns),
            ms(s.log_prob_ns),
            ms(s.update_ns),
            opt_ms(s.other_ns),
            roles.join(" "),
            if s.slowest { "  <- slowest rank" } else { "" }
        );
    }
}

fn top(r: &Report, o: &mut String) {
    if r.top.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n== top ops and kernels (by self time, ms) ==");
    let _ = writeln!(
        o,
        "{:<8} {:>9} {:>12} {:>12} {:>10} {:>10} {:>7}  name",
        "kind", "count", "total", "self", "mean", "max", "share"
    );
    for t in r.top.iter().take(30) {
        let _ = writeln!(
            o,
            "{:<8} {:>9} {:>12} {:>12} {:>10} {:>10} {:>6.1}%  {}",
            t.kind.as_str(),
            t.count,
            ms(t.total_ns),
            ms(t.self_ns),
            ms(t.mean_ns),
            ms(t.max_ns),
            t.share * 100.0,
            clean(&t.name)
        );
    }
}

fn memory(r: &Report, o: &mut String) {
    if r.memory.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n== memory ==");
    for m in &r.memory {
        let _ = writeln!(
            o,
            "[{}] rank {} {}: peak {} bytes at {} ms into the profile ({}), final {} bytes, {} events",
            m.profile,
            m.rank,
            m.kind,
            m.peak_bytes,
            ms(m.peak_since_start_ns.max(0) as u64),
            m.baseline,
            m.final_bytes,
            m.events
        );
        for p in m.at_peak.iter().take(5) {
            let _ = writeln!(
                o,
                "    live at peak: {:>14} bytes in {:>6} allocations by {}",
                p.bytes,
                p.count,
                clean(&p.op)
            );
        }
    }
}

fn comm(r: &Report, o: &mut String) {
    if r.comm.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n== communication ==");
    let _ = writeln!(
        o,
        "{:>4} {:>5} {:>7} {:>14} {:>12} {:>12} {:>10} {:>10}  name",
        "in", "rank", "count", "bytes", "total ms", "wait ms", "algbw GB/s", "busbw GB/s"
    );
    for c in &r.comm {
        let _ = writeln!(
            o,
            "{:>4} {:>5} {:>7} {:>14} {:>12} {:>12} {:>10} {:>10}  {}",
            c.profile,
            c.rank,
            c.count,
            c.bytes.map(|b| b.to_string()).unwrap_or("-".into()),
            ms(c.total_ns),
            opt_ms(c.wait_ns),
            c.bandwidth_gbps
                .map(|b| format!("{b:.3}"))
                .unwrap_or("-".into()),
            c.bus_bandwidth_gbps
                .map(|b| format!("{b:.3}"))
                .unwrap_or("-".into()),
            clean(&c.name)
        );
    }
}

fn compare(r: &Report, o: &mut String) {
    let Some(c) = &r.compare else { return };
    let _ = writeln!(
        o,
        "\n== compare A = {} vs B = {} (ms) ==",
        clean(&c.a),
        clean(&c.b)
    );
    for (title, rows) in [("mean per step row", &c.breakdown), ("top ops", &c.top)] {
        let _ = writeln!(o, "-- {title} --");
        for d in rows {
            let _ = writeln!(
                o,
                "{:>12} {:>12} {:>12} {:>8}  {}",
                ms(d.a_ns),
                ms(d.b_ns),
                format!("{:+.3}", d.delta_ns as f64 / 1e6),
                d.ratio.map(|x| format!("x{x:.2}")).unwrap_or("-".into()),
                clean(&d.name)
            );
        }
    }
}

/// The text section: one line per profile and role call (`covered by ops: 93%`).
pub(crate) fn render_coverage(rows: &[crate::coverage::CoverageRow], o: &mut String) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n== op coverage per role call ==");
    for r in rows {
        let _ = writeln!(
            o,
            "[{}] rank {} {:<22} {:>3} call(s) {:>12.3} ms  covered by ops: {:.0}%",
            r.profile,
            r.rank,
            clean(&r.call),
            r.calls,
            r.total_ns as f64 / 1e6,
            r.covered * 100.0
        );
    }
}
