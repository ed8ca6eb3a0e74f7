//! Backward ops as profiler ops. candle's `Tensor::backward` has no per-node hook, so every
//! differentiable op of the trainable model is a custom op (see [`kernels`](super::kernels))
//! wrapped in [`Tagged`]: at forward time it takes the forward op's module path and an autograd
//! sequence number (only in [`grad_enabled`] mode, like PyTorch's grad mode), and candle's call
//! of its backward is recorded as PyTorch names it:
//!
//! - `autograd::engine::evaluate_function: <Op>Backward0` (op, the forward op's module path and
//!   sequence number: exporters link the two with a `fwdbwd` flow). It spans from the node's
//!   start to the next node's start, as PyTorch's does: candle adds each input gradient into a
//!   zero-filled buffer after the node returns, and those allocations and adds are this node's;
//!   so are the view nodes (reshape) candle runs before the next recorded node.
//! - `<Op>Backward0` beneath it (op) with the kernel `cpu_<op>_backward_f32`: the node's own work.
//!
//! [`region`] makes a small composed computation (the loss) one node: its forward runs on
//! detached inputs, its backward runs candle's backward of that small graph inside the node.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use rlprof_profiler::{Content, NameId, OpGuard, intern, kernel, now, op, resolve, wants};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

thread_local! {
    static GRAD: Cell<bool> = const { Cell::new(false) };
    static SEQ: Cell<u32> = const { Cell::new(0) };
    /// The forward op [`super::ops::traced`] is running: (name, module, sequence number taken).
    static FWD: Cell<Option<(NameId, NameId, u32)>> = const { Cell::new(None) };
    /// The open `evaluate_function` op of the last backward node.
    static PENDING: RefCell<Option<OpGuard>> = const { RefCell::new(None) };
    static NAMES: RefCell<HashMap<u32, BwdNames>> = RefCell::new(HashMap::new());
}

/// Guard of [`grad_enabled`]: restores the previous mode on drop.
pub struct GradMode(bool);

impl Drop for GradMode {
    fn drop(&mut self) {
        GRAD.with(|g| g.set(self.0));
    }
}

/// Turns grad mode on for this thread until the guard drops: differentiable ops run in it take
/// sequence numbers and record their backward.
pub fn grad_enabled() -> GradMode {
    GradMode(GRAD.with(|g| g.replace(true)))
}

/// Called by `traced` around one forward op: returns the previous forward context.
#[inline]
pub(crate) fn enter_forward(name: NameId, module: NameId) -> Option<(NameId, NameId, u32)> {
    FWD.with(|f| f.replace(Some((name, module, 0))))
}

/// Ends the forward op entered with [`enter_forward`]; returns its sequence number (0 when no
/// differentiable node was created in grad mode).
#[inline]
pub(crate) fn exit_forward(prev: Option<(NameId, NameId, u32)>) -> u32 {
    FWD.with(|f| f.replace(prev)).map_or(0, |(_, _, s)| s)
}

/// What a backward node records: the forward op's name, module and sequence number.
#[derive(Clone, Copy, Debug)]
pub struct Tag {
    fwd: NameId,
    module: NameId,
    seq: u32,
    /// The forward call's id in this thread's precision dump (0: not dumped).
    pd: u32,
}

/// The tag of a node created now (None outside grad mode or outside a traced op).
fn take_tag() -> Option<Tag> {
    if !GRAD.with(|g| g.get()) {
        return None;
    }
    FWD.with(|f| {
        let (name, module, seq) = f.get()?;
        let seq = if seq != 0 {
            seq
        } else {
            let s = SEQ.with(|c| {
                let n = c.get().wrapping_add(1).max(1);
                c.set(n);
                n
            });
            f.set(Some((name, module, s)));
            s
        };
        Some(Tag {
            fwd: name,
            module,
            seq,
            pd: super::precision::current(),
        })
    })
}

/// A differentiable custom op whose backward is recorded as an op.
pub struct Tagged<C> {
    inner: C,
    tag: Option<Tag>,
}

/// Wraps `inner` (a custom op with a backward), tagging it with the current forward op.
pub fn tagged<C>(inner: C) -> Tagged<C> {
    Tagged {
        inner,
        tag: take_tag(),
    }
}

#[derive(Clone, Copy)]
struct BwdNames {
    eval: NameId,
    node: NameId,
    kernel: NameId,
}

/// `silu_mul` -> `SiluMulBackward0`.
pub fn backward_name(fwd: &str) -> String {
    let mut out = String::with_capacity(fwd.len() + 9);
    for part in fwd.split('_').filter(|p| !p.is_empty()) {
        let mut c = part.chars();
        if let Some(first) = c.next() {
            out.extend(first.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    out.push_str("Backward0");
    out
}

fn names_of(fwd: NameId) -> BwdNames {
    NAMES.with(|m| {
        *m.borrow_mut().entry(fwd.0).or_insert_with(|| {
            let f = resolve(fwd).map_or_else(|| "op".to_string(), |s| s.to_string());
            let node = backward_name(&f);
            BwdNames {
                eval: intern(&format!("autograd::engine::evaluate_function: {node}")),
                node: intern(&node),
                kernel: intern(&format!("cpu_{f}_backward_f32")),
            }
        })
    })
}

/// Closes the `evaluate_function` op of the previous backward node.
pub fn end_node() {
    let g = PENDING.with(|p| p.borrow_mut().take());
    drop(g);
}

/// Guard of one `backward()` call: closes the last node's op when dropped.
pub struct BackwardScope(());

impl Drop for BackwardScope {
    fn drop(&mut self) {
        end_node();
    }
}

/// Call before `loss.backward()`; hold until its gradients are read.
pub fn backward_scope() -> BackwardScope {
    end_node();
    BackwardScope(())
}

/// Runs the backward `f` of the node tagged `tag`, recorded as described in the module docs.
pub fn backward<R: super::precision::Grads>(
    tag: Option<Tag>,
    grad: &Tensor,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    end_node();
    let Some(tag) = tag else { return f() };
    let f = || {
        let r = f()?;
        if tag.pd != 0 {
            super::precision::backward(tag.pd, grad, &r.grads());
        }
        Ok(r)
    };
    let names = names_of(tag.fwd);
    let mut outer = op(names.eval, tag.module);
    if !outer.is_recording() {
        return f();
    }
    outer.seq(tag.seq, true);
    let r = {
        let _node = op(names.node, tag.module);
        if wants(Content::Npu) {
            let start = now();
            let r = f();
            kernel(names.kernel, start, now(), 0, 0);
            r
        } else {
            f()
        }
    };
    PENDING.with(|p| *p.borrow_mut() = Some(outer));
    r
}

impl<C: CustomOp1> CustomOp1 for Tagged<C> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        self.inner.cpu_fwd(s, l)
    }
    fn bwd(&self, arg: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        backward(self.tag, grad, || self.inner.bwd(arg, res, grad))
    }
}

type Grads2 = (Option<Tensor>, Option<Tensor>);
type Grads3 = (Option<Tensor>, Option<Tensor>, Option<Tensor>);

impl<C: CustomOp2> CustomOp2 for Tagged<C> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        self.inner.cpu_fwd(s1, l1, s2, l2)
    }
    fn bwd(&self, a1: &Tensor, a2: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Grads2> {
        backward(self.tag, grad, || self.inner.bwd(a1, a2, res, grad))
    }
}

impl<C: CustomOp3> CustomOp3 for Tagged<C> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        self.inner.cpu_fwd(s1, l1, s2, l2, s3, l3)
    }
    fn bwd(
        &self,
        a1: &Tensor,
        a2: &Tensor,
        a3: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<Grads3> {
        backward(self.tag, grad, || self.inner.bwd(a1, a2, a3, res, grad))
    }
}

/// A composed computation as one differentiable node of two inputs (see [`region`]).
struct Region {
    /// Detached copies of the inputs, as variables of the small graph.
    vars: [candle_core::Var; 2],
    /// The output of the small graph (tracked through `vars`).
    out: Tensor,
}

impl CustomOp2 for Region {
    fn name(&self) -> &'static str {
        "rlprof-region"
    }
    fn cpu_fwd(
        &self,
        _s1: &CpuStorage,
        _l1: &Layout,
        _s2: &CpuStorage,
        _l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let v = self.out.flatten_all()?.to_vec1::<f32>()?;
        Ok((CpuStorage::F32(v), self.out.shape().clone()))
    }
    fn bwd(&self, _a1: &Tensor, _a2: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Grads2> {
        let weighted = self.out.mul(&grad.detach())?.sum_all()?;
        let gs = weighted.backward()?;
        // an input the output does not depend on gets a zero gradient (candle expects one
        // for every tracked input)
        let get = |v: &candle_core::Var| match gs.get(v.as_tensor()) {
            Some(g) => Ok(Some(g.clone())),
            None => v.as_tensor().zeros_like().map(Some),
        };
        Ok((get(&self.vars[0])?, get(&self.vars[1])?))
    }
}

/// `f(a, b)` (plain candle ops on f32 CPU tensors) as one node of the graph: the forward runs on
/// detached copies of `a` and `b` and returns a tensor tracked through them; the backward runs
/// candle's backward of `f`'s small graph inside one recorded node. Call it inside a traced op.
pub fn region(
    a: &Tensor,
    b: &Tensor,
    f: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let va = candle_core::Var::from_tensor(&a.detach())?;
    let vb = candle_core::Var::from_tensor(&b.detach())?;
    let out = f(va.as_tensor(), vb.as_tensor())?;
    a.apply_op2(
        b,
        tagged(Region {
            vars: [va, vb],
            out,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backward_names_follow_pytorch() {
        assert_eq!(backward_name("silu_mul"), "SiluMulBackward0");
        assert_eq!(backward_name("linear"), "LinearBackward0");
        assert_eq!(backward_name("index_select"), "IndexSelectBackward0");
    }

    #[test]
    fn a_region_has_the_gradient_of_its_composed_form() -> Result<()> {
        let d = candle_core::Device::Cpu;
        let a = candle_core::Var::from_slice(&[1f32, 2.0, 3.0], 3, &d)?;
        let b = candle_core::Var::from_slice(&[0.5f32, -1.0, 2.0], 3, &d)?;
        let f = |x: &Tensor, y: &Tensor| x.mul(y)?.exp()?.sum_all();
        let r = region(a.as_tensor(), b.as_tensor(), f)?;
        let direct = f(a.as_tensor(), b.as_tensor())?;
        assert!((r.to_scalar::<f32>()? - direct.to_scalar::<f32>()?).abs() < 1e-4);
        let (g1, g2) = (
            r.affine(2.0, 0.0)?.backward()?,
            direct.affine(2.0, 0.0)?.backward()?,
        );
        for v in [&a, &b] {
            let x = g1.get(v.as_tensor()).expect("grad").to_vec1::<f32>()?;
            let y = g2.get(v.as_tensor()).expect("grad").to_vec1::<f32>()?;
            for (p, q) in x.iter().zip(&y) {
                assert!((p - q).abs() < 1e-3 * q.abs().max(1.0), "{x:?} vs {y:?}");
            }
        }
        Ok(())
    }
}
