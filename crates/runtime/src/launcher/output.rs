//! Line-by-line forwarding of the ranks' stdout and stderr.
//!
//! Each rank stream keeps its partial last line until the newline arrives, so two ranks'
//! output never mixes inside a line. With `--tag-output` every line is prefixed with
//! `[1,R]<stdout>: ` or `[1,R]<stderr>: ` (Open MPI's format; the 1 is the job number).

use std::io::{self, Write};

/// A line longer than this is forwarded in pieces to bound memory. The bytes are passed on
/// unchanged (no newline is added, the tag only starts the line); only another rank's
/// output arriving while such a line is unfinished starts on a new line.
pub const MAX_LINE: usize = 64 * 1024;

/// Which of a rank's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl StreamKind {
    fn name(self) -> &'static str {
        match self {
            StreamKind::Stdout => "stdout",
            StreamKind::Stderr => "stderr",
        }
    }
}

/// Collects one rank stream's bytes and cuts them into complete lines.
#[derive(Debug)]
pub struct LineBuffer {
    partial: Vec<u8>,
    tag: Option<Vec<u8>>,
    /// The start of the current line was already forwarded (a line over [`MAX_LINE`]).
    continuing: bool,
}

impl LineBuffer {
    /// A buffer for `rank`'s `kind` stream, tagging lines if `tag` is set.
    pub fn new(rank: u32, kind: StreamKind, tag: bool) -> Self {
        LineBuffer {
            partial: Vec::new(),
            tag: tag.then(|| format!("[1,{rank}]<{}>: ", kind.name()).into_bytes()),
            continuing: false,
        }
    }

    /// Adds `data` and appends every line it completes (newline included, tagged if
    /// requested) to `out`.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        while let Some(nl) = data.iter().position(|b| *b == b'\n') {
            let (line, rest) = data.split_at(nl + 1);
            self.partial.extend_from_slice(line);
            self.emit(out);
            data = rest;
        }
        self.partial.extend_from_slice(data);
        while self.partial.len() >= MAX_LINE {
            let rest = self.partial.split_off(MAX_LINE);
            self.emit(out);
            self.partial = rest;
        }
    }

    /// Appends the unterminated last line, if any, to `out` without adding a newline.
    /// Returns true if something was flushed.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> bool {
        if self.partial.is_empty() {
            return false;
        }
        self.emit(out);
        true
    }

    fn emit(&mut self, out: &mut Vec<u8>) {
        if let Some(tag) = self.tag.as_ref().filter(|_| !self.continuing) {
            out.extend_from_slice(tag);
        }
        self.continuing = self.partial.last() != Some(&b'\n');
        out.append(&mut self.partial);
    }
}

/// Per rank and stream: where the rank's output stands, in bytes of the output of an
/// uninterrupted run, when a rank's output may come from several processes in turn (one
/// restored after a rollback, one started again that re-executes): each byte is forwarded
/// once, by whichever process wrote it first.
#[derive(Debug, Default, Clone, Copy)]
pub struct OutPos {
    /// Offset at which the current process's output starts (the cut it was restored from,
    /// 0 for a process that starts from the beginning).
    pub base: u64,
    /// Bytes read from the current process.
    pub read: u64,
    /// Highest offset forwarded so far, by any process of the rank.
    pub forwarded: u64,
}

impl OutPos {
    /// Of `data` just read from the current process, the part not forwarded before.
    pub fn fresh<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        let at = self.base + self.read;
        self.read += data.len() as u64;
        let end = at + data.len() as u64;
        let skip = self.forwarded.saturating_sub(at).min(data.len() as u64) as usize;
        self.forwarded = self.forwarded.max(end);
        &data[skip..]
    }

    /// A new process of the rank starts writing at `base`.
    pub fn restart(&mut self, base: u64) {
        self.base = base;
        self.read = 0;
    }
}

/// The launcher's own stdout or stderr, remembering whether the last write ended in the
/// middle of a line (a rank's unterminated last line), so the next rank's output starts
/// on a fresh line instead of continuing it.
#[derive(Debug)]
pub struct Sink {
    kind: StreamKind,
    mid_line: bool,
    /// Which rank wrote the unfinished line (`None`: the launcher).
    mid_line_from: Option<u32>,
    broken: bool,
}

impl Sink {
    /// A sink writing to the launcher's own `kind` stream.
    pub fn new(kind: StreamKind) -> Self {
        Sink {
            kind,
            mid_line: false,
            mid_line_from: None,
            broken: false,
        }
    }

    /// Writes `bytes` from the launcher itself (whole lines, except possibly a final
    /// partial one).
    pub fn write(&mut self, bytes: &[u8]) {
        self.write_from(None, bytes);
    }

    /// Writes `bytes` from `rank` (`None`: the launcher). A line left unfinished by the
    /// same writer is continued as is; another writer's bytes start on a new line.
    pub fn write_from(&mut self, rank: Option<u32>, bytes: &[u8]) {
        if bytes.is_empty() || self.broken {
            return;
        }
        let mut buf = Vec::with_capacity(bytes.len() + 1);
        if self.mid_line && (self.mid_line_from != rank || rank.is_none()) {
            buf.push(b'\n');
        }
        buf.extend_from_slice(bytes);
        self.mid_line = bytes.last() != Some(&b'\n');
        self.mid_line_from = rank;
        let res = match self.kind {
            StreamKind::Stdout => {
                let mut o = io::stdout().lock();
                o.write_all(&buf).and_then(|()| o.flush())
            }
            StreamKind::Stderr => io::stderr().lock().write_all(&buf),
        };
        if let Err(e) = res {
            // A closed terminal or pipe must not stop the job; drop further output.
            tracing::debug!(error = %e, stream = self.kind.name(), "output sink broken");
            self.broken = true;
        }
    }

    /// Writes a launcher message (one full line) to this sink.
    pub fn message(&mut self, line: &str) {
        let mut b = line.as_bytes().to_vec();
        b.push(b'\n');
        self.write(&b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_and_keeps_partial() {
        let mut lb = LineBuffer::new(3, StreamKind::Stdout, true);
        let mut out = Vec::new();
        lb.push(b"hel", &mut out);
        assert!(out.is_empty());
        lb.push(b"lo\nwor", &mut out);
        assert_eq!(out, b"[1,3]<stdout>: hello\n");
        out.clear();
        lb.push(b"ld\n\nx", &mut out);
        assert_eq!(out, b"[1,3]<stdout>: world\n[1,3]<stdout>: \n");
        out.clear();
        assert!(lb.finish(&mut out));
        assert_eq!(out, b"[1,3]<stdout>: x");
        out.clear();
        assert!(!lb.finish(&mut out));
    }

    #[test]
    fn untagged_passthrough_and_long_lines() {
        let mut lb = LineBuffer::new(0, StreamKind::Stderr, false);
        let mut out = Vec::new();
        lb.push(b"a\nb", &mut out);
        assert_eq!(out, b"a\n");
        out.clear();
        let long = vec![b'z'; MAX_LINE + 10];
        lb.push(&long, &mut out);
        assert_eq!(out.len(), MAX_LINE);
        assert_eq!(out[0], b'b');
    }

    /// Output is forwarded byte for byte: lines far over [`MAX_LINE`] and binary data
    /// come out unchanged, through the buffer and the sink's line tracking.
    #[test]
    fn long_lines_and_binary_data_are_forwarded_unchanged() {
        for tag in [false, true] {
            let mut lb = LineBuffer::new(0, StreamKind::Stdout, tag);
            let data: Vec<u8> = (0..5 * MAX_LINE + 123)
                .map(|i| if i % 200_000 == 199_999 { b'\n' } else { (i * 7 % 251) as u8 | 1 })
                .collect();
            let mut out = Vec::new();
            for chunk in data.chunks(4096 + 17) {
                lb.push(chunk, &mut out);
            }
            lb.finish(&mut out);
            let expect: Vec<u8> = if tag {
                let mut e = Vec::new();
                for line in data.split_inclusive(|b| *b == b'\n') {
                    e.extend_from_slice(b"[1,0]<stdout>: ");
                    e.extend_from_slice(line);
                }
                e
            } else {
                data.clone()
            };
            assert!(out == expect, "tag={tag}: output differs from input");
        }
    }
}
