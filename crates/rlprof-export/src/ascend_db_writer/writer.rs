//! The streaming pass that fills `ascend_pytorch_profiler_{rank}.db`: the attributed events
//! of one replay become rows of the event tables as they arrive (appended to the file's b-tree
//! pages by [`crate::sqlite_file`]); what is per step or per collective is summed on the way
//! for `analysis.db`.
//! Memory is bounded as in the text exporter: interned-string bits, live allocations, per-step
//! sums and the collectives' figures.

use super::schema::{self as s, INVALID};
use super::strings::{Const, Strings};
use super::summary::{CommFigures, StepSums};
use super::template::{Col, RowTemplate};
use crate::attrib::{Out, RangeInfo};
use crate::decode::{CommEv, Event, Index, KernelEv, MemEv, RangeEv};
use crate::memory::{Live, MemTracker};
use crate::sqlite_file::Database;
use rlprof_profiler::record::RangeCat;
use std::io;

/// The event tables being filled.
struct Tables {
    pytorch_api: RowTemplate,
    connection_ids: RowTemplate,
    cann_api: RowTemplate,
    task: RowTemplate,
    compute: RowTemplate,
    comm_op: RowTemplate,
    comm_task: RowTemplate,
    mstx: RowTemplate,
    memory_record: RowTemplate,
    op_memory: RowTemplate,
}

/// One rank's rows, written as the events stream by.
pub struct Writer<'c, 'a> {
    idx: &'a Index,
    db: &'c mut Database,
    t: Tables,
    /// Device data is written (level0 and up).
    device: bool,
    pid: i64,
    strings: Strings,
    /// Call stacks used (their `PYTORCH_CALLCHAINS` rows are written at the end).
    stacks: Strings,
    mem: MemTracker,
    /// The op whose kernels were the last ones seen (kernels arrive just before their op).
    linked: u64,
    next_task: i64,
    next_conn: i64,
    next_range: i64,
    /// Per-step and per-collective figures for `analysis.db`.
    pub steps: StepSums,
    /// Collective figures (level1 and up).
    pub comms: CommFigures,
    err: Option<io::Error>,
}

use Col::{Bind as B, Lit, Null as N};

/// `PYTORCH_API` rows: ops and steps (`sequenceNumber`, `fwdThreadId` unknown; type `op`).
const PYTORCH_API: [Col; 11] = [B, B, B, B, B, N, N, B, B, B, Lit(s::API_OP)];
/// `COMPUTE_TASK_INFO` rows: name, task, task type, op type, input dtypes and shapes.
const COMPUTE_TASK_INFO: [Col; 15] = [B, B, N, N, B, B, N, B, B, N, N, N, N, N, N];

/// `TASK` rows (device 0, the process id, no context or model).
fn task_cols(pid: i64) -> [Col; 11] {
    [
        B,
        B,
        Lit(0),
        B,
        B,
        Lit(pid),
        B,
        Lit(INVALID),
        B,
        B,
        Lit(INVALID),
    ]
}

/// Connection ids of communication launches start here (ops use their external ids below).
const COMM_CONN_BASE: i64 = 1 << 40;

impl<'c, 'a> Writer<'c, 'a> {
    /// A writer into `db`, which holds [`s::PROFILER_TABLES`].
    pub fn new(db: &'c mut Database, idx: &'a Index) -> Self {
        let t = Tables {
            pytorch_api: RowTemplate::with(db, s::PYTORCH_API, &PYTORCH_API),
            connection_ids: RowTemplate::new(db, s::CONNECTION_IDS),
            cann_api: RowTemplate::new(db, s::CANN_API),
            task: RowTemplate::with(db, s::TASK, &task_cols(idx.meta.pid as i64)),
            compute: RowTemplate::with(db, s::COMPUTE_TASK_INFO, &COMPUTE_TASK_INFO),
            comm_op: RowTemplate::new(db, s::COMMUNICATION_OP),
            comm_task: RowTemplate::new(db, s::COMMUNICATION_TASK_INFO),
            mstx: RowTemplate::new(db, s::MSTX_EVENTS),
            memory_record: RowTemplate::new(db, s::MEMORY_RECORD),
            op_memory: RowTemplate::new(db, s::OP_MEMORY),
        };
        Writer {
            idx,
            db,
            t,
            device: crate::npu::level_rank(idx.meta.level) >= 0,
            pid: idx.meta.pid as i64,
            strings: Strings::default(),
            stacks: Strings::default(),
            mem: MemTracker::default(),
            linked: 0,
            next_task: 0,
            next_conn: COMM_CONN_BASE,
            next_range: 0,
            steps: StepSums::new(),
            comms: CommFigures::new(crate::npu::level_rank(idx.meta.level) >= 1),
            err: None,
        }
    }

    /// Takes one attributed event (the first error is kept and stops the writing).
    #[inline]
    pub fn push(&mut self, o: &Out) {
        if self.err.is_some() {
            return;
        }
        if let Err(e) = self.push_inner(o) {
            self.err = Some(e);
        }
    }

    fn push_inner(&mut self, o: &Out) -> io::Result<()> {
        match o {
            Out::Range(r) => self.range(r),
            Out::Kernel(k, op) => {
                self.steps.kernel(k);
                if !self.device {
                    return Ok(());
                }
                self.kernel(k, op.map(|o| (o.ext_id, o.op)))
            }
            Out::Other(Event::Comm(c)) => {
                self.steps.comm(self.idx, c);
                self.comms.comm(self.idx, c);
                self.comm(c)
            }
            Out::Other(Event::Memory(m)) => self.memory(m),
            Out::Other(_) => Ok(()),
        }
    }

    #[inline]
    fn tid(&self, thread: u32) -> Option<i64> {
        Some(self.pid << 32 | thread as i64)
    }

    fn range(&mut self, ri: &RangeInfo) -> io::Result<()> {
        let r = &ri.r;
        let name = self.strings.id(r.name);
        match RangeCat::from_u8(r.cat) {
            Some(RangeCat::Op) => {
                let conn = if ri.ext_id != 0 && ri.ext_id == self.linked {
                    let c = Some(ri.ext_id as i64);
                    self.t.connection_ids.push(self.db, &[c, c])?;
                    c
                } else {
                    None
                };
                let row = [
                    Some(r.start as i64),
                    Some(r.end as i64),
                    self.tid(r.thread),
                    conn,
                    name,
                    self.strings.id(r.dtypes),
                    self.strings.id(r.shapes),
                    {
                        self.strings.id(r.stack);
                        self.stacks.id(r.stack)
                    },
                ];
                self.t.pytorch_api.push(self.db, &row)
            }
            Some(RangeCat::Step) => self.t.pytorch_api.push(
                self.db,
                &[
                    Some(r.start as i64),
                    Some(r.end as i64),
                    self.tid(r.thread),
                    None,
                    name,
                    None,
                    None,
                    None,
                ],
            ),
            Some(c @ (RangeCat::Api | RangeCat::Runtime)) => {
                let ty = if c == RangeCat::Api {
                    s::API_ACL
                } else {
                    s::API_RUNTIME
                };
                self.t.cann_api.push(
                    self.db,
                    &[
                        Some(r.start as i64),
                        Some(r.end as i64),
                        Some(ty),
                        self.tid(r.thread),
                        None,
                        name,
                    ],
                )
            }
            _ => self.mstx(r, name),
        }
    }

    /// Phases, role calls, iterations, user ranges and spans: marker ranges. Role calls (verl's
    /// stage labels) and user ranges are in mstx's default domain, as verl's stage ranges are;
    /// the ranges verl has no counterpart of are in the `rlprof` domain.
    fn mstx(&mut self, r: &RangeEv, name: Option<i64>) -> io::Result<()> {
        self.next_range += 1;
        let domain = match RangeCat::from_u8(r.cat) {
            Some(RangeCat::RoleCall | RangeCat::User) => Const::DefaultDomain,
            _ => Const::Rlprof,
        };
        let tid = self.tid(r.thread);
        self.t.mstx.push(
            self.db,
            &[
                Some(r.start as i64),
                Some(r.end as i64),
                Some(s::MSTX_RANGE),
                Some(self.next_range),
                Some(r.cat as i64),
                name,
                tid,
                tid,
                domain.id(),
                None,
            ],
        )
    }

    fn kernel(&mut self, k: &KernelEv, op: Option<(u64, RangeEv)>) -> io::Result<()> {
        self.next_task += 1;
        let gid = Some(self.next_task);
        let conn = match op {
            Some((ext, _)) => {
                self.linked = ext;
                Some(ext as i64)
            }
            None => Some(INVALID),
        };
        let ty = if k.on_host {
            Const::AiCpu.id()
        } else {
            Const::AiCore.id()
        };
        self.t.task.push(
            self.db,
            &[
                Some(k.start as i64),
                Some(k.end as i64),
                conn,
                gid,
                ty,
                Some(k.stream as i64),
                gid,
            ],
        )?;
        let name = self.strings.id(k.name);
        let (dtypes, shapes) = match op {
            Some((_, o)) => (self.strings.id(o.dtypes), self.strings.id(o.shapes)),
            None => (None, None),
        };
        self.t
            .compute
            .push(self.db, &[name, gid, ty, name, dtypes, shapes])
    }

    /// A communication op: its row, the launch that links it, and its tasks (the waiting part
    /// as a `Notify_Wait` task, the rest as a `Memcpy` task carrying the bytes).
    fn comm(&mut self, c: &CommEv) -> io::Result<()> {
        self.next_conn += 1;
        let conn = Some(self.next_conn);
        let op_id = Some(self.next_conn - COMM_CONN_BASE);
        let name = self.strings.id(c.name);
        let group = self.strings.id(c.group).or(Const::DefaultGroup.id());
        let tid = self.tid(c.thread);
        self.t.cann_api.push(
            self.db,
            &[
                Some(c.start as i64),
                Some(c.start as i64),
                Some(s::API_NODE),
                tid,
                conn,
                name,
            ],
        )?;
        self.t.comm_op.push(
            self.db,
            &[
                name,
                Some(c.start as i64),
                Some(c.end as i64),
                conn,
                group,
                op_id,
                Some(0),
                Some(0),
                None,
                None,
                None,
                name,
            ],
        )?;
        let wait = c.wait_ns.min(c.end - c.start);
        let rank = Some(self.idx.meta.rank as i64);
        let peer = c.peer.map_or(rank, |p| Some(p as i64));
        let task = |w: &mut Self, start: u64, end: u64, kind: Const, bytes: Option<i64>| {
            w.next_task += 1;
            let gid = Some(w.next_task);
            w.t.task.push(
                w.db,
                &[
                    Some(start as i64),
                    Some(end as i64),
                    conn,
                    gid,
                    kind.id(),
                    None,
                    gid,
                ],
            )?;
            w.t.comm_task.push(
                w.db,
                &[
                    kind.id(),
                    gid,
                    kind.id(),
                    Some(0),
                    group,
                    None,
                    None,
                    rank,
                    peer,
                    None,
                    bytes,
                    None,
                    None,
                    op_id,
                ],
            )
        };
        if wait > 0 {
            task(self, c.start, c.start + wait, Const::NotifyWait, Some(0))?;
        }
        task(
            self,
            c.start + wait,
            c.end,
            Const::Memcpy,
            Some(c.bytes as i64),
        )
    }

    fn memory(&mut self, m: &MemEv) -> io::Result<()> {
        // An address allocated again without a free: the earlier allocation stays unreleased
        // (the tracker forgets it, the DB keeps it).
        if !m.free
            && let Some(old) = self.mem.live.get(&m.addr).copied()
        {
            self.op_memory(old, None)?;
        }
        let released = self.mem.apply(m);
        let a = self.mem.allocated as i64;
        self.t.memory_record.push(
            self.db,
            &[
                Const::Pta.id(),
                Some(m.ts as i64),
                Some(a),
                Some(self.mem.reserved() as i64),
                Some(a),
                None,
                Some(m.device as i64),
            ],
        )?;
        if let (Some(l), true) = (released, m.free) {
            self.op_memory(l, Some((m.ts, self.mem.allocated)))?;
        }
        Ok(())
    }

    fn op_memory(&mut self, l: Live, release: Option<(u64, u64)>) -> io::Result<()> {
        let name = self.strings.id(l.op).or(Const::Unknown.id());
        let (t, dur, total) = match release {
            Some((t, total)) => (
                Some(t as i64),
                Some(t.saturating_sub(l.ts) as i64),
                Some(total as i64),
            ),
            None => (None, None, None),
        };
        let at = Some(l.total_at_alloc as i64);
        self.t.op_memory.push(
            self.db,
            &[
                name,
                Some(l.bytes as i64),
                Some(l.ts as i64),
                t,
                t,
                dur,
                dur,
                at,
                at,
                at,
                total,
                total,
                total,
                None,
                Some(l.device as i64),
            ],
        )
    }

    /// Writes what is still open (allocations never freed) and returns
    /// the used strings and call stacks.
    pub fn finish(mut self) -> io::Result<(Strings, Strings, StepSums, CommFigures)> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        let mut live: Vec<Live> = self.mem.live.values().copied().collect();
        live.sort_by_key(|l| l.ts);
        for l in live {
            self.op_memory(l, None)?;
        }
        Ok((self.strings, self.stacks, self.steps, self.comms))
    }
}
