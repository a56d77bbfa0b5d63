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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use crate::request::Mode;
    use crate::PROC_NULL;

    fn send(e: &Engine, buf: &[u8], dest: i32, tag: i32) -> SendSpec {
        SendSpec { buf: buf.as_ptr(), count: buf.len(), dtype: e.byte_type(), comm: e.world, dest, tag, mode: Mode::Standard }
    }

    fn recv(e: &Engine, buf: &mut [u8], src: i32, tag: i32) -> RecvSpec {
        RecvSpec { buf: buf.as_mut_ptr(), count: buf.len(), dtype: e.byte_type(), comm: e.world, src, tag }
    }

    #[test]
    fn isendrecv_with_oneself_completes_with_the_receive_status() {
        let mut e = Engine::init(None, None).unwrap();
        let out = [1u8, 2, 3, 4];
        let mut inb = [0u8; 8];
        let (s, r) = (send(&e, &out, 0, 7), recv(&e, &mut inb, 0, 7));
        let h = e.isendrecv(s, r).unwrap();
        let st = e.wait(h).unwrap();
        assert_eq!((st.source, st.tag, st.bytes, st.error), (0, 7, 4, None));
        assert!(e.release(h));
        assert_eq!(&inb[..4], &out);
        assert!(e.compounds.is_empty());
    }

    #[test]
    fn replace_sends_the_data_from_before_the_receive() {
        let mut e = Engine::init(None, None).unwrap();
        let mut buf = [10u8, 11, 12];
        let other = [20u8, 21, 22];
        // The message for the replace's receive is already there (tag 2), so the receive
        // overwrites the buffer at once; the send (tag 1) must still carry 10 11 12.
        let o = e.isend(send(&e, &other, 0, 2)).unwrap();
        let (s, r) = (send(&e, &buf, 0, 1), recv(&e, &mut buf, 0, 2));
        let h = e.isendrecv_replace(s, r).unwrap();
        e.wait(h).unwrap();
        e.wait(o).unwrap();
        assert_eq!(buf, other);
        let mut got = [0u8; 3];
        let g = e.irecv(recv(&e, &mut got, 0, 1)).unwrap();
        e.wait(g).unwrap();
        assert_eq!(got, [10, 11, 12]);
    }

    #[test]
    fn proc_null_ends_and_argument_errors() {
        let mut e = Engine::init(None, None).unwrap();
        let out = [5u8];
        let mut inb = [9u8];
        let (s, r) = (send(&e, &out, PROC_NULL, 0), recv(&e, &mut inb, PROC_NULL, 0));
        let h = e.isendrecv(s, r).unwrap();
        let st = e.wait(h).unwrap();
        assert_eq!((st.source, st.bytes), (PROC_NULL, 0));
        assert_eq!(inb, [9]);
        // A bad destination fails before anything starts: nothing is left in flight.
        let (s, r) = (send(&e, &out, 3, 0), recv(&e, &mut inb, 0, 0));
        assert_eq!(e.isendrecv(s, r).unwrap_err().class, ErrorClass::Rank);
        assert!(e.compounds.is_empty());
        let mut probe = [0u8];
        let p = e.irecv(recv(&e, &mut probe, crate::matching::ANY_SOURCE, crate::matching::ANY_TAG)).unwrap();
        e.progress().unwrap();
        assert!(!e.is_complete(p).unwrap(), "a message was sent by the failed call");
    }

    #[test]
    fn generalized_request_completes_only_when_told() {
        let mut e = Engine::init(None, None).unwrap();
        let h = e.generalized_request();
        e.progress().unwrap();
        assert!(!e.is_complete(h).unwrap());
        let st = Status { source: 4, tag: 5, error: None, bytes: 6, cancelled: false };
        e.complete_generalized(h, st).unwrap();
        assert_eq!(e.wait(h).unwrap(), st);
        assert_eq!(e.complete_generalized(h, st).unwrap_err().class, ErrorClass::Request);
    }
}
