//! Process-wide string interning.
//!
//! Records refer to strings (op names, module paths, shape lists) by a 32-bit [`NameId`]. A
//! string is interned once per process (at model construction, or the first time a call site
//! runs through [`name!`](crate::name)); raw files carry the id -> string table, written
//! incrementally as ids appear. Id 0 is the empty string.

use parking_lot::RwLock;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// An interned string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct NameId(pub u32);

impl NameId {
    /// The empty string.
    pub const NONE: NameId = NameId(0);
}

#[derive(Default)]
struct Interner {
    map: HashMap<Arc<str>, u32>,
    strings: Vec<Arc<str>>,
}

fn interner() -> &'static RwLock<Interner> {
    static I: OnceLock<RwLock<Interner>> = OnceLock::new();
    I.get_or_init(|| {
        let empty: Arc<str> = Arc::from("");
        let mut map = HashMap::new();
        map.insert(empty.clone(), 0);
        RwLock::new(Interner {
            map,
            strings: vec![empty],
        })
    })
}

/// Interns `s`, returning its id (the same id for the same string, process-wide).
///
/// ```
/// let a = rlprof_profiler::intern("model.layers.0.mlp");
/// assert_eq!(a, rlprof_profiler::intern("model.layers.0.mlp"));
/// assert_eq!(rlprof_profiler::resolve(a).as_deref(), Some("model.layers.0.mlp"));
/// ```
pub fn intern(s: &str) -> NameId {
    if let Some(&id) = interner().read().map.get(s) {
        return NameId(id);
    }
    let mut w = interner().write();
    if let Some(&id) = w.map.get(s) {
        return NameId(id);
    }
    let id = w.strings.len() as u32;
    let a: Arc<str> = Arc::from(s);
    w.strings.push(a.clone());
    w.map.insert(a, id);
    NameId(id)
}

/// The string of an id, if the id exists.
pub fn resolve(id: NameId) -> Option<Arc<str>> {
    interner().read().strings.get(id.0 as usize).cloned()
}

/// Number of interned strings (ids are `0..len`).
pub fn len() -> usize {
    interner().read().strings.len()
}

/// Calls `f` for every string with id in `from..`; returns the new length.
pub(crate) fn for_each_since(from: usize, mut f: impl FnMut(u32, &str)) -> usize {
    let r = interner().read();
    for (i, s) in r.strings.iter().enumerate().skip(from) {
        f(i as u32, s);
    }
    r.strings.len()
}

/// Per-thread shape cache: dims -> interned id, plus a reusable key buffer.
type ShapeCache = (HashMap<Box<[u64]>, u32>, Vec<u64>);

thread_local! {
    static SHAPE_CACHE: RefCell<ShapeCache> = RefCell::new((HashMap::new(), Vec::new()));
}

/// Interns a list of tensor shapes as the text the Ascend/PyTorch formats use
/// (`"32,64;64,128"`), caching per thread by the dimensions so that a repeated shape costs a
/// hash lookup and no formatting or allocation.
///
/// ```
/// let id = rlprof_profiler::intern_shapes(&[&[32, 64], &[64, 128]]);
/// assert_eq!(rlprof_profiler::resolve(id).as_deref(), Some("32,64;64,128"));
/// ```
pub fn intern_shapes(shapes: &[&[usize]]) -> NameId {
    SHAPE_CACHE.with(|c| {
        let (map, key) = &mut *c.borrow_mut();
        key.clear();
        for s in shapes {
            key.push(u64::MAX);
            key.extend(s.iter().map(|&d| d as u64));
        }
        if let Some(&id) = map.get(key.as_slice()) {
            return NameId(id);
        }
        let text = shapes
            .iter()
            .map(|s| {
                s.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect::<Vec<_>>()
            .join(";");
        let id = intern(&text);
        map.insert(key.clone().into_boxed_slice(), id.0);
        id
    })
}

/// Interns a string literal once per call site and returns its [`NameId`].
///
/// ```
/// let id = rlprof_profiler::name!("matmul");
/// assert_eq!(rlprof_profiler::resolve(id).as_deref(), Some("matmul"));
/// ```
#[macro_export]
macro_rules! name {
    ($s:expr) => {{
        static ID: ::std::sync::atomic::AtomicU32 = ::std::sync::atomic::AtomicU32::new(u32::MAX);
        let v = ID.load(::std::sync::atomic::Ordering::Relaxed);
        if v != u32::MAX {
            $crate::NameId(v)
        } else {
            let id = $crate::intern($s);
            ID.store(id.0, ::std::sync::atomic::Ordering::Relaxed);
            id
        }
    }};
}
