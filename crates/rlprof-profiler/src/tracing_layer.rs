//! A `tracing_subscriber::Layer` that records spans of any `tracing`-instrumented crate
//! (candle-transformers' `with_tracing` layers, for instance) as host ranges of the current
//! collection, with the same gating as every other instrumentation point: when nothing
//! collects, `on_enter`/`on_exit` cost one relaxed load.
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! let subscriber = tracing_subscriber::registry().with(rlprof_profiler::RlprofLayer::default());
//! tracing::subscriber::with_default(subscriber, || {
//!     let _s = tracing::info_span!("linear").entered();
//! });
//! ```

use crate::record::{Kind, RangeCat};
use crate::recorder::{self, ANY_ACTIVE, Open};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use tracing::Subscriber;
use tracing::span::Id;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The bridge layer. Spans are named by their `tracing` name.
#[derive(Debug, Default, Clone, Copy)]
pub struct RlprofLayer;

thread_local! {
    static OPEN: RefCell<Vec<(u64, Open)>> = RefCell::new(Vec::with_capacity(64));
    static NAMES: RefCell<HashMap<usize, u32>> = RefCell::new(HashMap::new());
}

impl<S> Layer<S> for RlprofLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(open) = recorder::begin_content(None) {
            OPEN.with(|o| o.borrow_mut().push((id.into_u64(), open)));
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
            return;
        }
        let open = OPEN.with(|o| {
            let mut o = o.borrow_mut();
            match o.last() {
                Some((top, _)) if *top == id.into_u64() => o.pop().map(|(_, op)| op),
                _ => None,
            }
        });
        let Some(open) = open else { return };
        let Some(meta) = ctx.metadata(id) else { return };
        let key = meta as *const _ as usize;
        let name = NAMES.with(|n| {
            *n.borrow_mut()
                .entry(key)
                .or_insert_with(|| crate::intern::intern(meta.name()).0)
        });
        recorder::end(open, Kind::Range as u8, RangeCat::Span as u8, name);
    }
}
