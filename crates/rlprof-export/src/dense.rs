//! Maps keyed by small dense integer ids (thread indices, interned-string ids).
//!
//! The profiler numbers threads and strings from 0 upwards, so a vector indexed by id replaces
//! a hash map on the per-event paths. Ids beyond [`DENSE_LIMIT`] (possible only in hand-made or
//! damaged files) fall back to an ordered map, so memory stays bounded by the ids present.

use std::collections::BTreeMap;

/// Ids below this are stored in the vector.
pub(crate) const DENSE_LIMIT: u32 = 1 << 16;

/// An id -> `T` map; iteration is in id order.
#[derive(Debug, Clone)]
pub(crate) struct DenseMap<T> {
    dense: Vec<Option<T>>,
    sparse: BTreeMap<u32, T>,
}

impl<T> Default for DenseMap<T> {
    fn default() -> Self {
        DenseMap {
            dense: Vec::new(),
            sparse: BTreeMap::new(),
        }
    }
}

impl<T> DenseMap<T> {
    /// The value of `id`, inserted with `make` when absent.
    #[inline]
    pub(crate) fn get_or_insert_with(&mut self, id: u32, make: impl FnOnce() -> T) -> &mut T {
        if id < DENSE_LIMIT {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].get_or_insert_with(make)
        } else {
            self.sparse.entry(id).or_insert_with(make)
        }
    }

    /// The value of `id`, if present.
    #[cfg(test)]
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        if id < DENSE_LIMIT {
            self.dense.get(id as usize)?.as_ref()
        } else {
            self.sparse.get(&id)
        }
    }

    /// Removes and returns the value of `id`.
    #[cfg(test)]
    #[inline]
    pub(crate) fn take(&mut self, id: u32) -> Option<T> {
        if id < DENSE_LIMIT {
            self.dense.get_mut(id as usize)?.take()
        } else {
            self.sparse.remove(&id)
        }
    }

    /// Every `(id, value)` in id order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        let dense = self
            .dense
            .iter_mut()
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32, v.as_mut()?)));
        dense.chain(self.sparse.iter_mut().map(|(k, v)| (*k, v)))
    }

    /// Removes every entry, yielding them in id order.
    #[cfg(test)]
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (u32, T)> + '_ {
        let dense = self
            .dense
            .drain(..)
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32, v?)));
        dense.chain(std::mem::take(&mut self.sparse))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_ids_in_order() {
        let mut m = DenseMap::default();
        for id in [7, DENSE_LIMIT + 3, 0, DENSE_LIMIT, 3] {
            *m.get_or_insert_with(id, || 0u32) += id;
        }
        assert_eq!(m.get(7), Some(&7));
        assert_eq!(m.get(5), None);
        assert_eq!(m.take(3), Some(3));
        assert_eq!(m.take(3), None);
        let ids: Vec<u32> = m.iter_mut().map(|(k, _)| k).collect();
        assert_eq!(ids, vec![0, 7, DENSE_LIMIT, DENSE_LIMIT + 3]);
        let all: Vec<(u32, u32)> = m.drain().collect();
        assert_eq!(all.len(), 4);
        assert_eq!(m.get(7), None);
    }
}

/// A fast non-cryptographic hasher for small integer keys (the `FxHash` multiply-rotate
/// scheme); the exporters' aggregate maps are keyed by interned ids, never by input an
/// attacker could choose to collide.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.hash = (self.hash.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(v as u64);
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.add(v as u64);
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A hash map with [`FxHasher`].
pub(crate) type FastMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;
