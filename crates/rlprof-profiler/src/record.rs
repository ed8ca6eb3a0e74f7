//! The fixed-size binary record written on the hot path.
//!
//! Every event is one 24-byte [`Record`]; events that need more fields (an op's module and
//! shapes, a collective's bytes and group, an allocation's address) are followed by one
//! [`Kind::Ext`] record on the same thread. Layout and meaning are documented in
//! `docs/raw-format.md`.

/// Size of one record in bytes.
pub const RECORD_SIZE: usize = 24;

/// One raw event. `repr(C)`, 24 bytes, no padding.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record {
    /// Start ticks (ranges, instants) or the first payload word (ext records).
    pub ts: u64,
    /// End ticks (ranges) or a payload word.
    pub a: u64,
    /// Interned name.
    pub name: u32,
    /// [`Kind`] as u8.
    pub kind: u8,
    /// Sub-kind: a [`RangeCat`] for ranges, 0/1 alloc/free for memory.
    pub cat: u8,
    /// Small extra field: nesting depth for ranges, device for memory, stream for kernels.
    pub aux: u16,
}

const _: () = assert!(std::mem::size_of::<Record>() == RECORD_SIZE);

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A host range `[ts, a)` in ticks; `cat` is a [`RangeCat`].
    Range = 1,
    /// Extension of the previous record on the same thread; meaning depends on that record.
    /// After an op range: `ts` = module id | shapes id << 32, `a` = dtypes id | stack id << 32,
    /// `name` = autograd sequence number (0 = none), `cat` = 1 for a backward op.
    /// After a kernel: `ts` = FLOPs, `a` = bytes moved. After a collective: `ts` = bytes,
    /// `a` = wait ticks, `name` = group id, `aux` = peer rank + 1 (0 = collective).
    /// After a memory event: `ts` = address, `a` = bytes.
    Ext = 2,
    /// A device kernel `[ts, a)`; `aux` = stream; `cat` = 1 when it ran on the host CPU engine.
    Kernel = 3,
    /// A memory event at `ts`; `cat` 0 = alloc, 1 = free; `name` = op that caused it;
    /// `aux` = device index; always followed by an Ext with address and size.
    Memory = 4,
    /// A collective `[ts, a)`; followed by an Ext.
    Comm = 5,
    /// An instant at `ts` with value `a` (`cat`: 0 plain, 1 iteration begin).
    Instant = 6,
    /// A counter sample at `ts` with value `a`.
    Counter = 7,
}

impl Kind {
    /// Decodes a kind byte.
    pub fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Range,
            2 => Kind::Ext,
            3 => Kind::Kernel,
            4 => Kind::Memory,
            5 => Kind::Comm,
            6 => Kind::Instant,
            7 => Kind::Counter,
            _ => return None,
        })
    }
}

/// Category of a host range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RangeCat {
    /// A training step (`ProfilerStep#N`).
    Step = 1,
    /// A trainer phase (`gen`, `reward`, ...).
    Phase = 2,
    /// A role call (`generate_sequences`, ...).
    RoleCall = 3,
    /// A framework (tensor) op; followed by an Ext with module/shapes.
    Op = 4,
    /// A span from the `tracing` bridge.
    Span = 5,
    /// Engine API layer (dispatch/launch) — level1+.
    Api = 6,
    /// Runtime layer (allocator, synchronisation) — level2.
    Runtime = 7,
    /// A user range with no more specific category.
    User = 8,
    /// A scheduled inner iteration that was recorded (`decode_step`, `micro_batch`,
    /// `mini_batch`); followed by an Ext with `ts` = iteration id (0-based, per role call).
    Iteration = 9,
}

impl RangeCat {
    /// Decodes a category byte.
    pub fn from_u8(v: u8) -> Option<RangeCat> {
        Some(match v {
            1 => RangeCat::Step,
            2 => RangeCat::Phase,
            3 => RangeCat::RoleCall,
            4 => RangeCat::Op,
            5 => RangeCat::Span,
            6 => RangeCat::Api,
            7 => RangeCat::Runtime,
            8 => RangeCat::User,
            9 => RangeCat::Iteration,
            _ => return None,
        })
    }

    /// Structural ranges (step, phase, role call, iteration) frame the timeline and are kept
    /// outside a schedule's recorded iterations; the others are content and follow the
    /// schedule.
    pub fn is_structural(self) -> bool {
        matches!(
            self,
            RangeCat::Step | RangeCat::Phase | RangeCat::RoleCall | RangeCat::Iteration
        )
    }
}

impl Record {
    /// A record of `kind`, fields in their on-disk order.
    ///
    /// ```
    /// use rlprof_profiler::record::{Kind, Record};
    /// let r = Record::new(10, 20, 3, Kind::Range, 0, 1);
    /// assert_eq!((r.ts, r.a, r.name, r.kind, r.aux), (10, 20, 3, Kind::Range as u8, 1));
    /// ```
    pub const fn new(ts: u64, a: u64, name: u32, kind: Kind, cat: u8, aux: u16) -> Record {
        Record {
            ts,
            a,
            name,
            kind: kind as u8,
            cat,
            aux,
        }
    }

    /// Encodes into 24 little-endian bytes.
    pub fn to_bytes(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.a.to_le_bytes());
        out.extend_from_slice(&self.name.to_le_bytes());
        out.push(self.kind);
        out.push(self.cat);
        out.extend_from_slice(&self.aux.to_le_bytes());
    }

    /// Decodes from 24 little-endian bytes.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Record {
        Record {
            ts: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            a: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            name: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
            kind: b[20],
            cat: b[21],
            aux: u16::from_le_bytes(b[22..24].try_into().expect("2 bytes")),
        }
    }
}
