//! CANN's step figures (torch_npu's `TraceStepTimeParser`, which writes
//! `step_trace_time.csv`; msprof-analyze reads the same from the DB layout's `StepTraceTime`),
//! computed by CANN's rules from a device timeline, once for the report (a profile without
//! those tables) and for the Ascend writer (the tables it writes of our collections):
//!
//! - the device timeline is cut into CANN's overlap-analysis segments: `Computing` (the union
//!   of compute tasks), `Communication` (the union of collectives), `Communication(Not
//!   Overlapped)` (collectives while no compute task runs) and `Free` (the gaps between device
//!   activity, from the first task to the last);
//! - a segment belongs to the step whose device window holds its start. A step's device window
//!   starts at the first device task at or after its host step's start and runs to the next
//!   step's window (the last step's to the end);
//! - per step: each figure is the sum of its segments' durations; `Bubble` the sum of receive
//!   collectives ([`is_receive`]); `Overlapped` = `Communication` − `Communication(Not
//!   Overlapped)`; `Communication(Not Overlapped and Exclude Receive)` = `Communication(Not
//!   Overlapped)` − `Bubble`; `Stage` = the step's segments' last end − first start − `Bubble`;
//!   `Preparing` = the first compute or communication segment's start − the host step's start
//!   (none without a host step);
//! - without host steps, one window covers the whole timeline (CANN's step `None`).

use super::intervals::{Union, difference, merge};

/// One step's figures, in ns, in CANN's column order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepFigures {
    /// `Computing`.
    pub computing: u64,
    /// `Communication(Not Overlapped)`.
    pub communication_not_overlapped: u64,
    /// `Overlapped`.
    pub overlapped: u64,
    /// `Communication`.
    pub communication: u64,
    /// `Free`.
    pub free: u64,
    /// `Stage`.
    pub stage: u64,
    /// `Bubble`.
    pub bubble: u64,
    /// `Communication(Not Overlapped and Exclude Receive)`.
    pub communication_not_overlapped_exclude_receive: u64,
    /// `Preparing` (none without a host step).
    pub preparing: Option<u64>,
}

/// Whether a collective is a receive, whose time is CANN's `Bubble` (`hcom_receive*`, any
/// case).
pub fn is_receive(name: &str) -> bool {
    let n = name.as_bytes();
    n.len() >= 12 && n[..12].eq_ignore_ascii_case(b"hcom_receive")
}

/// One step's sums while the segments stream past.
#[derive(Default)]
struct Window {
    f: StepFigures,
    /// First start and last end of its compute, communication, not-overlapped and free
    /// segments.
    first: Option<i64>,
    last: Option<i64>,
    /// First start of its compute or communication segments.
    first_task: Option<i64>,
}

impl Window {
    fn span(&mut self, (s, e): (i64, i64)) {
        self.first = Some(self.first.map_or(s, |f| f.min(s)));
        self.last = Some(self.last.map_or(e, |l| l.max(e)));
    }
    fn task(&mut self, s: i64) {
        self.first_task = Some(self.first_task.map_or(s, |f| f.min(s)));
    }
}

/// The figures of each step whose host start is in `host_starts` (in start order; one window
/// for the whole timeline when empty), `None` for a step without device activity.
///
/// `compute` and `comm` give the union of the compute tasks and of the collectives (each in
/// start order; called once per pass, so they stream rather than being held); `receive` the
/// receive collectives' intervals.
pub fn step_figures<C, M>(
    compute: impl Fn() -> C,
    comm: impl Fn() -> M,
    receive: &[(i64, i64)],
    host_starts: &[i64],
) -> Vec<Option<StepFigures>>
where
    C: Iterator<Item = (i64, i64)>,
    M: Iterator<Item = (i64, i64)>,
{
    let busy = || Union::new(merge(compute(), comm()));
    // Device windows: from the first busy segment starting at or after the host step's start
    // (steps and busy segments both in start order: one pass).
    let starts: Vec<i64> = if host_starts.is_empty() {
        vec![i64::MIN]
    } else {
        let mut b = busy().map(|s| s.0).peekable();
        host_starts
            .iter()
            .map(|&h| {
                while b.next_if(|&s| s < h).is_some() {}
                b.peek().copied().unwrap_or(i64::MAX)
            })
            .collect()
    };
    let mut acc: Vec<Window> = starts.iter().map(|_| Window::default()).collect();
    // The window holding `t`: the last whose start is at or before it (a window that starts
    // where the next starts is empty). Each pass meets its segments in start order, so a
    // cursor moves forward through the windows.
    let st: &[i64] = &starts;
    let cursor = || {
        let mut k = 0usize;
        move |t: i64| {
            while k < st.len() && st[k] <= t {
                k += 1;
            }
            k.checked_sub(1)
        }
    };
    let mut at = cursor();
    for seg in compute() {
        if let Some(w) = at(seg.0) {
            acc[w].f.computing += (seg.1 - seg.0) as u64;
            acc[w].span(seg);
            acc[w].task(seg.0);
        }
    }
    let mut at = cursor();
    for seg in comm() {
        if let Some(w) = at(seg.0) {
            acc[w].f.communication += (seg.1 - seg.0) as u64;
            acc[w].span(seg);
            acc[w].task(seg.0);
        }
    }
    let mut at = cursor();
    for seg in difference(comm(), compute()) {
        if let Some(w) = at(seg.0) {
            acc[w].f.communication_not_overlapped += (seg.1 - seg.0) as u64;
            acc[w].span(seg);
        }
    }
    let mut prev: Option<i64> = None;
    let mut at = cursor();
    for (s, e) in busy() {
        if let Some(gap_start) = prev
            && let Some(w) = at(gap_start)
        {
            acc[w].f.free += (s - gap_start) as u64;
            acc[w].span((gap_start, s));
        }
        prev = Some(e);
    }
    let mut at = cursor();
    for &(s, e) in receive {
        if let Some(w) = at(s) {
            acc[w].f.bubble += (e - s).max(0) as u64;
        }
    }
    acc.into_iter()
        .enumerate()
        .map(|(k, w)| {
            let (first, last) = (w.first?, w.last?);
            let mut f = w.f;
            f.overlapped = f
                .communication
                .saturating_sub(f.communication_not_overlapped);
            f.stage = ((last - first) as u64).saturating_sub(f.bubble);
            f.communication_not_overlapped_exclude_receive =
                f.communication_not_overlapped.saturating_sub(f.bubble);
            f.preparing = host_starts
                .get(k)
                .zip(w.first_task)
                .map(|(&h, t)| (t - h).max(0) as u64);
            Some(f)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two host steps over compute [0,10) [12,20) [30,40), a collective [8,14) and a receive
    /// [33,36): each figure by hand.
    #[test]
    fn each_figure_by_hand() {
        let compute = [(0, 10), (12, 20), (30, 40)];
        let comm = [(8, 14), (33, 36)];
        let f = step_figures(
            || compute.iter().copied(),
            || comm.iter().copied(),
            &[(33, 36)],
            &[-5, 25],
        );
        let one = f[0].unwrap();
        // Busy time is [0,20) and [30,40): the windows start at 0 and 30. The first holds
        // [0,10) [12,20), the collective [8,14) (not overlapped [10,12)) and the gap [20,30).
        assert_eq!(one.computing, 18);
        assert_eq!(one.communication, 6);
        assert_eq!(one.communication_not_overlapped, 2);
        assert_eq!(one.overlapped, 4);
        assert_eq!(one.free, 10);
        assert_eq!(one.stage, 30);
        assert_eq!(one.bubble, 0);
        assert_eq!(one.preparing, Some(5));
        let two = f[1].unwrap();
        assert_eq!(two.computing, 10);
        assert_eq!(two.communication, 3);
        assert_eq!(two.communication_not_overlapped, 0);
        assert_eq!(two.bubble, 3);
        assert_eq!(two.stage, 10 - 3);
        assert_eq!(two.communication_not_overlapped_exclude_receive, 0);
        assert_eq!(two.preparing, Some(5));
        // No host steps: one window; a host step after all activity: none.
        let whole = step_figures(
            || compute.iter().copied(),
            || comm.iter().copied(),
            &[],
            &[],
        );
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].unwrap().computing, 28);
        assert_eq!(whole[0].unwrap().preparing, None);
        let late = step_figures(
            || compute.iter().copied(),
            || comm.iter().copied(),
            &[],
            &[99],
        );
        assert_eq!(late, vec![None]);
        assert!(is_receive("HCOM_Receive_1") && !is_receive("hcom_send"));
    }
}
