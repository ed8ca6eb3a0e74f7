//! Helpers of the kernels' tests: compare a fused kernel with its composed form, values and
//! gradients.

use candle_core::{Device, Tensor, Var};

/// The largest absolute difference of `a` and `b`.
pub(super) fn diff(a: &Tensor, b: &Tensor) -> f32 {
    a.sub(b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// A variable of `shape` drawn from `N(0, std^2)`.
pub(super) fn var(shape: &[usize], std: f64) -> Var {
    let t = Tensor::randn(0f32, std as f32, shape, &Device::Cpu).unwrap();
    Var::from_tensor(&t).unwrap()
}

/// Runs `fused` and `composed` on the same inputs, then backpropagates a random projection of
/// each output: values and every input's gradient must agree.
pub(super) fn check(
    inputs: &[&Var],
    fused: impl Fn(&[&Tensor]) -> Tensor,
    composed: impl Fn(&[&Tensor]) -> Tensor,
    tol: f32,
) {
    let ts: Vec<&Tensor> = inputs.iter().map(|v| v.as_tensor()).collect();
    let (ours, theirs) = (fused(&ts), composed(&ts));
    assert_eq!(ours.dims(), theirs.dims());
    assert!(
        diff(&ours, &theirs) < tol,
        "values differ by {}",
        diff(&ours, &theirs)
    );
    let w = Tensor::randn(0f32, 1.0, ours.dims(), &Device::Cpu).unwrap();
    let grads = |y: &Tensor| y.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
    let (g1, g2) = (grads(&ours), grads(&theirs));
    for (i, t) in ts.iter().enumerate() {
        let (a, b) = (g1.get(t).unwrap(), g2.get(t).unwrap());
        assert!(
            diff(a, b) < tol,
            "gradient of input {i} differs by {}",
            diff(a, b)
        );
    }
}
