//! Interval arithmetic, written once for every figure of the workspace: unions, covered time
//! in a window, intersection and difference, over streams of half-open intervals `[start,
//! end)` in integer nanoseconds, in start order. Nothing is materialised that the caller does
//! not collect: a union of 10 M kernels streams past in constant memory.
//!
//! A union merges an interval into the one before when it starts at or before that one's
//! end, so touching intervals are one segment, and a zero-length interval that touches
//! nothing stays a segment of length 0 (it counts in a span's first and last time).

use std::iter::Peekable;

/// The union of intervals given in start order: disjoint segments in start order.
pub struct Union<I: Iterator<Item = (i64, i64)>> {
    it: Peekable<I>,
}

impl<I: Iterator<Item = (i64, i64)>> Union<I> {
    /// The union of `it`, whose intervals come in start order.
    pub fn new(it: I) -> Union<I> {
        Union { it: it.peekable() }
    }
}

impl<I: Iterator<Item = (i64, i64)>> Iterator for Union<I> {
    type Item = (i64, i64);
    fn next(&mut self) -> Option<(i64, i64)> {
        let (s, mut e) = self.it.next()?;
        while let Some(&(s2, e2)) = self.it.peek() {
            debug_assert!(s2 >= s, "intervals out of start order");
            if s2 > e {
                break;
            }
            e = e.max(e2);
            self.it.next();
        }
        Some((s, e))
    }
}

/// Two streams in start order as one stream in start order.
pub fn merge<A, B>(a: A, b: B) -> Merge<A, B>
where
    A: Iterator<Item = (i64, i64)>,
    B: Iterator<Item = (i64, i64)>,
{
    Merge {
        a: a.peekable(),
        b: b.peekable(),
    }
}

/// [`merge`]'s iterator.
pub struct Merge<A: Iterator<Item = (i64, i64)>, B: Iterator<Item = (i64, i64)>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = (i64, i64)>,
    B: Iterator<Item = (i64, i64)>,
{
    type Item = (i64, i64);
    #[inline]
    fn next(&mut self) -> Option<(i64, i64)> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if x <= y => self.a.next(),
            (Some(_), Some(_)) => self.b.next(),
            (Some(_), None) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

/// Total length of segments (disjoint) clipped to `[s, e)`.
pub fn covered(segments: impl Iterator<Item = (i64, i64)>, s: i64, e: i64) -> u64 {
    segments
        .take_while(|x| x.0 < e)
        .map(|x| (x.1.min(e) - x.0.max(s)).max(0) as u64)
        .sum()
}

/// Total length of segments (disjoint).
pub fn length(segments: impl Iterator<Item = (i64, i64)>) -> u64 {
    segments.map(|(a, b)| (b - a).max(0) as u64).sum()
}

/// Sorted, disjoint intervals covering the same time as `v`.
pub fn union(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    if !v.is_sorted() {
        v.sort_unstable();
    }
    Union::new(v.into_iter()).collect()
}

/// Total length of the intersection of two unions (each disjoint, in start order).
pub fn intersection(
    a: impl Iterator<Item = (i64, i64)>,
    b: impl Iterator<Item = (i64, i64)>,
) -> u64 {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut total = 0u64;
    while let (Some(&x), Some(&y)) = (a.peek(), b.peek()) {
        let (lo, hi) = (x.0.max(y.0), x.1.min(y.1));
        if hi > lo {
            total += (hi - lo) as u64;
        }
        if x.1 < y.1 {
            a.next();
        } else {
            b.next();
        }
    }
    total
}

/// `a` minus `b`, both unions (disjoint, in start order): the parts of `a`'s segments that no
/// segment of `b` covers, in start order.
pub fn difference(
    a: impl Iterator<Item = (i64, i64)>,
    b: impl Iterator<Item = (i64, i64)>,
) -> impl Iterator<Item = (i64, i64)> {
    let mut b = b.peekable();
    a.flat_map(move |(s, e)| {
        let mut out = Vec::new();
        let mut cur = s;
        // Segments of `b` that end at or before `cur` can overlap no later segment of `a`.
        while b.peek().is_some_and(|x| x.1 <= cur) {
            b.next();
        }
        // Look at the segments of `b` that start before `e` without consuming the last one,
        // which may reach into the next segment of `a`.
        while let Some(&(bs, be)) = b.peek() {
            if bs >= e {
                break;
            }
            if bs > cur {
                out.push((cur, bs));
            }
            cur = cur.max(be);
            if be > e {
                break;
            }
            b.next();
        }
        if cur < e {
            out.push((cur, e));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_intersection_and_difference() {
        assert_eq!(
            union(vec![(5, 7), (0, 2), (1, 3), (3, 4)]),
            vec![(0, 4), (5, 7)]
        );
        assert_eq!(union(vec![(0, 0), (2, 2), (2, 3)]), vec![(0, 0), (2, 3)]);
        let i =
            |a: &[(i64, i64)], b: &[(i64, i64)]| intersection(a.iter().copied(), b.iter().copied());
        assert_eq!(i(&[(0, 4), (5, 7)], &[(3, 6)]), 2);
        assert_eq!(i(&[], &[(3, 6)]), 0);
        let d = |a: &[(i64, i64)], b: &[(i64, i64)]| {
            difference(a.iter().copied(), b.iter().copied()).collect::<Vec<_>>()
        };
        let a = [(0, 10), (20, 30)];
        let b = [(2, 4), (8, 22), (25, 26)];
        assert_eq!(d(&a, &b), vec![(0, 2), (4, 8), (22, 25), (26, 30)]);
        assert_eq!(d(&a, &[]), a.to_vec());
        assert_eq!(d(&[], &b), vec![]);
        // One segment of `b` over several of `a`.
        assert_eq!(
            d(&[(0, 2), (3, 5), (6, 9)], &[(1, 7)]),
            vec![(0, 1), (7, 9)]
        );
        let m: Vec<_> = merge([(0, 1), (4, 5)].into_iter(), [(2, 3), (4, 4)].into_iter()).collect();
        assert_eq!(m, vec![(0, 1), (2, 3), (4, 4), (4, 5)]);
        assert_eq!(covered([(0, 4), (6, 9)].into_iter(), 2, 7), 3);
        assert_eq!(length([(0, 4), (6, 9)].into_iter()), 7);
    }
}
