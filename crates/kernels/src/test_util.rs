//! What the unit tests of this crate share.

/// Deterministic values in [-1, 1) (xorshift), so failures reproduce.
pub(crate) fn random_values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Panics unless each `got` is within `tolerance` of the sum of its products' magnitudes
/// (`magnitude`, plus one for sums near zero) of `want`, naming `what` and the element.
pub(crate) fn assert_close(
    got: &[f32],
    want: &[f64],
    magnitude: &[f64],
    tolerance: f64,
    what: &str,
) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (index, ((&got, &want), &magnitude)) in got.iter().zip(want).zip(magnitude).enumerate() {
        let error = (f64::from(got) - want).abs();
        assert!(
            error <= tolerance * (magnitude + 1.0),
            "{what}: element {index} is {got}, want {want} (error {error:e}, Σ|p| {magnitude:e})"
        );
    }
}

/// A stride-1 convolution for reference sums in f64: `[n, c, h, w]` images, `out` channels,
/// a `[kh, kw]` kernel, `[ph, pw]` zero padding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvCase {
    pub images: [usize; 4],
    pub out: usize,
    pub kernel: [usize; 2],
    pub padding: [usize; 2],
}

impl ConvCase {
    /// `[oh, ow]`.
    pub(crate) fn out_size(&self) -> [usize; 2] {
        let [_, _, h, w] = self.images;
        let [[kh, kw], [ph, pw]] = [self.kernel, self.padding];
        [h + 2 * ph + 1 - kh, w + 2 * pw + 1 - kw]
    }

    /// Every product of the direct convolution: `f(output index, x index, weight index)`.
    fn for_each_product(&self, mut f: impl FnMut(usize, usize, usize)) {
        let ([n, c, h, w], out, [kh, kw], [ph, pw]) =
            (self.images, self.out, self.kernel, self.padding);
        let [oh, ow] = self.out_size();
        for (i, o, ch) in
            (0..n).flat_map(|i| (0..out).flat_map(move |o| (0..c).map(move |ch| (i, o, ch))))
        {
            for (oy, ox, ky, kx) in (0..oh).flat_map(|oy| {
                (0..ow).flat_map(move |ox| {
                    (0..kh).flat_map(move |ky| (0..kw).map(move |kx| (oy, ox, ky, kx)))
                })
            }) {
                let (iy, ix) = ((oy + ky).wrapping_sub(ph), (ox + kx).wrapping_sub(pw));
                if iy < h && ix < w {
                    let y = ((i * out + o) * oh + oy) * ow + ox;
                    let x = ((i * c + ch) * h + iy) * w + ix;
                    f(y, x, ((o * c + ch) * kh + ky) * kw + kx);
                }
            }
        }
    }

    /// The outputs of `x` convolved by `weight`, and per output the sum of its products'
    /// magnitudes.
    pub(crate) fn forward(&self, x: &[f32], weight: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let [oh, ow] = self.out_size();
        let len = self.images[0] * self.out * oh * ow;
        let (mut sums, mut magnitudes) = (vec![0f64; len], vec![0f64; len]);
        self.for_each_product(|y, xi, wi| {
            let product = f64::from(x[xi]) * f64::from(weight[wi]);
            sums[y] += product;
            magnitudes[y] += product.abs();
        });
        (sums, magnitudes)
    }

    /// The weight gradient of `x` under the output gradient `grad`, and per weight the sum of
    /// its products' magnitudes.
    pub(crate) fn weight_grad(&self, x: &[f32], grad: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let [_, c, _, _] = self.images;
        let len = self.out * c * self.kernel[0] * self.kernel[1];
        let (mut sums, mut magnitudes) = (vec![0f64; len], vec![0f64; len]);
        self.for_each_product(|y, xi, wi| {
            let product = f64::from(x[xi]) * f64::from(grad[y]);
            sums[wi] += product;
            magnitudes[wi] += product.abs();
        });
        (sums, magnitudes)
    }
}

/// `Σ a·b` in f64.
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .sum()
}

impl ConvCase {
    /// `run(y, x, weight)` (a convolution into `y`) against the direct sum, to `tolerance` of
    /// each output's products' magnitudes.
    pub(crate) fn check_forward(&self, tolerance: f64, run: impl Fn(&mut [f32], &[f32], &[f32])) {
        let [n, c, h, w] = self.images;
        let [oh, ow] = self.out_size();
        let x = random_values(n * c * h * w, 1);
        let weight = random_values(self.out * c * self.kernel[0] * self.kernel[1], 2);
        let mut y = vec![f32::NAN; n * self.out * oh * ow];
        run(&mut y, &x, &weight);
        let (want, magnitude) = self.forward(&x, &weight);
        assert_close(&y, &want, &magnitude, tolerance, &format!("{self:?}"));
    }

    /// `run(x, grad)` (a weight gradient) against the direct sum, to `tolerance` of each
    /// weight's products' magnitudes.
    pub(crate) fn check_weight_grad(
        &self,
        tolerance: f64,
        run: impl Fn(&[f32], &[f32]) -> Vec<f32>,
    ) {
        let [n, c, h, w] = self.images;
        let [oh, ow] = self.out_size();
        let x = random_values(n * c * h * w, 3);
        let grad = random_values(n * self.out * oh * ow, 4);
        let (want, magnitude) = self.weight_grad(&x, &grad);
        assert_close(
            &run(&x, &grad),
            &want,
            &magnitude,
            tolerance,
            &format!("{self:?}"),
        );
    }

    /// `backward(dx, grad, weight)` is the adjoint of `forward(y, x, weight)`: `<forward(x), g>
    /// = <x, backward(g)>`, as an input gradient must be.
    pub(crate) fn check_adjoint(
        &self,
        forward: impl Fn(&mut [f32], &[f32], &[f32]),
        backward: impl Fn(&mut [f32], &[f32], &[f32]),
    ) {
        let [n, c, h, w] = self.images;
        let [oh, ow] = self.out_size();
        let x = random_values(n * c * h * w, 5);
        let weight = random_values(self.out * c * self.kernel[0] * self.kernel[1], 6);
        let grad = random_values(n * self.out * oh * ow, 7);
        let mut y = vec![0f32; grad.len()];
        forward(&mut y, &x, &weight);
        let mut dx = vec![0f32; x.len()];
        backward(&mut dx, &grad, &weight);
        let (left, right) = (dot(&y, &grad), dot(&x, &dx));
        assert!(
            (left - right).abs() < 1e-4 * left.abs().max(1.0),
            "{self:?}: {left} against {right}"
        );
    }

    /// The padding of the input gradient's convolution: `k - 1 - p`.
    pub(crate) fn flipped_padding(&self) -> [usize; 2] {
        [0, 1].map(|d| self.kernel[d] - 1 - self.padding[d])
    }
}
