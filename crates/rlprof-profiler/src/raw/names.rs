//! The string table a raw file holds ([`Names`], by id). (The file's own name, `rank_N.rlraw`,
//! is the collection layout's: `crate::collection::names::rank_file`.)

use std::collections::HashMap;

/// Ids below this many (plus four times the number of strings read) are kept in a dense table;
/// larger ones, which only a crafted file has (the profiler numbers strings from 0 up), go to a
/// map, so that an id like `0xffff_fff0` costs one entry, not a 64 GiB table.
const DENSE_SLACK: usize = 1024;

/// A raw file's string table: id -> string.
#[derive(Debug, Default)]
pub(super) struct Names {
    dense: Vec<Option<Box<str>>>,
    sparse: HashMap<u32, Box<str>>,
    count: usize,
}

impl Names {
    /// Defines `id`; false (and the first definition kept) when it was defined already.
    pub(super) fn insert(&mut self, id: u32, s: String) -> bool {
        if self.get(id).is_some() {
            return false;
        }
        let i = id as usize;
        if i < self.dense.len() {
            self.dense[i] = Some(s.into_boxed_str());
        } else if i < 4 * (self.count + DENSE_SLACK) {
            self.dense.resize(i + 1, None);
            self.dense[i] = Some(s.into_boxed_str());
        } else {
            self.sparse.insert(id, s.into_boxed_str());
        }
        self.count += 1;
        true
    }

    /// The string of `id`, if defined.
    #[inline]
    pub(super) fn get(&self, id: u32) -> Option<&str> {
        match self.dense.get(id as usize) {
            Some(s) => s.as_deref(),
            None if self.sparse.is_empty() => None,
            None => self.sparse.get(&id).map(|s| &**s),
        }
    }

    /// Whether a record may refer to `id`: id 0 (the empty string, "none") always, any other
    /// when the file defines it.
    #[inline(always)]
    pub(super) fn known(&self, id: u32) -> bool {
        id == 0 || self.get(id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_string_ids_do_not_allocate_a_dense_table() {
        let mut n = Names::default();
        assert!(n.insert(1, "a".into()));
        assert!(n.insert(0xffff_fff0, "far".into()));
        assert!(!n.insert(1, "again".into()));
        assert_eq!(n.get(1), Some("a"));
        assert_eq!(n.get(0xffff_fff0), Some("far"));
        assert_eq!(n.get(2), None);
        assert!(n.dense.len() < 1 << 16, "{}", n.dense.len());
        assert!(n.known(0) && n.known(1) && !n.known(7));
    }
}
