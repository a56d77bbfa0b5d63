//! Slot exchange: the small collectives of ranks that share memory.
//!
//! Every rank of a communicator whose ranks are all on one host owns two *slots* in a segment
//! they all map. Call `k` of the exchange uses slot `k % 2`: each rank writes its
//! contribution there (one or more *parts*, each with its CRC32C) and publishes the call
//! number; then it reads the part it needs from every other rank's slot of that parity. A
//! barrier is a call without parts, an allgather one part per rank, an alltoall one part per
//! destination, an allreduce one part that every rank reduces in rank order.
//!
//! **Why two slots are enough.** Every call reads every other rank's slot, so a rank that
//! finished call `k + 1` has seen every rank publish `k + 1`, and a rank publishes `k + 1`
//! only after it finished reading call `k`. When a rank writes call `k + 2` into the slot
//! of call `k` it has finished `k + 1`: nobody still reads call `k` there. (This is why only
//! collectives in which every rank reads every other rank's contribution use the exchange.)
//!
//! **Torn reads.** A slot's state word carries the call (plus one) and a write generation,
//! odd while the slot is being written (a sequence lock). A reader takes the state, copies
//! its part, and takes the state again: a change means the copy may be torn and is retried.
//!
//! **Damage.** A part whose copy does not match its CRC is never used. The reader counts it
//! and asks the writer to write its slots again (a counter in the writer's line); the writer
//! keeps a private copy of its last two contributions for that and answers whenever it polls
//! (in a later call, or in the engine's idle progress). A copy damaged on the reader's side
//! is repaired the same way: the rewrite moves the generation on and the reader copies again.
//!
//! A contribution above the exchange's `keep_max` bytes is not copied: its writer answers
//! from the caller's buffers and returns only once every rank counted the call done — one
//! more wait, where the copy would cost more.
//!
//! A rank that is done with the communicator keeps answering until every rank reports that
//! it completed the last call (each rank counts its completed calls in its line):
//! [`Exchange::quiet`].
//!
//! The exchange is sans-IO: the shared memory is a [`Board`], which the engine implements
//! on a mapped segment and the simulation (`tests/slots.rs`) on plain memory with faults.

/// The shared memory of an exchange: per rank a repair counter, a count of completed calls
/// and two slots, each with a
/// state word, one CRC per part and the data. Implementations give the orderings noted.
pub trait Board {
    /// Ranks with slots.
    fn ranks(&self) -> usize;
    /// Data bytes a slot holds.
    fn capacity(&self) -> usize;
    /// Slot `(r, p)`'s state word (acquire load).
    fn state(&self, r: usize, p: usize) -> u64;
    /// The state word again after copying data out: an acquire fence, then the load.
    fn state_again(&self, r: usize, p: usize) -> u64;
    /// Store slot `(r, p)`'s state word. `writing`: the slot's data is about to change (the
    /// store must be ordered before the data writes that follow); otherwise the data written
    /// before is published (a release store).
    fn set_state(&self, r: usize, p: usize, v: u64, writing: bool);
    /// Copy `src` into slot `(r, p)`'s data at `off`; returns the CRC32C of `src`.
    fn put(&self, r: usize, p: usize, off: usize, src: &[u8]) -> u32;
    /// Copy slot `(r, p)`'s data at `off` into `dst`; returns the CRC32C of the copy.
    fn take(&self, r: usize, p: usize, off: usize, dst: &mut [u8]) -> u32;
    /// The CRC of part `j` of slot `(r, p)`.
    fn crc(&self, r: usize, p: usize, j: usize) -> u32;
    fn set_crc(&self, r: usize, p: usize, j: usize, crc: u32);
    /// Bytes of the contribution in slot `(r, p)`, and its writer's record of them: a reader
    /// whose own contribution differs in size knows the ranks disagree (an erroneous call).
    fn total(&self, r: usize, p: usize) -> u64;
    fn set_total(&self, r: usize, p: usize, bytes: u64);
    /// Rank `r`'s repair counter (acquire load), and a request that it rewrites its slots.
    fn repairs(&self, r: usize) -> u64;
    fn ask_repair(&self, r: usize);
    /// Calls rank `r` completed (acquire load), and this rank's own count (release store).
    fn done(&self, r: usize) -> u64;
    fn set_done(&self, r: usize, calls: u64);
}

/// Bits of the state word holding the write generation; the call (plus one) is above them.
const GEN_BITS: u32 = 24;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

fn state_word(call_plus_one: u64, generation: u64) -> u64 {
    call_plus_one << GEN_BITS | (generation & GEN_MASK)
}

/// The call (plus one) a settled state word publishes; None while the slot is being written.
fn published(state: u64) -> Option<u64> {
    (state & 1 == 0).then_some(state >> GEN_BITS)
}

/// Why a call cannot use the exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error("contribution of {bytes} bytes exceeds the slot's {capacity}")]
    TooLarge { bytes: usize, capacity: usize },
    #[error("{parts} parts, the slots have CRCs for {max}")]
    TooManyParts { parts: usize, max: usize },
    #[error("a call is already in progress")]
    Busy,
    #[error("no call in progress")]
    Idle,
    #[error("part {0} is not in the call")]
    NoPart(usize),
    #[error("destination of part {part} holds {len} bytes, the part {expected}")]
    PartLength { part: usize, len: usize, expected: usize },
}

/// The ranks of a call disagree on the size of their contributions (an erroneous program:
/// their counts or type signatures differ). The call completes without the other rank's
/// data, so nobody waits forever; [`Exchange::mismatch`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// The first rank found to differ, its contribution's bytes, and this rank's.
    pub rank: usize,
    pub theirs: u64,
    pub mine: u64,
}

/// Where the parts a rank needs go.
pub trait Sink {
    /// The part of rank `r`'s contribution this rank needs, and the buffer of that part's
    /// length it goes to.
    fn dst(&mut self, r: usize) -> (usize, &mut [u8]);
}

/// A contribution kept for rewriting its slot on request.
#[derive(Default)]
struct Kept {
    /// The call (plus one) it belongs to; 0: none.
    call: u64,
    lens: Vec<usize>,
    data: Vec<u8>,
}

/// Counters of one rank's exchange.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SlotCounters {
    /// Parts whose copy failed its CRC (never used).
    pub corrupt_detected: u64,
    /// Copies retried because the slot changed under them.
    pub torn_retries: u64,
    /// Rewrites of this rank's slots on another rank's request.
    pub repairs_served: u64,
}

/// One rank's side of the exchange.
pub struct Exchange {
    me: usize,
    size: usize,
    /// Calls started so far; the current call is `calls - 1` while `active`.
    calls: u64,
    active: bool,
    /// This rank's write generation (its slots' state words).
    generation: u64,
    kept: [Kept; 2],
    /// The repair counter value last answered.
    repairs_seen: u64,
    /// Per rank: its part of the current call is here.
    got: Vec<bool>,
    missing: usize,
    /// Per rank: the state word of a copy that failed its CRC (not copied again until the
    /// slot changes).
    damaged: Vec<Option<u64>>,
    /// Byte offset and length of each part in a slot for the current call.
    offsets: Vec<usize>,
    lens: Vec<usize>,
    /// Contributions above this many bytes are not copied for repairs: the writer answers
    /// them from the caller's buffers and stays in the call until every rank is done.
    keep_max: usize,
    /// The current call's contribution is not kept (above `keep_max`).
    held: bool,
    /// The rank whose count of completed calls releases this one from the current call
    /// (a rooted barrier's non-root rank: its parent in the tree).
    wait_for: Option<usize>,
    /// Bytes of this rank's contribution to the current call, and the first rank found to
    /// have contributed a different number.
    total: u64,
    mismatch: Option<Mismatch>,
    pub counters: SlotCounters,
}

impl Exchange {
    /// Rank `me` of `size` ranks; contributions up to `keep_max` bytes are copied for
    /// repairs after they are published, larger ones make the writer wait until every rank
    /// is done with the call (see [`Exchange::poll`]).
    pub fn new(me: usize, size: usize, keep_max: usize) -> Exchange {
        Exchange {
            me,
            size,
            calls: 0,
            active: false,
            generation: 0,
            kept: Default::default(),
            repairs_seen: 0,
            got: vec![false; size],
            missing: 0,
            damaged: vec![None; size],
            offsets: Vec::new(),
            lens: Vec::new(),
            keep_max,
            held: false,
            wait_for: None,
            total: 0,
            mismatch: None,
            counters: SlotCounters::default(),
        }
    }

    /// Calls completed or in progress.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Whether a call is in progress.
    pub fn active(&self) -> bool {
        self.active
    }

    /// Start the next call: write this rank's contribution, `parts` (every rank passes parts
    /// of the same lengths), and publish it. Then [`Exchange::poll`] until it returns true.
    pub fn start(&mut self, board: &impl Board, parts: &[&[u8]]) -> Result<(), SlotError> {
        if self.active {
            return Err(SlotError::Busy);
        }
        let bytes: usize = parts.iter().map(|p| p.len()).sum();
        if bytes > board.capacity() {
            return Err(SlotError::TooLarge { bytes, capacity: board.capacity() });
        }
        if parts.len() > board.ranks() {
            return Err(SlotError::TooManyParts { parts: parts.len(), max: board.ranks() });
        }
        self.serve(board, &[]);
        let call = self.calls;
        let p = (call & 1) as usize;
        self.offsets.clear();
        self.lens.clear();
        let mut off = 0;
        for part in parts {
            self.offsets.push(off);
            self.lens.push(part.len());
            off += part.len();
        }
        self.write_slot(board, p, call + 1, parts);
        self.total = bytes as u64;
        self.mismatch = None;
        self.wait_for = None;
        self.held = bytes > self.keep_max;
        let k = &mut self.kept[p];
        if self.held {
            k.call = 0;
        } else {
            // The copy for repairs is made after the publication, off the readers' path.
            k.call = call + 1;
            k.lens.clone_from(&self.lens);
            k.data.clear();
            for part in parts {
                k.data.extend_from_slice(part);
            }
        }
        self.calls += 1;
        self.active = true;
        self.got.iter_mut().for_each(|g| *g = false);
        self.damaged.iter_mut().for_each(|d| *d = None);
        self.got[self.me] = true;
        self.missing = self.size - 1;
        Ok(())
    }

    /// Start the next call as a barrier rooted at `root` that releases the ranks down a
    /// tree: every other rank publishes its arrival and waits until `parent` (its parent in
    /// the tree) counts the call done; the root waits for every arrival and counts the call
    /// done. The root leaves first, then each rank after its parent, as from a
    /// fan-in/fan-out barrier, so data sent down the same tree right after (a broadcast) is
    /// there when a rank looks. Two slots still suffice: only the root reads a slot in this
    /// call, and a rank publishes call k + 2 after its parent, hence the root, counted
    /// k + 1 done — after the root read every rank's k + 1, each published after its rank
    /// finished call k.
    pub fn start_rooted(&mut self, board: &impl Board, root: usize, parent: Option<usize>) -> Result<(), SlotError> {
        if self.active {
            return Err(SlotError::Busy);
        }
        if root >= self.size || parent.is_some_and(|q| q >= self.size || q == self.me) || (self.me == root) != parent.is_none() {
            return Err(SlotError::NoPart(root));
        }
        self.serve(board, &[]);
        let call = self.calls;
        let p = (call & 1) as usize;
        self.offsets.clear();
        self.lens.clear();
        self.held = false;
        self.total = 0;
        self.mismatch = None;
        self.calls += 1;
        self.active = true;
        self.damaged.iter_mut().for_each(|d| *d = None);
        self.wait_for = parent;
        if self.me == root {
            self.got.iter_mut().for_each(|g| *g = false);
            self.got[self.me] = true;
            self.missing = self.size - 1;
        } else {
            self.write_slot(board, p, call + 1, &[]);
            let k = &mut self.kept[p];
            k.call = call + 1;
            k.lens.clear();
            k.data.clear();
            self.got.iter_mut().for_each(|g| *g = true);
            self.missing = 0;
        }
        Ok(())
    }

    /// Write `parts` of call `call_plus_one - 1` into this rank's slot `p` under a new
    /// generation, and publish them.
    fn write_slot(&mut self, board: &impl Board, p: usize, call_plus_one: u64, parts: &[&[u8]]) {
        let (writing, done) = (self.generation + 1, self.generation + 2);
        self.generation = done;
        // The call number stays the slot's old one while it is written: readers of the new
        // call wait, readers of the old one (a repair) see the odd generation.
        let old = board.state(self.me, p) >> GEN_BITS;
        board.set_state(self.me, p, state_word(old, writing), true);
        let mut off = 0;
        for (j, part) in parts.iter().enumerate() {
            let crc = board.put(self.me, p, off, part);
            board.set_crc(self.me, p, j, crc);
            off += part.len();
        }
        board.set_total(self.me, p, off as u64);
        board.set_state(self.me, p, state_word(call_plus_one, done), false);
    }

    /// Write kept contribution `p` into this rank's slot `p` again.
    fn write_kept(&mut self, board: &impl Board, p: usize) {
        let k = std::mem::take(&mut self.kept[p]);
        let mut parts = Vec::with_capacity(k.lens.len());
        let mut off = 0;
        for &l in &k.lens {
            parts.push(&k.data[off..off + l]);
            off += l;
        }
        self.write_slot(board, p, k.call, &parts);
        drop(parts);
        self.kept[p] = k;
    }

    /// Answer other ranks' requests to rewrite this rank's slots (damage they found). Cheap
    /// when there is none: one load. Call it while idle too: a rank that finished a call may
    /// be the one a slower rank needs a rewrite from. `parts`: the current call's
    /// contribution when it is held (not kept), else ignored.
    #[inline]
    pub fn serve(&mut self, board: &impl Board, parts: &[&[u8]]) -> bool {
        let r = board.repairs(self.me);
        if r == self.repairs_seen {
            return false;
        }
        self.serve_requests(board, parts, r)
    }

    /// The rewrites [`Exchange::serve`] found asked for: apart, so that the check, made
    /// at every start and poll, is inlined without the rewrite's register saves (28
    /// instructions per check as one function).
    #[cold]
    #[inline(never)]
    fn serve_requests(&mut self, board: &impl Board, parts: &[&[u8]], r: u64) -> bool {
        self.repairs_seen = r;
        for p in 0..2 {
            if self.kept[p].call != 0 {
                self.write_kept(board, p);
            }
        }
        if self.active && self.held && parts.len() == self.lens.len() {
            let p = ((self.calls - 1) & 1) as usize;
            self.write_slot(board, p, self.calls, parts);
        }
        self.counters.repairs_served += 1;
        true
    }

    /// The first rank of the current (or last) call whose contribution differed in size
    /// from this rank's.
    pub fn mismatch(&self) -> Option<Mismatch> {
        self.mismatch
    }

    /// Whether this rank has every part of the current call and waits, with its
    /// contribution held, for the others to be done with it.
    pub fn draining(&self) -> bool {
        self.active && self.held && self.missing == 0
    }

    /// Copy what the current call needs from the ranks that published it; true once every
    /// rank's part is in (and, for a held contribution, once every rank is done with the
    /// call). `sink` names the part of each rank this rank needs and where it goes; it is
    /// asked once per rank and copy attempt. A copy that failed its CRC leaves the
    /// destination damaged until a later poll copies it again. `parts`: the contribution
    /// given to [`Exchange::start`], still the caller's.
    pub fn poll(&mut self, board: &impl Board, sink: &mut impl Sink, parts: &[&[u8]]) -> Result<bool, SlotError> {
        if !self.active {
            return Err(SlotError::Idle);
        }
        self.serve(board, parts);
        if self.draining() {
            return Ok(self.finish_held(board));
        }
        let p = ((self.calls - 1) & 1) as usize;
        for r in 0..self.size {
            if self.got[r] {
                continue;
            }
            let s = board.state(r, p);
            if published(s) != Some(self.calls) || self.damaged[r] == Some(s) {
                continue;
            }
            let theirs = board.total(r, p);
            if theirs != self.total {
                if board.state_again(r, p) != s {
                    self.counters.torn_retries += 1;
                    continue;
                }
                // Not copied: the parts' places differ. The call goes on without it.
                self.mismatch.get_or_insert(Mismatch { rank: r, theirs, mine: self.total });
                self.got[r] = true;
                self.missing -= 1;
                continue;
            }
            if self.offsets.is_empty() {
                // A call without parts (a barrier): the publication is all there is.
                self.got[r] = true;
                self.missing -= 1;
                continue;
            }
            let (j, out) = sink.dst(r);
            let Some(&off) = self.offsets.get(j) else { return Err(SlotError::NoPart(j)) };
            if out.len() != self.lens[j] {
                return Err(SlotError::PartLength { part: j, len: out.len(), expected: self.lens[j] });
            }
            let crc = board.take(r, p, off, out);
            if board.state_again(r, p) != s {
                self.counters.torn_retries += 1;
                continue;
            }
            if crc != board.crc(r, p, j) {
                self.counters.corrupt_detected += 1;
                self.damaged[r] = Some(s);
                board.ask_repair(r);
                continue;
            }
            self.got[r] = true;
            self.missing -= 1;
        }
        if self.missing == 0 {
            if let Some(q) = self.wait_for {
                if board.done(q) < self.calls {
                    return Ok(false);
                }
                self.wait_for = None;
            }
            board.set_done(self.me, self.calls);
            if self.held {
                return Ok(self.finish_held(board));
            }
            self.active = false;
            return Ok(true);
        }
        Ok(false)
    }

    /// A held call ends once every rank counted it done: nobody reads its slot any more.
    fn finish_held(&mut self, board: &impl Board) -> bool {
        if (0..self.size).all(|r| board.done(r) >= self.calls) {
            self.active = false;
            return true;
        }
        false
    }

    /// Whether every rank completed every call this rank started: then nobody reads this
    /// rank's slots any more, and it may stop answering repairs (its communicator freed).
    pub fn quiet(&self, board: &impl Board) -> bool {
        !self.active && (0..self.size).all(|r| board.done(r) >= self.calls)
    }

    /// The one rank the current call now waits for, if it is one: the last rank whose
    /// part is not in or, with every part in, the rank whose count releases this one (a
    /// rooted barrier's non-root rank). None when it waits for several, or for nobody.
    pub fn awaited(&self) -> Option<usize> {
        if !self.active {
            return None;
        }
        match self.missing {
            0 => self.wait_for,
            1 => self.missing().next(),
            _ => None,
        }
    }

    /// Ranks whose part of the current call is not in yet.
    pub fn missing(&self) -> impl Iterator<Item = usize> + '_ {
        self.got.iter().enumerate().filter(|(_, g)| !**g).map(|(r, _)| r)
    }

    /// Whether some rank published the current call and its part can be copied now (for a
    /// sleeping rank's last look before it sleeps).
    pub fn ready(&self, board: &impl Board) -> bool {
        if !self.active {
            return true;
        }
        if board.repairs(self.me) != self.repairs_seen {
            return true;
        }
        if self.draining() {
            return (0..self.size).all(|r| board.done(r) >= self.calls);
        }
        if let Some(q) = self.wait_for.filter(|_| self.missing == 0) {
            return board.done(q) >= self.calls;
        }
        let p = ((self.calls - 1) & 1) as usize;
        self.missing().any(|r| {
            let s = board.state(r, p);
            published(s) == Some(self.calls) && self.damaged[r] != Some(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_words_publish_only_settled_calls() {
        assert_eq!(published(state_word(5, 2)), Some(5));
        assert_eq!(published(state_word(5, 3)), None);
        // The generation wraps inside its bits without touching the call.
        assert_eq!(published(state_word(7, GEN_MASK + 1)), Some(7));
    }
}
