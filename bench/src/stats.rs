//! Latency samples and their percentiles.

use serde::Serialize;

/// Milliseconds, in the order they were taken.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<f64>);

/// The summary of [`Samples`] as reported.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq)]
pub struct Percentiles {
    /// How many samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, ms: f64) {
        self.0.push(ms);
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The percentiles (nearest rank), all 0 without samples.
    pub fn percentiles(&self) -> Percentiles {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| -> f64 {
            if sorted.is_empty() {
                return 0.0;
            }
            let rank = (q * sorted.len() as f64).ceil() as usize;
            round(sorted[rank.clamp(1, sorted.len()) - 1])
        };
        Percentiles {
            count: sorted.len(),
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// Rounded to 0.1.
pub fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// `rate` as a fraction of `anchor`, to 0.001 (a tenth of a percent is below the spread of
/// any run here); none without a positive anchor, so a failed or missing baseline never
/// reads as an infinite ratio.
pub fn ratio(rate: f64, anchor: Option<f64>) -> Option<f64> {
    anchor
        .filter(|a| *a > 0.0)
        .map(|a| (rate / a * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s = Samples::default();
        for i in 1..=100 {
            s.push(f64::from(i));
        }
        let p = s.percentiles();
        assert_eq!(
            (p.count, p.p50, p.p90, p.p99, p.max),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
    }

    #[test]
    fn ratios_to_a_tenth_of_a_percent_and_none_without_an_anchor() {
        assert_eq!(ratio(50.0, Some(200.0)), Some(0.25));
        assert_eq!(ratio(1.0, Some(3.0)), Some(0.333));
        assert_eq!(ratio(2.0, Some(3.0)), Some(0.667));
        assert_eq!(ratio(300.0, Some(200.0)), Some(1.5));
        assert_eq!(ratio(50.0, Some(0.0)), None);
        assert_eq!(ratio(50.0, None), None);
    }

    #[test]
    fn no_samples_are_zeros() {
        assert_eq!(Samples::default().percentiles(), Percentiles::default());
    }
}
