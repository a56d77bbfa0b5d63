//! Requests: one per pending operation, referenced by handle from C and from the wire.

use crate::datatype::TypeRef;
use crate::error::ErrorClass;

/// Completion status of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub error: Option<ErrorClass>,
    /// Bytes received (or, for sends, 0).
    pub bytes: u64,
    pub cancelled: bool,
}

/// Send modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Standard,
    Synchronous,
    Ready,
    Buffered,
}

/// Parameters of a send, kept for persistent requests.
#[derive(Debug, Clone)]
pub struct SendSpec {
    pub buf: *const u8,
    pub count: usize,
    pub dtype: TypeRef,
    pub comm: crate::Handle,
    pub dest: i32,
    pub tag: i32,
    pub mode: Mode,
}

/// Parameters of a receive, kept for persistent requests.
#[derive(Debug, Clone)]
pub struct RecvSpec {
    pub buf: *mut u8,
    pub count: usize,
    pub dtype: TypeRef,
    pub comm: crate::Handle,
    pub src: i32,
    pub tag: i32,
}

/// What a request does.
#[derive(Debug)]
pub enum Op {
    Send(SendSpec),
    Recv(RecvSpec),
    /// Already complete at creation (e.g. PROC_NULL, a buffered send's user-visible request).
    Null,
}

/// Progress of an active send.
#[derive(Debug, Default)]
pub struct SendState {
    /// Packed copy of non-contiguous or buffered data (stable address for single copy).
    pub owned: Option<Vec<u8>>,
    /// Bytes reserved in the attached Bsend buffer, released at completion.
    pub bsend_reserved: usize,
    /// Where the message went: world rank, context, and the id the receiver knows it by
    /// (the eager message id, or this request for a rendezvous), for MPI_Cancel.
    pub sent: Option<Sent>,
    /// MPI_Cancel asked the receiver to withdraw the message; the answer is pending.
    pub cancelling: bool,
    /// Streamed, this send completes once its data is in the path, the path copying what it
    /// may have to resend, not on the receiver's FIN after the path held the buffer (see
    /// `State::copy_sends`).
    pub unheld: bool,
}

/// Where a send went, for MPI_Cancel.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// World rank of the receiver.
    pub peer: u32,
    /// Context and the sender's rank in it, as the message header carries them.
    pub ctx: u32,
    pub src: i32,
    /// The message's sequence number among those sent to `peer` (its name at the receiver).
    pub seq: u64,
    /// For a rendezvous, the send request (for a buffered send, the internal request that
    /// carries the data); 0 for an eager message.
    pub id: u64,
    pub rendezvous: bool,
    /// A buffered send: this request completed locally and `id` (for a rendezvous) is the
    /// internal request that carries the data.
    pub buffered: bool,
}

/// Progress of an active receive.
#[derive(Debug, Default)]
pub struct RecvState {
    pub ctx: u32,
    /// Posted in the matcher (cancellable).
    pub posted: bool,
    /// The whole of a nonblocking collective at this rank (a leaf of a small MPI_Ibcast,
    /// `coll/small.rs`): it completes with a collective's status, reports a message shorter
    /// than its count as MPI_ERR_COUNT as a schedule would, and is not cancelled.
    pub coll: bool,
    /// Total length announced by the sender.
    pub expected: u64,
    /// Bytes arrived so far (rendezvous data).
    pub received: u64,
    /// Staging buffer for non-contiguous receive types; empty when there is none (an
    /// `Option` would leave bytes undefined, see [`MaybeRank`]).
    pub temp: Vec<u8>,
    /// World rank streaming rendezvous data to us, once the receive matched.
    pub peer: MaybeRank,
    /// The sender's sequence number of that rendezvous message.
    pub seq: u64,
    /// Logging modes: the sender's request this receive asked for the data (its `Cts`
    /// named it).
    pub sreq: u64,
}

/// A world rank or none. An `Option<u32>` leaves four bytes undefined when it is `None`;
/// the compiler then assembled a new request's receive state on the stack and copied it
/// in with loads wider than the stores that built it (a store-forwarding failure on every
/// request made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaybeRank(u32);

impl MaybeRank {
    pub const NONE: MaybeRank = MaybeRank(u32::MAX);

    /// World rank `w` (which is never `u32::MAX`: no job has that many ranks).
    pub fn some(w: u32) -> MaybeRank {
        debug_assert_ne!(w, u32::MAX);
        MaybeRank(w)
    }

    pub fn get(self) -> Option<u32> {
        (self != MaybeRank::NONE).then_some(self.0)
    }
}

impl Default for MaybeRank {
    fn default() -> MaybeRank {
        MaybeRank::NONE
    }
}

/// A request.
#[derive(Debug)]
pub struct Request {
    pub op: Op,
    pub persistent: bool,
    pub active: bool,
    pub complete: bool,
    /// MPI_Request_free was called: drop when complete.
    pub freed: bool,
    pub status: Status,
    pub send: SendState,
    pub recv: RecvState,
}

// SAFETY: raw buffer pointers belong to the application, which guarantees them valid while
// the request is active; the engine is used under one lock.
unsafe impl Send for Request {}

impl Request {
    /// A new, inactive request for `op`.
    pub fn new(op: Op, persistent: bool) -> Request {
        Request {
            op,
            persistent,
            active: false,
            complete: false,
            freed: false,
            status: Status::default(),
            send: SendState::default(),
            recv: RecvState::default(),
        }
    }
}
