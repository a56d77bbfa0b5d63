//! CRC32C (Castagnoli) checksums, including a fused copy-and-checksum pass.
//!
//! Plain checksums come from the `crc32c` crate. [`copy_with_crc32c`] copies a buffer and
//! checksums it in the same pass: with SSE4.2 it runs three independent `crc32` dependency
//! chains over three thirds of a block (the instruction has a latency of 3 cycles and a
//! throughput of 1 per cycle, so one chain leaves two thirds of the unit idle) and merges
//! them with precomputed "append n zero bytes" operators. Each source word is loaded once,
//! stored to the destination and fed to the CRC unit, so the checksum rides on the copy's
//! memory traffic instead of needing a second pass over the data.

use std::mem::MaybeUninit;

/// CRC-32C polynomial, bit-reflected.
const POLY: u32 = 0x82F6_3B78;

/// CRC32C of `data` (initial value 0, as in iSCSI/ext4).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Continues a CRC32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Combines two CRCs: `crc32c_combine(crc32c(a), crc32c(b), b.len()) == crc32c(a ++ b)`.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    multmodp(x8nmodp(len_b), crc_a) ^ crc_b
}

/// Copies `src` into `dst` and returns the CRC32C of the bytes, in one pass.
///
/// # Panics
/// If `dst.len() != src.len()` (a caller bug, never a property of received data).
#[inline]
pub fn copy_with_crc32c(dst: &mut [u8], src: &[u8]) -> u32 {
    copy_with_crc32c_append(0, dst, src)
}

/// Like [`copy_with_crc32c`], continuing from `crc` (the CRC of the bytes before `src`).
///
/// # Panics
/// If `dst.len() != src.len()`.
pub fn copy_with_crc32c_append(crc: u32, dst: &mut [u8], src: &[u8]) -> u32 {
    assert_eq!(dst.len(), src.len(), "copy_with_crc32c: length mismatch");
    // SAFETY: `dst` is valid for `src.len()` writes, the borrows guarantee no overlap.
    unsafe { copy_raw(crc, dst.as_mut_ptr(), src) }
}

/// Like [`copy_with_crc32c_append`] into uninitialized memory (e.g. a `Vec`'s spare
/// capacity), which saves the zero-fill a `vec![0; n]` destination would cost.
///
/// # Panics
/// If `dst.len() != src.len()`.
pub fn copy_with_crc32c_uninit(crc: u32, dst: &mut [MaybeUninit<u8>], src: &[u8]) -> u32 {
    assert_eq!(dst.len(), src.len(), "copy_with_crc32c: length mismatch");
    // SAFETY: as above; every byte of `dst` is written before the function returns.
    unsafe { copy_raw(crc, dst.as_mut_ptr().cast::<u8>(), src) }
}

/// Appends a copy of `src` to `out` and returns the CRC32C of `src` continued from `crc`.
pub fn extend_with_crc32c(crc: u32, out: &mut Vec<u8>, src: &[u8]) -> u32 {
    out.reserve(src.len());
    let old = out.len();
    let spare = &mut out.spare_capacity_mut()[..src.len()];
    let crc = copy_with_crc32c_uninit(crc, spare, src);
    // SAFETY: the `src.len()` bytes after `old` were initialized by the copy above.
    unsafe { out.set_len(old + src.len()) };
    crc
}

/// Which implementation [`copy_with_crc32c`] uses on this machine.
pub fn fused_implementation() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            return "sse4.2, 3 interleaved chains";
        }
    }
    "portable (memcpy then crc32c)"
}

/// Dispatches to the SSE4.2 kernel when the CPU has it.
///
/// # Safety
/// `dst` must be valid for `src.len()` byte writes and must not overlap `src`.
#[inline]
unsafe fn copy_raw(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        // `is_x86_feature_detected!` caches its answer in an atomic: cheap per call.
        if std::arch::is_x86_feature_detected!("sse4.2") {
            return x86::copy_crc32c_sse42(crc, dst, src);
        }
    }
    copy_raw_portable(crc, dst, src)
}

/// Portable fallback: a plain copy followed by a checksum of the (cache-hot) destination.
///
/// # Safety
/// Same contract as [`copy_raw`].
unsafe fn copy_raw_portable(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
    crc32c::crc32c_append(crc, std::slice::from_raw_parts(dst, src.len()))
}

/// The portable fallback, exposed so tests can check it on machines that have SSE4.2.
#[doc(hidden)]
pub fn copy_with_crc32c_portable(crc: u32, dst: &mut [u8], src: &[u8]) -> u32 {
    assert_eq!(dst.len(), src.len(), "copy_with_crc32c: length mismatch");
    // SAFETY: as in `copy_with_crc32c_append`.
    unsafe { copy_raw_portable(crc, dst.as_mut_ptr(), src) }
}

// ---------------------------------------------------------------------------------------
// GF(2) arithmetic for shifting a CRC register over n zero bytes (the zlib method).

/// Multiplies `a` by `b` modulo the CRC polynomial (bit-reflected representation).
const fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut m: u32 = 1 << 31;
    let mut p: u32 = 0;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// `X2N[k]` is x^(2^k) modulo the polynomial.
const X2N: [u32; 64] = {
    let mut t = [0u32; 64];
    let mut p: u32 = 1 << 30; // x^1
    t[0] = p;
    let mut n = 1;
    while n < 64 {
        p = multmodp(p, p);
        t[n] = p;
        n += 1;
    }
    t
};

/// x^(8n) modulo the polynomial: the operator for appending `n` zero bytes.
const fn x8nmodp(mut n: u64) -> u32 {
    let mut p: u32 = 1 << 31; // x^0
    let mut k = 3; // 8 = 2^3
    while n != 0 {
        if n & 1 != 0 {
            p = multmodp(X2N[k & 63], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// Byte-wise tables applying the "append `n` zero bytes" operator to a 32-bit register.
const fn shift_table(n: u64) -> [[u32; 256]; 4] {
    let op = x8nmodp(n);
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            t[k][b] = multmodp(op, (b as u32) << (8 * k));
            b += 1;
        }
        k += 1;
    }
    t
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::shift_table;
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    // Block sizes per chain. A block of 3*L bytes runs three chains of L bytes each; the
    // merge costs two table shifts (8 lookups), so L trades merge overhead against how
    // much of a short buffer is left for the single-chain tail.
    const LONG: usize = 4096;
    const MID: usize = 512;
    const SHORT: usize = 64;

    static LONG_T: [[u32; 256]; 4] = shift_table(LONG as u64);
    static MID_T: [[u32; 256]; 4] = shift_table(MID as u64);
    static SHORT_T: [[u32; 256]; 4] = shift_table(SHORT as u64);

    #[inline(always)]
    fn shift(t: &[[u32; 256]; 4], crc: u64) -> u64 {
        let c = crc as u32;
        u64::from(
            t[0][(c & 0xff) as usize]
                ^ t[1][((c >> 8) & 0xff) as usize]
                ^ t[2][((c >> 16) & 0xff) as usize]
                ^ t[3][(c >> 24) as usize],
        )
    }

    /// Copies and checksums `3 * n` blocks of `len` bytes with three chains.
    ///
    /// # Safety
    /// SSE4.2 present; `s`/`d` valid for `remaining` bytes, no overlap.
    #[inline]
    #[target_feature(enable = "sse4.2")]
    unsafe fn blocks3(
        mut crc0: u64,
        d: &mut *mut u8,
        s: &mut *const u8,
        remaining: &mut usize,
        len: usize,
        table: &[[u32; 256]; 4],
    ) -> u64 {
        while *remaining >= 3 * len {
            let (mut crc1, mut crc2) = (0u64, 0u64);
            let (s0, s1, s2) = (*s, s.add(len), s.add(2 * len));
            let (d0, d1, d2) = (*d, d.add(len), d.add(2 * len));
            let mut i = 0;
            while i < len {
                // Each word is loaded once, stored, and fed to its chain.
                let a = s0.add(i).cast::<u64>().read_unaligned();
                let b = s1.add(i).cast::<u64>().read_unaligned();
                let c = s2.add(i).cast::<u64>().read_unaligned();
                d0.add(i).cast::<u64>().write_unaligned(a);
                d1.add(i).cast::<u64>().write_unaligned(b);
                d2.add(i).cast::<u64>().write_unaligned(c);
                crc0 = _mm_crc32_u64(crc0, a);
                crc1 = _mm_crc32_u64(crc1, b);
                crc2 = _mm_crc32_u64(crc2, c);
                i += 8;
            }
            crc0 = shift(table, crc0) ^ crc1;
            crc0 = shift(table, crc0) ^ crc2;
            *s = s.add(3 * len);
            *d = d.add(3 * len);
            *remaining -= 3 * len;
        }
        crc0
    }

    /// Fused copy and CRC32C with SSE4.2.
    ///
    /// # Safety
    /// `dst` valid for `src.len()` byte writes, not overlapping `src`.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn copy_crc32c_sse42(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        let mut crc0 = u64::from(!crc);
        let mut s = src.as_ptr();
        let mut d = dst;
        let mut rem = src.len();
        crc0 = blocks3(crc0, &mut d, &mut s, &mut rem, LONG, &LONG_T);
        crc0 = blocks3(crc0, &mut d, &mut s, &mut rem, MID, &MID_T);
        crc0 = blocks3(crc0, &mut d, &mut s, &mut rem, SHORT, &SHORT_T);
        while rem >= 8 {
            let a = s.cast::<u64>().read_unaligned();
            d.cast::<u64>().write_unaligned(a);
            crc0 = _mm_crc32_u64(crc0, a);
            s = s.add(8);
            d = d.add(8);
            rem -= 8;
        }
        let mut c = crc0 as u32;
        while rem > 0 {
            let b = s.read();
            d.write(b);
            c = _mm_crc32_u8(c, b);
            s = s.add(1);
            d = d.add(1);
            rem -= 1;
        }
        !c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_vector() {
        // RFC 3720 (iSCSI) test vector: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let mut dst = [0u8; 9];
        assert_eq!(copy_with_crc32c(&mut dst, b"123456789"), 0xE306_9283);
        assert_eq!(&dst, b"123456789");
    }

    #[test]
    fn every_length_around_block_edges() {
        let src: Vec<u8> = (0..40_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut lens: Vec<usize> = (0..300).collect();
        for edge in [192usize, 1536, 12288, 3 * 4096 + 3 * 512 + 3 * 64] {
            lens.extend(edge.saturating_sub(9)..edge + 9);
        }
        lens.push(src.len() - 8);
        for len in lens {
            for off in [0usize, 1, 7] {
                let s = &src[off..off + len];
                let mut dst = vec![0xAAu8; len];
                assert_eq!(
                    copy_with_crc32c(&mut dst, s),
                    crc32c(s),
                    "len {len} off {off}"
                );
                assert_eq!(dst, s);
                let mut dst2 = vec![0u8; len];
                assert_eq!(copy_with_crc32c_portable(0, &mut dst2, s), crc32c(s));
            }
        }
    }

    #[test]
    fn extend_appends() {
        let mut out = b"head".to_vec();
        let c = extend_with_crc32c(crc32c(b"head"), &mut out, b"tail and more");
        assert_eq!(out, b"headtail and more");
        assert_eq!(c, crc32c(b"headtail and more"));
    }

    proptest! {
        #[test]
        fn fused_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..20_000), seed in any::<u32>()) {
            let mut dst = vec![0u8; data.len()];
            prop_assert_eq!(copy_with_crc32c_append(seed, &mut dst, &data), crc32c_append(seed, &data));
            prop_assert_eq!(&dst, &data);
        }

        #[test]
        fn combine_matches_concatenation(a in proptest::collection::vec(any::<u8>(), 0..3000),
                                         b in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let mut ab = a.clone();
            ab.extend_from_slice(&b);
            prop_assert_eq!(crc32c_combine(crc32c(&a), crc32c(&b), b.len() as u64), crc32c(&ab));
        }
    }
}
