//! Datatypes: a type map flattened to byte blocks, with pack and unpack.
//!
//! Every datatype, predefined or derived, is described by the blocks `(offset, length)` of
//! one element (adjacent blocks merged), its size (bytes of data), and its lower bound and
//! extent (the stride between consecutive elements). A type whose one block starts at 0 and
//! spans its whole extent is contiguous and moves with a single copy.

use std::sync::Arc;

/// Arithmetic class of a predefined type, used by reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasicKind {
    Int { bytes: u8, signed: bool },
    Float { bytes: u8 },
    Complex { bytes: u8 },
    Bool { bytes: u8 },
    /// Bytes with no arithmetic (char, byte, packed).
    Opaque,
    /// A value followed by an int index (MINLOC / MAXLOC types).
    Pair { value: &'static BasicKind, index_offset: u8 },
}

/// One contiguous run of bytes inside an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub off: isize,
    pub len: usize,
}

/// A datatype as the engine sees it.
#[derive(Debug, Clone)]
pub struct Datatype {
    pub name: String,
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    pub blocks: Vec<Block>,
    /// Number of basic (predefined) elements in one element, for Get_elements.
    pub basic_count: usize,
    /// Size of the basic element when all basic elements share one type.
    pub basic: Option<(BasicKind, usize)>,
    pub predefined: bool,
    pub committed: bool,
}

/// Shared reference to a datatype; requests keep one so a freed type stays valid until done.
pub type TypeRef = Arc<Datatype>;

impl Datatype {
    /// A predefined type of `size` bytes with extent `extent` whose data is `blocks`.
    pub fn predefined(name: &str, size: usize, extent: usize, kind: BasicKind, blocks: Vec<Block>) -> Datatype {
        let (true_lb, true_ub) = bounds(&blocks).unwrap_or((0, 0));
        Datatype {
            name: name.to_string(),
            size,
            lb: 0,
            extent: extent as isize,
            true_lb,
            true_extent: true_ub - true_lb,
            blocks,
            basic_count: 1,
            basic: Some((kind, size)),
            predefined: true,
            committed: true,
        }
    }

    /// Whether `count` elements occupy one contiguous run starting at the buffer address.
    pub fn is_contiguous(&self) -> bool {
        self.blocks.len() <= 1
            && self.blocks.first().map_or(true, |b| b.off == 0 && b.len as isize == self.extent)
            && self.lb == 0
    }

    /// Bytes of data in `count` elements.
    pub fn packed_size(&self, count: usize) -> usize {
        self.size * count
    }

    /// Copy the data of `count` elements at `src` into `dst` (which holds at least
    /// `packed_size(count)` bytes). Returns bytes written.
    ///
    /// # Safety
    /// `src` must be valid for the type map of `count` elements.
    pub unsafe fn pack(&self, src: *const u8, count: usize, dst: &mut [u8]) -> usize {
        let mut at = 0;
        let mut out = dst.as_mut_ptr();
        for i in 0..count {
            let base = src.offset(i as isize * self.extent);
            for b in &self.blocks {
                std::ptr::copy_nonoverlapping(base.offset(b.off), out, b.len);
                out = out.add(b.len);
                at += b.len;
            }
        }
        at
    }

    /// Scatter packed bytes `src` into up to `count` elements at `dst`; a short `src` fills a
    /// prefix (as a short message does). Returns bytes consumed.
    ///
    /// # Safety
    /// `dst` must be valid for the type map of `count` elements.
    pub unsafe fn unpack(&self, src: &[u8], dst: *mut u8, count: usize) -> usize {
        let mut left = src.len();
        let mut inp = src.as_ptr();
        'outer: for i in 0..count {
            let base = dst.offset(i as isize * self.extent);
            for b in &self.blocks {
                if left == 0 {
                    break 'outer;
                }
                let n = b.len.min(left);
                std::ptr::copy_nonoverlapping(inp, base.offset(b.off), n);
                inp = inp.add(n);
                left -= n;
            }
        }
        src.len() - left
    }

    /// Number of whole basic elements in `bytes` of packed data (Get_elements), or None when
    /// the types inside are mixed and `bytes` ends inside one.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return Some(0);
        }
        match self.basic {
            Some((_, bsize)) if bsize > 0 => (bytes % bsize == 0).then_some(bytes / bsize),
            _ => {
                let whole = bytes / self.size;
                (bytes % self.size == 0).then_some(whole * self.basic_count)
            }
        }
    }
}

/// (lowest offset, highest end) of a set of blocks.
pub fn bounds(blocks: &[Block]) -> Option<(isize, isize)> {
    let lo = blocks.iter().map(|b| b.off).min()?;
    let hi = blocks.iter().map(|b| b.off + b.len as isize).max()?;
    Some((lo, hi))
}

/// Merge adjacent blocks (in order) so regular layouts copy in as few runs as possible.
pub fn merge_blocks(blocks: impl IntoIterator<Item = Block>) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    for b in blocks {
        if b.len == 0 {
            continue;
        }
        match out.last_mut() {
            Some(l) if l.off + l.len as isize == b.off => l.len += b.len,
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pack_unpack_strided() {
        // three ints every other int: a vector(3, 1, 2) of 4-byte elements, extent 20
        let t = Datatype {
            blocks: vec![Block { off: 0, len: 4 }, Block { off: 8, len: 4 }, Block { off: 16, len: 4 }],
            size: 12,
            extent: 20,
            ..Datatype::predefined("v", 4, 4, BasicKind::Opaque, vec![])
        };
        let src: Vec<u8> = (0..40).collect();
        let mut packed = vec![0u8; 24];
        let n = unsafe { t.pack(src.as_ptr(), 2, &mut packed) };
        assert_eq!(n, 24);
        assert_eq!(&packed[..12], &[0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]);
        assert_eq!(&packed[12..16], &[20, 21, 22, 23]);
        let mut back = vec![0u8; 40];
        let m = unsafe { t.unpack(&packed[..14], back.as_mut_ptr(), 2) };
        assert_eq!(m, 14);
        assert_eq!(&back[20..22], &[20, 21]);
        assert_eq!(back[22], 0);
        assert!(!t.is_contiguous());
    }
    #[test]
    fn merge() {
        let m = merge_blocks([Block { off: 0, len: 4 }, Block { off: 4, len: 4 }, Block { off: 12, len: 1 }]);
        assert_eq!(m, vec![Block { off: 0, len: 8 }, Block { off: 12, len: 1 }]);
    }
}
