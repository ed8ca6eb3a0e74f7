//! `STRING_IDS` interning. A string of the raw file keeps its raw name id (they are already
//! interned); the few strings of the layout itself ([`Const`]) get ids from [`CONST_BASE`] up.
//! Only the ids used are written, once, when the export ends.

use crate::decode::Index;

/// First id of the layout's own strings (torch_npu starts its framework strings at `1 << 28`).
pub const CONST_BASE: i64 = 1 << 28;

/// The layout's own strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum Const {
    /// Task type of a device kernel.
    AiCore,
    /// Task type of a kernel that ran on the host CPU engine.
    AiCpu,
    /// Memory component.
    Pta,
    /// Domain of rlprof's own marker ranges (those verl has no counterpart of).
    Rlprof,
    /// A communication op's waiting task.
    NotifyWait,
    /// A communication op's transfer task.
    Memcpy,
    /// Group of a collective without a group name.
    DefaultGroup,
    /// Op of an allocation without one.
    Unknown,
    /// mstx's default domain: verl's stage ranges and the user's own ranges.
    DefaultDomain,
}

impl Const {
    /// Every constant, in id order.
    pub const ALL: [Const; 9] = [
        Const::AiCore,
        Const::AiCpu,
        Const::Pta,
        Const::Rlprof,
        Const::NotifyWait,
        Const::Memcpy,
        Const::DefaultGroup,
        Const::Unknown,
        Const::DefaultDomain,
    ];

    /// The string.
    pub fn as_str(self) -> &'static str {
        match self {
            Const::AiCore => "AI_CORE",
            Const::AiCpu => "AI_CPU",
            Const::Pta => "PTA",
            Const::Rlprof => super::schema::RLPROF_DOMAIN,
            Const::NotifyWait => "Notify_Wait",
            Const::Memcpy => "Memcpy",
            Const::DefaultGroup => "default_group",
            Const::Unknown => "unknown",
            Const::DefaultDomain => super::schema::DEFAULT_DOMAIN,
        }
    }

    /// Its `STRING_IDS` id.
    #[inline]
    pub fn id(self) -> Option<i64> {
        Some(CONST_BASE + self as i64)
    }
}

/// Which raw name ids are used (a bit per id).
#[derive(Default)]
pub struct Strings {
    used: Vec<u64>,
}

impl Strings {
    /// The `STRING_IDS` id of raw name `id` (None for 0, "no name"), marking it used.
    #[inline]
    pub fn id(&mut self, id: u32) -> Option<i64> {
        if id == 0 {
            return None;
        }
        let (w, b) = ((id / 64) as usize, id % 64);
        if w >= self.used.len() {
            self.used.resize(w + 1, 0);
        }
        self.used[w] |= 1 << b;
        Some(id as i64)
    }

    /// Every used `(id, value)`, the layout's constants included.
    pub fn rows<'a>(&'a self, idx: &'a Index) -> impl Iterator<Item = (i64, &'a str)> + 'a {
        let raw = self.used.iter().enumerate().flat_map(move |(w, bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| {
                    let id = (w * 64 + b) as u32;
                    (id as i64, idx.name(id))
                })
        });
        raw.chain(
            Const::ALL
                .iter()
                .map(|c| (CONST_BASE + *c as i64, c.as_str())),
        )
    }
}
