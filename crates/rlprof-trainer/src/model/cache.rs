//! The per-layer key/value cache of incremental decoding: preallocated buffers written in place
//! (no-grad models) or grown by concatenation, and the row gather that hands a shared prompt's
//! cache to every row.

use super::gather::{cat_dim1, select_rows0};
use crate::traced_op;
use candle_core::{Result, Tensor};
use rlprof_profiler::NameId;

/// Per-layer key/value cache for incremental decoding: `[B, capacity, kv_heads, head_dim]`
/// buffers written in place (no-grad models), the first `len` positions valid.
#[derive(Default)]
pub struct KvCache {
    pub(super) layers: Vec<Option<LayerCache>>,
    pub(super) capacity: usize,
}

pub(super) struct LayerCache {
    k: CacheBuf,
    v: CacheBuf,
}

/// One cached tensor: `[B, capacity, kv_heads, head_dim]`, the first `len` positions valid.
struct CacheBuf {
    buf: Tensor,
    len: usize,
}

impl CacheBuf {
    /// Appends `x` `[B, T, kvh, hd]` and returns a view of every cached position. In place into
    /// a preallocated buffer when `in_place` (no gradient flows through a cache write), else by
    /// concatenation (tracked).
    fn append(
        slot: Option<&mut CacheBuf>,
        x: &Tensor,
        capacity: usize,
        in_place: bool,
    ) -> Result<(Tensor, Option<CacheBuf>)> {
        let (b, t, kvh, hd) = x.dims4()?;
        match slot {
            None if in_place && capacity > t => {
                let buf = Tensor::zeros((b, capacity, kvh, hd), x.dtype(), x.device())?;
                buf.slice_set(&x.contiguous()?, 1, 0)?;
                Ok((x.clone(), Some(CacheBuf { buf, len: t })))
            }
            None => Ok((
                x.clone(),
                Some(CacheBuf {
                    buf: x.clone(),
                    len: t,
                }),
            )),
            Some(c) => {
                let len = c.len + t;
                if in_place && c.buf.dim(1)? >= len && c.buf.is_contiguous() {
                    c.buf.slice_set(&x.contiguous()?, 1, c.len)?;
                } else {
                    c.buf = cat_dim1(&c.buf.narrow(1, 0, c.len)?, x)?;
                }
                c.len = len;
                Ok((c.buf.narrow(1, 0, len)?, None))
            }
        }
    }
}

impl LayerCache {
    /// Appends the new keys and values (op `kv_append` each) and returns every cached position.
    pub(super) fn append(
        slot: &mut Option<LayerCache>,
        k: &Tensor,
        v: &Tensor,
        capacity: usize,
        in_place: bool,
        module: NameId,
    ) -> Result<(Tensor, Tensor)> {
        let (mut nk, mut nv) = (None, None);
        let k_all = traced_op!("kv_append", module, [k], 0, {
            let ck = slot.as_mut().map(|c| &mut c.k);
            let (all, new) = CacheBuf::append(ck, k, capacity, in_place)?;
            nk = new;
            Ok(all)
        })?;
        let v_all = traced_op!("kv_append", module, [v], 0, {
            let cv = slot.as_mut().map(|c| &mut c.v);
            let (all, new) = CacheBuf::append(cv, v, capacity, in_place)?;
            nv = new;
            Ok(all)
        })?;
        if let (Some(k), Some(v)) = (nk, nv) {
            *slot = Some(LayerCache { k, v });
        }
        Ok((k_all, v_all))
    }
}

impl LayerCache {
    /// Replaces the cached keys/values by rows `rows` (u32 `[B]`) of them (op `kv_expand`
    /// each): a prefix computed once per distinct prompt, handed to every row that shares it.
    /// A preallocated buffer keeps its capacity.
    pub(super) fn select_rows(&mut self, rows: &Tensor, module: NameId) -> Result<()> {
        for c in [&mut self.k, &mut self.v] {
            let all = &c.buf;
            c.buf = traced_op!("kv_expand", module, [all, rows], 0, select_rows0(all, rows))?;
        }
        Ok(())
    }
}

impl KvCache {
    /// An empty cache for `layers` layers.
    pub fn new(layers: usize) -> KvCache {
        KvCache::with_capacity(layers, 0)
    }

    /// An empty cache for `layers` layers whose buffers hold `capacity` positions (prompt +
    /// generated); past that it grows by concatenation.
    pub fn with_capacity(layers: usize, capacity: usize) -> KvCache {
        KvCache {
            layers: (0..layers).map(|_| None).collect(),
            capacity,
        }
    }

    /// Cached positions.
    pub fn len(&self) -> usize {
        self.layers
            .first()
            .and_then(|l| l.as_ref())
            .map_or(0, |c| c.k.len)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
