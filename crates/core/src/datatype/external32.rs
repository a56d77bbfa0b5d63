//! The external32 data representation (MPI 4.1 section 15.5.2): big-endian, IEEE formats,
//! standard sizes, no padding. Used by MPI_Pack_external / MPI_Unpack_external.

use super::{Datatype, Ext32, Part};

impl Datatype {
    /// Bytes `count` elements take in external32.
    pub fn ext32_packed_size(&self, count: usize) -> Option<usize> {
        self.ext32_size.checked_mul(count)
    }

    /// Write `count` elements at `src` into `dst` in external32; returns bytes written.
    /// `dst` must hold [`Datatype::ext32_packed_size`] bytes (else nothing is written and
    /// None is returned).
    ///
    /// # Safety
    /// `src` must be valid for the type map of `count` elements.
    pub unsafe fn pack_external(&self, src: *const u8, count: usize, dst: &mut [u8]) -> Option<usize> {
        let need = self.ext32_packed_size(count)?;
        if dst.len() < need {
            return None;
        }
        let base = src as usize;
        let mut at = 0usize;
        for i in 0..count {
            self.for_each_part(i as isize * self.extent, &mut |p, off| {
                let n = p.ext32_size();
                let from = base.wrapping_add_signed(off) as *const u8;
                // SAFETY: the caller guarantees the type map is readable; `at + n <= need`.
                let native = std::slice::from_raw_parts(from, p.size);
                encode(p, native, &mut dst[at..at + n]);
                at += n;
            });
        }
        Some(at)
    }

    /// Read `count` elements from external32 bytes `src` into memory at `dst`; returns bytes
    /// consumed, or None (nothing written) when `src` is shorter than `count` elements.
    ///
    /// # Safety
    /// `dst` must be valid for the type map of `count` elements.
    pub unsafe fn unpack_external(&self, src: &[u8], dst: *mut u8, count: usize) -> Option<usize> {
        let need = self.ext32_packed_size(count)?;
        if src.len() < need {
            return None;
        }
        let base = dst as usize;
        let mut at = 0usize;
        for i in 0..count {
            self.for_each_part(i as isize * self.extent, &mut |p, off| {
                let n = p.ext32_size();
                let to = base.wrapping_add_signed(off) as *mut u8;
                // SAFETY: the caller guarantees the type map is writable; `at + n <= need`.
                let native = std::slice::from_raw_parts_mut(to, p.size);
                decode(p, &src[at..at + n], native);
                at += n;
            });
        }
        Some(at)
    }
}

/// Native bytes of one basic element to its external32 bytes (`ext.len() == p.ext32_size()`).
fn encode(p: &Part, native: &[u8], ext: &mut [u8]) {
    match p.ext32 {
        Ext32::Raw => ext.copy_from_slice(native),
        Ext32::Swap { unit } => {
            for (o, i) in ext.chunks_mut(unit.max(1) as usize).zip(native.chunks(unit.max(1) as usize)) {
                o.copy_from_slice(i);
                if cfg!(target_endian = "little") {
                    o.reverse();
                }
            }
        }
        Ext32::Int { signed, .. } => {
            // Big-endian, truncated to the external size (or sign-extended if it is larger).
            let (n, m) = (native.len(), ext.len());
            let negative = signed && n > 0 && native_byte(native, n - 1) & 0x80 != 0;
            let fill = if negative { 0xff } else { 0 };
            for (k, o) in ext.iter_mut().enumerate() {
                let sig = m - 1 - k;
                *o = if sig < n { native_byte(native, sig) } else { fill };
            }
        }
        Ext32::X87 { n } => {
            for j in 0..n as usize {
                let q = x87_to_binary128(&native[16 * j..16 * j + 10]);
                ext[16 * j..16 * j + 16].copy_from_slice(&q.to_be_bytes());
            }
        }
    }
}

/// External32 bytes of one basic element back to native bytes.
fn decode(p: &Part, ext: &[u8], native: &mut [u8]) {
    match p.ext32 {
        Ext32::Raw => native.copy_from_slice(ext),
        Ext32::Swap { unit } => {
            for (o, i) in native.chunks_mut(unit.max(1) as usize).zip(ext.chunks(unit.max(1) as usize)) {
                o.copy_from_slice(i);
                if cfg!(target_endian = "little") {
                    o.reverse();
                }
            }
        }
        Ext32::Int { signed, .. } => {
            let m = ext.len();
            let negative = signed && m > 0 && ext[0] & 0x80 != 0;
            let fill = if negative { 0xff } else { 0 };
            for sig in 0..native.len() {
                // sig-th byte from the least significant end.
                let v = if sig < m { ext[m - 1 - sig] } else { fill };
                set_native_byte(native, sig, v);
            }
        }
        Ext32::X87 { n } => {
            for j in 0..n as usize {
                let mut b = [0u8; 16];
                b.copy_from_slice(&ext[16 * j..16 * j + 16]);
                let x = binary128_to_x87(u128::from_be_bytes(b));
                native[16 * j..16 * j + 10].copy_from_slice(&x);
                native[16 * j + 10..16 * j + 16].fill(0);
            }
        }
    }
}

/// The `sig`-th least significant byte of a native integer.
fn native_byte(native: &[u8], sig: usize) -> u8 {
    if cfg!(target_endian = "little") {
        native[sig]
    } else {
        native[native.len() - 1 - sig]
    }
}

fn set_native_byte(native: &mut [u8], sig: usize, v: u8) {
    let n = native.len();
    if cfg!(target_endian = "little") {
        native[sig] = v;
    } else {
        native[n - 1 - sig] = v;
    }
}

/// x87 80-bit extended (little-endian bytes: 64-bit significand with explicit integer bit,
/// then sign and 15-bit exponent) to IEEE binary128 bits. The exponent bias is the same
/// (16383); the 63 fraction bits become the top of the 112-bit fraction.
fn x87_to_binary128(b: &[u8]) -> u128 {
    let mut m = [0u8; 8];
    m.copy_from_slice(&b[..8]);
    let mant = u64::from_le_bytes(m);
    let se = u16::from_le_bytes([b[8], b[9]]) as u128;
    let frac = (mant & (u64::MAX >> 1)) as u128;
    (se << 112) | (frac << 49)
}

/// IEEE binary128 bits to x87 80-bit extended bytes (the fraction is rounded toward zero
/// to 63 bits; the explicit integer bit is set for every non-zero exponent).
fn binary128_to_x87(q: u128) -> [u8; 10] {
    let se = (q >> 112) as u16;
    let exp = se & 0x7fff;
    let frac = ((q >> 49) as u64) & (u64::MAX >> 1);
    let int_bit = if exp != 0 { 1u64 << 63 } else { 0 };
    let mut out = [0u8; 10];
    out[..8].copy_from_slice(&(int_bit | frac).to_le_bytes());
    out[8..].copy_from_slice(&se.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x87_round_trip_of_exact_values() {
        // 1.0 as x87: significand 0x8000_0000_0000_0000, exponent 0x3fff.
        let one = [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f];
        let q = x87_to_binary128(&one);
        assert_eq!(q, 0x3fff_0000_0000_0000_0000_0000_0000_0000);
        assert_eq!(binary128_to_x87(q), one);
        // -3.5: 1.75 * 2^1, significand 0xe000..., exponent 0x4000 with sign.
        let m35 = [0, 0, 0, 0, 0, 0, 0, 0xe0, 0x00, 0xc0];
        let q = x87_to_binary128(&m35);
        assert_eq!(q >> 112, 0xc000);
        assert_eq!(binary128_to_x87(q), m35);
    }
}
