//! Requests made of other requests: MPI_Isendrecv and MPI_Isendrecv_replace.
//!
//! The user-visible request stands for an internal receive and an internal send started at
//! once; `Engine::progress` completes it when both have completed, with the receive's
//! status (and the send's error if only the send failed). The replace variant sends from a
//! packed copy owned here, so the receive can land in the user's buffer at once.

use crate::error::MpiResult;
use crate::request::{RecvSpec, SendSpec, Status};
use crate::slab::Handle;
use crate::Engine;

/// One compound request in flight.
struct Compound {
    /// The request the application holds.
    req: Handle,
    recv: Handle,
    send: Handle,
    /// Packed copy the send reads from (replace variant); a heap block that never moves.
    _copy: Option<Vec<u8>>,
}

/// Compound requests in flight.
#[derive(Default)]
pub(crate) struct Compounds {
    active: Vec<Compound>,
}

impl Compounds {
    /// Whether no compound request is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
}

impl Engine {
    /// MPI_Isendrecv: start `recv` and `send`; returns the request completing when both have.
    pub fn isendrecv(&mut self, send: SendSpec, recv: RecvSpec) -> MpiResult<Handle> {
        self.start_compound(send, recv, None)
    }

    /// MPI_Isendrecv_replace: `send` and `recv` describe the same buffer; the data to send is
    /// packed first so the receive may overwrite the buffer before the send has left.
    pub fn isendrecv_replace(&mut self, send: SendSpec, recv: RecvSpec) -> MpiResult<Handle> {
        let n = send.dtype.packed_size(send.count);
        let mut copy = vec![0u8; n];
        // SAFETY: the application's buffer holds `count` elements of the type (MPI rule).
        unsafe { send.dtype.pack(send.buf, send.count, &mut copy) };
        let packed = SendSpec { buf: copy.as_ptr(), count: n, dtype: self.byte_type(), ..send };
        self.start_compound(packed, recv, Some(copy))
    }

    fn start_compound(&mut self, send: SendSpec, recv: RecvSpec, copy: Option<Vec<u8>>) -> MpiResult<Handle> {
        // Both are checked before either starts, so an argument error leaves nothing behind.
        let r = self.recv_init(recv, false)?;
        let s = match self.send_init(send, false) {
            Ok(s) => s,
            Err(e) => {
                self.release(r);
                return Err(e);
            }
        };
        if let Err(e) = self.start(r) {
            self.release(r);
            self.release(s);
            return Err(e);
        }
        if let Err(e) = self.start(s) {
            // The receive is already posted: withdraw it (a match cannot be undone).
            let _ = self.cancel(r);
            if self.is_complete(r).unwrap_or(true) {
                self.release(r);
            } else {
                let _ = self.request_free(r);
            }
            self.release(s);
            return Err(e);
        }
        let req = self.coll_request(false);
        self.compounds.active.push(Compound { req, recv: r, send: s, _copy: copy });
        self.compound_progress();
        Ok(req)
    }

    /// Complete the compound requests whose parts have completed (called from `progress`);
    /// true if one did.
    pub(crate) fn compound_progress(&mut self) -> bool {
        let mut finished = false;
        let mut i = 0;
        while i < self.compounds.active.len() {
            let c = &self.compounds.active[i];
            let done = |h| self.is_complete(h).unwrap_or(true);
            if !(done(c.recv) && done(c.send)) {
                i += 1;
                continue;
            }
            let c = self.compounds.active.swap_remove(i);
            let rs = self.status(c.recv).unwrap_or_default();
            let ss = self.status(c.send).unwrap_or_default();
            self.release(c.recv);
            self.release(c.send);
            let status = Status { error: rs.error.or(ss.error), ..rs };
            self.complete_request(c.req, status);
            finished = true;
        }
        finished
    }
}

impl Engine {
    /// MPI_Grequest_start: an active request that only [`Engine::complete_generalized`]
    /// completes (the application's operation runs outside the library).
    pub fn generalized_request(&mut self) -> Handle {
        self.coll_request(false)
    }

    /// MPI_Grequest_complete: complete generalized request `h` with `status`. The request
    /// goes away at once if the application already freed it.
    pub fn complete_generalized(&mut self, h: Handle, status: Status) -> MpiResult<()> {
        if self.is_complete(h)? {
            return crate::mpi_err!(Request, "the generalized request is already complete");
        }
        self.complete_request(h, status);
        Ok(())
    }
}
