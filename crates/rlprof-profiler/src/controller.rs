//! The collection controller: decides, per rank, when a collection starts and stops (at step
//! boundaries in end-to-end mode, around role calls in discrete mode, across runs of steps with
//! `profile_continuous_steps`), lays out its directory and hands finished collections on.
//!
//! Output layout: by default verl 0.9.1's (`{save_path}/train/...` end-to-end,
//! `{save_path}/{stage}/...` discrete, flat torch names), or rlprof's step-grouped one
//! (`{save_path}/step{N}/{e2e|stage}/...`), each collection directory holding
//! `rlprof_raw/rank_{rank}.rlraw`; see [`crate::collection::names`]. The directory is written
//! under a `.tmp` name and renamed when the collection stops; an existing name is never reused
//! (the timestamp field is bumped). The names, and the lock held while the directory is
//! written, are [`crate::collection`]'s.
//!
//! Who collects what, as verl does: an end-to-end collection is opened by the training roles
//! (actor, ref, critic, reward model) and holds the whole step, rollout included (verl profiles
//! generation in the rollout engine, apart; rlprof keeps it inside). A rollout enabled alone
//! collects its generation calls only, never the rest of the step. verl's torch schedule
//! sub-samples the update stage only; verl's token window applies to discrete rollout only
//! ([`RolePlan::schedule_for`]). A discrete torch update under verl's schedule is split by
//! window, as verl writes one trace per window: at each window's first recorded mini-batch
//! ([`crate::iteration`]) the collection of the window before ends and the window's own starts,
//! under the call's one basename (`{basename}_mb{a}_torch_pt`; its trace is named
//! `{basename}_mb{a}-{b}.json.gz` from the mini-batches it recorded). Each window's collection
//! holds the part of the role call's range it covers.
//!
//! ```
//! use rlprof_profiler::{Profiler, plan::{ProfilePlan, RoleCall}};
//! let profiler = Profiler::new(ProfilePlan::disabled(1));
//! let rank = profiler.rank(0);
//! let _bound = rank.bind_thread();
//! for step in 1..=2 {
//!     let _s = rank.step(step);
//!     let _c = rank.role_call(RoleCall::GenerateSequences);
//! }
//! assert!(profiler.completed().is_empty());
//! ```

use crate::clock;
use crate::collection::lock::{CollectionLock, lock_new_collection};
use crate::collection::names::{
    CollectionId, RAW_DIR, ROLLOUT_STAGE, Scope, hostname, place, raw_file, step_label,
    timestamp17, unfinished_name,
};
use crate::device::{DEVICE_THREAD_BASE, DeviceFinish, DeviceTimeline};
use crate::intern;
use crate::plan::{ProfilePlan, Role, RoleCall, RolePlan, ScheduleScope, Tool};
use crate::raw::{CollectionMeta, RawWriter, RoleSchedule};
use crate::record::{Kind, RangeCat};
use crate::recorder::{self, RankContext, Sink, SinkStats, ThreadBinding};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Callback run when a collection completes (must not block: spawn long work).
pub type CompletionHook = Arc<dyn Fn(&CompletedCollection) + Send + Sync>;

/// A finished collection.
#[derive(Debug, Clone, Serialize)]
pub struct CompletedCollection {
    /// The collection directory (final name).
    pub dir: PathBuf,
    /// The raw file inside it.
    pub raw_file: PathBuf,
    /// Rank that collected.
    pub rank: u32,
    /// Tool.
    pub tool: Tool,
    /// Whether to parse automatically.
    pub analysis: bool,
    /// Steps covered.
    pub steps: Vec<u64>,
    /// `e2e` or the role name of the discrete call.
    pub role_dir: String,
    /// Events written.
    pub events: u64,
    /// Raw bytes.
    pub bytes: u64,
    /// Whether a cap truncated it.
    pub truncated: bool,
    /// Whether writing failed (data partial).
    pub failed: bool,
}

struct Inner {
    plan: ProfilePlan,
    host: String,
    pid: u32,
    hook: RwLock<Option<CompletionHook>>,
    completed: Mutex<Vec<CompletedCollection>>,
    names: Mutex<()>,
    opener: RawOpener,
    /// Set by [`Profiler::close_open`]: no collection starts any more.
    closed: std::sync::atomic::AtomicBool,
    /// Every rank's state, to close open collections from another thread.
    ranks: Mutex<Vec<RankEntry>>,
    /// Collections whose device timeline is being read back (see [`Profiler::wait_collections`]).
    finishing: Mutex<Vec<JoinHandle<()>>>,
}

/// A rank handed out by [`Profiler::rank`], held weakly: rank, recording state, controller state.
type RankEntry = (
    u32,
    std::sync::Weak<RankContext>,
    std::sync::Weak<Mutex<RankState>>,
);

/// Opens a new raw file (the default creates it; tests route writes elsewhere, e.g. `/dev/full`).
pub type RawOpener = fn(&Path) -> std::io::Result<std::fs::File>;

fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    crate::collection::safe_fs::create_new(path)
}

/// The per-process profiler: owns the plan; hands out one [`RankProfiler`] per rank.
#[derive(Clone)]
pub struct Profiler {
    inner: Arc<Inner>,
}

impl Profiler {
    /// A profiler executing `plan`.
    pub fn new(plan: ProfilePlan) -> Profiler {
        crate::nvtx::set_enabled(plan.tool == Some(crate::plan::Tool::Nsys));
        Profiler {
            inner: Arc::new(Inner {
                plan,
                host: hostname(),
                pid: std::process::id(),
                hook: RwLock::new(None),
                completed: Mutex::new(Vec::new()),
                names: Mutex::new(()),
                opener: create_new,
                closed: Default::default(),
                ranks: Mutex::new(Vec::new()),
                finishing: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Like [`Profiler::new`], with a custom way to open raw files.
    pub fn with_raw_opener(plan: ProfilePlan, opener: RawOpener) -> Profiler {
        let p = Profiler::new(plan);
        let mut inner = Arc::try_unwrap(p.inner).unwrap_or_else(|_| unreachable!("fresh Arc"));
        inner.opener = opener;
        Profiler {
            inner: Arc::new(inner),
        }
    }

    /// The plan.
    pub fn plan(&self) -> &ProfilePlan {
        &self.inner.plan
    }

    /// The controller of `rank` (each call makes a new, independent rank state; call once per rank).
    pub fn rank(&self, rank: u32) -> RankProfiler {
        let rp = RankProfiler {
            inner: self.inner.clone(),
            rank,
            ctx: RankContext::new(),
            state: Arc::new(Mutex::new(RankState::default())),
            device: Arc::new(RwLock::new(None)),
        };
        let mut ranks = self.inner.ranks.lock();
        ranks.retain(|(_, c, _)| c.strong_count() > 0);
        ranks.push((rank, Arc::downgrade(&rp.ctx), Arc::downgrade(&rp.state)));
        rp
    }

    /// Stops every open collection of every rank now (end marker, final name, completion hook)
    /// and lets no new one start: for a process about to exit (SIGINT, SIGTERM, a failed run).
    /// Callable from any thread while the ranks keep running. Returns how many it closed.
    pub fn close_open(&self) -> usize {
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let ranks: Vec<RankProfiler> = {
            let ranks = self.inner.ranks.lock();
            ranks
                .iter()
                .filter_map(|(rank, ctx, state)| {
                    Some(RankProfiler {
                        inner: self.inner.clone(),
                        rank: *rank,
                        ctx: ctx.upgrade()?,
                        state: state.upgrade()?,
                        // Closing at exit does not read a device timeline back.
                        device: Arc::new(RwLock::new(None)),
                    })
                })
                .collect()
        };
        let mut closed = 0;
        for rp in ranks {
            let active = rp.state.lock().active.take();
            if let Some(a) = active {
                rp.stop(a);
                closed += 1;
            }
        }
        closed
    }

    /// Sets the hook called for each completed collection (e.g. to start automatic analysis).
    pub fn on_complete(&self, hook: impl Fn(&CompletedCollection) + Send + Sync + 'static) {
        *self.inner.hook.write() = Some(Arc::new(hook));
    }

    /// Waits until every stopped collection is complete: collections with a device timeline
    /// finish on a background thread once the device's records are read back. Call before
    /// relying on [`Profiler::completed`] or the completion hook at the end of a run.
    pub fn wait_collections(&self) {
        loop {
            let hs: Vec<_> = self.inner.finishing.lock().drain(..).collect();
            if hs.is_empty() {
                return;
            }
            for h in hs {
                let _ = h.join();
            }
        }
    }

    /// Every collection completed so far, in completion order.
    pub fn completed(&self) -> Vec<CompletedCollection> {
        self.inner.completed.lock().clone()
    }
}

#[derive(Default)]
struct RankState {
    step: Option<u64>,
    active: Option<Active>,
    /// The open role call's range (start ticks, depth) while its collection is split by
    /// window: each window's collection gets the part of it that it covers.
    call_range: Option<(u64, u16)>,
}

struct Active {
    /// Whether the device timeline was told of the start.
    started: bool,
    sink: Arc<Sink>,
    /// The collection's lock, held until the directory has its final name.
    _lock: Option<CollectionLock>,
    tmp_dir: PathBuf,
    final_dir: PathBuf,
    raw_file: PathBuf,
    plan: RolePlan,
    steps: Vec<u64>,
    role_dir: String,
    discrete: bool,
    /// The role whose settings made it.
    role: Role,
    /// The role call of a discrete collection.
    call: Option<RoleCall>,
    /// The 17-digit timestamp of its names (shared by the windows of one call).
    ts17: u64,
    /// One window of a scheduled torch update: the window's first mini-batch.
    window: Option<u64>,
    /// When it started (raw ticks).
    start_ticks: u64,
}

/// The controller of one rank. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct RankProfiler {
    inner: Arc<Inner>,
    rank: u32,
    ctx: Arc<RankContext>,
    state: Arc<Mutex<RankState>>,
    device: Arc<RwLock<Option<Arc<dyn DeviceTimeline>>>>,
}

/// Guard of a training step (see [`RankProfiler::step`]).
#[must_use = "the step ends when the guard is dropped"]
pub struct StepGuard {
    rank: RankProfiler,
    step: u64,
    range: Option<recorder::Open>,
    _nvtx: crate::nvtx::NvtxRange,
}

/// Guard of a role call (see [`RankProfiler::role_call`]).
#[must_use = "the role call ends when the guard is dropped"]
pub struct RoleCallGuard {
    rank: RankProfiler,
    call: RoleCall,
    range: Option<recorder::Open>,
    started_discrete: bool,
    scheduled: bool,
    _nvtx: crate::nvtx::NvtxRange,
}

impl RankProfiler {
    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Binds the calling thread to this rank: instrumentation points on the thread record into
    /// this rank's collections until the returned guard drops.
    pub fn bind_thread(&self) -> ThreadBinding {
        let _busy = recorder::BusyGuard::enter();
        ThreadBinding::bind(self.ctx.clone())
    }

    /// The plan.
    pub fn plan(&self) -> &ProfilePlan {
        &self.inner.plan
    }

    /// Puts this rank's device (a GPU) into its collections: see [`crate::device`].
    pub fn set_device_timeline(&self, timeline: Arc<dyn DeviceTimeline>) {
        *self.device.write() = Some(timeline);
    }

    fn device_timeline(&self) -> Option<Arc<dyn DeviceTimeline>> {
        self.device.read().clone()
    }

    /// Whether a collection is recording on this rank now.
    pub fn is_recording(&self) -> bool {
        self.ctx.is_recording()
    }

    /// The training role that collects end-to-end on this rank, if any, with its plan (verl's
    /// `start_profile(role="train")` on the training workers; the rollout is not one of them).
    fn e2e_plan(&self) -> Option<(Role, &RolePlan)> {
        [Role::Actor, Role::Ref, Role::Critic, Role::RewardModel]
            .into_iter()
            .filter_map(|r| Some((r, self.inner.plan.role(r)?)))
            .find(|(_, p)| !p.discrete && p.collects_on(self.rank))
    }

    /// Whether `call` opens a collection of its own on this rank: its role collects in discrete
    /// mode, or it is rollout generation and the rollout collects while no training role
    /// collects end-to-end here (a rollout enabled alone records generation only).
    fn own_collection(&self, call: RoleCall) -> Option<&RolePlan> {
        let p = self
            .inner
            .plan
            .role(call.role())
            .filter(|p| p.collects_on(self.rank))?;
        if p.discrete
            || (call.role() == Role::Rollout
                && call == RoleCall::GenerateSequences
                && self.e2e_plan().is_none())
        {
            Some(p)
        } else {
            None
        }
    }

    /// Enters training step `step` (1-based). In end-to-end mode this starts the collection at
    /// the first step of a profiled group; dropping the guard of the group's last step stops it.
    pub fn step(&self, step: u64) -> StepGuard {
        let _busy = recorder::BusyGuard::enter();
        {
            let mut st = self.state.lock();
            st.step = Some(step);
            if st.active.is_none()
                && let (Some(group), Some((role, plan))) =
                    (self.inner.plan.group_of(step), self.e2e_plan())
                && group.first() == Some(&step)
            {
                st.active = self.start(plan.clone(), role, group.to_vec(), None, None, None);
            }
        }
        StepGuard {
            rank: self.clone(),
            step,
            range: recorder::begin(None),
            _nvtx: crate::nvtx::NvtxRange::push(format_args!("step {step}")),
        }
    }

    /// Enters a role call. In discrete mode, when the current step is profiled and the call's
    /// role collects on this rank, a collection of its own covers exactly this call.
    pub fn role_call(&self, call: RoleCall) -> RoleCallGuard {
        let _busy = recorder::BusyGuard::enter();
        let mut started_discrete = false;
        let mut windowed = false;
        {
            let mut st = self.state.lock();
            if st.active.is_none() {
                let step = st.step;
                let group = step.and_then(|s| self.inner.plan.group_of(s));
                let plan = self.own_collection(call);
                if let (Some(step), Some(_), Some(plan)) = (step, group, plan) {
                    let window = window_of(plan, call);
                    st.active = self.start(
                        plan.clone(),
                        call.role(),
                        vec![step],
                        Some(call),
                        window,
                        None,
                    );
                    started_discrete = st.active.is_some();
                    windowed = started_discrete && window.is_some();
                }
            }
        }
        let scheduled = self.arm_schedule(call, windowed);
        let range = recorder::begin(None);
        if windowed && let Some(o) = &range {
            self.state.lock().call_range = Some((o.start(), recorder::depth().wrapping_sub(1)));
        }
        RoleCallGuard {
            rank: self.clone(),
            call,
            range,
            started_discrete,
            scheduled,
            _nvtx: crate::nvtx::NvtxRange::push(call.annotated_name()),
        }
    }

    /// When a collection is active and `call`'s role has a schedule on this rank, gates
    /// content records by iteration for the call's duration; with `windowed`, each schedule
    /// window gets a collection of its own ([`RankProfiler::next_window`]). Returns whether it
    /// gated.
    fn arm_schedule(&self, call: RoleCall, windowed: bool) -> bool {
        if !self.ctx.is_recording() {
            return false;
        }
        let Some((sched, kind)) = self
            .inner
            .plan
            .role(call.role())
            .filter(|p| p.collects_on(self.rank))
            .and_then(|p| p.schedule_for(call))
        else {
            return false;
        };
        let split = windowed.then(|| {
            let me = self.clone();
            recorder::WindowSplit {
                hook: Arc::new(move |first| me.next_window(first)),
                recorded: false,
            }
        });
        *self.ctx.iter.lock() = recorder::IterState {
            sched: Some((sched, kind)),
            next: 0,
            split,
        };
        self.ctx
            .gate
            .store(recorder::GATE_SKIP, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// A schedule window of the open, windowed role call begins at iteration `first` (verl's
    /// discrete torch update writes one trace per window): the collection of the window before
    /// ends (holding the role call's range up to now) and the window's own starts, under the
    /// same basename. Called from [`crate::iteration`] on the rank's thread.
    fn next_window(&self, first: u64) {
        let _busy = recorder::BusyGuard::enter();
        let (old, call_range) = {
            let mut st = self.state.lock();
            match st.active.take() {
                Some(a) if a.window.is_some() && a.call.is_some() => (a, st.call_range),
                other => {
                    st.active = other;
                    return;
                }
            }
        };
        let Some(call) = old.call else { return };
        if let Some((start, depth)) = call_range {
            push_call_range(&old, call, start, depth);
        }
        let (plan, role, steps, ts) = (old.plan.clone(), old.role, old.steps.clone(), old.ts17);
        self.stop(old);
        let next = self.start(plan, role, steps, Some(call), Some(first), Some(ts));
        self.state.lock().active = next;
    }

    /// The schedules of the roles that collect on this rank, for the Meta chunk.
    fn schedules(&self) -> BTreeMap<String, RoleSchedule> {
        let mut m = BTreeMap::new();
        for (role, p) in &self.inner.plan.roles {
            if let (Some(schedule), true) = (p.schedule, p.collects_on(self.rank)) {
                m.insert(
                    role.as_str().to_string(),
                    RoleSchedule {
                        schedule,
                        granularity: p.granularity,
                    },
                );
            }
        }
        m
    }

    /// Starts a collection of `plan` (the settings of `role`) over `steps`: end-to-end when
    /// `call` is `None`, else around that one role call; `window`: one schedule window of it
    /// (its first mini-batch), named with the timestamp `ts17` when given.
    fn start(
        &self,
        plan: RolePlan,
        role: Role,
        steps: Vec<u64>,
        call: Option<RoleCall>,
        window: Option<u64>,
        ts17: Option<u64>,
    ) -> Option<Active> {
        if self.inner.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let discrete = call.is_some();
        let role_dir = call.map_or("e2e", RoleCall::annotated_name).to_string();
        match self.try_start(&plan, role, &steps, call, window, ts17) {
            Ok(((sink, lock, tmp_dir, final_dir, raw_file), ts17)) => Some(Active {
                started: self
                    .device_timeline()
                    .map(|d| d.collection_started(plan.tool))
                    .is_some(),
                sink,
                _lock: lock,
                tmp_dir,
                final_dir,
                raw_file,
                plan,
                steps,
                role_dir,
                discrete,
                role,
                call,
                ts17,
                window,
                start_ticks: clock::now(),
            }),
            Err(e) => {
                tracing::warn!(
                    rank = self.rank,
                    "profiling collection for step {} ({role_dir}) disabled, training continues: {e}",
                    step_label(&steps)
                );
                None
            }
        }
    }

    fn try_start(
        &self,
        plan: &RolePlan,
        role: Role,
        steps: &[u64],
        call: Option<RoleCall>,
        window: Option<u64>,
        ts17: Option<u64>,
    ) -> Result<(CollectionFiles, u64), crate::ProfilerError> {
        let id = CollectionId {
            layout: self.inner.plan.layout,
            tool: plan.tool,
            scope: match call {
                None => Scope::Train,
                Some(RoleCall::GenerateSequences) => Scope::Stage(ROLLOUT_STAGE),
                Some(c) => Scope::Stage(c.annotated_name()),
            },
            role,
            steps,
            host: &self.inner.host,
            pid: self.inner.pid,
            rank: self.rank,
            world_size: self.inner.plan.world_size,
            window,
        };
        let role_dir = call.map_or("e2e", RoleCall::annotated_name);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| crate::ProfilerError::Io { path, source }
        };
        let (tmp_dir, final_dir, export_name, ts) = {
            let _g = self.inner.names.lock();
            let mut ts = ts17.unwrap_or_else(|| timestamp17(clock::wall_ns()));
            loop {
                let at = place(&plan.save_path, &id, ts);
                std::fs::create_dir_all(&at.parent).map_err(io(&at.parent))?;
                let final_dir = at.parent.join(&at.name);
                let tmp_dir = at.parent.join(unfinished_name(&at.name));
                // An export name already taken (a file, or a collection that will write it) is
                // never reused either: the timestamp is bumped (torch) or, where the name has
                // no timestamp (torch_memory), the collection goes on and its snapshot is
                // named apart by `rlprof analyse`.
                let export_taken = at
                    .export_name
                    .as_ref()
                    .is_some_and(|n| plan.tool == Tool::Torch && at.parent.join(n).exists());
                if !final_dir.exists() && !export_taken {
                    match std::fs::create_dir(&tmp_dir) {
                        Ok(()) => break (tmp_dir, final_dir, at.export_name, ts),
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(io(&tmp_dir)(e)),
                    }
                }
                ts += 1;
            }
        };
        let lock = lock_new_collection(&tmp_dir);
        let raw_dir = tmp_dir.join(RAW_DIR);
        std::fs::create_dir(&raw_dir).map_err(io(&raw_dir))?;
        let raw_path = raw_file(&tmp_dir, self.rank);
        let file = (self.inner.opener)(&raw_path).map_err(io(&raw_path))?;
        let mut w = RawWriter::from_file(file, &raw_path)?;
        let cal = clock::calibrate();
        let meta = CollectionMeta {
            format_version: crate::raw::FORMAT_VERSION,
            tool: plan.tool,
            level: plan.level,
            export_type: Some(plan.export_type),
            contents: plan.contents,
            analysis: plan.analysis,
            rank: self.rank,
            world_size: self.inner.plan.world_size,
            host: self.inner.host.clone(),
            pid: self.inner.pid,
            steps: steps.to_vec(),
            role_dir: role_dir.to_string(),
            discrete: call.is_some(),
            layout: Some(self.inner.plan.layout),
            export_name,
            mini_batch_window: window.is_some(),
            caps: plan.caps,
            torch_memory: plan.torch_memory.clone(),
            schedules: self.schedules(),
            start_wall_ns: cal.wall_ns,
            start_mono_ns: cal.mono_ns,
            ns_per_tick: Some(clock::local_ns_per_tick()),
        };
        w.write_meta(&meta)?;
        w.write_calibration(cal)?;
        let final_raw = raw_file(&final_dir, self.rank);
        let sink = self.ctx.start(w, plan.contents, plan.caps);
        Ok(((sink, lock, tmp_dir, final_dir, final_raw), ts))
    }

    fn stop(&self, active: Active) {
        if let Some(sink) = self.ctx.stop() {
            debug_assert!(Arc::ptr_eq(&sink, &active.sink));
        }
        let device = self
            .device_timeline()
            .filter(|_| active.started)
            .and_then(|d| d.collection_stopping(active.plan.tool));
        match device {
            None => self.complete(active, Vec::new()),
            Some(work) => self.complete_in_background(active, work),
        }
    }

    /// Reads the device timeline back and completes the collection on a background thread (on
    /// this one if no thread can be started).
    fn complete_in_background(&self, active: Active, work: DeviceFinish) {
        type Job = Box<dyn FnOnce() + Send>;
        let me = self.clone();
        let job: Arc<Mutex<Option<Job>>> = Arc::new(Mutex::new(Some(Box::new(move || {
            me.complete(active, work())
        }))));
        let run = |job: &Mutex<Option<Job>>| {
            if let Some(f) = job.lock().take() {
                f()
            }
        };
        let j = job.clone();
        match std::thread::Builder::new()
            .name("rlprof-device".into())
            .spawn(move || run(&j))
        {
            Ok(h) => self.inner.finishing.lock().push(h),
            Err(e) => {
                tracing::warn!(
                    "cannot start a thread to read device timings back ({e}); reading them on this one"
                );
                run(&job);
            }
        }
    }

    /// Writes the device records, finishes the raw file, renames the directory and hands the
    /// collection on.
    fn complete(&self, active: Active, device_records: Vec<crate::record::Record>) {
        if !device_records.is_empty() {
            active
                .sink
                .write_external(DEVICE_THREAD_BASE, "device", &device_records);
        }
        let stats: SinkStats = active.sink.finish();
        // Under the names lock, as a name is chosen: a rank choosing a name checks that the
        // final directory does not exist and then creates the temporary one; renamed between
        // the two, this collection's temporary name would be free again and the other rank
        // would take it, and one of the two renames would fail (seen as a collection left
        // under its temporary name by a racing test).
        let renamed = {
            let _g = self.inner.names.lock();
            std::fs::rename(&active.tmp_dir, &active.final_dir)
        };
        if let Err(e) = renamed {
            tracing::warn!(
                "cannot rename {} to {}: {e}; the raw data stays under the temporary name",
                active.tmp_dir.display(),
                active.final_dir.display()
            );
            return;
        }
        let done = CompletedCollection {
            dir: active.final_dir,
            raw_file: active.raw_file,
            rank: self.rank,
            tool: active.plan.tool,
            analysis: active.plan.analysis,
            steps: active.steps,
            role_dir: active.role_dir,
            events: stats.events,
            bytes: stats.bytes,
            truncated: stats.truncated.is_some(),
            failed: stats.failed,
        };
        self.inner.completed.lock().push(done.clone());
        let hook = self.inner.hook.read().clone();
        if let Some(h) = hook {
            h(&done);
        }
    }
}

impl Drop for StepGuard {
    fn drop(&mut self) {
        let _busy = recorder::BusyGuard::enter();
        if let Some(open) = self.range.take() {
            let name = intern::intern(&format!("ProfilerStep#{}", self.step));
            recorder::end(open, Kind::Range as u8, RangeCat::Step as u8, name.0);
        }
        let mut st = self.rank.state.lock();
        let ends_group = st
            .active
            .as_ref()
            .is_some_and(|a| !a.discrete && a.steps.last() == Some(&self.step));
        if ends_group {
            let a = st.active.take().expect("active");
            drop(st);
            self.rank.stop(a);
        } else {
            drop(st);
        }
        crate::finish_hook::after_step(&self.rank.inner.plan, self.rank.rank, self.step);
    }
}

impl Drop for RoleCallGuard {
    fn drop(&mut self) {
        let _busy = recorder::BusyGuard::enter();
        if let Some(open) = self.range.take() {
            let name = intern::intern(self.call.annotated_name());
            // Split by window: the range's own collection has ended; the last window's
            // collection gets the part it covers.
            let mut st = self.rank.state.lock();
            if let Some(a) = st
                .active
                .as_ref()
                .filter(|a| a.window.is_some() && a.sink.generation() != open.generation())
            {
                push_call_range(
                    a,
                    self.call,
                    open.start(),
                    recorder::depth().wrapping_sub(1),
                );
            }
            st.call_range = None;
            drop(st);
            recorder::end(open, Kind::Range as u8, RangeCat::RoleCall as u8, name.0);
        }
        if self.scheduled {
            *self.rank.ctx.iter.lock() = recorder::IterState::default();
            self.rank
                .ctx
                .gate
                .store(recorder::GATE_RECORD, std::sync::atomic::Ordering::Relaxed);
        }
        if self.started_discrete {
            let a = self.rank.state.lock().active.take();
            if let Some(a) = a {
                self.rank.stop(a);
            }
        }
    }
}

/// The window a discrete call's collection starts with (its first mini-batch), when its
/// collection is split by window: verl's discrete torch update under a schedule
/// (`torch_profile.py`: a scheduled `get_torch_profiler` writes one trace per window).
fn window_of(plan: &RolePlan, call: RoleCall) -> Option<u64> {
    if plan.tool != Tool::Torch || !plan.discrete || plan.schedule_scope != ScheduleScope::Update {
        return None;
    }
    plan.schedule_for(call)?.0.first_recorded()
}

/// Records `call`'s range into `active`'s collection, from `start` (or the collection's start,
/// if later) to now.
fn push_call_range(active: &Active, call: RoleCall, start: u64, depth: u16) {
    let name = intern::intern(call.annotated_name());
    recorder::push(
        active.sink.generation(),
        crate::record::Record {
            ts: start.max(active.start_ticks),
            a: clock::now(),
            name: name.0,
            kind: Kind::Range as u8,
            cat: RangeCat::RoleCall as u8,
            aux: depth,
        },
    );
}

/// What starting a collection made: sink, lock, `.tmp` and final directories, final raw path.
type CollectionFiles = (Arc<Sink>, Option<CollectionLock>, PathBuf, PathBuf, PathBuf);
