//! Channel memories (MPICH-V1, `--ft channel-memory`): every message goes to its
//! receiver's channel memory, which stores it, fixes its place in the receiver's stream,
//! and passes it on; a receiver takes its messages only from there, in that order. When a
//! rank starts again, its channel memory sends it its whole stream from the start (or from
//! where an image of it left off), the same messages in the same order, so its re-execution
//! matches them as before; senders keep no log.
//!
//! This is the machine of one channel memory server, which may host the streams of several
//! ranks; the host (`steadfast-runtime`) moves the bytes. Frames are opaque here: the
//! packets of the engine, stored as they came.
//!
//! Release: once the launcher keeps a process image of a rank (it will restore no older
//! one), the rank's current process releases the part of its stream the image holds
//! ([`ChannelMemory::release`]); the server drops those frames, and a later reader may
//! only start at or after the release point. Without images nothing is released.
//!
//! Incarnations: a rank's connection says which process of the rank it is. Once a newer
//! process of a rank has spoken, what an older one still deposits is refused, so in every
//! stream all messages of one process of a sender come before all messages of the next.

use std::collections::{HashMap, VecDeque};

/// A connection of the host (any number it chooses).
pub type ConnId = u64;

/// Why a connection's hello was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("rank {0} is not part of this job")]
    NoSuchRank(u32),
    #[error("rank {rank}: incarnation {incarnation} is older than {newest}, which has spoken")]
    Stale { rank: u32, incarnation: u16, newest: u16 },
    #[error("rank {0}'s stream is not kept by this channel memory")]
    NotHosted(u32),
    #[error("rank {rank} asks for its stream from frame {from}, but the frames before {base} were released (an image past them was kept)")]
    Released { rank: u32, from: u64, base: u64 },
}

#[derive(Debug, Default)]
struct Stream {
    /// (sender, frame), in the order they were stored, from frame `base` on.
    frames: VecDeque<(u32, Vec<u8>)>,
    /// Frames before this one were released.
    base: u64,
    bytes: u64,
    /// The connection of the rank's current process and the number of the next frame it
    /// gets (counted from the stream's start).
    reader: Option<(ConnId, u64)>,
}

impl Stream {
    fn end(&self) -> u64 {
        self.base + self.frames.len() as u64
    }
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    rank: u32,
    incarnation: u16,
}

/// Counters for the report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ChannelStats {
    pub stored: u64,
    pub bytes: u64,
    /// Frames of a process older than its rank's newest, refused.
    pub stale: u64,
    /// Frames for a rank this server does not host, or from an unknown connection.
    pub misdirected: u64,
    /// Frames sent to readers (a replay counts again).
    pub delivered: u64,
    /// Readers that started from an earlier place than the end (restarted processes).
    pub replays: u64,
    /// Frames released (and their bytes): held by a kept image of their receiver.
    pub released: u64,
    pub released_bytes: u64,
}

/// One channel memory server.
#[derive(Debug)]
pub struct ChannelMemory {
    streams: HashMap<u32, Stream>,
    /// Newest incarnation that has spoken, per rank of the job.
    newest: Vec<u16>,
    conns: HashMap<ConnId, Conn>,
    pub stats: ChannelStats,
}

impl ChannelMemory {
    /// A server for a job of `size` ranks that keeps the streams of `hosted`.
    pub fn new(size: u32, hosted: impl IntoIterator<Item = u32>) -> ChannelMemory {
        ChannelMemory {
            streams: hosted.into_iter().filter(|&r| r < size).map(|r| (r, Stream::default())).collect(),
            newest: vec![0; size as usize],
            conns: HashMap::new(),
            stats: ChannelStats::default(),
        }
    }

    /// Connection `conn` is process `incarnation` of `rank`. With `read_from`, it also reads
    /// the rank's stream here, from that frame on (0: from the start).
    pub fn hello(&mut self, conn: ConnId, rank: u32, incarnation: u16, read_from: Option<u64>) -> Result<(), Refused> {
        let newest = self.newest.get_mut(rank as usize).ok_or(Refused::NoSuchRank(rank))?;
        if incarnation < *newest {
            return Err(Refused::Stale { rank, incarnation, newest: *newest });
        }
        if let Some(from) = read_from {
            let s = self.streams.get_mut(&rank).ok_or(Refused::NotHosted(rank))?;
            if from < s.base {
                return Err(Refused::Released { rank, from, base: s.base });
            }
            let at = from.min(s.end());
            if at < s.end() {
                self.stats.replays += 1;
            }
            s.reader = Some((conn, at));
        }
        *newest = incarnation;
        self.conns.insert(conn, Conn { rank, incarnation });
        Ok(())
    }

    /// A frame from connection `conn` for rank `to`; false if refused (stale sender, unknown
    /// connection, rank not hosted).
    pub fn deposit(&mut self, conn: ConnId, to: u32, frame: Vec<u8>) -> bool {
        let Some(c) = self.conns.get(&conn).copied() else {
            self.stats.misdirected += 1;
            return false;
        };
        if self.newest.get(c.rank as usize).is_some_and(|&n| c.incarnation < n) {
            self.stats.stale += 1;
            return false;
        }
        let Some(s) = self.streams.get_mut(&to) else {
            self.stats.misdirected += 1;
            return false;
        };
        s.bytes += frame.len() as u64;
        self.stats.stored += 1;
        self.stats.bytes += frame.len() as u64;
        s.frames.push_back((c.rank, frame));
        true
    }

    /// The current process of a rank, reading its stream on connection `conn`, says that
    /// the launcher keeps an image of it that read the stream up to frame `upto`: the
    /// frames before it (and before what the reader took) are dropped. Returns how many.
    pub fn release(&mut self, conn: ConnId, upto: u64) -> u64 {
        let Some(c) = self.conns.get(&conn).copied() else { return 0 };
        if self.newest.get(c.rank as usize).is_none_or(|&n| c.incarnation < n) {
            return 0;
        }
        let Some(s) = self.streams.get_mut(&c.rank) else { return 0 };
        let Some((reader, at)) = s.reader else { return 0 };
        if reader != conn {
            return 0;
        }
        let mut n = 0;
        while s.base < upto.min(at) {
            let Some((_, f)) = s.frames.pop_front() else { break };
            s.base += 1;
            s.bytes -= f.len() as u64;
            self.stats.released_bytes += f.len() as u64;
            n += 1;
        }
        self.stats.released += n;
        n
    }

    /// The next frame for reader `conn` (sender, bytes), if it has one waiting.
    pub fn next_for(&self, conn: ConnId) -> Option<(u32, &[u8])> {
        let c = self.conns.get(&conn)?;
        let s = self.streams.get(&c.rank)?;
        let (reader, at) = s.reader?;
        if reader != conn {
            return None;
        }
        s.frames.get(at.checked_sub(s.base)? as usize).map(|(from, f)| (*from, f.as_slice()))
    }

    /// Reader `conn` took the frame [`ChannelMemory::next_for`] gave.
    pub fn advance(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else { return };
        let Some(s) = self.streams.get_mut(&c.rank) else { return };
        let end = s.end();
        if let Some((reader, at)) = s.reader.as_mut() {
            if *reader == conn && *at < end {
                *at += 1;
                self.stats.delivered += 1;
            }
        }
    }

    /// Connection `conn` ended.
    pub fn closed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else { return };
        if let Some(s) = self.streams.get_mut(&c.rank) {
            if s.reader.is_some_and(|(r, _)| r == conn) {
                s.reader = None;
            }
        }
    }

    /// Frames in rank `rank`'s stream so far (released ones included).
    pub fn stream_len(&self, rank: u32) -> u64 {
        self.streams.get(&rank).map_or(0, |s| s.end())
    }

    /// Bytes kept for rank `rank` (released ones not).
    pub fn stream_bytes(&self, rank: u32) -> u64 {
        self.streams.get(&rank).map_or(0, |s| s.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steadfast_proto::Rng;

    fn drain(cm: &mut ChannelMemory, conn: ConnId) -> Vec<(u32, Vec<u8>)> {
        let mut v = Vec::new();
        while let Some((from, f)) = cm.next_for(conn) {
            v.push((from, f.to_vec()));
            cm.advance(conn);
        }
        v
    }

    #[test]
    fn a_stream_keeps_arrival_order_and_a_new_process_gets_it_again() {
        let mut cm = ChannelMemory::new(3, [0, 1, 2]);
        cm.hello(10, 0, 0, Some(0)).unwrap();
        cm.hello(11, 1, 0, Some(0)).unwrap();
        cm.hello(12, 2, 0, Some(0)).unwrap();
        assert!(cm.deposit(11, 0, b"a".to_vec()));
        assert!(cm.deposit(12, 0, b"b".to_vec()));
        assert!(cm.deposit(11, 0, b"c".to_vec()));
        assert_eq!(drain(&mut cm, 10), vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (1, b"c".to_vec())]);
        // Rank 0 dies and comes back: the same stream from the start, then what is new.
        cm.closed(10);
        assert!(cm.deposit(12, 0, b"d".to_vec()), "kept while nobody reads");
        cm.hello(20, 0, 1, Some(0)).unwrap();
        assert_eq!(cm.stats.replays, 1);
        let again = drain(&mut cm, 20);
        assert_eq!(again.len(), 4);
        assert_eq!(again[..3], [(1, b"a".to_vec()), (2, b"b".to_vec()), (1, b"c".to_vec())]);
        // From an image: from where it had read.
        cm.closed(20);
        cm.hello(30, 0, 2, Some(3)).unwrap();
        assert_eq!(drain(&mut cm, 30), vec![(2, b"d".to_vec())]);
        // An image that read 3 frames is kept: they go; a reader may not start before them.
        assert_eq!(cm.release(30, 3), 3);
        assert_eq!((cm.stream_len(0), cm.stream_bytes(0), cm.stats.released_bytes), (4, 1, 3));
        assert_eq!(cm.release(30, 9), 1, "only what the reader took");
        cm.closed(30);
        assert_eq!(cm.hello(40, 0, 3, Some(2)), Err(Refused::Released { rank: 0, from: 2, base: 4 }));
        cm.hello(41, 0, 3, Some(4)).unwrap();
        assert!(cm.deposit(12, 0, b"e".to_vec()));
        assert_eq!(drain(&mut cm, 41), vec![(2, b"e".to_vec())]);
        // Only the rank's current reader releases.
        assert_eq!(cm.release(12, 5), 0);
    }

    #[test]
    fn an_older_process_of_a_rank_is_refused_once_a_newer_spoke() {
        let mut cm = ChannelMemory::new(2, [0]);
        cm.hello(1, 1, 0, None).unwrap();
        assert!(cm.deposit(1, 0, b"x".to_vec()));
        cm.hello(2, 1, 1, None).unwrap();
        assert!(!cm.deposit(1, 0, b"late".to_vec()), "the dead process's last bytes");
        assert!(cm.deposit(2, 0, b"y".to_vec()));
        assert_eq!(cm.stats.stale, 1);
        assert_eq!(cm.hello(3, 1, 0, None), Err(Refused::Stale { rank: 1, incarnation: 0, newest: 1 }));
        assert_eq!(cm.hello(4, 7, 0, None), Err(Refused::NoSuchRank(7)));
        assert_eq!(cm.hello(5, 1, 1, Some(0)), Err(Refused::NotHosted(1)));
        assert!(!cm.deposit(2, 1, b"z".to_vec()), "rank 1 is hosted elsewhere");
        assert!(!cm.deposit(99, 0, b"z".to_vec()), "unknown connection");
        assert_eq!(cm.stream_len(0), 2);
    }

    /// Seeded simulation: ranks deposit to each other in random order, crash and come back
    /// (sometimes from an "image": the place they had read to); after every step, every
    /// process has read a prefix of its stream, a new process of a rank reads exactly what
    /// its predecessor read before anything new, and no stream holds a frame of a process
    /// after a frame of a newer one of the same sender.
    #[test]
    fn simulated_crashes_and_replays_keep_every_stream_consistent() {
        for seed in 1..=200u64 {
            let mut rng = Rng::new(seed);
            let n = 2 + (seed % 3) as u32;
            let mut cm = ChannelMemory::new(n, 0..n);
            let mut inc = vec![0u16; n as usize];
            let mut conn_of = vec![0u64; n as usize];
            let mut next_conn = 1u64;
            // What each rank's current process has read.
            let mut read: Vec<Vec<(u32, Vec<u8>)>> = vec![Vec::new(); n as usize];
            let mut counter = 0u64;
            for r in 0..n {
                conn_of[r as usize] = next_conn;
                cm.hello(next_conn, r, 0, Some(0)).unwrap();
                next_conn += 1;
            }
            let mut old_conns: Vec<(ConnId, u32)> = Vec::new();
            // Where each rank's stream was released to (a kept image's place).
            let mut released = vec![0u64; n as usize];
            for _step in 0..300 {
                match rng.below(10) {
                    0..=4 => {
                        let from = rng.below(n as u64) as u32;
                        let to = rng.below(n as u64) as u32;
                        counter += 1;
                        let mut f = vec![from as u8, inc[from as usize] as u8];
                        f.extend_from_slice(&counter.to_le_bytes());
                        assert!(cm.deposit(conn_of[from as usize], to, f));
                    }
                    5 => {
                        // A dead process's connection still delivers a frame: refused, and
                        // cannot release anything.
                        if let Some(&(c, _)) = old_conns.last() {
                            assert!(!cm.deposit(c, rng.below(n as u64) as u32, vec![0xee]));
                            assert_eq!(cm.release(c, u64::MAX), 0);
                        }
                        // An image of a rank at a place it read to is kept: release.
                        let r = rng.below(n as u64) as usize;
                        let upto = rng.below(read[r].len() as u64 + 1);
                        cm.release(conn_of[r], upto);
                        released[r] = released[r].max(upto);
                    }
                    6..=8 => {
                        let r = rng.below(n as u64) as usize;
                        let c = conn_of[r];
                        while let Some((from, f)) = cm.next_for(c) {
                            read[r].push((from, f.to_vec()));
                            cm.advance(c);
                            if rng.below(3) == 0 {
                                break;
                            }
                        }
                    }
                    _ => {
                        let r = rng.below(n as u64) as usize;
                        let before = read[r].clone();
                        // From the start, or from an image taken at a random earlier place.
                        let lo = released[r];
                        let resume = if rng.below(2) == 0 { lo } else { lo + rng.below(before.len() as u64 + 1 - lo) };
                        old_conns.push((conn_of[r], r as u32));
                        inc[r] += 1;
                        conn_of[r] = next_conn;
                        next_conn += 1;
                        cm.hello(conn_of[r], r as u32, inc[r], Some(resume)).unwrap();
                        let mut again: Vec<(u32, Vec<u8>)> = before[..resume as usize].to_vec();
                        while let Some((from, f)) = cm.next_for(conn_of[r]) {
                            again.push((from, f.to_vec()));
                            cm.advance(conn_of[r]);
                        }
                        assert!(again.len() >= before.len(), "seed {seed}: a new process read less than the old one had");
                        assert_eq!(again[..before.len()], before[..], "seed {seed}: a new process read something else");
                        read[r] = again;
                    }
                }
                // Every stream: senders' processes in order.
                for r in 0..n {
                    let mut last = vec![0u8; n as usize];
                    let s = &cm.streams[&r];
                    for (from, f) in &s.frames {
                        let this = f[1];
                        assert!(this >= last[*from as usize], "seed {seed}: an older process's frame after a newer one's");
                        last[*from as usize] = this;
                    }
                    assert_eq!(s.base, released[r as usize], "seed {seed}: released elsewhere than the image's place");
                    let kept: Vec<(u32, Vec<u8>)> = s.frames.iter().take(read[r as usize].len() - s.base as usize).cloned().collect();
                    assert_eq!(kept[..], read[r as usize][s.base as usize..], "seed {seed}: not a prefix");
                }
            }
        }
    }
}
