//! Device-side tables: `TASK` with `COMPUTE_TASK_INFO` (kernels, copies, stream waits) and
//! `COMMUNICATION_OP` with `COMMUNICATION_TASK_INFO` (collectives, their bytes and waits).

use super::{Reader, Stop, opt};
use crate::device_names::device_track;
use crate::model::{Detail, Track};
use rlprof_profiler::metrics::PlaneWaits;
use rustc_hash::FxHashMap;

/// One row of `COMMUNICATION_TASK_INFO`, keyed by its globalTaskId.
#[derive(Clone, Copy)]
pub(super) struct CommTaskInfo {
    /// The collective (`COMMUNICATION_OP.opId`) the task belongs to.
    op: i64,
    bytes: u64,
    /// A `Notify_Wait` task: time spent waiting, not moving data.
    wait: bool,
    peer: Option<i64>,
    /// The plane (`planeId`): a collective runs its tasks on several planes at once.
    plane: i64,
}

/// A communication op's task totals.
#[derive(Default, Clone)]
pub(super) struct CommTasks {
    bytes: u64,
    waits: PlaneWaits,
    peer: Option<i64>,
}

impl Reader<'_, '_> {
    /// The connection ids of the collectives (`COMMUNICATION_OP.connectionId`), sorted: the
    /// API call that launched one, and its own record among the device tasks, repeat the
    /// collective's time.
    pub(super) fn comm_connections(&self) -> rusqlite::Result<Vec<i64>> {
        let mut v: Vec<i64> = Vec::new();
        if self.has("COMMUNICATION_OP")? {
            let mut st = self.select("COMMUNICATION_OP", &["connectionId"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                v.extend(opt(r, 0)?);
            }
        }
        v.sort_unstable();
        Ok(v)
    }

    /// Communication tasks by globalTaskId.
    pub(super) fn read_comm_task_info(&mut self) -> rusqlite::Result<FxHashMap<i64, CommTaskInfo>> {
        let wait_id = self.string_id("Notify_Wait");
        let mut m = FxHashMap::default();
        let mut st = self.select(
            "COMMUNICATION_TASK_INFO",
            &[
                "globalTaskId",
                "opId",
                "size",
                "name",
                "taskType",
                "dstRank",
                "planeId",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let (Some(gid), Some(op)) = (opt(r, 0)?, opt(r, 1)?) else {
                continue;
            };
            let size = opt(r, 2)?.unwrap_or(0).max(0) as u64;
            // torch_npu names the task's kind in `taskType` (`name` is its op's); ours in both.
            let wait = wait_id.is_some() && (opt(r, 3)? == wait_id || opt(r, 4)? == wait_id);
            let peer = opt(r, 5)?;
            m.insert(
                gid,
                CommTaskInfo {
                    op,
                    bytes: size,
                    wait,
                    peer,
                    plane: opt(r, 6)?.unwrap_or(0),
                },
            );
        }
        Ok(m)
    }

    /// Device tasks from `TASK`:
    /// - a task of a communication op (`COMMUNICATION_TASK_INFO`) is summed into its op;
    /// - a compute task (`COMPUTE_TASK_INFO`) is a kernel (or a copy) named by its info;
    /// - any other task is named by its task type: the collective's own record on its stream
    ///   (launched by the op's connection id) is left out, as it repeats the op; stream
    ///   synchronisation ([`crate::device_names::is_sync_task`]) stays on the timeline as a user range, not device
    ///   work; where the DB has compute infos, the rest are not kernels either (copies stay
    ///   copies: [`Self::task_track`]).
    pub(super) fn read_tasks(
        &mut self,
        comm: &FxHashMap<i64, CommTaskInfo>,
    ) -> Result<FxHashMap<i64, CommTasks>, Stop> {
        let mut names: Vec<(i64, Option<i64>)> = Vec::new();
        if self.has("COMPUTE_TASK_INFO")? {
            let mut st = self.select("COMPUTE_TASK_INFO", &["globalTaskId", "name"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                if let Some(g) = opt(r, 0)? {
                    names.push((g, opt(r, 1)?));
                }
            }
        }
        if !names.is_sorted_by_key(|n| n.0) {
            names.sort_by_key(|n| n.0);
        }
        let launches = self.comm_connections()?;
        // Task type id -> track of a task without a compute info, decided once per type.
        let mut type_tracks: FxHashMap<Option<i64>, Track> = FxHashMap::default();
        let mut per_op: FxHashMap<i64, CommTasks> = FxHashMap::default();
        let mut st = self.select(
            "TASK",
            &[
                "startNs",
                "endNs",
                "globalTaskId",
                "taskType",
                "streamId",
                "connectionId",
            ],
        )?;
        let mut rows = st.raw_query();
        let mut cursor = 0usize;
        while let Some(r) = rows.next()? {
            let Some((start, end)) = self.span(r, 0, 1)? else {
                continue;
            };
            let gid: Option<i64> = opt(r, 2)?;
            if let Some(c) = gid.and_then(|g| comm.get(&g)) {
                let t = per_op.entry(c.op).or_default();
                t.bytes += c.bytes;
                if c.wait {
                    t.waits
                        .add(c.plane, end.saturating_sub(start).max(0) as u64);
                }
                if c.peer.is_some() {
                    t.peer = c.peer;
                }
                continue;
            }
            // Tasks and their infos are mostly in the same order: try the next one first.
            let name_id = gid.and_then(|g| {
                if names.get(cursor).is_some_and(|n| n.0 == g) {
                    cursor += 1;
                    return Some(names[cursor - 1].1);
                }
                let i = names.binary_search_by_key(&g, |n| n.0).ok()?;
                cursor = i + 1;
                Some(names[i].1)
            });
            let (name, track) = match name_id {
                Some(info_name) => {
                    let name = self.name(info_name);
                    (name, self.kernel_track(name))
                }
                None => {
                    if opt(r, 5)?.is_some_and(|c| launches.binary_search(&c).is_ok()) {
                        continue;
                    }
                    let ty = opt(r, 3)?;
                    let track = match type_tracks.get(&ty) {
                        Some(&t) => t,
                        None => {
                            let t = self.task_track(ty, !names.is_empty());
                            type_tracks.insert(ty, t);
                            t
                        }
                    };
                    (self.name(ty), track)
                }
            };
            let stream: i64 = opt(r, 4)?.unwrap_or(0);
            let thread = self.thread(-1 - stream, || format!("stream {stream}"));
            let e = self.event(start, end, name, thread, track);
            self.push(e)?;
        }
        Ok(per_op)
    }

    /// The track of a compute task (one with a `COMPUTE_TASK_INFO` row) from its name, as the
    /// text layout's device tasks are told ([`device_track`]), decided once per name.
    fn kernel_track(&mut self, name: u32) -> Track {
        let i = name as usize;
        if let Some(Some(t)) = self.kernel_tracks.get(i) {
            return *t;
        }
        let t = device_track(self.p.str(name), None);
        if self.kernel_tracks.len() <= i {
            self.kernel_tracks.resize(i + 1, None);
        }
        self.kernel_tracks[i] = Some(t);
        t
    }

    /// The track of a device task without a compute info, from its task type id, in a DB that
    /// has compute infos (`infos`) or not. Where it has them, such a task is not a kernel
    /// (copies stay copies): msprof's overlap analysis counts only the compute tasks as
    /// computing, and so do `analyse --cluster` and this report, so the three agree.
    fn task_track(&self, ty: Option<i64>, infos: bool) -> Track {
        let ty = ty.and_then(|i| self.text.get(&i)).map(String::as_str);
        match device_track(ty.unwrap_or(""), ty) {
            Track::Kernel if infos => Track::User,
            t => t,
        }
    }

    pub(super) fn read_comm_ops(&mut self, per_op: &FxHashMap<i64, CommTasks>) -> Result<(), Stop> {
        let mut st = self.select(
            "COMMUNICATION_OP",
            &["opName", "startNs", "endNs", "groupName", "opId"],
        )?;
        let mut rows = st.raw_query();
        let rank = self.p.rank as i64;
        let thread = self.thread(i64::MIN, || "communication".into());
        while let Some(r) = rows.next()? {
            let Some((start, end)) = self.span(r, 1, 2)? else {
                continue;
            };
            let name = self.name(opt(r, 0)?);
            let mut e = self.event(start, end, name, thread, Track::Comm);
            let t = opt(r, 4)?
                .and_then(|op| per_op.get(&op))
                .cloned()
                .unwrap_or_default();
            let d = Detail {
                bytes: Some(t.bytes),
                wait_ns: Some(t.waits.wait()),
                group: self.text_of(opt(r, 3)?).filter(|g| g != "default_group"),
                peer: t.peer.filter(|&p| p != rank && p >= 0).map(|p| p as u32),
                ..Detail::default()
            };
            e.detail = self.p.add_detail(d);
            self.push(e)?;
        }
        Ok(())
    }
}
