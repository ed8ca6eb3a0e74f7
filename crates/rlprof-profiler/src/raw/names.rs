//! Names a raw file holds or has: its string table ([`Names`], by id) and its own file name
//! (`rank_N.rlraw`, [`rank_file`]), which `rlprof analyse` and `rlprof report` both read through
//! [`rank_file`] so that they agree on which files of a collection are rank files.

use std::collections::HashMap;
use std::path::Path;

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

/// What a file name in a collection's `rlprof_raw/` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankFile {
    /// Not named `rank_*.rlraw`: not a rank file, ignored by `rlprof analyse` and `rlprof report`.
    Other,
    /// `rank_N.rlraw` with `N` a rank (a decimal `u32`, written as the profiler writes it).
    Rank(u32),
    /// Named `rank_*.rlraw`, but `*` is not a rank (negative, too large for a rank, not a
    /// decimal number, or with leading zeros): the file is refused, with this reason.
    Invalid(String),
}

/// The rank of a raw file from its name: `rank_3.rlraw` -> [`RankFile::Rank`]`(3)`. The one
/// reading of rank file names, shared by the decoder, `rlprof analyse` and `rlprof report`.
pub fn rank_file(path: &Path) -> RankFile {
    let Some(name) = path.file_name() else {
        return RankFile::Other;
    };
    let name = name.to_string_lossy();
    let Some(n) = name
        .strip_prefix("rank_")
        .and_then(|n| n.strip_suffix(".rlraw"))
    else {
        return RankFile::Other;
    };
    let invalid = |why: &str| {
        RankFile::Invalid(format!(
            "the file name's rank `{n}` {why} (ranks are written as decimal numbers from 0 to {})",
            u32::MAX
        ))
    };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return if n.starts_with('-') && n.len() > 1 {
            invalid("is negative")
        } else {
            invalid("is not a number")
        };
    }
    if n.len() > 1 && n.starts_with('0') {
        return invalid("has leading zeros");
    }
    match n.parse::<u32>() {
        Ok(r) => RankFile::Rank(r),
        Err(_) => invalid("is out of range"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_file_names() {
        let r = |n: &str| rank_file(Path::new(n));
        assert_eq!(r("rank_0.rlraw"), RankFile::Rank(0));
        assert_eq!(r("/x/rlprof_raw/rank_17.rlraw"), RankFile::Rank(17));
        assert_eq!(r("rank_4294967295.rlraw"), RankFile::Rank(u32::MAX));
        assert_eq!(r("rank_0.rlraw.tmp"), RankFile::Other);
        assert_eq!(r("other.rlraw"), RankFile::Other);
        assert_eq!(r("rank_3.json"), RankFile::Other);
        for (bad, why) in [
            ("rank_4294967296.rlraw", "out of range"),
            ("rank_-1.rlraw", "negative"),
            ("rank_+1.rlraw", "not a number"),
            ("rank_.rlraw", "not a number"),
            ("rank_1e3.rlraw", "not a number"),
            ("rank_007.rlraw", "leading zeros"),
        ] {
            match r(bad) {
                RankFile::Invalid(m) => assert!(m.contains(why), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

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
