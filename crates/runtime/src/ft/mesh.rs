//! The control channel's sockets: one TCP listener per rank, a connection per peer opened
//! on first use (non-blocking), authenticated frames both ways.
//!
//! A connection carries frames in both directions; the connecting side introduces itself
//! with a Hello, so either end can answer on it. The kernel closes every socket of a process
//! that dies, so a connection that reaches end-of-file or fails is the "broken connection"
//! input of the failure detector — unless the peer said BYE first (MPI_Finalize). A
//! connection that sends anything but a valid frame of this job is foreign: it is dropped
//! and counted, and never names a suspect.
//!
//! Peers on the same host (a loopback address) are reached over a Unix stream socket in the
//! abstract namespace whose name is derived from the peer's TCP address, when it answers:
//! a frame over a Unix socket costs a quarter of the CPU time of one over loopback TCP
//! (no TCP/IP processing), which matters when many control threads share few cores.
//! Everything else (frames, Hello, end-of-file as the broken-connection input) is the same;
//! a peer without the Unix listener is reached over TCP. Any user can bind an abstract
//! name, so both ends check the other's credentials (`SO_PEERCRED`): a listener or a
//! connecting process of another user is never trusted (the connector falls back to TCP,
//! the acceptor drops and counts the connection), and a squatter can neither make a
//! healthy rank look dead nor keep the local path from working as TCP.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use steadfast_membership::Time;

use super::frame::{self, Frame, FrameKey, Kind};

/// An unidentified (no Hello yet) incoming connection is dropped after this long.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many incoming connections wait for their Hello at once; past it the oldest
/// is closed, so strangers cannot take the descriptors the job needs.
const MAX_PENDING_HELLOS: usize = 32;
/// A peer that lets this much unsent data pile up is treated as failed.
const MAX_BACKLOG: usize = 16 << 20;

/// What the sockets produced.
#[derive(Debug)]
pub enum MeshEvent {
    /// A valid frame from an identified peer, and when it was read (CLOCK_MONOTONIC ns).
    Frame(Frame, u64),
    /// The connection to `peer` broke (end-of-file, reset, refused): the process is gone.
    Broken {
        /// World rank of the peer.
        peer: u32,
        /// Its life, when it introduced itself on this connection.
        incarnation: Option<u32>,
        /// What happened, for logs.
        why: String,
    },
}

/// Poll-set entry kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// The listening socket.
    Listener,
    /// The local (Unix) listening socket.
    LocalListener,
    /// Connection slot `i`.
    Conn(usize),
}

/// A connection's socket: TCP, or a Unix stream socket to a peer on the same host.
#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
        }
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            // std's TcpStream writes with MSG_NOSIGNAL.
            Stream::Tcp(s) => (&*s).write(buf),
            // std's UnixStream writes with write(2): a write to a dead peer would raise
            // SIGPIPE, which kills a C program that does not ignore it.
            Stream::Unix(s) => {
                // SAFETY: `buf` is valid for `buf.len()` bytes; the descriptor is ours.
                let n = unsafe {
                    libc::send(
                        s.as_raw_fd(),
                        buf.as_ptr().cast(),
                        buf.len(),
                        libc::MSG_NOSIGNAL,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }
        }
    }

    fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Stream::Tcp(s) => s.take_error(),
            Stream::Unix(s) => s.take_error(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Abstract-namespace name of the Unix listener of the rank listening on TCP `addr`
/// (`None` unless `addr` is a loopback address: only then is the peer on this host).
fn local_name(addr: &SocketAddr) -> Option<Vec<u8>> {
    addr.ip()
        .is_loopback()
        .then(|| format!("steadfast-ft/{addr}").into_bytes())
}

/// A non-blocking Unix listener on the abstract name `name`.
fn local_listen(name: &[u8]) -> io::Result<UnixListener> {
    let fd = unix_socket()?;
    // SAFETY: `fd` is a fresh socket nobody else owns.
    let listener = unsafe { UnixListener::from_raw_fd(fd.into_raw()) };
    let (sa, len) = abstract_addr(name)?;
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
    let rc = unsafe {
        libc::bind(
            listener.as_raw_fd(),
            &sa as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain listen(2) on our socket.
    if unsafe { libc::listen(listener.as_raw_fd(), 1024) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

/// Connects to the abstract Unix name `name` without blocking (a Unix connect completes at
/// once or fails).
fn local_connect(name: &[u8]) -> io::Result<UnixStream> {
    let fd = unix_socket()?;
    // SAFETY: `fd` is a fresh socket nobody else owns.
    let stream = unsafe { UnixStream::from_raw_fd(fd.into_raw()) };
    let (sa, len) = abstract_addr(name)?;
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
    let rc = unsafe {
        libc::connect(
            stream.as_raw_fd(),
            &sa as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The name may have been squatted by another user: trust only our own uid.
    if !same_user(stream.as_raw_fd()) {
        return Err(io::Error::new(
            ErrorKind::PermissionDenied,
            "local control listener belongs to another user",
        ));
    }
    Ok(stream)
}

/// Whether the process at the other end of Unix socket `fd` runs as our effective user
/// (credentials recorded by the kernel at connect or listen time).
fn same_user(fd: RawFd) -> bool {
    // SAFETY: all-zero is a valid ucred.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid has no preconditions.
    rc == 0 && cred.uid == unsafe { libc::geteuid() }
}

/// A socket descriptor closed on drop unless handed over.
struct OwnedSock(RawFd);

impl OwnedSock {
    fn into_raw(self) -> RawFd {
        let fd = self.0;
        std::mem::forget(self);
        fd
    }
}

impl Drop for OwnedSock {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn unix_socket() -> io::Result<OwnedSock> {
    // SAFETY: plain socket(2) call.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedSock(fd))
}

fn abstract_addr(name: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // sun_path[0] stays 0: the abstract namespace (nothing in the file system).
    if name.len() + 1 > sa.sun_path.len() {
        return Err(io::Error::new(ErrorKind::InvalidInput, "name too long"));
    }
    for (d, &b) in sa.sun_path[1..].iter_mut().zip(name) {
        *d = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    Ok((sa, len as libc::socklen_t))
}

#[derive(Debug)]
struct Conn {
    stream: Stream,
    peer: Option<u32>,
    incarnation: Option<u32>,
    connecting: bool,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    wpos: usize,
    opened: Time,
}

impl Conn {
    fn pending_write(&self) -> bool {
        self.wpos < self.wbuf.len()
    }
}

/// Every control-channel socket of one rank.
#[derive(Debug)]
pub struct Mesh {
    me: u32,
    size: u32,
    incarnation: u32,
    key: FrameKey,
    listener: TcpListener,
    /// The Unix listener for peers on this host (none if it could not be created).
    local: Option<UnixListener>,
    addrs: Vec<Option<SocketAddr>>,
    conns: Vec<Option<Conn>>,
    route: Vec<Option<usize>>,
    departed: Vec<bool>,
    lost: Vec<bool>,
    events: VecDeque<MeshEvent>,
    /// After an accept error (out of descriptors), the listener rests until then.
    listener_rest: Option<Time>,
    /// Connections dropped for sending something that is not a frame of this job.
    pub foreign: u64,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock
}

impl Mesh {
    /// Sockets of rank `me` of `size`, listening on `listener` (already bound).
    pub fn new(
        me: u32,
        size: u32,
        incarnation: u32,
        key: FrameKey,
        listener: TcpListener,
    ) -> io::Result<Mesh> {
        listener.set_nonblocking(true)?;
        // Silent connections wait in the kernel, not in our descriptor table.
        steadfast_paths::tcp::defer_accept(&listener, 2);
        let local = listener
            .local_addr()
            .ok()
            .as_ref()
            .and_then(local_name)
            .and_then(|name| match local_listen(&name) {
                Ok(l) => Some(l),
                Err(e) => {
                    tracing::debug!(error = %e, "no local control listener; peers use TCP");
                    None
                }
            });
        let n = size as usize;
        Ok(Mesh {
            me,
            size,
            incarnation,
            key,
            listener,
            local,
            addrs: vec![None; n],
            conns: Vec::new(),
            route: vec![None; n],
            departed: vec![false; n],
            lost: vec![false; n],
            events: VecDeque::new(),
            listener_rest: None,
            foreign: 0,
        })
    }

    /// Control-channel addresses of the peers (index = rank).
    pub fn set_addrs(&mut self, addrs: Vec<Option<SocketAddr>>) {
        let n = self.size as usize;
        self.addrs = addrs;
        self.addrs.resize(n, None);
    }

    /// Next event, if any.
    pub fn next_event(&mut self) -> Option<MeshEvent> {
        self.events.pop_front()
    }

    /// Whether a connection to `peer` is open (or opening).
    pub fn has_route(&self, peer: u32) -> bool {
        self.route.get(peer as usize).is_some_and(Option::is_some)
    }

    /// Whether `peer` said goodbye.
    pub fn is_departed(&self, peer: u32) -> bool {
        self.departed.get(peer as usize).copied().unwrap_or(false)
    }

    /// Sends one frame to `peer`, connecting first if needed. A peer whose connection broke
    /// is not contacted again (until it connects to us); the loss was reported once.
    pub fn send(&mut self, now: Time, peer: u32, kind: Kind, payload: &[u8]) {
        if peer == self.me || peer >= self.size {
            return;
        }
        let p = peer as usize;
        if self.lost[p] || self.departed[p] {
            return;
        }
        let idx = match self.route[p] {
            Some(i) => i,
            None => match self.connect(now, peer) {
                Some(i) => i,
                None => return,
            },
        };
        // Stamped at the last moment, so the receiver's latency excludes our own handling.
        let sent_ns = super::mono_ns();
        let Some(c) = self.conns[idx].as_mut() else {
            return;
        };
        frame::encode(&self.key, kind, self.me, sent_ns, payload, &mut c.wbuf);
        if c.wbuf.len() - c.wpos > MAX_BACKLOG {
            self.close(idx, "peer does not read (backlog limit)".into());
            return;
        }
        if !c.connecting {
            self.flush(idx);
        }
    }

    fn connect(&mut self, now: Time, peer: u32) -> Option<usize> {
        let p = peer as usize;
        let Some(addr) = self.addrs[p] else {
            tracing::warn!(peer, "no control-channel address for peer");
            return None;
        };
        // A peer on this host: its Unix listener if it answers, else TCP.
        let local = local_name(&addr).and_then(|name| local_connect(&name).ok());
        let res = match local {
            Some(s) => Ok((Stream::Unix(s), true)),
            None => connect_nonblocking(&addr).map(|(s, connected)| {
                let _ = s.set_nodelay(true);
                (Stream::Tcp(s), connected)
            }),
        };
        match res {
            Ok((stream, connected)) => {
                let mut wbuf = Vec::new();
                let mut hello = [0u8; 8];
                hello[..4].copy_from_slice(&self.incarnation.to_be_bytes());
                hello[4..].copy_from_slice(&self.size.to_be_bytes());
                frame::encode(
                    &self.key,
                    Kind::Hello,
                    self.me,
                    now.as_nanos() as u64,
                    &hello,
                    &mut wbuf,
                );
                let idx = self.insert(Conn {
                    stream,
                    peer: Some(peer),
                    incarnation: None,
                    connecting: !connected,
                    rbuf: Vec::new(),
                    wbuf,
                    wpos: 0,
                    opened: now,
                });
                self.route[p] = Some(idx);
                Some(idx)
            }
            Err(e) => {
                self.report_lost(peer, None, format!("connect to {addr}: {e}"));
                None
            }
        }
    }

    fn insert(&mut self, c: Conn) -> usize {
        match self.conns.iter().position(Option::is_none) {
            Some(i) => {
                self.conns[i] = Some(c);
                i
            }
            None => {
                self.conns.push(Some(c));
                self.conns.len() - 1
            }
        }
    }

    fn report_lost(&mut self, peer: u32, incarnation: Option<u32>, why: String) {
        let p = peer as usize;
        if self.departed[p] || self.lost[p] {
            return;
        }
        self.lost[p] = true;
        self.events.push_back(MeshEvent::Broken {
            peer,
            incarnation,
            why,
        });
    }

    /// Closes connection `idx`; a broken connection to an identified peer is reported.
    fn close(&mut self, idx: usize, why: String) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::take) else {
            return;
        };
        if let Some(peer) = c.peer {
            let p = peer as usize;
            if self.route[p] == Some(idx) {
                // Another open connection to the same peer, if any, carries on.
                self.route[p] = self
                    .conns
                    .iter()
                    .position(|o| o.as_ref().is_some_and(|o| o.peer == Some(peer)));
            }
            self.report_lost(peer, c.incarnation, why);
        } else {
            tracing::debug!(%why, "unidentified control connection closed");
        }
    }

    fn flush(&mut self, idx: usize) {
        let Some(c) = self.conns[idx].as_mut() else {
            return;
        };
        while c.pending_write() {
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(0) => break,
                Ok(n) => c.wpos += n,
                Err(e) if would_block(&e) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.close(idx, format!("write: {e}"));
                    return;
                }
            }
        }
        if !c.pending_write() {
            c.wbuf.clear();
            c.wpos = 0;
        } else if c.wpos > 64 << 10 {
            c.wbuf.drain(..c.wpos);
            c.wpos = 0;
        }
    }

    /// Adds the sockets to a poll set.
    pub fn poll_set(&self, fds: &mut Vec<libc::pollfd>, tags: &mut Vec<Tag>) {
        let mut add = |fd: RawFd, events: i16, tag: Tag| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            tags.push(tag);
        };
        // A listener that cannot accept stays readable: leave it out while it rests, or the
        // loop would spin.
        if self.listener_rest.is_none() {
            add(self.listener.as_raw_fd(), libc::POLLIN, Tag::Listener);
            if let Some(l) = &self.local {
                add(l.as_raw_fd(), libc::POLLIN, Tag::LocalListener);
            }
        }
        for (i, c) in self.conns.iter().enumerate() {
            if let Some(c) = c {
                let mut ev = libc::POLLIN;
                if c.connecting || c.pending_write() {
                    ev |= libc::POLLOUT;
                }
                add(c.stream.as_raw_fd(), ev, Tag::Conn(i));
            }
        }
    }

    /// Handles readiness `revents` of the socket tagged `tag`.
    pub fn ready(&mut self, now: Time, tag: Tag, revents: i16) {
        match tag {
            Tag::Listener => self.accept(now),
            Tag::LocalListener => self.accept_local(now),
            Tag::Conn(idx) => self.conn_ready(now, idx, revents),
        }
    }

    fn accept(&mut self, now: Time) {
        // At most half the pending budget per call: a peer's connection accepted now is
        // among the newest, never the oldest closed to make room before its Hello is read.
        for _ in 0..MAX_PENDING_HELLOS / 2 {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let pending = || self.conns.iter().flatten().filter(|c| c.peer.is_none());
                    if pending().count() >= MAX_PENDING_HELLOS {
                        let oldest = self
                            .conns
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| c.as_ref().is_some_and(|c| c.peer.is_none()))
                            .min_by_key(|(_, c)| c.as_ref().map(|c| c.opened))
                            .map(|(i, _)| i);
                        if let Some(i) = oldest {
                            self.foreign += 1;
                            self.close(i, "too many connections without hello".into());
                        }
                    }
                    self.insert(Conn {
                        stream: Stream::Tcp(stream),
                        peer: None,
                        incarnation: None,
                        connecting: false,
                        rbuf: Vec::new(),
                        wbuf: Vec::new(),
                        wpos: 0,
                        opened: now,
                    });
                }
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "control channel accept failed; retrying in 100 ms");
                    self.listener_rest = Some(now + Duration::from_millis(100));
                    return;
                }
            }
        }
    }

    fn accept_local(&mut self, now: Time) {
        let Some(l) = &self.local else { return };
        let mut accepted = Vec::new();
        loop {
            match l.accept() {
                Ok((stream, _)) => {
                    if !same_user(stream.as_raw_fd()) {
                        self.foreign += 1;
                        continue; // another user's process: closed unread
                    }
                    if stream.set_nonblocking(true).is_ok() {
                        accepted.push(stream);
                    }
                }
                Err(e) if would_block(&e) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "local control channel accept failed; retrying in 100 ms");
                    self.listener_rest = Some(now + Duration::from_millis(100));
                    break;
                }
            }
        }
        for stream in accepted {
            self.insert(Conn {
                stream: Stream::Unix(stream),
                peer: None,
                incarnation: None,
                connecting: false,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                wpos: 0,
                opened: now,
            });
        }
    }

    fn conn_ready(&mut self, now: Time, idx: usize, revents: i16) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        if c.connecting {
            if revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) == 0 {
                return;
            }
            match c.stream.take_error() {
                Ok(None) => c.connecting = false,
                Ok(Some(e)) | Err(e) => {
                    self.close(idx, format!("connect: {e}"));
                    return;
                }
            }
        }
        if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            self.read(now, idx);
        }
        if self.conns[idx].as_ref().is_some_and(Conn::pending_write) {
            self.flush(idx);
        }
    }

    fn read(&mut self, _now: Time, idx: usize) {
        let rx_ns = super::mono_ns();
        let mut chunk = [0u8; 16 << 10];
        let mut closed: Option<String> = None;
        {
            let Some(c) = self.conns[idx].as_mut() else {
                return;
            };
            loop {
                match c.stream.read(&mut chunk) {
                    Ok(0) => {
                        closed = Some("connection closed by peer".into());
                        break;
                    }
                    Ok(n) => {
                        c.rbuf.extend_from_slice(&chunk[..n]);
                        // A short read emptied the socket: another read would only say so
                        // (an end-of-file right behind the data shows at the next poll).
                        if n < chunk.len() {
                            break;
                        }
                    }
                    Err(e) if would_block(&e) => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        closed = Some(format!("read: {e}"));
                        break;
                    }
                }
            }
        }
        // Frames that arrived before the end still count (a BYE right before closing).
        self.parse(rx_ns, idx);
        if let Some(why) = closed {
            self.close(idx, why);
        }
    }

    fn parse(&mut self, rx_ns: u64, idx: usize) {
        let mut used = 0;
        loop {
            let Some(c) = self.conns[idx].as_mut() else {
                return;
            };
            let frame = match frame::decode(&self.key, &c.rbuf[used..]) {
                Ok(None) => break,
                Ok(Some((f, n))) => {
                    used += n;
                    f
                }
                Err(e) => {
                    self.foreign += 1;
                    tracing::warn!(error = %e, peer = ?c.peer, "dropping control connection: not a frame of this job");
                    // An identified peer that sends garbage is broken; a stranger is just dropped.
                    self.close(idx, format!("bad frame: {e}"));
                    return;
                }
            };
            match c.peer {
                None => {
                    let ok = frame.kind == Kind::Hello
                        && frame.from < self.size
                        && frame.from != self.me
                        && frame.payload.len() == 8
                        && frame.payload[4..8] == self.size.to_be_bytes();
                    if !ok {
                        self.foreign += 1;
                        tracing::warn!(from = frame.from, kind = ?frame.kind, "control connection without a valid hello");
                        self.close(idx, "no valid hello".into());
                        return;
                    }
                    let inc = u32::from_be_bytes([
                        frame.payload[0],
                        frame.payload[1],
                        frame.payload[2],
                        frame.payload[3],
                    ]);
                    c.peer = Some(frame.from);
                    c.incarnation = Some(inc);
                    let p = frame.from as usize;
                    // It reached us, so it is reachable again (a process back under its id).
                    self.lost[p] = false;
                    if self.route[p].is_none() {
                        self.route[p] = Some(idx);
                    }
                }
                Some(peer) if frame.from != peer => {
                    self.foreign += 1;
                    tracing::warn!(peer, from = frame.from, "frame with a foreign sender id");
                    self.close(idx, "sender id does not match the connection".into());
                    return;
                }
                Some(peer) => {
                    if frame.kind == Kind::Bye {
                        self.departed[peer as usize] = true;
                    }
                }
            }
            self.events.push_back(MeshEvent::Frame(frame, rx_ns));
        }
        if let Some(c) = self.conns[idx].as_mut() {
            c.rbuf.drain(..used);
        }
    }

    /// Drops incoming connections that never said hello; ends the listener's rest.
    pub fn expire(&mut self, now: Time) {
        if self.listener_rest.is_some_and(|t| t <= now) {
            self.listener_rest = None;
        }
        for i in 0..self.conns.len() {
            let stale = self.conns[i]
                .as_ref()
                .is_some_and(|c| c.peer.is_none() && now.saturating_sub(c.opened) >= HELLO_TIMEOUT);
            if stale {
                self.foreign += 1;
                self.close(i, "no hello in time".into());
            }
        }
    }

    /// When [`Mesh::expire`] has something to do next.
    pub fn next_deadline(&self) -> Option<Time> {
        self.conns
            .iter()
            .flatten()
            .filter(|c| c.peer.is_none())
            .map(|c| c.opened + HELLO_TIMEOUT)
            .chain(self.listener_rest)
            .min()
    }

    /// Says BYE on every connection and waits (at most `limit`) for it to be written.
    pub fn goodbye(&mut self, now: Time, limit: Duration) {
        for i in 0..self.conns.len() {
            if let Some(c) = self.conns[i].as_mut() {
                if c.peer.is_some() && !c.connecting {
                    frame::encode(
                        &self.key,
                        Kind::Bye,
                        self.me,
                        now.as_nanos() as u64,
                        &[],
                        &mut c.wbuf,
                    );
                    self.flush(i);
                }
            }
        }
        let deadline = std::time::Instant::now() + limit;
        loop {
            let mut fds: Vec<libc::pollfd> = self
                .conns
                .iter()
                .flatten()
                .filter(|c| c.pending_write() && !c.connecting)
                .map(|c| libc::pollfd {
                    fd: c.stream.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                })
                .collect();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if fds.is_empty() || left.is_zero() {
                break;
            }
            // SAFETY: `fds` is a valid slice of pollfd structs.
            unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    left.as_millis().max(1) as i32,
                )
            };
            for i in 0..self.conns.len() {
                if self.conns[i].as_ref().is_some_and(Conn::pending_write) {
                    self.flush(i);
                }
            }
        }
    }

    /// Number of open connections (for tests and logs).
    pub fn open_connections(&self) -> usize {
        self.conns.iter().flatten().count()
    }
}

/// Starts a TCP connection without blocking: `(stream, true)` if it is already established,
/// `(stream, false)` if it completes later (POLLOUT, then `take_error`).
fn connect_nonblocking(addr: &SocketAddr) -> io::Result<(TcpStream, bool)> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2) call; the descriptor is owned by the TcpStream right after.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nobody else owns.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin =
                unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
            let sin6 = unsafe {
                &mut *(&mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr_in6)
            };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: `ss` holds a valid address of `len` bytes for this socket's family.
    let rc = unsafe {
        libc::connect(
            fd,
            &ss as *const libc::sockaddr_storage as *const libc::sockaddr,
            len as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok((stream, true));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok((stream, false))
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` in a forked child as user 65534 (nobody) and returns the child's pid, or
    /// `None` where that is impossible (not root).
    fn as_nobody(f: impl FnOnce()) -> Option<libc::pid_t> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to act as another user");
            return None;
        }
        // SAFETY: the child only makes system calls, then exits without unwinding.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: dropping privileges in the child.
            unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(65534, 65534, 65534) != 0
                    || libc::setresuid(65534, 65534, 65534) != 0
                {
                    libc::_exit(3);
                }
            }
            f();
            // SAFETY: leave without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        Some(pid)
    }

    /// Security: another user squatting a rank's abstract Unix name (accepting and
    /// dropping connections, which made healthy ranks look dead) is not trusted: the
    /// connector refuses it, and the acceptor refuses another user's connections.
    #[test]
    fn squatted_local_names_are_not_trusted() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let name = local_name(&l.local_addr().unwrap()).unwrap();
        let (sa, len) = abstract_addr(&name).unwrap();
        let Some(pid) = as_nobody(move || unsafe {
            // SAFETY: plain socket calls on the child's own descriptors.
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            if libc::bind(fd, &sa as *const libc::sockaddr_un as *const libc::sockaddr, len) != 0
                || libc::listen(fd, 64) != 0
            {
                libc::_exit(4);
            }
            loop {
                let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                if c >= 0 {
                    libc::close(c);
                }
            }
        }) else {
            return;
        };
        // Wait until the squatter listens.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (sa, len) = abstract_addr(&name).unwrap();
            // SAFETY: probe connect on a fresh socket, closed right after.
            let up = unsafe {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let ok = libc::connect(fd, &sa as *const libc::sockaddr_un as *const libc::sockaddr, len) == 0;
                libc::close(fd);
                ok
            };
            if up {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "squatter never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        let res = local_connect(&name);
        // A rank's own listener on another name is still trusted.
        let mine = TcpListener::bind("127.0.0.1:0").unwrap();
        let my_name = local_name(&mine.local_addr().unwrap()).unwrap();
        let _own = local_listen(&my_name).unwrap();
        let own = local_connect(&my_name);
        // An accepting rank refuses a connection from another user.
        let mut m = mesh(0, 2, 9);
        let mesh_name = local_name(&m.listener.local_addr().unwrap()).unwrap();
        let (msa, mlen) = abstract_addr(&mesh_name).unwrap();
        let intruder = as_nobody(move || unsafe {
            // SAFETY: plain socket calls on the child's own descriptors.
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            if libc::connect(fd, &msa as *const libc::sockaddr_un as *const libc::sockaddr, mlen) != 0 {
                libc::_exit(5);
            }
            libc::sleep(10);
        })
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while m.foreign == 0 && std::time::Instant::now() < deadline {
            m.accept_local(Duration::ZERO);
            std::thread::sleep(Duration::from_millis(5));
        }
        let foreign = m.foreign;
        let open = m.open_connections();
        // SAFETY: ending the children we forked.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::kill(intruder, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::waitpid(intruder, std::ptr::null_mut(), 0);
        }
        assert!(res.is_err(), "connected to another user's listener");
        assert!(own.is_ok(), "own listener refused: {own:?}");
        assert_eq!(foreign, 1, "another user's connection was not refused");
        assert_eq!(open, 0);
    }

    fn mesh(me: u32, size: u32, key: u64) -> Mesh {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        Mesh::new(me, size, 0, FrameKey::from_job_key(key), l).unwrap()
    }

    fn addr(m: &Mesh) -> SocketAddr {
        m.listener.local_addr().unwrap()
    }

    /// Polls every mesh until `done` or the time limit.
    fn pump(ms: &mut [&mut Mesh], mut done: impl FnMut(&mut [&mut Mesh]) -> bool) {
        let start = std::time::Instant::now();
        while !done(ms) {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "meshes did not converge"
            );
            for m in ms.iter_mut() {
                let mut fds = Vec::new();
                let mut tags = Vec::new();
                m.poll_set(&mut fds, &mut tags);
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1) };
                for (f, t) in fds.iter().zip(tags) {
                    if f.revents != 0 {
                        m.ready(Time::ZERO, t, f.revents);
                    }
                }
            }
        }
    }

    /// Sends a query from `from` to rank 1 (`to`) and waits until `to` has it.
    fn query(from: &mut Mesh, to: &mut Mesh) {
        from.send(Time::ZERO, 1, Kind::HowAreYou, b"q");
        let mut got = Vec::new();
        pump(&mut [from, to], |ms| {
            while let Some(e) = ms[1].next_event() {
                got.push(e);
            }
            got.iter()
                .any(|e| matches!(e, MeshEvent::Frame(f, _) if f.kind == Kind::HowAreYou))
        });
    }

    #[test]
    fn same_host_peers_use_the_local_socket_else_tcp() {
        let mut a = mesh(0, 2, 7);
        let mut b = mesh(1, 2, 7);
        assert!(b.local.is_some(), "a loopback rank listens locally too");
        let addrs = vec![Some(addr(&a)), Some(addr(&b))];
        a.set_addrs(addrs.clone());
        b.set_addrs(addrs.clone());
        query(&mut a, &mut b);
        let unix = |m: &Mesh| {
            m.conns
                .iter()
                .flatten()
                .map(|c| matches!(c.stream, Stream::Unix(_)))
                .collect::<Vec<_>>()
        };
        assert_eq!(unix(&a), vec![true]);
        assert_eq!(unix(&b), vec![true]);
        // A write to a dead peer is an error, not SIGPIPE (this test binary ignores SIGPIPE
        // like every Rust program, so check the flag's effect directly on a socket pair).
        let (x, y) = UnixStream::pair().unwrap();
        drop(y);
        let sx = Stream::Unix(x);
        let _ = sx.write(b"1");
        let e = sx.write(b"2").expect_err("the peer is gone");
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
        // A peer without the local listener (another host, or it could not create it) is
        // reached over TCP, and its death is still seen.
        let mut a = mesh(0, 2, 8);
        let mut b = mesh(1, 2, 8);
        b.local = None;
        a.set_addrs(vec![Some(addr(&a)), Some(addr(&b))]);
        query(&mut a, &mut b);
        assert_eq!(unix(&a), vec![false]);
        drop(b);
        let mut c = mesh(1, 2, 9);
        let mut broken = false;
        pump(&mut [&mut a, &mut c], |ms| {
            while let Some(e) = ms[0].next_event() {
                broken |= matches!(e, MeshEvent::Broken { peer: 1, .. });
            }
            broken
        });
    }

    #[test]
    fn frames_flow_both_ways_and_death_is_seen() {
        let mut a = mesh(0, 3, 7);
        let mut b = mesh(1, 3, 7);
        let addrs = vec![Some(addr(&a)), Some(addr(&b)), None];
        a.set_addrs(addrs.clone());
        b.set_addrs(addrs);
        a.send(Time::ZERO, 1, Kind::HowAreYou, b"q");
        let mut got_b = Vec::new();
        pump(&mut [&mut a, &mut b], |ms| {
            while let Some(e) = ms[1].next_event() {
                got_b.push(e);
            }
            got_b.len() >= 2
        });
        assert!(
            matches!(&got_b[0], MeshEvent::Frame(f, _) if f.kind == Kind::Hello && f.from == 0)
        );
        assert!(
            matches!(&got_b[1], MeshEvent::Frame(f, _) if f.kind == Kind::HowAreYou && f.payload == b"q")
        );
        // b answers on the same connection (no address needed).
        b.send(Time::ZERO, 0, Kind::IAmAlive, &[]);
        let mut got_a = Vec::new();
        pump(&mut [&mut a, &mut b], |ms| {
            while let Some(e) = ms[0].next_event() {
                got_a.push(e);
            }
            !got_a.is_empty()
        });
        assert!(
            matches!(&got_a[0], MeshEvent::Frame(f, _) if f.kind == Kind::IAmAlive && f.from == 1)
        );
        assert_eq!(b.open_connections(), 1);
        // b dies: a sees the broken connection, once.
        drop(b);
        let mut c = mesh(2, 3, 7);
        let mut broken = Vec::new();
        pump(&mut [&mut a, &mut c], |ms| {
            while let Some(e) = ms[0].next_event() {
                broken.push(e);
            }
            !broken.is_empty()
        });
        assert!(matches!(
            &broken[0],
            MeshEvent::Broken {
                peer: 1,
                incarnation: None,
                ..
            }
        ));
        a.send(Time::ZERO, 1, Kind::HowAreYou, &[]);
        assert!(a.next_event().is_none());
    }

    #[test]
    fn refused_connection_is_a_broken_one() {
        let mut a = mesh(0, 2, 7);
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_addr = dead.local_addr().unwrap();
        drop(dead);
        a.set_addrs(vec![None, Some(dead_addr)]);
        a.send(Time::ZERO, 1, Kind::HowAreYou, &[]);
        let mut ev = Vec::new();
        pump(&mut [&mut a], |ms| {
            while let Some(e) = ms[0].next_event() {
                ev.push(e);
            }
            !ev.is_empty()
        });
        assert!(
            matches!(&ev[0], MeshEvent::Broken { peer: 1, .. }),
            "{ev:?}"
        );
    }

    #[test]
    fn bye_marks_departure_and_foreign_peers_are_dropped() {
        let mut a = mesh(0, 2, 7);
        let mut b = mesh(1, 2, 7);
        let addrs = vec![Some(addr(&a)), Some(addr(&b))];
        a.set_addrs(addrs.clone());
        b.set_addrs(addrs);
        b.send(Time::ZERO, 0, Kind::IAmAlive, &[]);
        pump(&mut [&mut a, &mut b], |ms| {
            ms[0].open_connections() == 1 && ms[0].next_event().is_some()
        });
        b.goodbye(Time::ZERO, Duration::from_millis(200));
        drop(b);
        let mut ev = Vec::new();
        pump(&mut [&mut a], |ms| {
            while let Some(e) = ms[0].next_event() {
                ev.push(e);
            }
            ms[0].open_connections() == 0
        });
        assert!(a.is_departed(1));
        assert!(
            !ev.iter().any(|e| matches!(e, MeshEvent::Broken { .. })),
            "{ev:?}"
        );

        // A stranger with another job's key, and one speaking another protocol.
        let mut other = mesh(1, 2, 8);
        other.set_addrs(vec![Some(addr(&a)), None]);
        other.send(Time::ZERO, 0, Kind::IAmAlive, &[]);
        let mut junk = TcpStream::connect(addr(&a)).unwrap();
        junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        pump(&mut [&mut a, &mut other], |ms| ms[0].foreign >= 2);
        pump(&mut [&mut a], |ms| ms[0].open_connections() == 0);
        assert!(
            a.next_event().is_none(),
            "a foreign peer must not be reported"
        );
    }
}
