//! Device memory: `MEMORY_RECORD`'s allocator totals and `OP_MEMORY`'s allocations by op.

use super::{Reader, opt};
use crate::ascend_text_reader::OpAllocation;
use crate::model::{MemEvent, NONE};

impl Reader<'_, '_> {
    /// Device memory. With `MEMORY_RECORD`, the curve is its `PTA` series, as the text
    /// layout's `memory_record.csv` is read (the allocator's own totals, so the peak counts
    /// what was allocated before the profile began); each point that is an allocation or a
    /// release of `OP_MEMORY` (same time, same total) takes that row's op, so the report can
    /// say what was live at the peak. Without it, `OP_MEMORY`'s allocations and releases alone.
    pub(super) fn read_memory(&mut self) -> rusqlite::Result<()> {
        let allocations = if self.has("OP_MEMORY")? {
            self.read_op_memory()?
        } else {
            Vec::new()
        };
        let totals = if self.has("MEMORY_RECORD")? {
            self.read_memory_record()?
        } else {
            Vec::new()
        };
        if totals.is_empty() {
            for (i, a) in allocations.iter().enumerate() {
                let addr = i as u64 + 1;
                let ev = |t, delta| MemEvent {
                    t,
                    delta,
                    addr,
                    op: a.op,
                    total: None,
                };
                self.p.memory.push(ev(a.at, a.size));
                if let Some((t, _)) = a.release {
                    self.p.memory.push(ev(t, -a.size));
                }
            }
            return Ok(());
        }
        let mut events = crate::ascend_text_reader::memory_from_totals(totals);
        crate::ascend_text_reader::attribute_allocations(&mut events, &allocations);
        self.p.memory.extend(events);
        self.p.op_allocations = allocations;
        Ok(())
    }

    /// `OP_MEMORY` rows of device memory, times relative to the origin.
    fn read_op_memory(&mut self) -> rusqlite::Result<Vec<OpAllocation>> {
        let mut st = self.select(
            "OP_MEMORY",
            &[
                "name",
                "size",
                "allocationTime",
                "releaseTime",
                "deviceId",
                "allocationTotalAllocated",
                "releaseTotalAllocated",
            ],
        )?;
        let mut rows = st.raw_query();
        let mut v = Vec::new();
        while let Some(r) = rows.next()? {
            // Host (CPU) allocations carry no device.
            if opt(r, 4)?.is_some_and(|d| d < 0) {
                continue;
            }
            let Some(at) = opt(r, 2)? else {
                continue;
            };
            let op = match opt(r, 0)? {
                Some(id) if self.text.get(&id).is_some_and(|s| s != "unknown") => {
                    self.name(Some(id))
                }
                _ => NONE,
            };
            let release = match opt(r, 3)? {
                Some(t) => Some((t.saturating_sub(self.origin), opt(r, 6)?)),
                None => None,
            };
            v.push(OpAllocation {
                op,
                size: opt(r, 1)?.unwrap_or(0),
                at: at.saturating_sub(self.origin),
                total_at: opt(r, 5)?,
                release,
            });
        }
        Ok(v)
    }

    /// Allocator totals `(t, bytes)` from `MEMORY_RECORD`, in time order, as the text layout's
    /// `memory_record.csv` is read: the `PTA` (torch allocator) rows when there are any, else
    /// every row, of devices only. torch_npu interleaves `PTA`, `GE`, `PTA+GE` and `WORKSPACE`
    /// series in the table, each a total of its own, so they are never mixed into one.
    fn read_memory_record(&mut self) -> rusqlite::Result<Vec<(i64, i64)>> {
        let pta = self.string_id("PTA");
        let mut st = self.select(
            "MEMORY_RECORD",
            &["timestamp", "totalAllocated", "component", "deviceId"],
        )?;
        let mut rows = st.raw_query();
        let mut series: Vec<(Option<i64>, i64, i64)> = Vec::new();
        while let Some(r) = rows.next()? {
            let (Some(t), Some(total)) = (opt(r, 0)?, opt(r, 1)?) else {
                continue;
            };
            if opt(r, 3)?.is_some_and(|d| d < 0) {
                continue;
            }
            series.push((opt(r, 2)?, t.saturating_sub(self.origin), total));
        }
        let has_pta = pta.is_some() && series.iter().any(|s| s.0 == pta);
        let mut totals: Vec<(i64, i64)> = series
            .into_iter()
            .filter(|s| !has_pta || s.0 == pta)
            .map(|s| (s.1, s.2))
            .collect();
        totals.sort_by_key(|t| t.0);
        Ok(totals)
    }
}
