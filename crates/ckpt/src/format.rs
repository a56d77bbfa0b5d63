//! The image file format (version 1). All integers little-endian.
//!
//! ```text
//! offset 0     header, 256 bytes
//!   0  magic "STFDCKPT"          8  version u32         12 nregions u32
//!   16 strings_len u32           20 flags u32 (0)
//!   24 start_brk u64             32 brk u64 (program break at the checkpoint)
//!   40 data_offset u64           48 total_len u64 (file length)
//!   56 tid_offset u64 (offset of the cached thread id from the thread pointer, or all ones)
//!   64 context, 80 bytes (rbx rbp r12 r13 r14 r15 rsp rip fsbase u64; mxcsr u32; fpucw u16)
//!   144..248 zero
//!   248 header_crc u32: CRC-32C of bytes 0..248, the region table and the strings
//! offset 256   region table: nregions entries of 80 bytes, in address order
//!   0 start u64  8 end u64  16 map_offset u64 (file offset of the mapping)  24 inode u64
//!   32 data_offset u64  40 data_len u64 (0 or end-start)
//!   48 prot u32 (PROT_* bits)  52 kind u32  56 flags u32  60 path_off u32  64 path_len u32
//!   68 data_crc u32 (CRC-32C of the region's bytes)  72..80 zero
//! then         strings: the paths or [names] of the mappings (not NUL-terminated)
//! data_offset  region bytes, each region at a page-aligned offset
//! ```
//!
//! Parsing checks every length, offset and checksum before anything is used (the image comes
//! from outside the process).

use crate::arch::{Context, CONTEXT_LEN};

/// First bytes of every image.
pub const MAGIC: [u8; 8] = *b"STFDCKPT";
/// Format version written by this library.
pub const VERSION: u32 = 1;
/// Fixed header size.
pub const HEADER_LEN: usize = 256;
/// Size of one region table entry.
pub const ENTRY_LEN: usize = 80;
/// Region data is aligned to this in the file.
pub const PAGE: u64 = 4096;
const CRC_AT: usize = 248;
/// Upper bound on regions (a process has at most `vm.max_map_count`, 65530 by default).
pub const MAX_REGIONS: u32 = 1 << 20;

/// What a region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// Anonymous memory (or a `[name]` the kernel does not own).
    Anon = 0,
    /// A mapping of a file.
    File = 1,
    /// The program break area, `[heap]`.
    Heap = 2,
    /// The main thread's stack, `[stack]`.
    Stack = 3,
    /// `[vdso]`, `[vvar]`, `[vsyscall]`: recorded to check the layout, never restored.
    Special = 4,
}

impl Kind {
    fn from_u32(v: u32) -> Option<Kind> {
        Some(match v {
            0 => Kind::Anon,
            1 => Kind::File,
            2 => Kind::Heap,
            3 => Kind::Stack,
            4 => Kind::Special,
            _ => return None,
        })
    }
}

/// Region flag: a `MAP_SHARED` mapping.
pub const FLAG_SHARED: u32 = 1;
/// Region flag: the image holds the region's bytes.
pub const FLAG_DATA: u32 = 2;
/// Region flag: the mapped file was deleted.
pub const FLAG_DELETED: u32 = 4;

/// One region table entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub start: u64,
    pub end: u64,
    pub map_offset: u64,
    pub inode: u64,
    pub data_offset: u64,
    pub data_len: u64,
    pub prot: u32,
    pub kind: u32,
    pub flags: u32,
    pub path_off: u32,
    pub path_len: u32,
    pub data_crc: u32,
}

impl Entry {
    /// Encodes into exactly [`ENTRY_LEN`] bytes.
    pub fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..ENTRY_LEN];
        out.fill(0);
        for (i, w) in [self.start, self.end, self.map_offset, self.inode, self.data_offset, self.data_len]
            .iter()
            .enumerate()
        {
            out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        for (i, w) in [self.prot, self.kind, self.flags, self.path_off, self.path_len, self.data_crc]
            .iter()
            .enumerate()
        {
            out[48 + i * 4..52 + i * 4].copy_from_slice(&w.to_le_bytes());
        }
    }

    fn decode(b: &[u8]) -> Entry {
        Entry {
            start: u64_at(b, 0),
            end: u64_at(b, 8),
            map_offset: u64_at(b, 16),
            inode: u64_at(b, 24),
            data_offset: u64_at(b, 32),
            data_len: u64_at(b, 40),
            prot: u32_at(b, 48),
            kind: u32_at(b, 52),
            flags: u32_at(b, 56),
            path_off: u32_at(b, 60),
            path_len: u32_at(b, 64),
            data_crc: u32_at(b, 68),
        }
    }

    /// The region's kind (checked at parse time).
    pub fn kind(&self) -> Kind {
        Kind::from_u32(self.kind).unwrap_or(Kind::Anon)
    }

    /// The image holds the region's bytes.
    pub fn has_data(&self) -> bool {
        self.flags & FLAG_DATA != 0
    }

    /// Length of the region in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// True for an empty range (never produced; present for clippy's sake).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The fixed header fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub nregions: u32,
    pub strings_len: u32,
    pub start_brk: u64,
    pub brk: u64,
    pub data_offset: u64,
    pub total_len: u64,
    pub tid_offset: u64,
    pub ctx: Context,
}

/// Value of `tid_offset` when the thread id could not be located.
pub const NO_TID_OFFSET: u64 = u64::MAX;

impl Header {
    /// Length of header, table and strings (where `data_offset` may start at the earliest).
    pub fn meta_len(&self) -> u64 {
        HEADER_LEN as u64 + self.nregions as u64 * ENTRY_LEN as u64 + self.strings_len as u64
    }

    /// Encodes the header into `meta[..HEADER_LEN]` and stores the checksum over `meta`
    /// (header, table and strings, already encoded in place).
    pub fn encode_and_seal(&self, meta: &mut [u8]) {
        let h = &mut meta[..HEADER_LEN];
        h.fill(0);
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.nregions.to_le_bytes());
        h[16..20].copy_from_slice(&self.strings_len.to_le_bytes());
        for (i, w) in [self.start_brk, self.brk, self.data_offset, self.total_len, self.tid_offset]
            .iter()
            .enumerate()
        {
            h[24 + i * 8..32 + i * 8].copy_from_slice(&w.to_le_bytes());
        }
        let mut c = [0u8; CONTEXT_LEN];
        self.ctx.encode(&mut c);
        h[64..64 + CONTEXT_LEN].copy_from_slice(&c);
        let crc = meta_crc(meta);
        meta[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

fn meta_crc(meta: &[u8]) -> u32 {
    let c = crc32c::crc32c(&meta[..CRC_AT]);
    crc32c::crc32c_append(c, &meta[HEADER_LEN..])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Why an image was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("not a Steadfast process image (bad magic)")]
    Magic,
    #[error("image format version {0} is not supported (this library reads version {VERSION})")]
    Version(u32),
    #[error("image is truncated: {0}")]
    Truncated(&'static str),
    #[error("header checksum mismatch (the image is damaged)")]
    HeaderChecksum,
    #[error("region {index} is inconsistent: {why}")]
    Region { index: usize, why: &'static str },
    #[error("header is inconsistent: {0}")]
    Header(&'static str),
}

/// A parsed, checked image description (without the region bytes).
#[derive(Debug, Clone)]
pub struct Meta {
    pub header: Header,
    pub entries: Vec<Entry>,
    pub strings: Vec<u8>,
}

impl Meta {
    /// The path of a file region.
    pub fn path(&self, e: &Entry) -> &[u8] {
        &self.strings[e.path_off as usize..(e.path_off + e.path_len) as usize]
    }
}

/// Reads the fixed header and tells how many bytes header + table + strings take.
pub fn meta_len_from_header(h: &[u8]) -> Result<u64, FormatError> {
    if h.len() < HEADER_LEN {
        return Err(FormatError::Truncated("shorter than the header"));
    }
    if h[0..8] != MAGIC {
        return Err(FormatError::Magic);
    }
    let version = u32_at(h, 8);
    if version != VERSION {
        return Err(FormatError::Version(version));
    }
    let nregions = u32_at(h, 12);
    if nregions > MAX_REGIONS {
        return Err(FormatError::Header("too many regions"));
    }
    Ok(HEADER_LEN as u64 + nregions as u64 * ENTRY_LEN as u64 + u32_at(h, 16) as u64)
}

/// Parses and checks header, table and strings (`meta` holds exactly those bytes);
/// `file_len` is the image file's length.
pub fn parse_meta(meta: &[u8], file_len: u64) -> Result<Meta, FormatError> {
    let want = meta_len_from_header(meta)?;
    if (meta.len() as u64) < want {
        return Err(FormatError::Truncated("region table or strings missing"));
    }
    let meta = &meta[..want as usize];
    if u32_at(meta, CRC_AT) != meta_crc(meta) {
        return Err(FormatError::HeaderChecksum);
    }
    let mut c = [0u8; CONTEXT_LEN];
    c.copy_from_slice(&meta[64..64 + CONTEXT_LEN]);
    let header = Header {
        nregions: u32_at(meta, 12),
        strings_len: u32_at(meta, 16),
        start_brk: u64_at(meta, 24),
        brk: u64_at(meta, 32),
        data_offset: u64_at(meta, 40),
        total_len: u64_at(meta, 48),
        tid_offset: u64_at(meta, 56),
        ctx: Context::decode(&c),
    };
    if header.total_len != file_len {
        return Err(FormatError::Truncated("file length differs from the header's"));
    }
    if header.data_offset < want || header.data_offset > header.total_len || header.data_offset % PAGE != 0 {
        return Err(FormatError::Header("data offset out of range"));
    }
    if header.brk < header.start_brk {
        return Err(FormatError::Header("program break below its start"));
    }
    if header.tid_offset != NO_TID_OFFSET && header.tid_offset > 4096 - 4 {
        return Err(FormatError::Header("thread id offset out of range"));
    }
    let strings = meta[HEADER_LEN + header.nregions as usize * ENTRY_LEN..].to_vec();
    let mut entries = Vec::with_capacity(header.nregions as usize);
    let mut prev_end = 0u64;
    for index in 0..header.nregions as usize {
        let at = HEADER_LEN + index * ENTRY_LEN;
        let e = Entry::decode(&meta[at..at + ENTRY_LEN]);
        let bad = |why| Err(FormatError::Region { index, why });
        if e.start >= e.end || e.start % PAGE != 0 || e.end % PAGE != 0 {
            return bad("address range empty or not page-aligned");
        }
        if e.start < prev_end {
            return bad("regions overlap or are out of order");
        }
        prev_end = e.end;
        if Kind::from_u32(e.kind).is_none() {
            return bad("unknown kind");
        }
        if e.prot & !7 != 0 {
            return bad("unknown protection bits");
        }
        if (e.path_off as u64 + e.path_len as u64) > strings.len() as u64 {
            return bad("path outside the strings");
        }
        if e.has_data() {
            if e.data_len != e.len() {
                return bad("data length differs from the region's");
            }
            if e.data_offset < header.data_offset
                || e.data_offset % PAGE != 0
                || e.data_offset.checked_add(e.data_len).map_or(true, |x| x > header.total_len)
            {
                return bad("data outside the file");
            }
        } else if e.data_len != 0 {
            return bad("data length without data");
        }
        entries.push(e);
    }
    Ok(Meta { header, entries, strings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<u8>, u64) {
        let path = b"/usr/lib/libx.so";
        let entries = [
            Entry { start: 0x1000, end: 0x3000, kind: Kind::File as u32, prot: 5, path_off: 0, path_len: path.len() as u32, inode: 7, ..Default::default() },
            Entry { start: 0x3000, end: 0x4000, kind: Kind::Anon as u32, prot: 3, flags: FLAG_DATA, data_offset: 4096, data_len: 0x1000, data_crc: 9, ..Default::default() },
        ];
        let h = Header { nregions: 2, strings_len: path.len() as u32, start_brk: 10, brk: 20, data_offset: 4096, total_len: 8192, tid_offset: 720, ctx: Context { rip: 0x55, fsbase: 0x77, ..Default::default() } };
        let mut meta = vec![0u8; h.meta_len() as usize];
        for (i, e) in entries.iter().enumerate() {
            e.encode(&mut meta[HEADER_LEN + i * ENTRY_LEN..]);
        }
        meta[HEADER_LEN + 2 * ENTRY_LEN..].copy_from_slice(path);
        h.encode_and_seal(&mut meta);
        (meta, 8192)
    }

    #[test]
    fn round_trip() {
        let (meta, len) = sample();
        let m = parse_meta(&meta, len).unwrap();
        assert_eq!(m.entries.len(), 2);
        assert_eq!(m.path(&m.entries[0]), b"/usr/lib/libx.so");
        assert_eq!(m.entries[1].data_crc, 9);
        assert_eq!(m.header.ctx.rip, 0x55);
        assert_eq!(m.header.tid_offset, 720);
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let (meta, len) = sample();
        for i in 0..meta.len() {
            if (CRC_AT + 4..HEADER_LEN).contains(&i) {
                continue; // reserved bytes after the checksum are not covered
            }
            let mut m = meta.clone();
            m[i] ^= 0x40;
            assert!(parse_meta(&m, len).is_err(), "flip at byte {i} went unnoticed");
        }
    }

    #[test]
    fn refuses_wrong_length_magic_version() {
        let (meta, len) = sample();
        assert_eq!(parse_meta(&meta, len + 1).unwrap_err(), FormatError::Truncated("file length differs from the header's"));
        assert_eq!(parse_meta(&meta[..100], len).unwrap_err(), FormatError::Truncated("shorter than the header"));
        let mut m = meta.clone();
        m[0] = b'X';
        assert_eq!(parse_meta(&m, len).unwrap_err(), FormatError::Magic);
        let mut m = meta.clone();
        m[8] = 2;
        assert_eq!(parse_meta(&m, len).unwrap_err(), FormatError::Version(2));
        assert!(parse_meta(&meta[..meta.len() - 1], len).is_err());
    }
}

/// Decodes the table entry at byte `at` of an encoded header + table.
pub fn entry_at(meta: &[u8], at: usize) -> Entry {
    Entry::decode(&meta[at..at + ENTRY_LEN])
}
