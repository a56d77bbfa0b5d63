//! MPI_Bcast in run-through mode: a Corrected Tree (binomial tree with interleaved numbering,
//! then checked correction on the ring), driven by the same sans-IO state machine as the
//! simulator (`steadfast-coll`). Every live rank receives the data even when ranks of the
//! tree died, without waiting for the failure detector: a rank whose tree parent died is
//! reached by a ring neighbour's correction message.
//!
//! Every message is one eager packet: a two-byte protocol header followed by the packed
//! data, so no send ever waits for a receiver that already left the call. Broadcasts larger
//! than the eager limit use the ordinary schedules. Correction messages that arrive after a
//! rank returned are dropped when its next corrected broadcast on the communicator starts.

use std::collections::HashMap;
use std::time::Instant;

use steadfast_coll::{
    absolute_rank, relative_rank, BcastConfig, BcastState, Correction, CorrectionStart, Dissemination, Msg,
    Numbering, Topology, TreeKind,
};

use super::sched::SUB_BITS;
use super::Buf;
use crate::engine::Engine;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::matching::ANY_SOURCE;
use crate::slab::Handle;

/// Sub-tag of corrected-broadcast messages within the collective's tag.
const SUB: i32 = (1 << SUB_BITS) - 1;
/// Tags of finished broadcasts kept per communicator for dropping late messages.
const LATE_TAGS: usize = 8;

/// Configurations by process count, and recent tags per collective context.
#[derive(Default)]
pub struct CorrectedState {
    configs: HashMap<u32, BcastConfig>,
    finished: HashMap<u32, Vec<i32>>,
}

impl CorrectedState {
    fn config(&mut self, procs: u32) -> MpiResult<&BcastConfig> {
        if !self.configs.contains_key(&procs) {
            let intern = |e: String| MpiError::new(ErrorClass::Intern, format!("corrected tree: {e}"));
            let topology = Topology::new(TreeKind::Binomial, Numbering::Interleaved, procs).map_err(|e| intern(e.to_string()))?;
            let cfg = BcastConfig::new(
                procs,
                Dissemination::Tree { topology, ack: None },
                Correction::Checked,
                CorrectionStart::Overlapped,
            )
            .map_err(|e| intern(e.to_string()))?;
            self.configs.insert(procs, cfg);
        }
        self.configs.get(&procs).ok_or_else(|| MpiError::new(ErrorClass::Intern, "corrected tree configuration vanished"))
    }
}

impl Engine {
    /// Whether MPI_Bcast of `bytes` bytes on `comm` runs as a corrected tree.
    pub(crate) fn use_corrected_bcast(&self, comm: Handle, bytes: usize) -> bool {
        self.run_through()
            && bytes + Msg::WIRE_LEN <= self.eager_limit()
            && self.comm(comm).is_ok_and(|c| c.remote.is_none() && c.size() > 2)
    }

    /// MPI_Bcast as a corrected tree (run-through mode, see the module documentation).
    pub(crate) fn bcast_corrected(&mut self, comm: Handle, buf: &Buf, root: i32) -> MpiResult<()> {
        let c = self.comm(comm)?;
        let (size, rank, ctx) = (c.size(), c.rank, c.coll_ctx());
        if !(0..size).contains(&root) {
            return Err(MpiError::new(ErrorClass::Root, format!("root {root} is not a rank of the communicator (size {size})")));
        }
        let tag = self.next_tag(c.ctx) | SUB;
        // Late correction messages of earlier broadcasts on this communicator.
        let late = self.coll.corrected.finished.remove(&ctx).unwrap_or_default();
        for t in &late {
            while self.take_unexpected(ctx, ANY_SOURCE, *t) {}
        }
        let (procs, me, root_u) = (size as u32, rank as u32, root as u32);
        let cfg = self.coll.corrected.config(procs)?.clone();
        let bytes = buf.dtype.packed_size(buf.count);
        let origin = Instant::now();
        let now = || origin.elapsed().as_micros() as u64;
        let mut st = BcastState::new(&cfg, relative_rank(me, root_u, procs), now());
        // Message = protocol header + packed data.
        let mut msg = vec![0u8; Msg::WIRE_LEN + bytes];
        let mut have_data = rank == root;
        if have_data {
            // SAFETY: the application's buffer holds `count` elements of its type.
            unsafe { buf.dtype.pack(buf.ptr, buf.count, &mut msg[Msg::WIRE_LEN..]) };
        }
        let mut incoming = vec![0u8; Msg::WIRE_LEN + bytes];
        let mut recv: Option<Handle> = None;
        let mut result = Ok(());
        loop {
            // Send what the protocol wants sent.
            while let Some(t) = st.poll_transmit(&cfg, now()) {
                let dst = absolute_rank(t.dst, root_u, procs) as i32;
                msg[..Msg::WIRE_LEN].copy_from_slice(&t.msg.to_bytes());
                let w = self.comm(comm)?.peer_world(dst);
                if w.is_some_and(|w| self.is_failed(w)) {
                    continue;
                }
                // A send to a process that died unnoticed is lost, which the correction covers.
                if let Err(e) = self.coll_send_bytes(comm, dst, tag, &msg) {
                    if e.class != ErrorClass::ProcFailed {
                        result = Err(e);
                        break;
                    }
                }
            }
            if result.is_err() || (st.is_colored() && st.is_finished()) {
                break;
            }
            // Wait for the next message, or learn that no one is left to send one.
            let h = match recv {
                Some(h) => h,
                None => {
                    let h = self.coll_irecv(comm, ANY_SOURCE, tag, &mut incoming)?;
                    recv = Some(h);
                    h
                }
            };
            let root_world = self.comm(comm)?.peer_world(root);
            self.block_until(|e| {
                e.is_complete(h).unwrap_or(true)
                    || e.comm_is_revoked(comm)
                    || (!st.is_colored() && root_world.is_some_and(|w| e.is_failed(w)))
                    || e.all_others_failed(comm)
            })?;
            if self.is_complete(h)? {
                recv = None;
                let s = self.status(h)?;
                self.release(h);
                if s.error.is_some() || s.bytes as usize != incoming.len() {
                    self.dropped_packet();
                    continue;
                }
                let Ok(m) = Msg::from_bytes(&incoming[..Msg::WIRE_LEN]) else {
                    self.dropped_packet();
                    continue;
                };
                if !have_data && m != Msg::Ack {
                    msg[Msg::WIRE_LEN..].copy_from_slice(&incoming[Msg::WIRE_LEN..]);
                    have_data = true;
                }
                let from = relative_rank(s.source as u32, root_u, procs);
                st.handle(&cfg, now(), from, m);
                continue;
            }
            // No message: revoked, root dead before we got the data, or alone.
            if self.comm_is_revoked(comm) {
                result = Err(MpiError::new(ErrorClass::Revoked, "the communicator was revoked"));
            } else if !st.is_colored() {
                result = Err(MpiError::new(ErrorClass::ProcFailed, "the root of the broadcast failed before the data reached this process"));
            }
            break;
        }
        if let Some(h) = recv {
            let _ = self.cancel(h);
            let _ = self.request_free(h);
        }
        let tags = self.coll.corrected.finished.entry(ctx).or_default();
        tags.push(tag);
        if tags.len() > LATE_TAGS {
            tags.remove(0);
        }
        if result.is_ok() && rank != root {
            // SAFETY: as above, for the receive side.
            unsafe { buf.dtype.unpack(&msg[Msg::WIRE_LEN..], buf.ptr, buf.count) };
        }
        result
    }
}
