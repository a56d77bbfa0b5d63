//! Unsigned LEB128 varints and the byte cursor the wire encodings are written and read with.
//!
//! A value takes 7 bits per byte, low bits first, the high bit set on every byte but the
//! last. The [`Reader`] accepts only the canonical form (no overlong encoding, nothing past
//! 64 bits), so a message that decodes re-encodes to the same bytes.

/// Why the [`Reader`] stopped. Each protocol maps this into its own decode error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The input ended in the middle of a field.
    Truncated,
    /// A varint longer than 64 bits, or not minimally encoded.
    Malformed,
}

/// Appends fields to a byte buffer.
#[derive(Debug, Default)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// A writer appending to `buf` (which may already hold bytes).
    pub fn new(buf: Vec<u8>) -> Self {
        Writer(buf)
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }

    /// A varint (1 to 10 bytes).
    #[inline]
    pub fn var(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    /// The buffer written so far.
    pub fn into_inner(self) -> Vec<u8> {
        self.0
    }
}

/// Reads fields from a byte slice, front to back; never panics, whatever the bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, Error> {
        let v = *self.buf.get(self.pos).ok_or(Error::Truncated)?;
        self.pos += 1;
        Ok(v)
    }

    /// A canonical varint.
    pub fn var(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for i in 0..10 {
            let byte = self.u8()?;
            // Reject overflow and non-minimal encodings, so accepted bytes are canonical.
            if (i == 9 && byte > 1) || (i > 0 && byte == 0) {
                return Err(Error::Malformed);
            }
            v |= ((byte & 0x7f) as u64) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut w = Writer::default();
        w.var(v);
        w.into_inner()
    }

    #[test]
    fn known_encodings() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(1_000_000), [0xc0, 0x84, 0x3d]);
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(enc(u64::MAX), max);
    }

    #[test]
    fn round_trip_at_every_width() {
        let mut vals = vec![0u64, u64::MAX];
        for bits in 1..64 {
            let p = 1u64 << bits;
            vals.extend([p - 1, p, p + 1]);
        }
        for v in vals {
            let b = enc(v);
            assert_eq!(
                b.len(),
                (64 - v.leading_zeros() as usize).div_ceil(7).max(1)
            );
            let mut r = Reader::new(&b);
            assert_eq!(r.var(), Ok(v), "{b:?}");
            assert_eq!(r.left(), 0);
        }
    }

    #[test]
    fn rejects_truncated_overlong_and_overflowing() {
        assert_eq!(Reader::new(&[]).u8(), Err(Error::Truncated));
        assert_eq!(Reader::new(&[]).var(), Err(Error::Truncated));
        assert_eq!(Reader::new(&[0x80]).var(), Err(Error::Truncated));
        // Non-minimal: a zero continuation byte.
        assert_eq!(Reader::new(&[0x80, 0x00]).var(), Err(Error::Malformed));
        assert_eq!(
            Reader::new(&[0x81, 0x80, 0x00]).var(),
            Err(Error::Malformed)
        );
        // Past 64 bits: the tenth byte may only be 1.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert_eq!(Reader::new(&b).var(), Err(Error::Malformed));
        // Eleven bytes.
        let b = [0xff; 11];
        assert_eq!(Reader::new(&b).var(), Err(Error::Malformed));
    }

    #[test]
    fn mixed_fields_in_order() {
        let mut w = Writer::new(vec![9]);
        w.u8(7);
        w.var(300);
        w.bytes(&[1, 2]);
        let b = w.into_inner();
        assert_eq!(b, [9, 7, 0xac, 0x02, 1, 2]);
        let mut r = Reader::new(&b);
        assert_eq!(r.u8(), Ok(9));
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.var(), Ok(300));
        assert_eq!(r.left(), 2);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u8(), Ok(2));
        assert_eq!(r.u8(), Err(Error::Truncated));
        assert_eq!(r.left(), 0);
    }
}
