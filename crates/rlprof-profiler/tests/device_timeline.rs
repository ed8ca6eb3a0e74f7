//! A device timeline (what the CUDA backend plugs in) through the controller: start/stop hooks
//! per collection, event pairs resolved off the training thread into the raw file, and the
//! collection completed only after that. The "device" is a fake whose events are host ticks.

mod support;

use rlprof_profiler::device::{
    DEVICE_THREAD_BASE, DeviceCalibration, DeviceFinish, DeviceTimeline, PendingOps,
};
use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::Kind;
use rlprof_profiler::{Profiler, intern, now, plan::Tool};
use std::sync::{Arc, Mutex};
use support::*;

/// Fake device: an "event" is the host tick it was recorded at; read-back waits on a channel so
/// the test can prove the training thread does not wait for it.
#[derive(Default)]
struct FakeDevice {
    log: Mutex<Vec<String>>,
    ops: Mutex<Option<PendingOps<u64>>>,
    gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl FakeDevice {
    fn op(&self, name: &str) {
        let start = now();
        let end = start + 1000;
        if let Some(ops) = self.ops.lock().unwrap().as_mut() {
            ops.push(intern(name), 10, 20, 7, start, end);
        }
    }
}

impl DeviceTimeline for FakeDevice {
    fn collection_started(&self, tool: Tool) {
        self.log.lock().unwrap().push(format!("start {tool:?}"));
        *self.ops.lock().unwrap() = Some(PendingOps::new(now()));
    }

    fn collection_stopping(&self, tool: Tool) -> Option<DeviceFinish> {
        self.log.lock().unwrap().push(format!("stop {tool:?}"));
        let ops = self.ops.lock().unwrap().take()?;
        if ops.is_empty() {
            return None;
        }
        let gate = self.gate.lock().unwrap().take();
        Some(Box::new(move || {
            if let Some(g) = gate {
                g.recv().unwrap();
            }
            let (a, b) = (*ops.marker(), now());
            // Device clock == host ticks: span in "ns" equals ticks here.
            let cal = DeviceCalibration::new(a, b, (b - a) as f64);
            ops.resolve(&cal, |x, y| Some(*y as f64 - *x as f64))
        }))
    }
}

#[test]
fn device_kernels_land_in_the_collection_after_a_background_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let profiler = Profiler::new(plan(
        dir.path(),
        &[1],
        false,
        role_plan(dir.path(), vec![0], false),
        1,
    ));
    let rank = profiler.rank(0);
    let dev = Arc::new(FakeDevice::default());
    let (release, gate) = std::sync::mpsc::channel();
    *dev.gate.lock().unwrap() = Some(gate);
    rank.set_device_timeline(dev.clone());
    let _b = rank.bind_thread();
    {
        let _s = rank.step(1);
        // Spread the ops over more than 1 ms so the calibration measures its rate.
        for i in 0..3 {
            dev.op(&format!("cuda_op{i}_f32"));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    // The step ended; the read-back is still blocked, so the collection is not complete yet
    // and the training thread got here anyway.
    assert!(profiler.completed().is_empty());
    release.send(()).unwrap();
    profiler.wait_collections();
    let done = profiler.completed();
    assert_eq!(done.len(), 1);
    assert_eq!(*dev.log.lock().unwrap(), vec!["start Npu", "stop Npu"]);

    let s = RawSummary::read(&done[0].raw_file, true).unwrap();
    assert!(s.end.is_some(), "finished after the device records");
    let kernels: Vec<_> = s
        .kept
        .iter()
        .filter(|(_, r)| r.kind == Kind::Kernel as u8)
        .collect();
    assert_eq!(kernels.len(), 3);
    for (i, (thread, r)) in kernels.iter().enumerate() {
        assert_eq!(*thread, DEVICE_THREAD_BASE);
        assert_eq!((r.cat, r.aux), (0, 7), "device kernel on stream 7");
        assert_eq!(s.name(r.name), format!("cuda_op{i}_f32"));
        // Fake device time is host ticks, so the mapping is the identity: 1000 ticks long.
        assert!((r.a - r.ts).abs_diff(1000) <= 1, "{} ticks", r.a - r.ts);
    }
    let exts = s
        .kept
        .iter()
        .filter(|(t, r)| *t == DEVICE_THREAD_BASE && r.kind == Kind::Ext as u8)
        .count();
    assert_eq!(exts, 3, "flops/bytes after each kernel");
}

#[test]
fn without_device_work_the_collection_completes_at_stop() {
    let dir = tempfile::tempdir().unwrap();
    let profiler = Profiler::new(plan(
        dir.path(),
        &[1],
        false,
        role_plan(dir.path(), vec![0], true),
        1,
    ));
    let rank = profiler.rank(0);
    let dev = Arc::new(FakeDevice::default());
    rank.set_device_timeline(dev.clone());
    let _b = rank.bind_thread();
    scripted_step(&rank, 1, 2);
    // Discrete: one collection per role call, each told to the device, none with ops.
    assert_eq!(profiler.completed().len(), 4);
    let log = dev.log.lock().unwrap().clone();
    assert_eq!(log.len(), 8);
    assert!(log.chunks(2).all(|p| p == ["start Npu", "stop Npu"]));
}
