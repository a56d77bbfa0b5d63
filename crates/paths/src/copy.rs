//! Copies of a few KiB or more between buffers that do not overlap: one-sided puts and gets,
//! and the engine's copies of whole messages into contiguous receive buffers.
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
//!
//! On AMD Zen 3 (AVX2, no AVX-512) glibc's `rep movsb` is far worse for one placement: a
//! destination 1-31 bytes past the source, counted within a 4 KiB page, copies more than
//! 2 KiB at 2-3 GB/s instead of 60-95 (16 KiB: 1.8 GB/s at 16 bytes past, 94 at 32; the
//! window-to-`malloc` get above is exactly that placement). [`copy`] takes a loop of 32-byte
//! loads and stores there, at every size from 2 KiB.
//!
//! AMD Zen 4 (AVX-512) crawls at the same placement, over a narrower range: from 3 KiB to
//! 512 KiB, a destination 1-15 bytes past the source (1-31 up to 8 KiB) copied at 1.8-3.2
//! GB/s against 44-96 aligned (a get into `&a[1]` of a page-aligned `double` array is such
//! a copy). The AVX-512 loop takes every size from 2 KiB there, not only up to
//! [`WIDE_MAX`]. `cargo run --release -p steadfast-paths --example copy_placement` measures
//! both.

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
        if n >= WIDE_MIN {
            if std::arch::is_x86_feature_detected!("avx512f") {
                if n <= WIDE_MAX || page_aliased(src, dst) {
                    // SAFETY: the CPU has AVX-512F; the ranges are as the caller promised.
                    unsafe { wide(src, dst, n) };
                    return;
                }
            } else if page_aliased(src, dst) && std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2; the ranges are as the caller promised.
                unsafe { wide256(src, dst, n) };
                return;
            }
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

/// Whether `dst` lies 1-63 bytes past `src` within a page (where `rep movsb` crawls on
/// Zen 3 and Zen 4; the measured slow distances were 1-31, the margin costs nothing).
#[cfg(target_arch = "x86_64")]
#[inline]
fn page_aliased(src: *const u8, dst: *mut u8) -> bool {
    let d = (dst as usize).wrapping_sub(src as usize) & 4095;
    (1..64).contains(&d)
}

/// The AVX2 loop: the first 32 bytes unaligned, then aligned stores from the first 32-byte
/// boundary of `dst`, the last 32 bytes unaligned (they may overlap what the loop wrote,
/// with the same bytes). `n` ≥ 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn wide256(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{_mm256_loadu_si256, _mm256_store_si256, _mm256_storeu_si256};
    debug_assert!(n >= 32);
    // SAFETY (every load and store below): inside [src, src + n) and [dst, dst + n); the
    // aligned stores start at a multiple of 32 in dst.
    unsafe {
        _mm256_storeu_si256(dst.cast(), _mm256_loadu_si256(src.cast()));
        let head = (32 - (dst as usize & 31)) & 31;
        let (s, d, m) = (src.add(head), dst.add(head), n - head);
        let mut i = 0;
        while i + 128 <= m {
            let a = _mm256_loadu_si256(s.add(i).cast());
            let b = _mm256_loadu_si256(s.add(i + 32).cast());
            let c = _mm256_loadu_si256(s.add(i + 64).cast());
            let e = _mm256_loadu_si256(s.add(i + 96).cast());
            _mm256_store_si256(d.add(i).cast(), a);
            _mm256_store_si256(d.add(i + 32).cast(), b);
            _mm256_store_si256(d.add(i + 64).cast(), c);
            _mm256_store_si256(d.add(i + 96).cast(), e);
            i += 128;
        }
        while i + 32 <= m {
            _mm256_store_si256(d.add(i).cast(), _mm256_loadu_si256(s.add(i).cast()));
            i += 32;
        }
        if i < m {
            _mm256_storeu_si256(dst.add(n - 32).cast(), _mm256_loadu_si256(src.add(n - 32).cast()));
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

    /// The AVX2 loop itself (the test above reaches it only where the CPU lacks AVX-512 and
    /// the vectors happen to lie 1-63 bytes apart within a page), and `copy` at the
    /// distances that pick it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_loop_copies_every_size_and_offset_exactly() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let src: Vec<u8> = (0..40_000usize).map(|i| (i * 13 + 5) as u8).collect();
        let mut dst = vec![0u8; 40_000 + 4096 + 128];
        let page = (4096 - dst.as_ptr() as usize % 4096) % 4096;
        for n in [32, 33, 63, 64, 127, 128, 129, 2048, 2049, 4096, 4100, 16384, 32768 + 7] {
            for so in [0, 1, 31] {
                for d_off in [0, 5, 32, 47] {
                    if d_off + n + 64 > dst.len() || so + n > src.len() {
                        continue;
                    }
                    dst.fill(0xee);
                    // SAFETY: the CPU has AVX2; both ranges lie inside their vectors.
                    unsafe { wide256(src.as_ptr().add(so), dst.as_mut_ptr().add(d_off), n) };
                    assert_eq!(&dst[d_off..d_off + n], &src[so..so + n], "n {n} src +{so} dst +{d_off}");
                    assert!(dst[..d_off].iter().all(|&b| b == 0xee), "wrote before: n {n} dst +{d_off}");
                    assert!(dst[d_off + n..].iter().all(|&b| b == 0xee), "wrote after: n {n} dst +{d_off}");
                }
            }
        }
        // Destinations 0-70 bytes past the source within a page.
        let s_page = src.as_ptr() as usize % 4096;
        for past in 0..70usize {
            let at = page + (s_page + past) % 4096;
            let n = 5000;
            dst.fill(0xee);
            // SAFETY: both ranges lie inside their vectors (at + n < dst.len()).
            unsafe { copy(src.as_ptr(), dst.as_mut_ptr().add(at), n) };
            assert_eq!(page_aliased(src.as_ptr(), dst.as_mut_ptr().wrapping_add(at)), (1..64).contains(&past));
            assert_eq!(&dst[at..at + n], &src[..n], "{past} past");
        }
    }
}
