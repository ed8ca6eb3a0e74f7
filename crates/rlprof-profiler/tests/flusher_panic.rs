//! A panic on the background flusher thread while it holds the recorder's locks must not turn
//! later instrumentation points on training threads into panics (the locks do not poison):
//! collection never breaks training. Its own test binary: the flusher dies for the process.

mod support;

use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::{NameId, Profiler, name, op};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::*;
use tracing_subscriber::layer::SubscriberExt;

static FLUSHER_PANICKED: AtomicBool = AtomicBool::new(false);

/// Panics when the flusher thread logs a warning: the cap warning it logs while it holds the
/// slot's flush lock and the sink's writer lock.
struct PanicInFlusher;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for PanicInFlusher {
    fn on_event(&self, ev: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let flusher = std::thread::current().name() == Some("rlprof-flusher");
        if flusher && *ev.metadata().level() == tracing::Level::WARN {
            FLUSHER_PANICKED.store(true, Ordering::SeqCst);
            panic!("injected panic on the flusher thread");
        }
    }
}

#[test]
fn training_goes_on_after_the_flusher_panics() {
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(PanicInFlusher))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut role = role_plan(dir.path(), vec![0], false);
    role.caps.max_events = Some(300);
    let profiler = Profiler::new(plan(dir.path(), &[1, 2], false, role, 1));
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    {
        let _s = rank.step(1);
        // Fewer records than a thread buffer holds: only the flusher's periodic pass writes
        // them, crosses the cap and warns (and panics).
        for _ in 0..400 {
            let _o = op(name!("before"), NameId::NONE);
        }
        let t0 = Instant::now();
        while !FLUSHER_PANICKED.load(Ordering::SeqCst) {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "flusher never wrote"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Training goes on, recording through the locks the flusher held when it died.
        for _ in 0..20_000 {
            let _o = op(name!("after"), NameId::NONE);
        }
    }
    {
        let _s = rank.step(2);
        for _ in 0..5_000 {
            let _o = op(name!("step2"), NameId::NONE);
        }
    }
    let done = profiler.completed();
    assert_eq!(done.len(), 2, "both collections completed");
    assert!(done[0].truncated && !done[0].failed);
    for c in &done {
        let s = RawSummary::read(&c.raw_file, false).unwrap();
        assert!(s.end.is_some(), "{}: closed cleanly", c.raw_file.display());
        assert!(s.corruption.is_none());
    }
    let s2 = RawSummary::read(&done[1].raw_file, false).unwrap();
    assert!(s2.records >= 300, "step 2 recorded without the flusher");
}
