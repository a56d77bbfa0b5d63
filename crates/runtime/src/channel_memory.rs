//! A channel memory server of `--ft channel-memory` (MPICH-V1): the network side of
//! `steadfast_logging::channel::ChannelMemory`. The launcher runs the job's servers as
//! threads; the wire and the ranks' side are in `steadfast_paths::cm`.
//!
//! One thread per connection reads deposits; a connection that reads its rank's stream
//! has a second thread that writes it, waking when something is stored for it.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use steadfast_logging::channel::{ChannelMemory, ConnId};
use steadfast_paths::cm::{self, Hello};

/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 1024;
/// Of those, connections that have not proved the key yet: a budget of their own, so that
/// idle strangers cannot take the places of the job's ranks.
const MAX_HANDSHAKES: usize = 64;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

struct Shared {
    cm: Mutex<ChannelMemory>,
    stored: Condvar,
}

/// A channel memory server bound to its address.
pub struct CmServer {
    listener: TcpListener,
    key: [u8; 32],
    shared: Arc<Shared>,
}

impl CmServer {
    /// A server on `addr` for a job of `size` ranks, keeping the streams of `hosted`,
    /// admitting whoever proves `key`.
    pub fn bind(addr: SocketAddr, key: [u8; 32], size: u32, hosted: Vec<u32>) -> io::Result<CmServer> {
        let listener = TcpListener::bind(addr)?;
        Ok(CmServer { listener, key, shared: Arc::new(Shared { cm: Mutex::new(ChannelMemory::new(size, hosted)), stored: Condvar::new() }) })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Reads the server's counters while it serves.
    pub fn stats_reader(&self) -> impl Fn() -> Option<steadfast_logging::channel::ChannelStats> + Send + 'static {
        let shared = self.shared.clone();
        move || shared.cm.lock().ok().map(|cm| cm.stats)
    }

    /// Serves on threads of this process until it ends.
    pub fn spawn(self) -> io::Result<()> {
        std::thread::Builder::new().name("steadfast-cm".into()).spawn(move || self.serve())?;
        Ok(())
    }

    /// Serves on this thread until the process ends: one thread per connection.
    pub fn serve(self) {
        let open = Arc::new(AtomicUsize::new(0));
        let handshaking = Arc::new(AtomicUsize::new(0));
        let ids = AtomicU64::new(1);
        for conn in self.listener.incoming() {
            let Ok(stream) = conn else { continue };
            if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS || handshaking.load(Ordering::Relaxed) >= MAX_HANDSHAKES {
                continue;
            }
            open.fetch_add(1, Ordering::Relaxed);
            handshaking.fetch_add(1, Ordering::Relaxed);
            let id = ids.fetch_add(1, Ordering::Relaxed);
            let (open2, shared, key) = (open.clone(), self.shared.clone(), self.key);
            let hs = Handshaking(Some(handshaking.clone()));
            let spawned = std::thread::Builder::new().name("steadfast-cm-conn".into()).spawn(move || {
                if let Err(e) = serve_connection(stream, id, &shared, &key, hs) {
                    if e.kind() != io::ErrorKind::UnexpectedEof {
                        tracing::debug!(conn = id, error = %e, "channel memory connection ended");
                    }
                }
                if let Ok(mut cm) = shared.cm.lock() {
                    cm.closed(id);
                }
                shared.stored.notify_all();
                open2.fetch_sub(1, Ordering::Relaxed);
            });
            if spawned.is_err() {
                open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// One place in the handshake budget, given back when the handshake ends either way.
struct Handshaking(Option<Arc<AtomicUsize>>);

impl Handshaking {
    fn done(&mut self) {
        if let Some(c) = self.0.take() {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.done();
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

fn serve_connection(mut s: TcpStream, id: ConnId, shared: &Arc<Shared>, key: &[u8; 32], mut hs: Handshaking) -> io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let (tag, body) = cm::read_frame_max(&mut s, cm::MAX_HANDSHAKE_FRAME)?;
    let hello = (tag == cm::HELLO).then(|| Hello::decode(&body)).flatten().ok_or_else(|| invalid("no hello"))?;
    if hello.version != cm::VERSION {
        s.write_all(&cm::frame(cm::REFUSED, &[format!("protocol version {} is not spoken here ({} is)", hello.version, cm::VERSION).as_bytes()]))?;
        return Err(invalid("version"));
    }
    let ours = cm::nonce()?;
    let mac = cm::handshake_mac(key, cm::ROLE_SERVER, &hello.nonce, &ours, hello.rank, hello.incarnation);
    s.write_all(&cm::frame(cm::CHALLENGE, &[&ours, &mac]))?;
    let (tag, body) = cm::read_frame_max(&mut s, cm::MAX_HANDSHAKE_FRAME)?;
    let want = cm::handshake_mac(key, cm::ROLE_CLIENT, &hello.nonce, &ours, hello.rank, hello.incarnation);
    let proved = tag == cm::PROOF && body.len() == 32 && blake3::Hash::from(want) == blake3::Hash::from(<[u8; 32]>::try_from(&body[..]).map_err(|_| invalid("proof"))?);
    if !proved {
        // Nothing is said to a stranger.
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "wrong key"));
    }
    let admitted = shared.cm.lock().map_err(|_| io::Error::other("channel memory state poisoned"))?.hello(id, hello.rank, hello.incarnation, hello.reads_from);
    if let Err(e) = admitted {
        s.write_all(&cm::frame(cm::REFUSED, &[e.to_string().as_bytes()]))?;
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()));
    }
    s.write_all(&cm::frame(cm::READY, &[]))?;
    hs.done();
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    let done = Arc::new(AtomicBool::new(false));
    let writer = if hello.reads_from.is_some() {
        let (w, shared, done) = (s.try_clone()?, shared.clone(), done.clone());
        Some(std::thread::Builder::new().name("steadfast-cm-out".into()).spawn(move || write_stream(w, id, &shared, &done))?)
    } else {
        None
    };
    let r = read_deposits(&mut s, id, shared);
    done.store(true, Ordering::Relaxed);
    shared.stored.notify_all();
    let _ = s.shutdown(std::net::Shutdown::Both);
    if let Some(w) = writer {
        let _ = w.join();
    }
    r
}

fn read_deposits(s: &mut TcpStream, id: ConnId, shared: &Shared) -> io::Result<()> {
    loop {
        let (tag, mut body) = cm::read_frame(s)?;
        if let Some(upto) = cm::release_upto(tag, &body) {
            shared.cm.lock().map_err(|_| io::Error::other("channel memory state poisoned"))?.release(id, upto);
            continue;
        }
        let to = cm::deposit_to(tag, &body).ok_or_else(|| invalid("not a deposit"))?;
        body.drain(..4);
        let stored = shared.cm.lock().map_err(|_| io::Error::other("channel memory state poisoned"))?.deposit(id, to, body);
        if stored {
            shared.stored.notify_all();
        }
    }
}

fn write_stream(mut w: TcpStream, id: ConnId, shared: &Shared, done: &AtomicBool) {
    loop {
        let next = {
            let Ok(mut cm) = shared.cm.lock() else { return };
            loop {
                if done.load(Ordering::Relaxed) {
                    return;
                }
                if let Some((from, f)) = cm.next_for(id) {
                    let out = cm::frame(cm::DELIVER, &[&from.to_le_bytes(), f]);
                    cm.advance(id);
                    break out;
                }
                match shared.stored.wait_timeout(cm, Duration::from_millis(500)) {
                    Ok((g, _)) => cm = g,
                    Err(_) => return,
                }
            }
        };
        if w.write_all(&next).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steadfast_paths::{cm::CmPath, PacketSink, Path, RawHeader, HDR_LEN};

    #[derive(Default)]
    struct Got(Vec<(u32, u8, Vec<u8>)>);
    impl PacketSink for Got {
        fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) {
            self.0.push((peer, hdr[0], payload.to_vec()));
        }
    }

    fn take(p: &mut CmPath, n: usize) -> Vec<(u32, u8, Vec<u8>)> {
        let mut g = Got::default();
        for _ in 0..2000 {
            p.poll(&mut g).unwrap();
            if g.0.len() >= n {
                break;
            }
            p.wait(Duration::from_millis(5)).unwrap();
        }
        g.0
    }

    #[test]
    fn ranks_exchange_through_the_server_and_a_new_process_gets_its_stream_again() {
        let key = cm::key_of_job(7);
        let server = CmServer::bind("127.0.0.1:0".parse().unwrap(), key, 2, vec![0, 1]).unwrap();
        let addr = server.local_addr().unwrap().to_string();
        let stats = server.stats_reader();
        server.spawn().unwrap();
        let mut a = CmPath::connect(0, 0, key, vec![addr.clone()], 0).unwrap();
        let mut b = CmPath::connect(1, 0, key, vec![addr.clone()], 0).unwrap();
        let h = |k: u8| -> RawHeader {
            let mut x = [0u8; HDR_LEN];
            x[0] = k;
            x
        };
        a.send(1, &h(1), b"one").unwrap();
        a.send(1, &h(2), &vec![9u8; 300_000]).unwrap();
        a.send(0, &h(3), b"self").unwrap();
        let got = take(&mut b, 2);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0, got[0].1, got[0].2.as_slice()), (0, 1, &b"one"[..]));
        assert_eq!(got[1].2.len(), 300_000);
        assert_eq!(take(&mut a, 1)[0].2, b"self");
        // Rank 1 restarts: the same stream from the start.
        drop(b);
        let mut b2 = CmPath::connect(1, 1, key, vec![addr.clone()], 0).unwrap();
        let again = take(&mut b2, 2);
        assert_eq!(again, got);
        // A stranger without the key gets nowhere.
        assert!(CmPath::connect(1, 2, cm::key_of_job(8), vec![addr.clone()], 0).is_err());
        // The old process of rank 1 is refused now.
        assert!(CmPath::connect(1, 0, key, vec![addr.clone()], 0).is_err());
        // An image of rank 1 that had read both frames is kept: they are released, and no
        // later process may read from before them.
        b2.release_stream(2).unwrap();
        // The release travels on b2's connection; a process of rank 1 admitted before the
        // server read it would make it stale (and rightly ignored), so wait for it.
        for _ in 0..400 {
            if stats().is_some_and(|s| s.released == 2) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(stats().map(|s| s.released), Some(2), "the release was not applied");
        drop(b2);
        let mut refused = None;
        for _ in 0..200 {
            match CmPath::connect(1, 3, key, vec![addr.clone()], 0) {
                Err(e) if e.to_string().contains("released") => {
                    refused = Some(e);
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        assert!(refused.is_some(), "a reader from before the release point was admitted");
        a.send(1, &h(4), b"after").unwrap();
        let mut b3 = CmPath::connect(1, 4, key, vec![addr], 2).unwrap();
        assert_eq!(take(&mut b3, 1)[0].2, b"after");
    }
}
