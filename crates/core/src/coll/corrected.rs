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
use std::sync::Arc;
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
    configs: HashMap<u32, Arc<BcastConfig>>,
    finished: HashMap<u32, Vec<i32>>,
    /// The outgoing message, kept between calls.
    out: Vec<u8>,
}

impl CorrectedState {
    fn config(&mut self, procs: u32) -> MpiResult<Arc<BcastConfig>> {
        if let Some(c) = self.configs.get(&procs) {
            return Ok(c.clone());
        }
        let intern = |e: String| MpiError::new(ErrorClass::Intern, format!("corrected tree: {e}"));
        let topology = Topology::new(TreeKind::Binomial, Numbering::Interleaved, procs).map_err(|e| intern(e.to_string()))?;
        let cfg = BcastConfig::new(procs, Dissemination::Tree { topology, ack: None }, Correction::Checked, CorrectionStart::Overlapped)
            .map_err(|e| intern(e.to_string()))?;
        let cfg = Arc::new(cfg);
        self.configs.insert(procs, cfg.clone());
        Ok(cfg)
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
        let cfg = self.coll.corrected.config(procs)?;
        let bytes = buf.dtype.packed_size(buf.count);
        let origin = Instant::now();
        let now = || origin.elapsed().as_micros() as u64;
        let mut st = BcastState::new(&cfg, relative_rank(me, root_u, procs), now());
        // Message = protocol header + packed data.
        let mut msg = std::mem::take(&mut self.coll.corrected.out);
        msg.clear();
        msg.resize(Msg::WIRE_LEN + bytes, 0);
        let mut have_data = rank == root;
        if have_data {
            // SAFETY: the application's buffer holds `count` elements of its type.
            unsafe { buf.dtype.pack(buf.ptr, buf.count, &mut msg[Msg::WIRE_LEN..]) };
        }
        let root_world = self.comm(comm)?.peer_world(root);
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
            // Take the next message that arrived (all are eager, so no receive is posted).
            if let Some((src, data)) = self.take_eager(ctx, ANY_SOURCE, tag) {
                let m = match Msg::from_bytes(data.get(..Msg::WIRE_LEN).unwrap_or(&[])) {
                    Ok(m) if data.len() == msg.len() => m,
                    _ => {
                        self.dropped_packet();
                        continue;
                    }
                };
                if !have_data && m != Msg::Ack {
                    msg[Msg::WIRE_LEN..].copy_from_slice(&data[Msg::WIRE_LEN..]);
                    have_data = true;
                }
                st.handle(&cfg, now(), relative_rank(src as u32, root_u, procs), m);
                continue;
            }
            // Wait for one, or learn that no one is left to send one.
            self.block_until(|e| {
                e.has_unexpected(ctx, ANY_SOURCE, tag)
                    || e.comm_is_revoked(comm)
                    || (!st.is_colored() && root_world.is_some_and(|w| e.is_failed(w)))
                    || e.all_others_failed(comm)
            })?;
            if self.has_unexpected(ctx, ANY_SOURCE, tag) {
                continue;
            }
            if self.comm_is_revoked(comm) {
                result = Err(MpiError::new(ErrorClass::Revoked, "the communicator was revoked"));
            } else if !st.is_colored() {
                result = Err(MpiError::new(ErrorClass::ProcFailed, "the root of the broadcast failed before the data reached this process"));
            }
            break;
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
        if msg.capacity() <= 1 << 16 {
            self.coll.corrected.out = msg;
        }
        result
    }
}
