//! Files in the job directory that the ranks of a communicator map shared: the channel
//! broadcast's and the slot exchange's segments. The communicator's rank 0 creates one under
//! a temporary name, initialises its header and publishes it by renaming; its name travels
//! over the tree and the other ranks open it, checking the header. A header line is a magic
//! word and shape words (u32 from byte 8) that every rank must agree on.

use std::fs::OpenOptions;
use std::path::Path as FsPath;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::engine::Engine;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::slab::Handle;

/// Groups whose answer [`Engine::segment_target`] remembers.
const LOCAL_MEMO: usize = 4;

fn map(f: &std::fs::File, len: usize) -> std::io::Result<*mut u8> {
    use std::os::fd::AsRawFd;
    // SAFETY: a shared read-write mapping of a file of at least `len` bytes.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), 0) };
    if p == libc::MAP_FAILED {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// Create the segment `path` of `len` bytes with its header; returns the mapping (the caller
/// unmaps it).
pub(super) fn create(path: &FsPath, len: usize, magic: u64, shape: &[u32]) -> std::io::Result<*mut u8> {
    assert!(8 + 4 * shape.len() <= len.min(64), "segment header beyond its first line");
    let tmp = path.with_extension("tmp");
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
    f.set_len(len as u64)?;
    // The header's page is written below: backed first, a full file system fails here.
    reserve(&f, 0, len.min(4096))?;
    let base = map(&f, len)?;
    // SAFETY: the header line lies inside the fresh mapping; nobody else sees it yet.
    unsafe {
        for (i, &w) in shape.iter().enumerate() {
            std::ptr::write(base.add(8 + 4 * i).cast::<u32>(), w);
        }
        std::ptr::write(base.cast::<u64>(), magic);
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        // SAFETY: the mapping just made, used by nobody.
        unsafe { libc::munmap(base.cast(), len) };
        return Err(e);
    }
    Ok(base)
}

/// Back `len` bytes at `offset` of segment file `f` with memory now, so that a full file
/// system is an error here rather than a SIGBUS at the first store into a page of the
/// mapping. Ranges already backed cost nothing more.
pub(super) fn reserve(f: &std::fs::File, offset: usize, len: usize) -> std::io::Result<()> {
    steadfast_paths::shm::back(f, offset, len)
}

/// The first `n` shape words of the segment `path` after checking its magic (what
/// [`create`] wrote), read without mapping it.
pub(super) fn read_shape(path: &FsPath, magic: u64, n: usize) -> std::io::Result<Vec<u32>> {
    use std::os::unix::fs::FileExt;
    let f = OpenOptions::new().read(true).open(path)?;
    let mut head = vec![0u8; 8 + 4 * n];
    f.read_exact_at(&mut head, 0)?;
    let (m, rest) = head.split_at(8);
    let m: [u8; 8] = m.try_into().map_err(|_| std::io::Error::other("segment header"))?;
    if u64::from_ne_bytes(m) != magic {
        return Err(std::io::Error::other("not a segment of this kind"));
    }
    Ok(rest.chunks_exact(4).map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]])).collect())
}

/// Map the segment another rank created, checking its size and header; `what` names the
/// settings that would differ between ranks if the shape does not match.
pub(super) fn open(path: &FsPath, len: usize, magic: u64, shape: &[u32], what: &str) -> std::io::Result<*mut u8> {
    let f = OpenOptions::new().read(true).write(true).open(path)?;
    if f.metadata()?.len() < len as u64 {
        return Err(std::io::Error::other(format!("segment smaller than its shape ({what} differ between ranks?)")));
    }
    let base = map(&f, len)?;
    // SAFETY: the header line lies inside the mapping.
    let ok = unsafe {
        std::ptr::read(base.cast::<u64>()) == magic && shape.iter().enumerate().all(|(i, &w)| std::ptr::read(base.add(8 + 4 * i).cast::<u32>()) == w)
    };
    if !ok {
        // SAFETY: the mapping just made, used by nobody.
        unsafe { libc::munmap(base.cast(), len) };
        return Err(std::io::Error::other(format!("segment of another shape ({what} differ between ranks?)")));
    }
    Ok(base)
}

impl Engine {
    /// Where a segment may serve communicator `comm`: an intracommunicator of at least 2
    /// ranks, outside the fault-tolerant modes (run-through: a failed rank would stall the
    /// others' waits; message logging: a restarted rank replays what it received from the
    /// log, and data written into a segment is in no log; coordinated checkpointing: the
    /// segment is not in the image). Returns this rank, the size, the context and whether
    /// every rank shares memory with this one.
    pub(super) fn segment_target(&self, comm: Handle) -> Option<(i32, i32, u32, bool)> {
        self.coll.channels.host.as_ref()?;
        if self.fast_paths_off() || self.coordinated() {
            return None;
        }
        let c = self.comm(comm).ok()?;
        if c.remote.is_some() || c.size() < 2 {
            return None;
        }
        let local = self.group_on_host(&c.group);
        Some((c.rank, c.size(), c.ctx, local))
    }

    /// Whether every world rank of `group` shares memory with this process (false without
    /// a host map). Remembered for the last few groups: every barrier, broadcast and
    /// collective rule asks it. A group is known by its allocation, which the memo keeps
    /// alive, so a new group never takes an old one's answer.
    pub(super) fn group_on_host(&self, group: &Arc<Vec<u32>>) -> bool {
        let Some(host) = self.coll.channels.host.as_ref() else { return false };
        let mut memo = self.coll.channels.local_memo.borrow_mut();
        if let Some(&(_, local)) = memo.iter().find(|(g, _)| Arc::ptr_eq(g, group)) {
            return local;
        }
        let me = self.rank;
        let local = group.iter().all(|&w| w == me || host.local.get(w as usize).copied().unwrap_or(false));
        if memo.len() == LOCAL_MEMO {
            memo.remove(0);
        }
        memo.push((group.clone(), local));
        local
    }

    /// A name for a segment this process makes, unique in the job directory.
    pub(super) fn segment_name(&mut self, prefix: &str) -> String {
        let n = format!("{prefix}-{}-{}", self.rank, self.coll.channels.created);
        self.coll.channels.created += 1;
        n
    }

    /// Agree on a segment for communicator `comm` (this rank is `rank` there): rank 0 makes
    /// `{prefix}-{world rank}-{n}` in the job directory with `make`, broadcasts its name over
    /// the tree (empty when it could not), and the others `attach` to it. None on every rank
    /// without a job directory or when rank 0 could not make it: the communicator then
    /// uses messages for good. `what` names the feature in messages. Returns the segment and
    /// its name.
    pub(super) fn agree_segment<T>(
        &mut self,
        comm: Handle,
        rank: i32,
        prefix: &str,
        what: &str,
        make: impl FnOnce(&FsPath) -> std::io::Result<T>,
        attach: impl FnOnce(&FsPath) -> std::io::Result<T>,
    ) -> MpiResult<Option<(T, String)>> {
        let Some(jobdir) = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone()) else { return Ok(None) };
        let mut name = Vec::new();
        let mut mine = None;
        if rank == 0 {
            let n = self.segment_name(prefix);
            match make(&jobdir.join(&n)) {
                Ok(s) => {
                    mine = Some(s);
                    name = n.into_bytes();
                }
                Err(e) => tracing::warn!("{what} segment {n}: {e}; using messages on this communicator"),
            }
        }
        self.bcast_bytes(comm, 0, &mut name)?;
        if name.is_empty() {
            return Ok(None);
        }
        let n = String::from_utf8_lossy(&name).into_owned();
        match mine {
            Some(s) => Ok(Some((s, n))),
            None => match attach(&jobdir.join(&n)) {
                Ok(s) => Ok(Some((s, n))),
                Err(e) => Err(MpiError::new(ErrorClass::Other, format!("opening {what} segment {n}: {e}"))),
            },
        }
    }
}

/// Per-communicator drivers of a shared-segment collective, by context: None for a
/// communicator that uses messages for good. The one used last is kept out of the map, where
/// a program calling collectives on one communicator finds it without a hash look-up on
/// every call. A call takes its driver out ([`DriverTable::take`]) while it runs (it may
/// drive the engine, whose idle waits serve every other driver) and puts it back after.
pub(super) struct DriverTable<D> {
    hot: Option<(u32, Option<Box<D>>)>,
    map: FxHashMap<u32, Option<Box<D>>>,
}

impl<D> Default for DriverTable<D> {
    fn default() -> Self {
        DriverTable { hot: None, map: FxHashMap::default() }
    }
}

impl<D> DriverTable<D> {
    /// Take the entry of `ctx` out (None: the communicator has none yet).
    pub(super) fn take(&mut self, ctx: u32) -> Option<Option<Box<D>>> {
        if self.hot.as_ref().is_some_and(|(c, _)| *c == ctx) {
            return self.hot.take().map(|(_, d)| d);
        }
        self.map.remove(&ctx)
    }

    /// Put the entry of `ctx` (back) in, as the one used last.
    pub(super) fn put(&mut self, ctx: u32, d: Option<Box<D>>) {
        if let Some((c, old)) = self.hot.replace((ctx, d)) {
            if c != ctx {
                self.map.insert(c, old);
            }
        }
    }

    /// The driver of `ctx`, if it has one and it is in the table.
    pub(super) fn get(&self, ctx: u32) -> Option<&D> {
        match &self.hot {
            Some((c, d)) if *c == ctx => d.as_deref(),
            _ => self.map.get(&ctx).and_then(|d| d.as_deref()),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.hot.is_none() && self.map.is_empty()
    }

    /// Every driver in the table, with its context.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut D)> {
        let hot = self.hot.iter_mut().map(|(c, d)| (*c, d));
        hot.chain(self.map.iter_mut().map(|(c, d)| (*c, d))).filter_map(|(c, d)| d.as_deref_mut().map(|d| (c, d)))
    }

    /// Add the entries of `other` (taken out earlier), which replace this one's of the same
    /// context.
    pub(super) fn merge(&mut self, other: DriverTable<D>) {
        for (ctx, d) in other.hot.into_iter().chain(other.map) {
            match &mut self.hot {
                Some((c, here)) if *c == ctx => *here = d,
                _ => {
                    self.map.insert(ctx, d);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DriverTable;

    #[test]
    fn driver_table_keeps_every_entry_whichever_is_hot() {
        let mut t: DriverTable<u32> = DriverTable::default();
        assert!(t.is_empty());
        assert_eq!(t.take(7), None, "no entry yet");
        t.put(1, Some(Box::new(10)));
        t.put(2, None);
        t.put(3, Some(Box::new(30)));
        // 3 is hot, 1 and 2 in the map: all are found, the tree-for-good marker too.
        assert_eq!(t.get(1), Some(&10));
        assert_eq!(t.get(2), None);
        assert_eq!(t.get(3), Some(&30));
        let mut seen: Vec<(u32, u32)> = t.iter_mut().map(|(c, d)| (c, *d)).collect();
        seen.sort();
        assert_eq!(seen, [(1, 10), (3, 30)]);
        // Taking a map entry and putting it back makes it hot without losing the old one.
        let one = t.take(1).expect("present");
        assert_eq!(one.as_deref(), Some(&10));
        assert_eq!(t.get(1), None, "out while taken");
        t.put(1, one);
        assert_eq!((t.get(1), t.get(3)), (Some(&10), Some(&30)));
        assert_eq!(t.take(2), Some(None), "the marker survives the moves");
        // What was added while the table was taken out stays, replacing older entries.
        let mut taken = std::mem::take(&mut t);
        assert!(t.is_empty());
        t.put(3, Some(Box::new(33)));
        t.put(4, Some(Box::new(40)));
        let added = std::mem::replace(&mut t, std::mem::take(&mut taken));
        t.merge(added);
        let mut all: Vec<(u32, u32)> = t.iter_mut().map(|(c, d)| (c, *d)).collect();
        all.sort();
        assert_eq!(all, [(1, 10), (3, 33), (4, 40)]);
        assert_eq!(t.take(3).flatten().as_deref(), Some(&33));
        assert_eq!(t.take(3), None);
    }
}
