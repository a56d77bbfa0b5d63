//! Keep a path answering its peers while the rank blocks elsewhere.
//!
//! At MPI_Finalize a rank waits until everything it sent was acknowledged, then blocks in
//! the launcher's fence. On a reliable path a peer may still be waiting for one of *our*
//! ACKs (the first one was lost): if nobody polls our sockets during the fence, that peer
//! retransmits forever and never reaches the fence. [`Linger`] moves the path to a helper
//! thread that keeps polling it until the fence is over.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{PacketSink, Path, RawHeader};

/// A path being polled on a helper thread.
pub struct Linger {
    stop: Arc<AtomicBool>,
    late: Arc<AtomicU64>,
    handle: Option<JoinHandle<Box<dyn Path>>>,
}

struct Discard<'a>(&'a AtomicU64);

impl PacketSink for Discard<'_> {
    fn packet(&mut self, _peer: u32, _hdr: &RawHeader, _payload: &[u8]) {
        // Every message this rank needed was received before it finalized; anything
        // new is a message nobody will receive (an erroneous program).
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Linger {
    /// Starts polling `path` on a helper thread.
    pub fn start(mut path: Box<dyn Path>) -> Linger {
        let stop = Arc::new(AtomicBool::new(false));
        let late = Arc::new(AtomicU64::new(0));
        let (s, l) = (Arc::clone(&stop), Arc::clone(&late));
        let handle = std::thread::Builder::new().name("steadfast-linger".into()).spawn(move || {
            while !s.load(Ordering::Acquire) {
                if let Err(e) = path.poll(&mut Discard(&l)) {
                    tracing::debug!("linger: {e}");
                }
                let _ = path.wait(Duration::from_millis(2));
            }
            path
        });
        match handle {
            Ok(h) => Linger { stop, late, handle: Some(h) },
            Err(e) => {
                // No thread: nothing polls during the fence, which only matters if an
                // ACK was lost at that very moment.
                tracing::warn!("cannot start the linger thread: {e}");
                Linger { stop, late, handle: None }
            }
        }
    }

    /// Stops the helper thread and gives the path back (None if the thread could not be
    /// started or panicked). Also returns how many packets arrived meanwhile.
    pub fn stop(mut self) -> (Option<Box<dyn Path>>, u64) {
        self.stop.store(true, Ordering::Release);
        let path = self.handle.take().and_then(|h| h.join().ok());
        (path, self.late.load(Ordering::Relaxed))
    }
}
