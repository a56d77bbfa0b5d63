//! Copies of a few KiB between buffers that do not overlap.
//!
//! glibc's `memcpy` moves 2-64 KiB with `rep movsb` on this machine's CPUs (AMD EPYC), which
//! is slow when source and destination sit at different offsets within a cache line:
//! copying 4 KiB from a page-aligned buffer took 29-30 ns to an aligned destination and
//! 38-39 ns to one 16, 32 or 48 bytes past a line (16 KiB: 102 and 126 ns). A loop of
//! 64-byte unaligned loads and aligned stores (AVX-512) took 16 and 25 ns for 4 KiB, 63 and
//! 80 ns for 16 KiB; from 32 KiB on it is no faster than `memcpy` (a 32 KiB one-sided put
//! into shared window memory took 0.37 µs with it against 0.22-0.27 with `memcpy`), nor
//! below 2 KiB. Measured in a loop of 20 million / (n/64 + 10) copies, both
//! buffers warm. [`copy`] uses the loop between those sizes when the CPU has AVX-512, and
//! `memcpy` otherwise. A one-sided get of 4 KiB from window memory into a buffer from
//! `malloc` is such a copy (`malloc` returns large blocks 16 bytes past a page).

/// Sizes the AVX-512 loop copies (inclusive).
pub const WIDE_MIN: usize = 2048;
pub const WIDE_MAX: usize = 16 * 1024;

/// Copy `n` bytes from `src` to `dst`.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`: both ranges valid for `n` bytes, not overlapping.
#[inline]
pub unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if (WIDE_MIN..=WIDE_MAX).contains(&n) && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F; the ranges are as the caller promised.
            unsafe { wide(src, dst, n) };
            return;
        }
    }
    // SAFETY: as the caller promised.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}

/// The AVX-512 loop: the first 64 bytes unaligned, then aligned stores from the first line
/// boundary of `dst`, the last 64 bytes unaligned (they may overlap what the loop wrote,
/// with the same bytes). `n` ≥ 64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn wide(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{_mm512_loadu_si512, _mm512_store_si512, _mm512_storeu_si512};
    debug_assert!(n >= 64);
    // SAFETY (every load and store below): inside [src, src + n) and [dst, dst + n); the
    // aligned stores start at a multiple of 64 in dst.
    unsafe {
        _mm512_storeu_si512(dst.cast(), _mm512_loadu_si512(src.cast()));
        let head = (64 - (dst as usize & 63)) & 63;
        let (s, d, m) = (src.add(head), dst.add(head), n - head);
        let mut i = 0;
        while i + 256 <= m {
            let a = _mm512_loadu_si512(s.add(i).cast());
            let b = _mm512_loadu_si512(s.add(i + 64).cast());
            let c = _mm512_loadu_si512(s.add(i + 128).cast());
            let e = _mm512_loadu_si512(s.add(i + 192).cast());
            _mm512_store_si512(d.add(i).cast(), a);
            _mm512_store_si512(d.add(i + 64).cast(), b);
            _mm512_store_si512(d.add(i + 128).cast(), c);
            _mm512_store_si512(d.add(i + 192).cast(), e);
            i += 256;
        }
        while i + 64 <= m {
            _mm512_store_si512(d.add(i).cast(), _mm512_loadu_si512(s.add(i).cast()));
            i += 64;
        }
        if i < m {
            _mm512_storeu_si512(dst.add(n - 64).cast(), _mm512_loadu_si512(src.add(n - 64).cast()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_size_and_offset_exactly() {
        let src: Vec<u8> = (0..WIDE_MAX + 300).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; WIDE_MAX + 300];
        for n in [0, 1, 63, 64, 65, 2047, 2048, 2049, 4096, 4100, 8191, 16384, 32767, WIDE_MAX] {
            for so in [0, 1, 16, 63] {
                for d_off in [0, 5, 16, 48, 64] {
                    if so + n > src.len() || d_off + n + 64 > dst.len() {
                        continue;
                    }
                    dst.fill(0xee);
                    // SAFETY: both ranges lie inside their vectors.
                    unsafe { copy(src.as_ptr().add(so), dst.as_mut_ptr().add(d_off), n) };
                    assert_eq!(&dst[d_off..d_off + n], &src[so..so + n], "n {n} src +{so} dst +{d_off}");
                    assert!(dst[..d_off].iter().all(|&b| b == 0xee), "wrote before: n {n} dst +{d_off}");
                    assert!(dst[d_off + n..].iter().all(|&b| b == 0xee), "wrote after: n {n} dst +{d_off}");
                }
            }
        }
    }
}
