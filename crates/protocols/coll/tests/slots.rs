//! Deterministic simulation of the slot exchange: ranks take steps in a seeded random order
//! (some much slower than others), writes are damaged after their CRC and copies on the
//! reader's side, and after every step the simulation checks:
//! - no rank starts call `k` (overwriting its slot of call `k - 2`) before every other rank
//!   finished call `k - 2`;
//! - every call completes on every rank, in order, with exactly the bytes each writer
//!   contributed (nothing damaged or stale is ever used);
//! - the run ends (damage is repaired, nobody waits forever), although a rank done with the
//!   scenario stops answering repairs once its exchange says it is quiet;
//! - in an erroneous call, where one rank's parts have another length, every rank finishes
//!   and reports the disagreement (blaming that rank), and the others' parts still arrive.
//!
//! `STEADFAST_SIM_SEEDS=n` sets the number of seeds; a failure prints the replay command.

use std::cell::RefCell;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use steadfast_coll::slots::{Board, Exchange, Sink};
use steadfast_proto::sweep;

struct Slot {
    state: u64,
    total: u64,
    crcs: Vec<u32>,
    data: Vec<u8>,
}

struct SimBoard {
    ranks: usize,
    cap: usize,
    slots: RefCell<Vec<Slot>>,
    repairs: RefCell<Vec<u64>>,
    done: RefCell<Vec<u64>>,
    rng: RefCell<ChaCha8Rng>,
    /// Chance that a write is damaged after its CRC, and that a copy is damaged in transit.
    corrupt: f64,
    bus: f64,
}

impl SimBoard {
    fn idx(&self, r: usize, p: usize) -> usize {
        r * 2 + p
    }
}

impl Board for SimBoard {
    fn ranks(&self) -> usize {
        self.ranks
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn state(&self, r: usize, p: usize) -> u64 {
        self.slots.borrow()[self.idx(r, p)].state
    }
    fn state_again(&self, r: usize, p: usize) -> u64 {
        self.state(r, p)
    }
    fn set_state(&self, r: usize, p: usize, v: u64, _writing: bool) {
        let i = self.idx(r, p);
        self.slots.borrow_mut()[i].state = v;
    }
    fn put(&self, r: usize, p: usize, off: usize, src: &[u8]) -> u32 {
        let i = self.idx(r, p);
        let crc = crc32c::crc32c(src);
        let mut slots = self.slots.borrow_mut();
        let d = &mut slots[i].data[off..off + src.len()];
        d.copy_from_slice(src);
        let mut rng = self.rng.borrow_mut();
        if !d.is_empty() && rng.gen_bool(self.corrupt) {
            let at = rng.gen_range(0..d.len());
            d[at] ^= 1 << rng.gen_range(0..8);
        }
        crc
    }
    fn take(&self, r: usize, p: usize, off: usize, dst: &mut [u8]) -> u32 {
        let i = self.idx(r, p);
        dst.copy_from_slice(&self.slots.borrow()[i].data[off..off + dst.len()]);
        let mut rng = self.rng.borrow_mut();
        if !dst.is_empty() && rng.gen_bool(self.bus) {
            let at = rng.gen_range(0..dst.len());
            dst[at] ^= 1 << rng.gen_range(0..8);
        }
        crc32c::crc32c(dst)
    }
    fn crc(&self, r: usize, p: usize, j: usize) -> u32 {
        self.slots.borrow()[self.idx(r, p)].crcs[j]
    }
    fn set_crc(&self, r: usize, p: usize, j: usize, crc: u32) {
        let i = self.idx(r, p);
        self.slots.borrow_mut()[i].crcs[j] = crc;
    }
    fn total(&self, r: usize, p: usize) -> u64 {
        self.slots.borrow()[self.idx(r, p)].total
    }
    fn set_total(&self, r: usize, p: usize, bytes: u64) {
        let i = self.idx(r, p);
        self.slots.borrow_mut()[i].total = bytes;
    }
    fn repairs(&self, r: usize) -> u64 {
        self.repairs.borrow()[r]
    }
    fn ask_repair(&self, r: usize) {
        self.repairs.borrow_mut()[r] += 1;
    }
    fn done(&self, r: usize) -> u64 {
        self.done.borrow()[r]
    }
    fn set_done(&self, r: usize, calls: u64) {
        self.done.borrow_mut()[r] = calls;
    }
}

/// A call of the scenario: `parts` parts of `len` bytes; `all_to_all`: rank `r` needs part
/// `r` of everyone (else part 0: an allgather, or a barrier without parts).
#[derive(Clone, Copy, Debug)]
struct Call {
    parts: usize,
    len: usize,
    all_to_all: bool,
    /// A barrier rooted here (`Exchange::start_rooted`).
    root: Option<usize>,
    /// Its ranks wait for their parent in the broadcast's binomial tree, not for the root
    /// (the engine's choice).
    tree: bool,
}

/// Whom `r` waits for to leave a barrier rooted at `root`: the root itself, or with `tree`
/// its parent in the binomial tree rooted there (the broadcast's).
fn parent(r: usize, root: usize, n: usize, tree: bool) -> Option<usize> {
    let vr = (r + n - root) % n;
    (vr != 0).then(|| if tree { (vr - (vr & vr.wrapping_neg()) + root) % n } else { root })
}

fn byte(seed: u64, call: usize, from: usize, part: usize, i: usize) -> u8 {
    let x = seed ^ (call as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (from as u64) << 40 ^ (part as u64) << 48 ^ (i as u64) << 8;
    (x.wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 56) as u8
}

struct Bufs(Vec<Vec<u8>>, usize, bool);
impl Sink for Bufs {
    fn dst(&mut self, r: usize) -> (usize, &mut [u8]) {
        let part = if self.2 { self.1 } else { 0 };
        (part, &mut self.0[r])
    }
}

struct Outcome {
    corrupt: u64,
    repairs: u64,
}

fn run(seed: u64) -> Result<Outcome, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = rng.gen_range(2..=8usize);
    let cap = 256;
    let ncalls = rng.gen_range(4..40usize);
    let calls: Vec<Call> = (0..ncalls)
        .map(|_| match rng.gen_range(0..4) {
            0 => Call { parts: 0, len: 0, all_to_all: false, root: None, tree: false },
            1 => Call { parts: 1, len: rng.gen_range(0..=cap), all_to_all: false, root: None, tree: false },
            2 => Call { parts: 0, len: 0, all_to_all: false, root: Some(rng.gen_range(0..n)), tree: rng.gen_bool(0.5) },
            _ => Call { parts: n, len: rng.gen_range(0..=cap / n), all_to_all: true, root: None, tree: false },
        })
        .collect();
    // An erroneous call: one rank contributes parts of another length (its count differs).
    // Every rank must still finish it, and report the disagreement.
    let odd: Option<(usize, usize, usize)> = rng.gen_bool(0.3).then(|| {
        let k = rng.gen_range(0..ncalls);
        (k, rng.gen_range(0..n), rng.gen_range(0..=cap / n))
    });
    let odd = odd.filter(|&(k, _, len)| calls[k].parts > 0 && calls[k].len != len);
    let len_of = |k: usize, r: usize| match odd {
        Some((ok, or, olen)) if ok == k && or == r => olen,
        _ => calls[k].len,
    };
    let faulty = rng.gen_bool(0.5);
    let board = SimBoard {
        ranks: n,
        cap,
        slots: RefCell::new((0..2 * n).map(|_| Slot { state: 0, total: 0, crcs: vec![0; n], data: vec![0; cap] }).collect()),
        repairs: RefCell::new(vec![0; n]),
        done: RefCell::new(vec![0; n]),
        rng: RefCell::new(ChaCha8Rng::seed_from_u64(seed ^ 0x5107)),
        corrupt: if faulty { rng.gen_range(0.0..0.2) } else { 0.0 },
        bus: if faulty { rng.gen_range(0.0..0.2) } else { 0.0 },
    };
    // Step weights: a few ranks run far less often than the others.
    let weights: Vec<u32> = (0..n).map(|_| if rng.gen_bool(0.25) { 1 } else { rng.gen_range(5..20) }).collect();
    let total: u32 = weights.iter().sum();
    // Keep every contribution, none, or the small ones only.
    let keep_max = match rng.gen_range(0..3) {
        0 => usize::MAX,
        1 => 0,
        _ => rng.gen_range(0..cap),
    };
    let mut ex: Vec<Exchange> = (0..n).map(|r| Exchange::new(r, n, keep_max)).collect();
    let mut owns: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
    let mut finished = vec![0usize; n];
    let mut gone = vec![false; n];
    let mut bufs: Vec<Option<Bufs>> = (0..n).map(|_| None).collect();
    let mut steps = 0u64;
    while finished.iter().any(|&f| f < ncalls) {
        steps += 1;
        if steps > 2_000_000 {
            return Err(format!("no end after {steps} steps: finished {finished:?}"));
        }
        let mut pick = rng.gen_range(0..total);
        let mut r = 0;
        while pick >= weights[r] {
            pick -= weights[r];
            r += 1;
        }
        if finished[r] == ncalls {
            // Done with the scenario (its communicator freed): answers repair requests, as
            // the engine does idle, until the exchange is quiet; then never again.
            if !gone[r] {
                if ex[r].quiet(&board) {
                    gone[r] = true;
                } else {
                    ex[r].serve(&board, &[]);
                }
            }
            continue;
        }
        let k = finished[r];
        let c = calls[k];
        if !ex[r].active() {
            if k >= 2 {
                if let Some(q) = (0..n).find(|&q| finished[q] + 1 < k) {
                    return Err(format!("rank {r} starts call {k} while rank {q} has finished only {} calls", finished[q]));
                }
            }
            owns[r] = (0..c.parts).map(|j| (0..len_of(k, r)).map(|i| byte(seed, k, r, j, i)).collect()).collect();
            let parts: Vec<&[u8]> = owns[r].iter().map(|v| v.as_slice()).collect();
            match c.root {
                Some(root) => ex[r].start_rooted(&board, root, parent(r, root, n, c.tree)),
                None => ex[r].start(&board, &parts),
            }
            .map_err(|e| format!("rank {r} call {k}: {e}"))?;
            let len = if c.parts == 0 { 0 } else { len_of(k, r) };
            bufs[r] = Some(Bufs((0..n).map(|_| vec![0; len]).collect(), r, c.all_to_all));
        }
        let b = bufs[r].as_mut().unwrap();
        let parts: Vec<&[u8]> = owns[r].iter().map(|v| v.as_slice()).collect();
        let done = ex[r].poll(&board, b, &parts).map_err(|e| format!("rank {r} call {k}: {e}"))?;
        if !done {
            // The rank a waiting rank says it waits for (its engine polls on for it while
            // that rank runs): another rank, one it cannot leave without.
            if let Some(q) = ex[r].awaited() {
                let needed = q != r
                    && q < n
                    && match c.root {
                        // A rooted barrier's other ranks wait for their parent's count.
                        Some(root) if r != root => parent(r, root, n, c.tree) == Some(q),
                        // Everyone else for the one part not in yet: never its own.
                        _ => ex[q].calls() as usize <= k || !finished.iter().all(|&f| f > k),
                    };
                if !needed {
                    return Err(format!("rank {r} call {k} says it waits for rank {q}, which it does not need"));
                }
            }
        }
        if done {
            if let Some(root) = c.root {
                // A rooted barrier: the root leaves only once everyone is in, the others only
                // once the root is out.
                let arrived = |q: usize| ex[q].calls() as usize > k;
                if r == root && !(0..n).all(arrived) {
                    return Err(format!("root {r} left call {k} before every rank arrived"));
                }
                if r != root && finished[root] <= k {
                    return Err(format!("rank {r} left rooted call {k} before root {root}"));
                }
                if let Some(q) = parent(r, root, n, c.tree) {
                    if finished[q] <= k {
                        return Err(format!("rank {r} left rooted call {k} before its parent {q}"));
                    }
                }
            }
            let b = bufs[r].take().unwrap();
            let odd_rank = odd.filter(|o| o.0 == k).map(|o| o.1);
            let found = ex[r].mismatch();
            match (odd_rank, found) {
                (None, None) => {}
                (None, Some(m)) => return Err(format!("rank {r} call {k}: a mismatch reported where there was none: {m:?}")),
                (Some(_), None) => return Err(format!("rank {r} call {k}: the odd rank's contribution went unnoticed")),
                (Some(o), Some(m)) if o != r && m.rank != o => return Err(format!("rank {r} call {k}: mismatch blamed on rank {} instead of {o}", m.rank)),
                (Some(_), Some(_)) => {}
            }
            if odd_rank == Some(r) {
                // The odd rank takes nobody's data.
                finished[r] += 1;
                continue;
            }
            for (from, got) in b.0.iter().enumerate() {
                if odd_rank == Some(from) {
                    continue;
                }
                let part = if c.all_to_all { r } else { 0 };
                let want: Vec<u8> = if c.parts == 0 { Vec::new() } else { (0..c.len).map(|i| byte(seed, k, from, part, i)).collect() };
                if from != r && *got != want {
                    return Err(format!("rank {r} call {k} ({c:?}): part from rank {from} differs"));
                }
            }
            finished[r] += 1;
        }
    }
    let corrupt = ex.iter().map(|e| e.counters.corrupt_detected).sum();
    let repairs = ex.iter().map(|e| e.counters.repairs_served).sum();
    Ok(Outcome { corrupt, repairs })
}

#[test]
fn sim_slot_exchange() {
    let seeds = sweep::seeds(1500, |i| sweep::spread(i, 0x51075));
    let out = sweep::sweep("slot exchange", "cargo test -p steadfast-coll --test slots", &seeds, run);
    if seeds.len() > 100 {
        // The faults were exercised, and repaired.
        assert!(out.iter().map(|o| o.corrupt).sum::<u64>() > 0);
        assert!(out.iter().map(|o| o.repairs).sum::<u64>() > 0);
    }
}
