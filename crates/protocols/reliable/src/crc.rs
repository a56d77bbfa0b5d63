//! CRC32C (Castagnoli) checksums, including a fused copy-and-checksum pass.
//!
//! Plain checksums come from the `crc32c` crate. [`copy_with_crc32c`] copies a buffer and
//! checksums it in the same pass: with SSE4.2 it runs three independent `crc32` dependency
//! chains over three thirds of a block (the instruction has a latency of 3 cycles and a
//! throughput of 1 per cycle, so one chain leaves two thirds of the unit idle) and merges
//! them with precomputed "append n zero bytes" operators. Each source word is loaded once,
//! stored to the destination and fed to the CRC unit, so the checksum rides on the copy's
//! memory traffic instead of needing a second pass over the data.
//!
//! On CPUs with AVX-512 and VPCLMULQDQ (Intel Ice Lake and later, AMD Zen 4 and later) both
//! the plain checksum and the fused copy of buffers of [`VPCLMUL_MIN`] bytes or more use
//! carry-less multiplication instead: four 512-bit accumulators fold 256 bytes per step,
//! about twice the `crc32` instruction's rate (which is bound to 8 bytes per cycle), and
//! one accumulator 64 bytes per step below 256 bytes, where a single `crc32` chain is
//! bound by its latency (3 cycles per 8 bytes). The accumulators' final merges are
//! independent multiplications, not a chain of folds. CPUs with VPCLMULQDQ but without
//! AVX-512 (AMD Zen 3, Intel's cores since Alder Lake) run the same kernel on 256-bit
//! registers: four accumulators fold 128 bytes per step; there a plain checksum of 16 KiB
//! or more also runs three `crc32` chains over the buffer's last part beside the folding,
//! since the two use different units (about 1.4 times the folding's rate in cache and 1.65
//! times from memory on Zen 3).
//! Everything is chosen at run time (`is_x86_feature_detected!`), so one binary runs
//! everywhere; the `crc32c` crate (SSE4.2 `crc32`, or a table) covers the rest.

use std::mem::MaybeUninit;

/// CRC-32C polynomial, bit-reflected.
const POLY: u32 = 0x82F6_3B78;

/// CRC32C of `data` (initial value 0, as in iSCSI/ext4).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Continues a CRC32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() >= VPCLMUL_MIN && vpclmul::available() {
            // SAFETY: the CPU has the features (checked above); `null` = no copy.
            return unsafe { vpclmul::fold(crc, std::ptr::null_mut(), data) };
        }
        // Short buffers (message headers, small records) are latency-bound: one chain of
        // 8-byte steps beats the general routine's dispatch and chain set-up.
        if data.len() < SHORT_MAX && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE4.2 (checked above).
            return unsafe { x86::crc32c_short(crc, data) };
        }
    }
    crc32c::crc32c_append(crc, data)
}

/// Below this length [`crc32c_append`] and the fused copy run a single chain of 8-byte steps.
const SHORT_MAX: usize = 256;

/// CRCs of a record made of a 32-bit length word (little-endian) and two parts, `a` then
/// `b` (a header and a payload), copied into `dst` (`a.len() + b.len()` bytes) in the same
/// pass: returns (CRC32C of `word ++ a`, CRC32C of `word ++ a ++ b`). The first lets a
/// receiver trust the header before it checks the payload. Short records take one call with
/// a single 8-byte chain, which is what keeps the checksum cheap for small messages; from
/// [`VPCLMUL_MIN`] payload bytes on, where the CPU has it, the payload is folded with
/// carry-less multiplication (a single chain costs 3 cycles per 8 bytes: 256 bytes took
/// 24 ns to copy and checksum that way, 17 ns folded).
///
/// # Panics
/// If `dst.len() != a.len() + b.len()`.
#[inline]
pub fn copy_record_with_crc32c(word: u32, dst: &mut [u8], a: &[u8], b: &[u8]) -> (u32, u32) {
    assert_eq!(dst.len(), a.len() + b.len(), "copy_record_with_crc32c: length mismatch");
    #[cfg(target_arch = "x86_64")]
    {
        if b.len() >= VPCLMUL_MIN && vpclmul::available() {
            // The header in one short chain, the payload folded (with its copy).
            // SAFETY: the CPU has the features; `dst` holds both parts, no overlap.
            unsafe {
                let head = x86::copy_crc32c_short(x86::crc32c_u32(0, word), dst.as_mut_ptr(), a);
                return (head, copy_raw(head, dst.as_mut_ptr().add(a.len()), b));
            }
        }
        if dst.len() < SHORT_MAX && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 checked; `dst` holds both parts and cannot overlap the sources.
            return unsafe { x86::copy_record_short(word, dst.as_mut_ptr(), a, b) };
        }
    }
    let (da, db) = dst.split_at_mut(a.len());
    let crc = crc32c_append_u32(0, word);
    let head = copy_with_crc32c_append(crc, da, a);
    (head, copy_with_crc32c_append(head, db, b))
}

/// Whether [`copy_record_with_crc32c_streaming`] streams on this CPU (it needs the folding
/// kernels, AVX2 or AVX-512 with VPCLMULQDQ); elsewhere it is [`copy_record_with_crc32c`].
pub fn streaming_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        vpclmul::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// [`copy_record_with_crc32c`] writing the payload with non-temporal stores, which
/// bypass the caches: no line of `dst` is read for ownership first, none stays in this
/// CPU's cache after. For a large record that another CPU reads next, this trades the
/// line transfers between the two CPUs' caches for a write to and a read from memory;
/// which is faster depends on the machine at the time (the shm path measures it). The
/// stores are complete (`sfence`) before it returns.
///
/// # Panics
/// If `dst.len() != a.len() + b.len()`.
pub fn copy_record_with_crc32c_streaming(word: u32, dst: &mut [u8], a: &[u8], b: &[u8]) -> (u32, u32) {
    assert_eq!(dst.len(), a.len() + b.len(), "copy_record_with_crc32c: length mismatch");
    #[cfg(target_arch = "x86_64")]
    {
        if b.len() >= ALIGN_MIN && vpclmul::available() {
            // SAFETY: the CPU has the features; `dst` holds both parts, no overlap.
            unsafe {
                let head = x86::copy_crc32c_short(x86::crc32c_u32(0, word), dst.as_mut_ptr(), a);
                return (head, copy_line_aligned::<true>(head, dst.as_mut_ptr().add(a.len()), b));
            }
        }
    }
    copy_record_with_crc32c(word, dst, a, b)
}

/// CRC32C of a record as [`copy_record_with_crc32c`] computes it, without copying.
#[inline]
pub fn record_crc32c(word: u32, a: &[u8], b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if b.len() >= VPCLMUL_MIN && vpclmul::available() {
            // SAFETY: the CPU has the features; a null destination means no copy.
            unsafe {
                let head = x86::crc32c_short(x86::crc32c_u32(0, word), a);
                return vpclmul::fold(head, std::ptr::null_mut(), b);
            }
        }
        if a.len() + b.len() < SHORT_MAX && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 checked; a null destination means no copy.
            return unsafe { x86::copy_record_short(word, std::ptr::null_mut(), a, b) }.1;
        }
    }
    crc32c_append(crc32c_append(crc32c_append_u32(0, word), a), b)
}

/// CRC32C of `a` followed by `b` (what `crc32c_append(crc32c(a), b)` gives), with one CPU
/// check and one short chain when both are small: a frame's header and its few data bytes.
#[inline]
pub fn crc32c_parts(a: &[u8], b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if a.len() + b.len() < SHORT_MAX && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 checked above.
            return unsafe { x86::crc32c_short(x86::crc32c_short(0, a), b) };
        }
    }
    crc32c_append(crc32c(a), b)
}

/// Continues a CRC32C over the 4 little-endian bytes of `v` (a length word in a header).
#[inline]
pub fn crc32c_append_u32(crc: u32, v: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE4.2 (checked above).
            return unsafe { x86::crc32c_u32(crc, v) };
        }
    }
    crc32c::crc32c_append(crc, &v.to_le_bytes())
}

/// Buffers at least this long use the carry-less-multiply kernel where the CPU has one;
/// below it the set-up and the final reduction cost more than they save.
pub const VPCLMUL_MIN: usize = 128;

/// The fused copy aligns its destination to a cache line before the folding kernel from
/// this length on; below it the few straddling stores cost less than the short chain
/// that would align them (up to 63 bytes at 3 cycles per 8).
const ALIGN_MIN: usize = 512;

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
        match vpclmul::level() {
            vpclmul::Level::Zmm => return "avx512 vpclmulqdq folding (sse4.2 crc32 below 128 B)",
            vpclmul::Level::Ymm => return "avx2 vpclmulqdq folding (sse4.2 crc32 below 128 B)",
            vpclmul::Level::None => {}
        }
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
        if src.len() >= VPCLMUL_MIN && vpclmul::available() {
            if src.len() < ALIGN_MIN {
                return vpclmul::fold(crc, dst, src);
            }
            return copy_line_aligned::<false>(crc, dst, src);
        }
        // `is_x86_feature_detected!` caches its answer in an atomic: cheap per call.
        if std::arch::is_x86_feature_detected!("sse4.2") {
            if src.len() < SHORT_MAX {
                return x86::copy_crc32c_short(crc, dst, src);
            }
            return x86::copy_crc32c_sse42(crc, dst, src);
        }
    }
    copy_raw_portable(crc, dst, src)
}

/// [`copy_raw`] from [`ALIGN_MIN`] bytes on: the first bytes up to a cache-line boundary of
/// `dst` in a short chain, the rest folded, with non-temporal stores when `STREAM`. A
/// 64-byte store that straddles two lines costs about twice one that does not (ring
/// payloads start 48 bytes into their line), and stores, unlike loads, cannot be issued two
/// per cycle; streaming stores must be aligned.
///
/// # Safety
/// As [`copy_raw`]; `src.len() >= ALIGN_MIN` and [`vpclmul::available`].
#[cfg(target_arch = "x86_64")]
unsafe fn copy_line_aligned<const STREAM: bool>(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
    let head = (dst as usize).wrapping_neg() & 63;
    let crc = if head > 0 { x86::copy_crc32c_short(crc, dst, &src[..head]) } else { crc };
    let (dst, src) = (dst.add(head), &src[head..]);
    // At least ALIGN_MIN - 63 bytes remain, past VPCLMUL_MIN (checked below).
    if STREAM {
        vpclmul::fold_streaming(crc, dst, src)
    } else {
        vpclmul::fold(crc, dst, src)
    }
}

const _: () = assert!(ALIGN_MIN - 63 >= VPCLMUL_MIN, "aligned copies must stay long enough for the folding kernel");

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
const fn x8nmodp(n: u64) -> u32 {
    xnmodp(n, 3)
}

/// x^(n * 2^k) modulo the polynomial.
const fn xnmodp(mut n: u64, mut k: usize) -> u32 {
    let mut p: u32 = 1 << 31; // x^0
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
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};

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

    /// CRC32C of a short buffer, one chain of 8-byte steps and a 4/2/1-byte tail.
    ///
    /// # Safety
    /// The CPU must have SSE4.2.
    #[inline]
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn crc32c_short(crc: u32, src: &[u8]) -> u32 {
        let mut c64 = u64::from(!crc);
        let (mut s, mut n) = (src.as_ptr(), src.len());
        while n >= 8 {
            c64 = _mm_crc32_u64(c64, s.cast::<u64>().read_unaligned());
            s = s.add(8);
            n -= 8;
        }
        let mut c = c64 as u32;
        if n >= 4 {
            c = _mm_crc32_u32(c, s.cast::<u32>().read_unaligned());
            s = s.add(4);
            n -= 4;
        }
        if n >= 2 {
            c = _mm_crc32_u16(c, s.cast::<u16>().read_unaligned());
            s = s.add(2);
            n -= 2;
        }
        if n == 1 {
            c = _mm_crc32_u8(c, s.read());
        }
        !c
    }

    /// CRC32C continued over one 32-bit little-endian word.
    ///
    /// # Safety
    /// The CPU must have SSE4.2.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn crc32c_u32(crc: u32, v: u32) -> u32 {
        !_mm_crc32_u32(!crc, v)
    }

    /// CRC32C of `word ++ a` and of `word ++ a ++ b`, copying `a ++ b` to `dst` unless it
    /// is null.
    ///
    /// # Safety
    /// The CPU must have SSE4.2; a non-null `dst` is valid for `a.len() + b.len()` byte
    /// writes and overlaps neither source.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn copy_record_short(word: u32, dst: *mut u8, a: &[u8], b: &[u8]) -> (u32, u32) {
        let c = !_mm_crc32_u32(!0, word);
        if dst.is_null() {
            let head = crc32c_short(c, a);
            (head, crc32c_short(head, b))
        } else {
            let head = copy_crc32c_short(c, dst, a);
            (head, copy_crc32c_short(head, dst.add(a.len()), b))
        }
    }

    /// Fused copy and CRC32C of a short buffer, one chain of 8-byte steps and at most one
    /// 4-, 2- and 1-byte step for the tail (no byte loop: the compiler would vectorize it,
    /// which costs more set-up than a header and a small payload take).
    ///
    /// # Safety
    /// The CPU must have SSE4.2; `dst` valid for `src.len()` byte writes, not overlapping `src`.
    #[inline]
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn copy_crc32c_short(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        let mut c64 = u64::from(!crc);
        let (mut s, mut d, mut n) = (src.as_ptr(), dst, src.len());
        while n >= 8 {
            let a = s.cast::<u64>().read_unaligned();
            d.cast::<u64>().write_unaligned(a);
            c64 = _mm_crc32_u64(c64, a);
            s = s.add(8);
            d = d.add(8);
            n -= 8;
            // Keeps the loop one pass: without it the compiler splits it into a call to
            // memcpy and a second loop over the source, which for a 40-byte header costs
            // more than the checksum.
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Release);
        }
        let mut c = c64 as u32;
        if n >= 4 {
            let a = s.cast::<u32>().read_unaligned();
            d.cast::<u32>().write_unaligned(a);
            c = _mm_crc32_u32(c, a);
            s = s.add(4);
            d = d.add(4);
            n -= 4;
        }
        if n >= 2 {
            let a = s.cast::<u16>().read_unaligned();
            d.cast::<u16>().write_unaligned(a);
            c = _mm_crc32_u16(c, a);
            s = s.add(2);
            d = d.add(2);
            n -= 2;
        }
        if n == 1 {
            let a = s.read();
            d.write(a);
            c = _mm_crc32_u8(c, a);
        }
        !c
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

/// Folding constant for a distance of `bits` (a multiple of 8): x^bits mod P, bit-reflected
/// and shifted to 33 bits, as the reflected carry-less-multiply fold expects.
#[cfg(target_arch = "x86_64")]
const fn fold_constant(bits: u64) -> i64 {
    ((x8nmodp(bits / 8) as u64) << 1) as i64
}

#[cfg(target_arch = "x86_64")]
mod vpclmul {
    //! CRC32C by folding with VPCLMULQDQ on 512-bit registers.
    //!
    //! A 128-bit lane A followed D bits later by lane B can be replaced by
    //! `A.lo * x^(D+32) + A.hi * x^(D-32) + B` (reflected, mod P) without changing the CRC
    //! of the message; four 512-bit accumulators fold 256 bytes per step. What is left at
    //! the end is 16 bytes whose plain CRC (register started at 0) is the CRC of the
    //! whole buffer, which the `crc32` instruction finishes.
    use super::fold_constant;
    use std::arch::x86_64::*;

    /// Constants that move a 128-bit lane `D` bits forward, as (x^(D+32), x^(D-32)).
    const fn k(d: u64) -> (i64, i64) {
        (fold_constant(d + 32), fold_constant(d - 32))
    }
    const K2048: (i64, i64) = k(2048);
    const K1536: (i64, i64) = k(1536);
    const K1024: (i64, i64) = k(1024);
    const K768: (i64, i64) = k(768);
    const K512: (i64, i64) = k(512);
    const K384: (i64, i64) = k(384);
    const K256: (i64, i64) = k(256);
    const K128: (i64, i64) = k(128);

    /// Whether the CPU runs [`fold`] (cached after the first call).
    #[inline]
    pub(crate) fn available() -> bool {
        level() != Level::None
    }

    /// The widest folding kernel the CPU runs.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(crate) enum Level {
        None,
        /// VPCLMULQDQ on 256-bit registers (AMD Zen 3, Intel Alder Lake and later cores
        /// without AVX-512).
        Ymm,
        /// VPCLMULQDQ on 512-bit registers (AMD Zen 4, Intel Ice Lake and later).
        Zmm,
    }

    /// [`Level`] of this CPU, detected once.
    pub(crate) fn level() -> Level {
        use std::sync::atomic::{AtomicU8, Ordering};
        static STATE: AtomicU8 = AtomicU8::new(0); // 0 unknown, 1 none, 2 ymm, 3 zmm
        match STATE.load(Ordering::Relaxed) {
            3 => Level::Zmm,
            2 => Level::Ymm,
            1 => Level::None,
            _ => {
                let base = std::arch::is_x86_feature_detected!("vpclmulqdq")
                    && std::arch::is_x86_feature_detected!("pclmulqdq")
                    && std::arch::is_x86_feature_detected!("sse4.2");
                let level = if base && std::arch::is_x86_feature_detected!("avx512f") {
                    Level::Zmm
                } else if base && std::arch::is_x86_feature_detected!("avx2") {
                    Level::Ymm
                } else {
                    Level::None
                };
                STATE.store(
                    match level {
                        Level::None => 1,
                        Level::Ymm => 2,
                        Level::Zmm => 3,
                    },
                    Ordering::Relaxed,
                );
                level
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,vpclmulqdq")]
    fn fold512(a: __m512i, b: __m512i, k: __m512i) -> __m512i {
        let lo = _mm512_clmulepi64_epi128(a, k, 0x00);
        let hi = _mm512_clmulepi64_epi128(a, k, 0x11);
        _mm512_ternarylogic_epi64(b, lo, hi, 0x96) // three-way xor
    }

    /// `a` moved forward by the distance of `k` (without adding a lane to it): folds that
    /// do not depend on each other run in parallel and are xor-ed together at the end.
    #[inline]
    #[target_feature(enable = "avx512f,vpclmulqdq")]
    fn shift512(a: __m512i, k: __m512i) -> __m512i {
        let lo = _mm512_clmulepi64_epi128(a, k, 0x00);
        let hi = _mm512_clmulepi64_epi128(a, k, 0x11);
        _mm512_xor_si512(lo, hi)
    }

    #[inline]
    #[target_feature(enable = "pclmulqdq,sse2")]
    fn shift128(a: __m128i, k: __m128i) -> __m128i {
        let lo = _mm_clmulepi64_si128(a, k, 0x00);
        let hi = _mm_clmulepi64_si128(a, k, 0x11);
        _mm_xor_si128(lo, hi)
    }

    #[inline]
    #[target_feature(enable = "pclmulqdq,sse2")]
    fn fold128(a: __m128i, b: __m128i, k: __m128i) -> __m128i {
        let lo = _mm_clmulepi64_si128(a, k, 0x00);
        let hi = _mm_clmulepi64_si128(a, k, 0x11);
        _mm_xor_si128(_mm_xor_si128(b, lo), hi)
    }

    /// Loads 64 bytes at `s + off` and, when `COPY`, stores them at `d + off`; with
    /// `STREAM` as a non-temporal store, which bypasses the caches.
    ///
    /// # Safety
    /// Both ranges valid (`d` only when `COPY`); with `STREAM`, `d + off` 64-byte aligned.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn ld512<const COPY: bool, const STREAM: bool>(s: *const u8, d: *mut u8, off: usize) -> __m512i {
        let v = _mm512_loadu_si512(s.add(off).cast());
        if COPY && STREAM {
            _mm512_stream_si512(d.add(off).cast(), v);
        } else if COPY {
            _mm512_storeu_si512(d.add(off).cast(), v);
        }
        v
    }

    /// CRC32C of `src` continued from `crc`; copies `src` to `dst` as it goes unless
    /// `dst` is null.
    ///
    /// # Safety
    /// [`available`] returned true; `src.len() >= 64`; `dst` null or valid for
    /// `src.len()` byte writes and not overlapping `src`.
    #[inline]
    pub(crate) unsafe fn fold(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        fold_at(level(), crc, dst, src)
    }

    /// [`fold`] with the kernel of `level` (tests run every kernel the CPU has).
    ///
    /// # Safety
    /// As [`fold`], and the CPU runs `level`'s kernel.
    pub(crate) unsafe fn fold_at(level: Level, crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        match (level, dst.is_null()) {
            (Level::Zmm, true) => kernel::<false, false>(crc, dst, src),
            (Level::Zmm, false) => kernel::<true, false>(crc, dst, src),
            (_, true) if src.len() >= HYBRID_MIN => hybrid256(crc, src),
            (_, true) => kernel256::<false, false>(crc, dst, src),
            (_, false) => kernel256::<true, false>(crc, dst, src),
        }
    }

    /// [`fold`] copying with non-temporal stores (followed by `sfence`, so that a later
    /// store that publishes the copy is ordered after it). The stores bypass the caches:
    /// the copy's lines are neither read for ownership nor left in this CPU's cache.
    ///
    /// # Safety
    /// As [`fold`], `dst` not null and 64-byte aligned.
    pub(crate) unsafe fn fold_streaming(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        debug_assert!(dst as usize % 64 == 0);
        let crc = match level() {
            Level::Zmm => kernel::<true, true>(crc, dst, src),
            _ => kernel256::<true, true>(crc, dst, src),
        };
        _mm_sfence();
        crc
    }

    #[inline]
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn kernel<const COPY: bool, const STREAM: bool>(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        debug_assert!(src.len() >= 64);
        let (mut s, mut d, mut rem) = (src.as_ptr(), dst, src.len());
        let wide = |k: (i64, i64)| _mm512_broadcast_i32x4(_mm_set_epi64x(k.1, k.0));
        let k512 = wide(K512);
        let k128 = _mm_set_epi64x(K128.1, K128.0);
        let init = _mm512_zextsi128_si512(_mm_cvtsi32_si128(!crc as i32));
        let mut z;
        if rem >= 256 {
            let k2048 = wide(K2048);
            let mut z0 = _mm512_xor_si512(ld512::<COPY, STREAM>(s, d, 0), init);
            let mut z1 = ld512::<COPY, STREAM>(s, d, 64);
            let mut z2 = ld512::<COPY, STREAM>(s, d, 128);
            let mut z3 = ld512::<COPY, STREAM>(s, d, 192);
            s = s.add(256);
            d = d.wrapping_add(256);
            rem -= 256;
            while rem >= 256 {
                z0 = fold512(z0, ld512::<COPY, STREAM>(s, d, 0), k2048);
                z1 = fold512(z1, ld512::<COPY, STREAM>(s, d, 64), k2048);
                z2 = fold512(z2, ld512::<COPY, STREAM>(s, d, 128), k2048);
                z3 = fold512(z3, ld512::<COPY, STREAM>(s, d, 192), k2048);
                s = s.add(256);
                d = d.wrapping_add(256);
                rem -= 256;
            }
            // The three accumulators move to the fourth's position independently (one
            // multiplication deep instead of three in a row).
            let a = _mm512_xor_si512(shift512(z0, wide(K1536)), shift512(z1, wide(K1024)));
            z = _mm512_ternarylogic_epi64(a, shift512(z2, k512), z3, 0x96);
        } else {
            // 64–255 bytes: one accumulator, 64 bytes per step.
            z = _mm512_xor_si512(ld512::<COPY, STREAM>(s, d, 0), init);
            s = s.add(64);
            d = d.wrapping_add(64);
            rem -= 64;
        }
        while rem >= 64 {
            z = fold512(z, ld512::<COPY, STREAM>(s, d, 0), k512);
            s = s.add(64);
            d = d.wrapping_add(64);
            rem -= 64;
        }
        // The four lanes of `z` to the last one's position, in parallel.
        let (l0, l1) = (_mm512_extracti32x4_epi32(z, 0), _mm512_extracti32x4_epi32(z, 1));
        let (l2, l3) = (_mm512_extracti32x4_epi32(z, 2), _mm512_extracti32x4_epi32(z, 3));
        let a = _mm_xor_si128(shift128(l0, _mm_set_epi64x(K384.1, K384.0)), shift128(l1, _mm_set_epi64x(K256.1, K256.0)));
        let x = _mm_xor_si128(a, fold128(l2, l3, k128));
        finish::<COPY>(x, s, d, rem)
    }

    /// Folds the last whole 16-byte lanes into `x`, which holds the CRC's state 16 bytes
    /// before `s`, and finishes with the `crc32` instruction over at most 15 bytes.
    ///
    /// # Safety
    /// `s` valid for `rem` byte reads, `d` for `rem` byte writes when `COPY`.
    #[inline]
    #[target_feature(enable = "pclmulqdq,sse4.2")]
    unsafe fn finish<const COPY: bool>(mut x: __m128i, mut s: *const u8, mut d: *mut u8, mut rem: usize) -> u32 {
        let k128 = _mm_set_epi64x(K128.1, K128.0);
        while rem >= 16 {
            let v = _mm_loadu_si128(s.cast());
            if COPY {
                _mm_storeu_si128(d.cast(), v);
            }
            x = fold128(x, v, k128);
            s = s.add(16);
            d = d.wrapping_add(16);
            rem -= 16;
        }
        let lo = _mm_cvtsi128_si64(x) as u64;
        let hi = _mm_extract_epi64(x, 1) as u64;
        let mut c = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi);
        // At most 15 bytes left: 8-, 4-, 2- and 1-byte steps, not a byte loop (each step is
        // a `crc32` of 3 cycles' latency, whatever its width).
        if rem >= 8 {
            let v = s.cast::<u64>().read_unaligned();
            if COPY {
                d.cast::<u64>().write_unaligned(v);
            }
            c = _mm_crc32_u64(c, v);
            s = s.add(8);
            d = d.wrapping_add(8);
            rem -= 8;
        }
        let mut c = c as u32;
        if rem >= 4 {
            let v = s.cast::<u32>().read_unaligned();
            if COPY {
                d.cast::<u32>().write_unaligned(v);
            }
            c = _mm_crc32_u32(c, v);
            s = s.add(4);
            d = d.wrapping_add(4);
            rem -= 4;
        }
        if rem >= 2 {
            let v = s.cast::<u16>().read_unaligned();
            if COPY {
                d.cast::<u16>().write_unaligned(v);
            }
            c = _mm_crc32_u16(c, v);
            s = s.add(2);
            d = d.wrapping_add(2);
            rem -= 2;
        }
        if rem == 1 {
            let b = s.read();
            if COPY {
                d.write(b);
            }
            c = _mm_crc32_u8(c, b);
        }
        !c
    }

    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq")]
    fn fold256(a: __m256i, b: __m256i, k: __m256i) -> __m256i {
        let lo = _mm256_clmulepi64_epi128(a, k, 0x00);
        let hi = _mm256_clmulepi64_epi128(a, k, 0x11);
        _mm256_xor_si256(_mm256_xor_si256(b, lo), hi)
    }

    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq")]
    fn shift256(a: __m256i, k: __m256i) -> __m256i {
        let lo = _mm256_clmulepi64_epi128(a, k, 0x00);
        let hi = _mm256_clmulepi64_epi128(a, k, 0x11);
        _mm256_xor_si256(lo, hi)
    }

    /// Loads 32 bytes at `s + off` and, when `COPY`, stores them at `d + off`; with
    /// `STREAM` as a non-temporal store.
    ///
    /// # Safety
    /// Both ranges valid (`d` only when `COPY`); with `STREAM`, `d + off` 32-byte aligned.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn ld256<const COPY: bool, const STREAM: bool>(s: *const u8, d: *mut u8, off: usize) -> __m256i {
        let v = _mm256_loadu_si256(s.add(off).cast());
        if COPY && STREAM {
            _mm256_stream_si256(d.add(off).cast(), v);
        } else if COPY {
            _mm256_storeu_si256(d.add(off).cast(), v);
        }
        v
    }

    /// The same folding on 256-bit registers: four accumulators fold 128 bytes per step.
    /// On a CPU without AVX-512 (AMD Zen 3) the `crc32` instruction's 8 bytes per cycle
    /// bound the checksum of every record and message; this runs at about twice that.
    ///
    /// # Safety
    /// [`level`] is at least [`Level::Ymm`]; `src.len() >= 32`; `dst` as in [`fold`].
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn kernel256<const COPY: bool, const STREAM: bool>(crc: u32, dst: *mut u8, src: &[u8]) -> u32 {
        debug_assert!(src.len() >= 32);
        let (mut s, mut d, mut rem) = (src.as_ptr(), dst, src.len());
        let wide = |k: (i64, i64)| _mm256_broadcastsi128_si256(_mm_set_epi64x(k.1, k.0));
        let k256 = wide(K256);
        let init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(!crc as i32));
        if rem >= 128 {
            let z0 = _mm256_xor_si256(ld256::<COPY, STREAM>(s, d, 0), init);
            let z1 = ld256::<COPY, STREAM>(s, d, 32);
            let z2 = ld256::<COPY, STREAM>(s, d, 64);
            let z3 = ld256::<COPY, STREAM>(s, d, 96);
            return tail256::<COPY, STREAM>([z0, z1, z2, z3], s.add(128), d.wrapping_add(128), rem - 128);
        }
        let mut z = _mm256_xor_si256(ld256::<COPY, STREAM>(s, d, 0), init);
        s = s.add(32);
        d = d.wrapping_add(32);
        rem -= 32;
        while rem >= 32 {
            z = fold256(z, ld256::<COPY, STREAM>(s, d, 0), k256);
            s = s.add(32);
            d = d.wrapping_add(32);
            rem -= 32;
        }
        let x = fold128(_mm256_castsi256_si128(z), _mm256_extracti128_si256(z, 1), _mm_set_epi64x(K128.1, K128.0));
        finish::<COPY>(x, s, d, rem)
    }

    /// The rest of [`kernel256`] from its four accumulators `z`, which hold the state of
    /// the 128 bytes before `s`: whole 128-byte steps, then 32-byte ones, then the finish.
    ///
    /// # Safety
    /// As [`kernel256`], for the `rem` bytes at `s` (and `d`).
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn tail256<const COPY: bool, const STREAM: bool>(z: [__m256i; 4], mut s: *const u8, mut d: *mut u8, mut rem: usize) -> u32 {
        let wide = |k: (i64, i64)| _mm256_broadcastsi128_si256(_mm_set_epi64x(k.1, k.0));
        let (k256, k1024) = (wide(K256), wide(K1024));
        let [mut z0, mut z1, mut z2, mut z3] = z;
        while rem >= 128 {
            z0 = fold256(z0, ld256::<COPY, STREAM>(s, d, 0), k1024);
            z1 = fold256(z1, ld256::<COPY, STREAM>(s, d, 32), k1024);
            z2 = fold256(z2, ld256::<COPY, STREAM>(s, d, 64), k1024);
            z3 = fold256(z3, ld256::<COPY, STREAM>(s, d, 96), k1024);
            s = s.add(128);
            d = d.wrapping_add(128);
            rem -= 128;
        }
        let a = _mm256_xor_si256(shift256(z0, wide(K768)), shift256(z1, wide(K512)));
        let mut z = _mm256_xor_si256(_mm256_xor_si256(a, shift256(z2, k256)), z3);
        while rem >= 32 {
            z = fold256(z, ld256::<COPY, STREAM>(s, d, 0), k256);
            s = s.add(32);
            d = d.wrapping_add(32);
            rem -= 32;
        }
        let x = fold128(_mm256_castsi256_si128(z), _mm256_extracti128_si256(z, 1), _mm_set_epi64x(K128.1, K128.0));
        finish::<COPY>(x, s, d, rem)
    }

    /// Bytes per step of [`hybrid256`]'s folding part, and of each of its three chains.
    /// Measured on AMD Zen 3 (1 MiB, GB/s): chains of 32 bytes 33.4, 48 35.1, 56 36.9, 64
    /// 37.8, 80 34.3, 96 32.6, against 25.3 for the folding alone.
    const HYBRID_FOLD: usize = 128;
    const HYBRID_CHAIN: usize = 64;

    /// From this length on [`fold_at`] checksums (without a copy) with [`hybrid256`] on a
    /// CPU whose widest kernel is [`kernel256`].
    pub(crate) const HYBRID_MIN: usize = 16 << 10;

    /// [`kernel256`] with three `crc32` chains beside it, for a checksum without a copy.
    /// On AMD Zen 3 a 256-bit VPCLMULQDQ issues every other cycle, so the folding alone
    /// runs at about 8 bytes per cycle, the `crc32` instruction's rate too; the two use
    /// different units. The buffer is cut into a part that is folded and three equal parts
    /// behind it, one `crc32` chain each; every step folds [`HYBRID_FOLD`] bytes and takes
    /// [`HYBRID_CHAIN`] bytes of each chain, and the four CRCs are put together at the end
    /// by multiplying with x^(8 * chain length) (carry-less, one multiplication per chain).
    /// A copy gains nothing from it (24 GB/s with the chains' bytes copied, 25 without the
    /// chains), so copies stay with [`kernel256`].
    ///
    /// # Safety
    /// [`level`] is at least [`Level::Ymm`]; `src.len() >= HYBRID_MIN`.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn hybrid256(crc: u32, src: &[u8]) -> u32 {
        debug_assert!(src.len() >= HYBRID_MIN);
        let n = src.len();
        // The folding part needs its first 128 bytes before the steps start.
        let steps = (n - 128) / (HYBRID_FOLD + 3 * HYBRID_CHAIN);
        let chain = steps * HYBRID_CHAIN;
        let folded = n - 3 * chain;
        let none = std::ptr::null_mut();
        let mut s = src.as_ptr();
        let wide = |k: (i64, i64)| _mm256_broadcastsi128_si256(_mm_set_epi64x(k.1, k.0));
        let k1024 = wide(K1024);
        let init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(!crc as i32));
        let mut z0 = _mm256_xor_si256(ld256::<false, false>(s, none, 0), init);
        let mut z1 = ld256::<false, false>(s, none, 32);
        let mut z2 = ld256::<false, false>(s, none, 64);
        let mut z3 = ld256::<false, false>(s, none, 96);
        s = s.add(128);
        let c0 = src.as_ptr().add(folded);
        let (c1, c2) = (c0.add(chain), c0.add(2 * chain));
        let (mut r0, mut r1, mut r2) = (u64::from(u32::MAX), u64::from(u32::MAX), u64::from(u32::MAX));
        let mut off = 0usize;
        for _ in 0..steps {
            let mut i = 0;
            while i < HYBRID_FOLD {
                z0 = fold256(z0, ld256::<false, false>(s, none, i), k1024);
                z1 = fold256(z1, ld256::<false, false>(s, none, i + 32), k1024);
                z2 = fold256(z2, ld256::<false, false>(s, none, i + 64), k1024);
                z3 = fold256(z3, ld256::<false, false>(s, none, i + 96), k1024);
                i += 128;
            }
            s = s.add(HYBRID_FOLD);
            let end = off + HYBRID_CHAIN;
            while off < end {
                r0 = _mm_crc32_u64(r0, c0.add(off).cast::<u64>().read_unaligned());
                r1 = _mm_crc32_u64(r1, c1.add(off).cast::<u64>().read_unaligned());
                r2 = _mm_crc32_u64(r2, c2.add(off).cast::<u64>().read_unaligned());
                off += 8;
            }
        }
        let head = tail256::<false, false>([z0, z1, z2, z3], s, none, folded - 128 - steps * HYBRID_FOLD);
        // crc(A ++ B) = crc(A) * x^(8 |B|) + crc(B) for standard CRCs (register started at
        // all ones, result inverted), the chains' CRCs of their own bytes.
        let k = super::shift_constant(chain);
        let shift = |c: u32| _mm_crc32_u64(0, _mm_cvtsi128_si64(_mm_clmulepi64_si128(_mm_cvtsi32_si128(c as i32), _mm_cvtsi32_si128(k as i32), 0)) as u64) as u32;
        let c = shift(head) ^ !(r0 as u32);
        let c = shift(c) ^ !(r1 as u32);
        shift(c) ^ !(r2 as u32)
    }
}

/// x^(8 * n - 33) modulo the polynomial for `n >= 64`: a 32-bit CRC `c` carry-less
/// multiplied by it and reduced by the `crc32` instruction (which multiplies by x^32 and
/// takes one more power from the reflected product) is `c * x^(8 n)`, `c` moved past `n`
/// zero bytes. Built from `X2N` with the same multiplication, about 20 ns.
#[cfg(target_arch = "x86_64")]
fn shift_constant(n: usize) -> u32 {
    use std::arch::x86_64::{_mm_clmulepi64_si128, _mm_crc32_u64, _mm_cvtsi128_si64, _mm_cvtsi32_si128};
    /// x^(2^k - 33) for k >= 6: multiplying by it this way multiplies by x^(2^k).
    const STEP: [u32; 64] = {
        let mut t = [0u32; 64];
        let mut k = 6;
        while k < 64 {
            t[k] = xnmodp((1u64 << k) - 33, 0);
            k += 1;
        }
        t
    };
    debug_assert!(n >= 64);
    // 8 n - 33 = 479 + 8 (n - 64), the second a multiple of 64: its bits are all from 6 on.
    let mut p = xnmodp(479, 0);
    let mut m = 8 * (n as u64 - 64);
    let mut k = 0;
    while m != 0 {
        if m & 1 != 0 {
            // SAFETY: callers run on CPUs with PCLMULQDQ and SSE4.2 (the folding kernels').
            p = unsafe { _mm_crc32_u64(0, _mm_cvtsi128_si64(_mm_clmulepi64_si128(_mm_cvtsi32_si128(p as i32), _mm_cvtsi32_si128(STEP[k] as i32), 0)) as u64) as u32 };
        }
        m >>= 1;
        k += 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn two_parts_are_the_crc_of_both() {
        let bytes: Vec<u8> = (0..600u32).map(|i| (i * 37 + 11) as u8).collect();
        for (a, b) in [(0, 0), (20, 0), (20, 8), (20, 1), (3, 5), (20, 235), (20, 236), (20, 500), (100, 300)] {
            let (x, y) = (&bytes[..a], &bytes[a..a + b]);
            assert_eq!(crc32c_parts(x, y), crc32c_append(crc32c(x), y), "{a} + {b}");
            assert_eq!(crc32c_parts(x, y), crc32c(&bytes[..a + b]), "{a} + {b}");
        }
    }

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
        for edge in [192usize, 256, 512, 1536, 12288, 3 * 4096 + 3 * 512 + 3 * 64] {
            lens.extend(edge.saturating_sub(9)..edge + 9);
        }
        lens.push(src.len() - 8);
        for len in lens {
            for off in [0usize, 1, 7] {
                let s = &src[off..off + len];
                let mut dst = vec![0xAAu8; len];
                // The `crc32c` crate is the reference: `crc32c` here may use the same
                // folding kernel as the fused copy.
                let want = crc32c::crc32c(s);
                assert_eq!(copy_with_crc32c(&mut dst, s), want, "len {len} off {off}");
                assert_eq!(dst, s);
                assert_eq!(crc32c(s), want, "len {len} off {off}");
                assert_eq!(crc32c_append(0x1234_5678, s), crc32c::crc32c_append(0x1234_5678, s));
                let mut dst2 = vec![0u8; len];
                assert_eq!(copy_with_crc32c_portable(0, &mut dst2, s), want);
            }
        }
    }

    /// Every position of the destination within a cache line (the fused copy aligns the
    /// destination before its vector loop), around the sizes where the vector loop starts.
    #[test]
    fn every_destination_alignment() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(40_503) >> 7) as u8).collect();
        let mut big = vec![0u8; 5000 + 128];
        for len in [127usize, 128, 129, 200, 255, 256, 257, 511, 512, 513, 575, 576, 577, 640, 1023, 4990] {
            for dst_off in 0..64 {
                let base = (64 - big.as_ptr() as usize % 64) % 64;
                let d = &mut big[base + dst_off..base + dst_off + len];
                d.fill(0x55);
                let s = &src[3..3 + len];
                assert_eq!(copy_with_crc32c_append(0x0bad_cafe, d, s), crc32c::crc32c_append(0x0bad_cafe, s), "len {len} dst +{dst_off}");
                assert_eq!(&*d, s, "len {len} dst +{dst_off}");
            }
        }
    }

    /// Each folding kernel this CPU runs (not only the widest, which the tests above use),
    /// copying and not, at the lengths where its loops change.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_folding_kernel_matches_reference() {
        use vpclmul::Level;
        let src: Vec<u8> = (0..3000u32).map(|i| (i.wrapping_mul(2_246_822_519) >> 11) as u8).collect();
        let mut levels = Vec::new();
        if vpclmul::level() != Level::None {
            levels.push(Level::Ymm);
        }
        if vpclmul::level() == Level::Zmm {
            levels.push(Level::Zmm);
        }
        for level in levels {
            let min = if level == Level::Zmm { 64 } else { 32 };
            for len in (min..300).chain([511, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 2999]) {
                let s = &src[1..1 + len];
                let want = crc32c::crc32c_append(0x0bad_cafe, s);
                let mut dst = vec![0u8; len];
                // SAFETY: the CPU runs `level` (checked above); `dst` holds `len` bytes.
                unsafe {
                    assert_eq!(vpclmul::fold_at(level, 0x0bad_cafe, std::ptr::null_mut(), s), want, "{level:?} len {len}");
                    assert_eq!(vpclmul::fold_at(level, 0x0bad_cafe, dst.as_mut_ptr(), s), want, "{level:?} copy len {len}");
                }
                assert_eq!(dst, s, "{level:?} len {len}");
            }
        }
    }

    /// The folding kernel with three `crc32` chains beside it, around the lengths where it
    /// starts and where its steps and chains change, from every source alignment of a cache
    /// line (and the copying kernel at the same lengths).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn hybrid_kernel_matches_reference() {
        if vpclmul::level() == vpclmul::Level::None {
            return;
        }
        let min = vpclmul::HYBRID_MIN;
        let src: Vec<u8> = (0..3 * min as u32 + 200).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let lens = (min..min + 700).chain([min + 4095, 2 * min - 1, 2 * min + 333, 3 * min]);
        for (i, len) in lens.enumerate() {
            let s = &src[i % 64..i % 64 + len];
            let want = crc32c::crc32c_append(0x1234_5678, s);
            let mut dst = vec![0u8; len];
            // SAFETY: the CPU has the Ymm kernel (checked above); `dst` holds `len` bytes.
            unsafe {
                assert_eq!(vpclmul::fold_at(vpclmul::Level::Ymm, 0x1234_5678, std::ptr::null_mut(), s), want, "len {len}");
                assert_eq!(vpclmul::fold_at(vpclmul::Level::Ymm, 0x1234_5678, dst.as_mut_ptr(), s), want, "copy len {len}");
            }
            assert_eq!(dst, s, "len {len}");
        }
    }

    /// The carry-less shift by n bytes against the bit-serial multiplication.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn shift_constant_moves_a_crc_past_zero_bytes() {
        use std::arch::x86_64::{_mm_clmulepi64_si128, _mm_crc32_u64, _mm_cvtsi128_si64, _mm_cvtsi32_si128};
        if !(std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("sse4.2")) {
            return;
        }
        for n in (64..2000).step_by(8).chain([4096, 65_536, 1 << 20, (1 << 30) + 8]) {
            let k = shift_constant(n);
            for c in [1u32, 0x8000_0000, 0xdead_beef, 0x0bad_cafe] {
                // SAFETY: the CPU has both (checked above).
                let got = unsafe { _mm_crc32_u64(0, _mm_cvtsi128_si64(_mm_clmulepi64_si128(_mm_cvtsi32_si128(c as i32), _mm_cvtsi32_si128(k as i32), 0)) as u64) as u32 };
                assert_eq!(got, multmodp(x8nmodp(n as u64), c), "n {n} c {c:#x}");
            }
        }
    }

    /// The folding constants against the published CRC32C (iSCSI) values (Intel ISA-L,
    /// `crc32_iscsi_by16_10`).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn fold_constants() {
        assert_eq!(fold_constant(2048 + 32), 0xdcb1_7aa4);
        assert_eq!(fold_constant(2048 - 32), 0xb9e0_2b86);
        assert_eq!(fold_constant(512 + 32), 0x740e_ef02);
        assert_eq!(fold_constant(512 - 32), 0x9e4a_ddf8);
        assert_eq!(fold_constant(128 + 32), 0xf20c_0dfe);
        assert_eq!(fold_constant(128 - 32), 0x1_4cd0_0bd6);
    }

    #[test]
    fn record_checksums_match_reference() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for (la, lb) in [(0, 0), (40, 0), (40, 1), (40, 7), (40, 127), (40, 128), (40, 129), (40, 200), (13, 5), (40, 300), (300, 300), (40, 2048), (40, 4095)] {
            let (a, b) = (&data[..la], &data[la..la + lb]);
            let mut whole = 0x1234u32.to_le_bytes().to_vec();
            whole.extend_from_slice(a);
            whole.extend_from_slice(b);
            let want = crc32c::crc32c(&whole);
            let mut dst = vec![0u8; la + lb];
            let mut head_bytes = 0x1234u32.to_le_bytes().to_vec();
            head_bytes.extend_from_slice(a);
            assert_eq!(copy_record_with_crc32c(0x1234, &mut dst, a, b), (crc32c::crc32c(&head_bytes), want), "{la}+{lb}");
            assert_eq!(&dst[..la], a);
            assert_eq!(&dst[la..], b);
            assert_eq!(record_crc32c(0x1234, a, b), want, "{la}+{lb}");
        }
    }

    #[test]
    fn streaming_records_match_the_cached_copy() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i * 131 + 17) as u8).collect();
        // Destination offsets inside a line (ring payloads start 48 bytes into theirs),
        // payloads below and above the aligning threshold, odd tails.
        for off in [0usize, 1, 16, 48, 63] {
            for (la, lb) in [(40, 0), (40, 100), (40, 511), (40, 512), (40, 575), (40, 4096), (40, 65_536 + 13), (7, 69_000)] {
                let (a, b) = (&data[..la], &data[la..la + lb]);
                let mut want_dst = vec![0u8; la + lb];
                let want = copy_record_with_crc32c(0xbeef, &mut want_dst, a, b);
                let mut buf = vec![0u8; la + lb + 64 + off];
                let dst = &mut buf[off..off + la + lb];
                assert_eq!(copy_record_with_crc32c_streaming(0xbeef, dst, a, b), want, "{off}: {la}+{lb}");
                assert!(dst == &want_dst[..], "{off}: {la}+{lb}");
            }
        }
    }

    #[test]
    fn u32_word_matches_bytes() {
        for (seed, v) in [(0u32, 0u32), (0, 1), (0xdead_beef, 0x0102_0304), (u32::MAX, u32::MAX)] {
            assert_eq!(crc32c_append_u32(seed, v), crc32c::crc32c_append(seed, &v.to_le_bytes()));
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
            let want = crc32c::crc32c_append(seed, &data);
            prop_assert_eq!(copy_with_crc32c_append(seed, &mut dst, &data), want);
            prop_assert_eq!(&dst, &data);
            prop_assert_eq!(crc32c_append(seed, &data), want);
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
