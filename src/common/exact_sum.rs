//! Exact sums of `double precision` values under insertions and retractions.
//!
//! A running `f64` sum keeps a residue once a value is taken out again: `1e20 + 1 - 1e20` is
//! 0, and `Infinity + 5 - Infinity` is NaN. [`ExactSum`] keeps the exact sum of the finite
//! values instead, as one wide fixed-point integer (a "superaccumulator", Kulisch's long
//! accumulator: every finite `f64` is an integer multiple of 2^-1074, the smallest
//! subnormal), and counts the NaNs and infinities apart. Adding or retracting a value is
//! exact and O(1); the sum read back is the exact sum of the values present, rounded once
//! to the nearest `f64` (ties to even), so it equals a recomputation from those values with
//! exact arithmetic whatever the order of changes.
//!
//! PostgreSQL's `sum(float8)` adds in scan order in `f64`, so its last digit may differ from
//! the correctly rounded sum (`0.1 + 0.2 + 0.3` is `0.6000000000000001` there, `0.6` here).

/// 64-bit words of the accumulator: 2,304 bits, two's complement. Values reach bit 2,162
/// (2^1024 times a weight below 2^63, relative to 2^-1074), leaving 2^140 of headroom.
const LIMBS: usize = 36;

/// The exact sum of a multiset of `f64` values (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactSum {
    /// The finite values' sum in units of 2^-1074, two's complement, least significant first.
    limbs: Box<[u64; LIMBS]>,
    /// NaN values present.
    nan: i64,
    /// `+Infinity` values present.
    pos_inf: i64,
    /// `-Infinity` values present.
    neg_inf: i64,
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum {
            limbs: Box::new([0; LIMBS]),
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
        }
    }
}

impl ExactSum {
    /// Bytes an accumulator holds on the heap (its limbs).
    pub const HEAP_BYTES: usize = LIMBS * 8;

    /// Adds `weight` copies of `x` (a negative weight retracts them).
    pub fn add(&mut self, x: f64, weight: i64) {
        if x.is_nan() {
            self.nan += weight;
            return;
        }
        if x.is_infinite() {
            if x > 0.0 {
                self.pos_inf += weight;
            } else {
                self.neg_inf += weight;
            }
            return;
        }
        if x == 0.0 || weight == 0 {
            return;
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as u32;
        let fraction = bits & ((1 << 52) - 1);
        // x = mantissa × 2^(shift - 1074).
        let (mantissa, shift) = if exponent == 0 {
            (fraction, 0)
        } else {
            (fraction | (1 << 52), exponent - 1)
        };
        let magnitude = u128::from(mantissa) * u128::from(weight.unsigned_abs());
        let negative = (x < 0.0) != (weight < 0);
        self.add_magnitude(magnitude, shift, negative);
    }

    /// Adds (or subtracts, `negative`) `magnitude × 2^shift` units.
    fn add_magnitude(&mut self, magnitude: u128, shift: u32, negative: bool) {
        let first = (shift / 64) as usize;
        let bit = shift % 64;
        let words = if bit == 0 {
            [magnitude as u64, (magnitude >> 64) as u64, 0]
        } else {
            [
                (magnitude as u64) << bit,
                (magnitude >> (64 - bit)) as u64,
                (magnitude >> (128 - bit)) as u64,
            ]
        };
        let mut carry = false;
        for i in first..LIMBS {
            let word = words.get(i - first).copied().unwrap_or(0);
            let (v, c1) = if negative {
                self.limbs[i].overflowing_sub(word)
            } else {
                self.limbs[i].overflowing_add(word)
            };
            let (v, c2) = if negative {
                v.overflowing_sub(u64::from(carry))
            } else {
                v.overflowing_add(u64::from(carry))
            };
            self.limbs[i] = v;
            carry = c1 || c2;
            if i - first >= 2 && !carry {
                break;
            }
        }
    }

    /// The sum, rounded once to the nearest `f64` (ties to even): NaN if a NaN is present or
    /// both infinities are, else the infinity present, else the finite values' sum (an
    /// infinity when it overflows `f64`).
    pub fn value(&self) -> f64 {
        if self.nan > 0 || (self.pos_inf > 0 && self.neg_inf > 0) {
            return f64::NAN;
        }
        if self.pos_inf > 0 {
            return f64::INFINITY;
        }
        if self.neg_inf > 0 {
            return f64::NEG_INFINITY;
        }
        let negative = self.limbs[LIMBS - 1] >> 63 == 1;
        let mut m = *self.limbs;
        if negative {
            // Two's complement negation: invert and add one.
            let mut carry = true;
            for limb in m.iter_mut() {
                let (v, c) = (!*limb).overflowing_add(u64::from(carry));
                *limb = v;
                carry = c;
            }
        }
        let Some(top) = m.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        let length = top as u32 * 64 + (64 - m[top].leading_zeros());
        let magnitude = if length <= 53 {
            // At most 2^53 units of 2^-1074: exactly the f64 with these bits.
            f64::from_bits(m[0])
        } else {
            let mut k = length - 53;
            let mut mantissa = bits_at(&m, k, 53);
            let round = bits_at(&m, k - 1, 1) == 1;
            let sticky = k > 1 && any_below(&m, k - 1);
            if round && (sticky || mantissa & 1 == 1) {
                mantissa += 1;
                if mantissa == 1 << 53 {
                    mantissa >>= 1;
                    k += 1;
                }
            }
            // mantissa × 2^(k - 1074) with mantissa in [2^52, 2^53): biased exponent k + 1.
            let biased = u64::from(k) + 1;
            if biased >= 0x7ff {
                f64::INFINITY
            } else {
                f64::from_bits((biased << 52) | (mantissa & ((1 << 52) - 1)))
            }
        };
        if negative { -magnitude } else { magnitude }
    }

    /// Adds every value of `other` (two partial sums of one multiset become its sum).
    pub fn merge(&mut self, other: &ExactSum) {
        let mut carry = false;
        for (limb, o) in self.limbs.iter_mut().zip(other.limbs.iter()) {
            let (v, c1) = limb.overflowing_add(*o);
            let (v, c2) = v.overflowing_add(u64::from(carry));
            *limb = v;
            carry = c1 || c2;
        }
        self.nan += other.nan;
        self.pos_inf += other.pos_inf;
        self.neg_inf += other.neg_inf;
    }

    /// Whether a NaN or an infinity is among the values.
    pub fn has_non_finite(&self) -> bool {
        self.nan > 0 || self.pos_inf > 0 || self.neg_inf > 0
    }

    /// The sum as PostgreSQL's `sum(double precision)` gives it: [`Self::value`], or `None`
    /// when the finite values' sum overflows `f64` and no NaN or infinity is among the values
    /// (PostgreSQL's `float8pl` then raises 22003 `value out of range: overflow`).
    ///
    /// PostgreSQL adds in scan order, so a sum that overflows on the way and comes back into
    /// range fails there; here only the exact sum counts, which no order of changes affects.
    pub fn pg_value_f64(&self) -> Option<f64> {
        let v = self.value();
        (v.is_finite() || self.has_non_finite()).then_some(v)
    }

    /// The sum as PostgreSQL's `sum(real)` gives it: the exact sum rounded to `f64`, then to
    /// `f32`; `None` when that overflows `f32` and no NaN or infinity is among the values
    /// (PostgreSQL's `float4pl` raises 22003 then).
    pub fn pg_value_f32(&self) -> Option<f32> {
        let v = self.value() as f32;
        (v.is_finite() || self.has_non_finite()).then_some(v)
    }

    /// The accumulator as bytes for a state table: the NaN, `+Infinity` and `-Infinity`
    /// counts (little-endian i64), then the limbs (little-endian u64, least significant
    /// first) without the leading ones that only repeat the sign.
    pub fn to_bytes(&self) -> Vec<u8> {
        let fill = if self.limbs[LIMBS - 1] >> 63 == 1 {
            u64::MAX
        } else {
            0
        };
        let mut len = LIMBS;
        while len > 1 && self.limbs[len - 1] == fill && self.limbs[len - 2] >> 63 == fill >> 63 {
            len -= 1;
        }
        let mut out = Vec::with_capacity(24 + 8 * len);
        for count in [self.nan, self.pos_inf, self.neg_inf] {
            out.extend_from_slice(&count.to_le_bytes());
        }
        for limb in &self.limbs[..len] {
            out.extend_from_slice(&limb.to_le_bytes());
        }
        out
    }

    /// Reads [`ExactSum::to_bytes`]; `None` for bytes of another shape.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < 32 || !bytes.len().is_multiple_of(8) || bytes.len() > 24 + 8 * LIMBS {
            return None;
        }
        let word = |i: usize| -> [u8; 8] {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            w
        };
        let mut sum = ExactSum {
            nan: i64::from_le_bytes(word(0)),
            pos_inf: i64::from_le_bytes(word(1)),
            neg_inf: i64::from_le_bytes(word(2)),
            ..ExactSum::default()
        };
        let stored = bytes.len() / 8 - 3;
        for i in 0..stored {
            sum.limbs[i] = u64::from_le_bytes(word(3 + i));
        }
        let fill = if sum.limbs[stored - 1] >> 63 == 1 {
            u64::MAX
        } else {
            0
        };
        for limb in &mut sum.limbs[stored..] {
            *limb = fill;
        }
        Some(sum)
    }
}

/// `len` (≤ 64) bits of `m` from bit `start` up.
fn bits_at(m: &[u64; LIMBS], start: u32, len: u32) -> u64 {
    let i = (start / 64) as usize;
    let off = start % 64;
    let mut v = m[i] >> off;
    if off > 0 && i + 1 < LIMBS {
        v |= m[i + 1] << (64 - off);
    }
    if len == 64 { v } else { v & ((1 << len) - 1) }
}

/// Whether any bit of `m` below bit `end` is set.
fn any_below(m: &[u64; LIMBS], end: u32) -> bool {
    let i = (end / 64) as usize;
    let off = end % 64;
    m[..i].iter().any(|&l| l != 0) || (off > 0 && m[i] & ((1 << off) - 1) != 0)
}

#[cfg(test)]
mod tests {
    use super::ExactSum;

    fn sum_of(values: &[(f64, i64)]) -> ExactSum {
        let mut s = ExactSum::default();
        for (x, w) in values {
            s.add(*x, *w);
        }
        s
    }

    #[test]
    fn retractions_leave_no_residue() {
        let s = sum_of(&[(1e20, 1), (1.0, 1), (1e20, -1)]);
        assert_eq!(s.value(), 1.0);
        let s = sum_of(&[(f64::INFINITY, 1), (5.0, 1), (f64::INFINITY, -1)]);
        assert_eq!(s.value(), 5.0);
        let s = sum_of(&[(f64::NAN, 2), (3.0, 1), (f64::NAN, -2)]);
        assert_eq!(s.value(), 3.0);
        let s = sum_of(&[(0.1, 3), (0.2, 1), (0.1, -3), (0.2, -1)]);
        assert_eq!(s.value(), 0.0);
        assert_eq!(s, ExactSum::default());
    }

    #[test]
    fn rounds_the_exact_sum_once() {
        // 0.1 + 0.2 + 0.3 is 0.6000000000000001 added in order; the exact sum of the three
        // doubles rounds to 0.6.
        assert_eq!(sum_of(&[(0.1, 1), (0.2, 1), (0.3, 1)]).value(), 0.6);
        // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: to even.
        let two53 = 9_007_199_254_740_992.0;
        assert_eq!(sum_of(&[(two53, 1), (1.0, 1)]).value(), two53);
        assert_eq!(
            sum_of(&[(two53, 1), (1.0, 1), (1e-300, 1)]).value(),
            two53 + 2.0
        );
        assert_eq!(sum_of(&[(two53 + 2.0, 1), (1.0, 1)]).value(), two53 + 4.0);
        assert_eq!(sum_of(&[(-2.5, 4), (0.5, 1)]).value(), -9.5);
        assert_eq!(sum_of(&[(1.5, -3)]).value(), -4.5);
    }

    #[test]
    fn extremes() {
        let tiny = f64::from_bits(1);
        assert_eq!(sum_of(&[(tiny, 3)]).value(), f64::from_bits(3));
        assert_eq!(
            sum_of(&[(f64::MIN_POSITIVE, 1), (tiny, -1)]).value(),
            f64::MIN_POSITIVE - tiny
        );
        assert_eq!(
            sum_of(&[(f64::MAX, 1), (f64::MAX, 1)]).value(),
            f64::INFINITY
        );
        assert_eq!(sum_of(&[(f64::MAX, 2), (f64::MAX, -1)]).value(), f64::MAX);
        assert_eq!(
            sum_of(&[(-f64::MAX, 1), (1e300, 1)]).value(),
            -f64::MAX + 1e300
        );
        let s = sum_of(&[(f64::INFINITY, 1), (f64::NEG_INFINITY, 1)]);
        assert!(s.value().is_nan());
        assert_eq!(
            sum_of(&[(f64::NEG_INFINITY, 1), (1.0, 1)]).value(),
            f64::NEG_INFINITY
        );
    }

    #[test]
    fn bytes_round_trip() {
        for s in [
            ExactSum::default(),
            sum_of(&[(1.5, 1)]),
            sum_of(&[(-1.5, 1)]),
            sum_of(&[(f64::MAX, 7), (-1e-300, 3), (f64::NAN, 1)]),
            sum_of(&[(-f64::MAX, 5), (f64::INFINITY, 2)]),
        ] {
            let back = ExactSum::from_bytes(&s.to_bytes()).expect("round trip");
            assert_eq!(back, s);
            assert_eq!(back.value().to_bits(), s.value().to_bits());
        }
        assert!(ExactSum::from_bytes(&[1, 2, 3]).is_none());
    }
}
