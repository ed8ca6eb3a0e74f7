//! Host-side tables: `PYTORCH_API` (ops, steps, Python functions, task-queue entries), with
//! their shapes, dtypes and call stacks; `CANN_API`; `MSTX_EVENTS`.

use super::{OpDetailIds, Reader, Stop, opt, text};
use crate::model::{Detail, NONE, Track};
use rlprof_profiler::record::RangeCat;
use rustc_hash::FxHashMap;

impl Reader<'_, '_> {
    /// Names of `ENUM_API_TYPE` ids.
    fn api_types(&self) -> rusqlite::Result<FxHashMap<i64, String>> {
        let mut m = FxHashMap::default();
        if self.has("ENUM_API_TYPE")? {
            let mut st = self.select("ENUM_API_TYPE", &["id", "name"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                if let Some(id) = opt(r, 0)? {
                    m.insert(id, text(r, 1)?);
                }
            }
        }
        Ok(m)
    }

    /// Call stacks: callchain id -> frames joined by newlines, in depth order.
    fn callchains(&self) -> rusqlite::Result<FxHashMap<i64, String>> {
        let mut m: FxHashMap<i64, Vec<(i64, String)>> = FxHashMap::default();
        if self.has("PYTORCH_CALLCHAINS")? {
            let mut st = self.select("PYTORCH_CALLCHAINS", &["id", "stack", "stackDepth"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                let Some(id) = opt(r, 0)? else { continue };
                let frame = self.text_of(opt(r, 1)?).unwrap_or_default();
                m.entry(id)
                    .or_default()
                    .push((opt(r, 2)?.unwrap_or(0), frame));
            }
        }
        Ok(m.into_iter()
            .map(|(id, mut v)| {
                v.sort_by_key(|f| f.0);
                let frames: Vec<String> = v.into_iter().map(|f| f.1).collect();
                (id, frames.join("\n"))
            })
            .collect())
    }

    pub(super) fn read_pytorch_api(&mut self) -> Result<(), Stop> {
        let types = self.api_types()?;
        let chains = self.callchains()?;
        let mut st = self.select(
            "PYTORCH_API",
            &[
                "startNs",
                "endNs",
                "globalTid",
                "name",
                "inputDtypes",
                "inputShapes",
                "callchainId",
                "type",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((start, end)) = self.span(r, 0, 1)? else {
                continue;
            };
            let tid: i64 = opt(r, 2)?.unwrap_or(0);
            let name_id: Option<i64> = opt(r, 3)?;
            let ty: Option<i64> = opt(r, 7)?;
            let name = self.name(name_id);
            let track = if self.p.str(name).starts_with("ProfilerStep#") {
                Track::Step
            } else {
                match ty.and_then(|t| types.get(&t)).map(String::as_str) {
                    // torch_npu names the Python tracer's type `trace`.
                    Some("trace" | "python_function") => Track::Span,
                    // verl 0.9.1 marks its stages with mstx ranges named by the stage label.
                    Some("mstx") if crate::roles::is_role_call(self.p.str(name)) => Track::RoleCall,
                    Some("mstx") => Track::User,
                    Some("queue") => Track::Runtime,
                    _ => Track::Op,
                }
            };
            let thread = self.host_thread(tid);
            let mut e = self.event(start, end, name, thread, track);
            if track == Track::Op {
                let key = (opt(r, 4)?, opt(r, 5)?, opt(r, 6)?);
                e.detail = match self.op_details.get(&key) {
                    Some(&d) => d,
                    None => {
                        let d = self.op_detail(key, &chains);
                        self.op_details.insert(key, d);
                        d
                    }
                };
            }
            self.push(e)?;
        }
        Ok(())
    }

    /// The detail of an op from its `(inputDtypes, inputShapes, callchainId)` ids ([`NONE`]
    /// when it has none of them).
    fn op_detail(
        &mut self,
        (dtypes, shapes, chain): OpDetailIds,
        chains: &FxHashMap<i64, String>,
    ) -> u32 {
        let d = Detail {
            dtypes: self.text_of(dtypes),
            shapes: self.text_of(shapes),
            stack: chain
                .and_then(|c| chains.get(&c))
                .filter(|s| !s.is_empty())
                .cloned(),
            ..Detail::default()
        };
        if d == Detail::default() {
            NONE
        } else {
            self.p.add_detail(d)
        }
    }

    pub(super) fn read_cann_api(&mut self) -> Result<(), Stop> {
        let types = self.api_types()?;
        let launches = self.comm_connections()?;
        let mut st = self.select(
            "CANN_API",
            &[
                "startNs",
                "endNs",
                "type",
                "globalTid",
                "connectionId",
                "name",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((start, end)) = self.span(r, 0, 1)? else {
                continue;
            };
            let conn: Option<i64> = opt(r, 4)?;
            if conn.is_some_and(|c| launches.binary_search(&c).is_ok()) {
                continue;
            }
            let ty: Option<i64> = opt(r, 2)?;
            let track = match ty.and_then(|t| types.get(&t)).map(String::as_str) {
                Some("runtime") => Track::Runtime,
                _ => Track::Api,
            };
            let tid: i64 = opt(r, 3)?.unwrap_or(0);
            let thread = self.host_thread(tid);
            let name = self.name(opt(r, 5)?);
            let e = self.event(start, end, name, thread, track);
            self.push(e)?;
        }
        Ok(())
    }

    /// `MSTX_EVENTS`. rlprof's DB (its `STRING_IDS` hold the `rlprof` domain) puts the ranges
    /// verl has no counterpart of in the `rlprof` domain, their `category` the range category,
    /// and verl's stage ranges in mstx's default domain beside the user's own ranges: there a
    /// stage label ([`crate::roles::is_stage_label`]) is a role call and any other name (a
    /// method name like `update_actor` included) a user range. In another DB (verl's own, older verl naming its ranges by method) every role-call
    /// name is a role call.
    pub(super) fn read_mstx(&mut self) -> Result<(), Stop> {
        let rlprof = self.string_id("rlprof");
        let mut st = self.select(
            "MSTX_EVENTS",
            &[
                "startNs",
                "endNs",
                "category",
                "message",
                "globalTid",
                "domainId",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((start, end)) = self.span(r, 0, 1)? else {
                continue;
            };
            let domain: Option<i64> = opt(r, 5)?;
            let ours = rlprof.is_some() && domain == rlprof;
            let tid: i64 = opt(r, 4)?.unwrap_or(0);
            let thread = self.host_thread(tid);
            let name = self.name(opt(r, 3)?);
            let track = if ours {
                match RangeCat::from_u8(opt(r, 2)?.unwrap_or(0) as u8) {
                    Some(RangeCat::Phase) => Track::Phase,
                    Some(RangeCat::RoleCall) => Track::RoleCall,
                    Some(RangeCat::Iteration) => Track::Iteration,
                    Some(RangeCat::Span) => Track::Span,
                    _ => Track::User,
                }
            } else {
                let label = self.p.str(name);
                // rlprof names its role calls by verl's stage labels, and the two calls verl
                // labels by method (`compute_values`, `compute_rm_score`).
                let stage = if rlprof.is_some() {
                    crate::roles::is_stage_label(label)
                        || matches!(label, "compute_values" | "compute_rm_score")
                } else {
                    crate::roles::is_role_call(label)
                };
                if stage { Track::RoleCall } else { Track::User }
            };
            let e = self.event(start, end, name, thread, track);
            self.push(e)?;
        }
        Ok(())
    }
}
