//! A zipfian sampler over the ranks `[0, n)`, by rejection-inversion.
//!
//! Rank `k` (0-based) has probability proportional to `1 / (k + 1)^θ`, so
//! rank 0 is the hottest; workloads map ranks to keys themselves (rank `r` is
//! row `r` in [`crate::micro`] and [`crate::ycsb`]). `θ = 0` is uniform.
//!
//! The method is W. Hörmann and G. Derflinger, "Rejection-inversion to
//! generate variates from monotone discrete distributions", ACM TOMACS 6(3),
//! 1996 (the variant Apache Commons RNG uses): it inverts the integral of the
//! continuous hat `h(x) = x^-θ` and accepts with a squeeze, so a sample costs
//! one `ln` and one `exp` and the expected number of iterations is below
//! 1.1 for every `θ`. Unlike Gray et al.'s method ("Quickly generating
//! billion-record synthetic databases", SIGMOD 1994), used by YCSB, it is
//! exact for `θ ≥ 1` and needs no O(n) set-up (no harmonic number).
//!
//! The workloads of the papers in `/work/shared/papers` draw keys this way:
//! Janus §6.2 varies the zipf coefficient from 0.5 to 1.0; COCO §7 makes YCSB
//! accesses zipfian to raise contention.

use crate::error::ConfigError;
use rand::Rng;

/// A zipfian distribution over `[0, n)` with exponent `θ ∈ [0, 1.5)`.
///
/// Cheap to copy; sampling takes `&self`, so one instance can serve many
/// generators.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Zipf {
    n: u64,
    theta: f64,
    /// `H(1.5) - 1`: the hat integral's lower end (maps to rank 1).
    h_integral_x1: f64,
    /// `H(n + 0.5)`: the hat integral's upper end.
    h_integral_n: f64,
    /// The squeeze: `k - x <= s` accepts without evaluating `H`.
    s: f64,
}

impl Zipf {
    /// Exponents at or above this are rejected (the workloads' documented
    /// range; the method itself works for any `θ > 0`).
    pub const MAX_THETA: f64 = 1.5;

    /// A sampler over `[0, n)`. Errors (naming `n` or `theta`) when `n == 0`
    /// or `θ` is not a finite number in `[0, 1.5)`.
    pub fn new(n: u64, theta: f64) -> Result<Self, ConfigError> {
        if n == 0 {
            return Err(ConfigError::new("n", "must be > 0, got 0"));
        }
        if !(theta.is_finite() && (0.0..Self::MAX_THETA).contains(&theta)) {
            return Err(ConfigError::new(
                "theta",
                format!("must be in [0, {}), got {theta}", Self::MAX_THETA),
            ));
        }
        let mut z = Zipf {
            n,
            theta,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        if theta > 0.0 {
            z.h_integral_x1 = z.h_integral(1.5) - 1.0;
            z.h_integral_n = z.h_integral(n as f64 + 0.5);
            z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        }
        Ok(z)
    }

    /// The number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The exponent θ.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// One rank in `[0, n)`; rank 0 is the most likely. O(1) expected.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        if self.theta == 0.0 {
            return rng.random_range(0..self.n);
        }
        if self.n == 1 {
            return 0;
        }
        loop {
            // u is uniform in (h_integral_x1, h_integral_n].
            let r: f64 = rng.random();
            let u = self.h_integral_n + r * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            // Round to the nearest rank (1-based) and clamp against
            // rounding at the ends.
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
    }

    /// `H(x) = ∫ x^-θ`, shifted so it is continuous in θ at θ = 1:
    /// `(x^(1-θ) - 1) / (1 - θ)`, or `ln x` when θ = 1.
    #[inline]
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.theta) * log_x) * log_x
    }

    /// The hat `h(x) = x^-θ`.
    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// The inverse of [`Self::h_integral`].
    #[inline]
    fn h_integral_inverse(&self, x: f64) -> f64 {
        // Clamp guards against rounding pushing t below -1 (log1p pole).
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, accurate near 0.
///
/// Uses `ln(1 + x)` rather than the slower `ln_1p` away from 0 (on the
/// sampling hot path): for `|x| > 1e-3` rounding `1 + x` costs at most
/// ~1e-13 relative error; below, a Taylor series to `x^4` (truncation
/// error < 2e-16).
#[inline]
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-3 {
        (1.0 + x).ln() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - x * (0.25 - x * 0.2)))
    }
}

/// `(e^x - 1) / x`, accurate near 0.
#[inline]
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// Exact probabilities of ranks `0..n` (O(n): tests only).
    fn pmf(n: u64, theta: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-theta)).collect();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    /// Pearson's chi-square of observed counts against expected
    /// probabilities, over bins given as rank ranges.
    fn chi_square(counts: &[u64], probs: &[f64], samples: u64) -> f64 {
        counts
            .iter()
            .zip(probs)
            .map(|(&c, &p)| {
                let e = p * samples as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    /// Chi-square over every rank of a small domain. With a fixed seed the
    /// statistic is deterministic; the bound is mean + 6 sd of chi²(df).
    fn check_small(theta: f64, seed: u64) {
        let n = 100u64;
        let samples = 400_000u64;
        let z = Zipf::new(n, theta).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..samples {
            let k = z.sample(&mut rng);
            assert!(k < n);
            counts[k as usize] += 1;
        }
        let df = (n - 1) as f64;
        let chi = chi_square(&counts, &pmf(n, theta), samples);
        assert!(
            chi < df + 6.0 * (2.0 * df).sqrt(),
            "theta {theta}: chi-square {chi} for df {df}"
        );
        // Rank order: rank 0 is the hottest (for θ > 0).
        if theta > 0.0 {
            assert!(counts[0] > counts[1] && counts[1] > counts[10]);
        }
    }

    #[test]
    fn matches_law_on_small_domain() {
        for (i, theta) in [0.0, 0.5, 0.99, 1.0, 1.2, 1.45].into_iter().enumerate() {
            check_small(theta, 42 + i as u64);
        }
    }

    /// A large domain, binned by powers of two (bin b = ranks
    /// [2^b - 1, 2^(b+1) - 1)), so the tail is checked too.
    #[test]
    fn matches_law_on_large_domain() {
        let n = 1_000_000u64;
        let samples = 1_000_000u64;
        for (i, theta) in [0.5, 0.99, 1.2].into_iter().enumerate() {
            let z = Zipf::new(n, theta).unwrap();
            let p = pmf(n, theta);
            let bin = |k: u64| (64 - (k + 1).leading_zeros() - 1) as usize;
            let bins = bin(n - 1) + 1;
            let mut probs = vec![0.0; bins];
            for (k, pk) in p.iter().enumerate() {
                probs[bin(k as u64)] += pk;
            }
            let mut counts = vec![0u64; bins];
            let mut rng = SmallRng::seed_from_u64(7 + i as u64);
            for _ in 0..samples {
                let k = z.sample(&mut rng);
                assert!(k < n);
                counts[bin(k)] += 1;
            }
            let df = (bins - 1) as f64;
            let chi = chi_square(&counts, &probs, samples);
            assert!(
                chi < df + 6.0 * (2.0 * df).sqrt(),
                "theta {theta}: chi-square {chi} for df {df}: {counts:?}"
            );
        }
    }

    #[test]
    fn tiny_domains() {
        let mut rng = SmallRng::seed_from_u64(1);
        for theta in [0.0, 0.7, 1.0, 1.3] {
            let z = Zipf::new(1, theta).unwrap();
            assert!((0..100).all(|_| z.sample(&mut rng) == 0));
            let z = Zipf::new(2, theta).unwrap();
            let ones = (0..10_000).filter(|_| z.sample(&mut rng) == 1).count() as f64;
            let expect = 10_000.0 / (1.0 + 2f64.powf(theta));
            assert!(
                (ones - expect).abs() < 300.0,
                "theta {theta}: {ones} vs {expect}"
            );
        }
    }

    #[test]
    fn huge_domain_stays_in_range() {
        let mut rng = SmallRng::seed_from_u64(3);
        for theta in [0.0, 0.3, 0.99, 1.0, 1.49] {
            let z = Zipf::new(u64::MAX / 2, theta).unwrap();
            for _ in 0..10_000 {
                assert!(z.sample(&mut rng) < u64::MAX / 2);
            }
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(Zipf::new(0, 0.5).unwrap_err().param, "n");
        for theta in [-0.1, 1.5, 2.0, f64::NAN, f64::INFINITY] {
            assert_eq!(Zipf::new(10, theta).unwrap_err().param, "theta");
        }
        assert!(Zipf::new(10, 0.0).is_ok());
        assert!(Zipf::new(10, 1.499).is_ok());
    }
}
