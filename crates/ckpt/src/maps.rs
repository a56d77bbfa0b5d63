//! Lines of `/proc/self/maps`, parsed without allocating (the checkpoint child must not
//! touch the heap it is saving).

/// One mapping as the kernel lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapLine<'a> {
    pub start: u64,
    pub end: u64,
    /// `PROT_*` bits from `rwx`.
    pub prot: u32,
    /// `p` (private) or `s` (shared).
    pub shared: bool,
    pub offset: u64,
    pub inode: u64,
    /// Path or `[name]`; empty for anonymous memory. A ` (deleted)` suffix is kept.
    pub path: &'a str,
}

impl MapLine<'_> {
    /// `[vdso]`, `[vvar]`, `[vvar_vclock]`, `[vsyscall]`: the kernel places them, they are
    /// the same in every process started the same way, and their contents are not ours.
    pub fn is_kernel_special(&self) -> bool {
        self.path.starts_with("[vdso") || self.path.starts_with("[vvar") || self.path == "[vsyscall]"
    }

    /// A mapping of a file (not anonymous, not a `[name]`).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }

    /// The mapped file was deleted (or replaced) since it was mapped.
    pub fn is_deleted(&self) -> bool {
        self.path.ends_with(" (deleted)")
    }

    /// Same address range, protection, sharing and file position.
    pub fn same_mapping(&self, o: &MapLine<'_>) -> bool {
        self.start == o.start
            && self.end == o.end
            && self.prot == o.prot
            && self.shared == o.shared
            && self.offset == o.offset
            && self.inode == o.inode
            && self.path == o.path
    }
}

/// Parses one line: `start-end perms offset dev inode [path]`.
pub fn parse_line(line: &str) -> Option<MapLine<'_>> {
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let t = rest.trim_start_matches(' ');
        let end = t.find(' ').unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?.as_bytes();
    let offset = u64::from_str_radix(field()?, 16).ok()?;
    let _dev = field()?;
    let inode = field()?.parse::<u64>().ok()?;
    let path = rest.trim_start_matches(' ');
    let (s, e) = range.split_once('-')?;
    let start = u64::from_str_radix(s, 16).ok()?;
    let end = u64::from_str_radix(e, 16).ok()?;
    if perms.len() != 4 || start >= end {
        return None;
    }
    let mut prot = 0;
    if perms[0] == b'r' {
        prot |= libc::PROT_READ as u32;
    }
    if perms[1] == b'w' {
        prot |= libc::PROT_WRITE as u32;
    }
    if perms[2] == b'x' {
        prot |= libc::PROT_EXEC as u32;
    }
    Some(MapLine { start, end, prot, shared: perms[3] == b's', offset, inode, path })
}

/// Every parsable line of a maps text.
pub fn lines(text: &str) -> impl Iterator<Item = MapLine<'_>> {
    text.lines().filter_map(parse_line)
}

/// `start_brk` (field 47) of a `/proc/PID/stat` text: where the program break began.
pub fn stat_start_brk(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let after = std::str::from_utf8(&stat[close + 1..]).ok()?;
    // Field 3 is the first token after the command name; field 47 is the 45th.
    after.split_ascii_whitespace().nth(44)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_anon_and_named_lines() {
        let l = parse_line("7ffff7dd3000-7ffff7df9000 r--p 00000000 08:01 1234   /usr/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        assert_eq!(l.start, 0x7ffff7dd3000);
        assert_eq!(l.end, 0x7ffff7df9000);
        assert_eq!(l.prot, libc::PROT_READ as u32);
        assert!(!l.shared);
        assert_eq!(l.inode, 1234);
        assert!(l.is_file());
        assert_eq!(l.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

        let a = parse_line("7ffff7fc1000-7ffff7fc5000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(a.path, "");
        assert_eq!(a.prot, 3);
        assert!(!a.is_file());

        let h = parse_line("555555559000-55555557a000 rw-p 00000000 00:00 0                          [heap]").unwrap();
        assert_eq!(h.path, "[heap]");
        let v = parse_line("7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]").unwrap();
        assert!(v.is_kernel_special());
        let s = parse_line("7ffff7fc1000-7ffff7fc3000 rw-s 00001000 00:05 77 /dev/shm/x (deleted)").unwrap();
        assert!(s.shared && s.is_deleted());
        assert_eq!(s.offset, 0x1000);
        let sp = parse_line("7f00-7f10 r--p 00000000 08:01 9 /tmp/a b").unwrap();
        assert_eq!(sp.path, "/tmp/a b");
    }

    #[test]
    fn rejects_malformed_lines() {
        assert!(parse_line("").is_none());
        assert!(parse_line("zz-10 r--p 0 0 0").is_none());
        assert!(parse_line("20-10 r--p 00000000 00:00 0").is_none());
        assert!(parse_line("10-20 r--p").is_none());
    }

    #[test]
    fn start_brk_from_stat() {
        let mut s = String::from("123 (a b) c) S");
        for i in 4..=46 {
            s.push_str(&format!(" {i}"));
        }
        s.push_str(" 93824992251904 48 49");
        assert_eq!(stat_start_brk(s.as_bytes()), Some(93824992251904));
        assert_eq!(stat_start_brk(b"1 (x) S 2"), None);
    }
}
