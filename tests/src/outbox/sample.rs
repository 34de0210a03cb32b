//! Seeded draws the world and the strategies share: weighted picks, a normal, a Beta.
//!
//! Everything takes the caller's [`Rng`], so a world or a strategy seeded the same way draws
//! the same numbers.

use tether_core::Rng;

/// Cumulative weights, for drawing an index with probability proportional to its weight.
#[derive(Clone, Debug)]
pub(crate) struct Weighted {
    cumulative: Vec<f64>,
}

impl Weighted {
    /// The table for `weights` (non-negative; at least one positive).
    pub(crate) fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let mut total = 0.0;
        let cumulative = weights
            .into_iter()
            .map(|w| {
                total += w.max(0.0);
                total
            })
            .collect();
        Weighted { cumulative }
    }

    /// One index, by weight.
    pub(crate) fn draw(&self, rng: &mut Rng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let x = rng.unit() * total;
        // The first index whose cumulative weight passes x; `min` keeps a rounding edge in range.
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1)
    }

    /// `k` distinct indices, by weight (fewer if fewer have a positive weight). Rejection is
    /// cheap here: `k` is a handful and the table has hundreds of entries.
    pub(crate) fn draw_distinct(&self, rng: &mut Rng, k: usize, exclude: &[usize]) -> Vec<usize> {
        let mut out = Vec::with_capacity(k);
        let mut tries = 0;
        while out.len() < k && tries < 64 * (k + 1) {
            tries += 1;
            let i = self.draw(rng);
            if !out.contains(&i) && !exclude.contains(&i) {
                out.push(i);
            }
        }
        out
    }
}

/// A uniform index below `n` (`n > 0`).
pub(crate) fn below(rng: &mut Rng, n: usize) -> usize {
    // Multiply-shift: unbiased enough for simulation and never out of range.
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// True with probability `p`.
pub(crate) fn chance(rng: &mut Rng, p: f64) -> bool {
    rng.unit() < p
}

/// A standard normal (Box-Muller; the second value is discarded to keep no state).
pub(crate) fn normal(rng: &mut Rng) -> f64 {
    // 1 - unit() is in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - rng.unit();
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A Beta(`a`, `b`) draw for `a, b >= 1`, as `X / (X + Y)` with `X ~ Gamma(a)`, `Y ~ Gamma(b)`.
pub(crate) fn beta(rng: &mut Rng, a: f64, b: f64) -> f64 {
    let x = gamma(rng, a);
    let y = gamma(rng, b);
    x / (x + y)
}

/// A Gamma(`shape`, 1) draw for `shape >= 1` (Marsaglia and Tsang's squeeze method, 2000).
fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let z = normal(rng);
        let v = 1.0 + c * z;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.unit();
        if u.ln() < 0.5 * z * z + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// Fisher-Yates, in place.
pub(crate) fn shuffle<T>(rng: &mut Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i + 1);
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_draws_follow_the_weights() {
        let table = Weighted::new([1.0, 0.0, 3.0]);
        let mut rng = Rng::new(1);
        let mut counts = [0usize; 3];
        for _ in 0..40_000 {
            counts[table.draw(&mut rng)] += 1;
        }
        assert_eq!(counts[1], 0);
        let share = counts[2] as f64 / 40_000.0;
        assert!((share - 0.75).abs() < 0.02, "{share}");
    }

    #[test]
    fn distinct_draws_are_distinct_and_skip_the_excluded() {
        let table = Weighted::new([1.0; 6]);
        let mut rng = Rng::new(2);
        let got = table.draw_distinct(&mut rng, 4, &[0]);
        assert_eq!(got.len(), 4);
        assert!(!got.contains(&0));
        let mut sorted = got.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
    }

    #[test]
    fn beta_mean_matches() {
        let mut rng = Rng::new(3);
        let n = 20_000;
        let mean: f64 = (0..n).map(|_| beta(&mut rng, 2.0, 6.0)).sum::<f64>() / n as f64;
        assert!((mean - 0.25).abs() < 0.01, "{mean}");
        let uniform: f64 = (0..n).map(|_| beta(&mut rng, 1.0, 1.0)).sum::<f64>() / n as f64;
        assert!((uniform - 0.5).abs() < 0.01, "{uniform}");
    }

    #[test]
    fn normal_has_unit_spread() {
        let mut rng = Rng::new(4);
        let n = 20_000;
        let xs: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = Rng::new(5);
        assert!((0..1000).all(|_| below(&mut rng, 7) < 7));
    }
}
