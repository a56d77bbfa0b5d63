//! The channel broadcast's primitive across hosts: one UDP multicast stream per
//! communicator (docs/chbcast.md, "The multicast driver").
//!
//! One member per host (the paper's SMP scheme: the host's lowest rank of the
//! communicator) binds a socket to the communicator's group address and port (so it sees
//! that group's datagrams only) and joins the group on the interface this host uses towards
//! the other hosts; the others only send, from an unbound socket. Every member sends with
//! loopback off: the members on the sender's own host get its frames through the host's
//! shared-memory channels, which the host's member in the group also fills with the frames
//! it receives (`channels.rs`). A frame goes out as the fragments of
//! [`steadfast_chbcast::datagram`], each tagged with a MAC keyed from the job key; whatever
//! does not check (another job, another stream, damage, truncation) is counted and dropped
//! by the caller.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

use steadfast_chbcast::datagram::{self, DatagramError, Key, Kind, Reassembly};

/// Socket buffer size asked for (the kernel caps it at `net.core.[rw]mem_max`).
const SOCKET_BUFFER: i32 = 4 << 20;

/// Where a communicator's stream goes: group, port, stream id. Rank 0 draws them and
/// sends them to the others as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    pub group: SocketAddrV4,
    pub id: u64,
}

impl Stream {
    /// A random group inside `range` (`a.b.c.d/len`, a multicast range), a random port
    /// and a random stream id.
    pub fn draw(range: &str) -> Result<Stream, String> {
        let (net, len) = range.split_once('/').ok_or_else(|| format!("`{range}` is not a.b.c.d/len"))?;
        let net: Ipv4Addr = net.trim().parse().map_err(|_| format!("`{net}` is not an IPv4 address"))?;
        let len: u32 = len.trim().parse().ok().filter(|l| (4..=32).contains(l)).ok_or_else(|| format!("`{len}` is not a prefix length from 4 to 32"))?;
        if !net.is_multicast() {
            return Err(format!("{net} is not a multicast address"));
        }
        let r = random_u64();
        let host_bits = if len == 32 { 0 } else { u32::MAX >> len };
        let group = Ipv4Addr::from((u32::from(net) & !host_bits) | (r as u32 & host_bits));
        // Ports 33000..60999: above the registered services most hosts run, below the
        // default ephemeral range of Linux (32768..60999 overlaps only harmlessly: the
        // socket is bound to the group address, not to the wildcard).
        let port = 33000 + ((r >> 32) % 28000) as u16;
        Ok(Stream { group: SocketAddrV4::new(group, port), id: random_u64() | 1 })
    }

    pub fn encode(&self) -> Vec<u8> {
        format!("{}:{}", self.group, self.id).into_bytes()
    }

    pub fn decode(b: &[u8]) -> Option<Stream> {
        let s = std::str::from_utf8(b).ok()?;
        let (addr, id) = s.rsplit_once(':')?;
        Some(Stream { group: addr.parse().ok()?, id: id.parse().ok()? })
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        u64::from_le_bytes(b)
    } else {
        // No entropy source: a collision with another stream is refused by the stream id
        // and the MAC, so time and pid are enough here.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        t ^ (u64::from(std::process::id()) << 32)
    }
}

fn setsockopt<T>(fd: i32, level: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points at a value of the size passed.
    let r = unsafe { libc::setsockopt(fd, level, name, (v as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One member's end of a communicator's multicast stream.
pub(crate) struct Mcast {
    sock: UdpSocket,
    stream: Stream,
    /// This member's rank in the communicator (its own datagrams come back by loopback).
    me: u32,
    key: Key,
    fragment: usize,
    reasm: Reassembly,
    buf: Vec<u8>,
}

/// What a drain of the socket found.
#[derive(Default)]
pub(crate) struct Drained {
    /// Datagrams refused (not ours, damaged, another stream).
    pub refused: u64,
    /// Probes of the stream seen.
    pub probes: u64,
}

impl Mcast {
    /// The socket of `stream` on the interface with address `iface`: bound to the group
    /// and joined when `join` (the host's member in the group), else for sending only.
    #[allow(clippy::too_many_arguments)]
    pub fn open(stream: Stream, iface: Ipv4Addr, join: bool, ttl: u32, me: u32, job_key: u64, fragment: usize, partial: usize) -> io::Result<Mcast> {
        // SAFETY: plain socket creation; the descriptor is owned by the UdpSocket below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh socket nobody else owns.
        let sock = unsafe { UdpSocket::from_raw_fd(fd) };
        // Every member on a host binds the same group and port.
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, &1i32)?;
        let (ip, port) = if join { (*stream.group.ip(), stream.group.port()) } else { (iface, 0) };
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
            sin_zero: [0; 8],
        };
        // SAFETY: `addr` is a valid sockaddr_in of the size passed.
        if unsafe { libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if join {
            sock.join_multicast_v4(stream.group.ip(), &iface)?;
        }
        let ifaddr = libc::in_addr { s_addr: u32::from(iface).to_be() };
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &ifaddr)?;
        sock.set_multicast_loop_v4(false)?;
        sock.set_multicast_ttl_v4(ttl)?;
        // Best effort: a small buffer only means more repairs.
        let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &SOCKET_BUFFER);
        let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &SOCKET_BUFFER);
        sock.set_nonblocking(true)?;
        Ok(Mcast { sock, stream, me, key: Key::from_job_key(job_key), fragment, reasm: Reassembly::new(partial), buf: vec![0; 1 << 16] })
    }

    /// Send the frame of broadcast `seq`. A full socket buffer loses the rest of the
    /// frame (the machine repairs it, as any loss); any other error is the primitive
    /// failing.
    pub fn write(&mut self, seq: u64, frame: &[u8]) -> io::Result<()> {
        let Some(ds) = datagram::fragments(&self.key, self.stream.id, self.me, seq, frame, self.fragment) else {
            return Err(io::Error::other("frame too large for the multicast stream"));
        };
        for d in ds {
            match self.sock.send_to(&d, self.stream.group) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Send a probe of the stream.
    pub fn probe(&self) -> io::Result<()> {
        let d = datagram::probe(&self.key, self.stream.id, self.me, self.stream.id);
        self.sock.send_to(&d, self.stream.group).map(|_| ())
    }

    /// Read every datagram waiting; each whole frame goes to `frame`.
    pub fn drain(&mut self, mut frame: impl FnMut(&[u8])) -> Drained {
        let mut out = Drained::default();
        loop {
            let n = match self.sock.recv(&mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return out,
            };
            let d = &self.buf[..n];
            match datagram::parse(&self.key, d) {
                Ok((h, _)) if h.stream != self.stream.id => out.refused += 1,
                Ok((h, _)) if h.kind == Kind::Probe => out.probes += 1,
                Ok((h, _)) if h.sender == self.me => {}
                Ok((h, payload)) => {
                    if let Some(f) = self.reasm.add(&h, payload) {
                        frame(&f);
                    }
                }
                Err(DatagramError::Length | DatagramError::Foreign | DatagramError::Tag | DatagramError::Crc | DatagramError::Fields) => out.refused += 1,
            }
        }
    }

    /// Wait up to `t` for a datagram.
    pub fn wait(&self, t: Duration) {
        let mut p = libc::pollfd { fd: self.sock.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = t.as_millis().clamp(0, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) };
    }

    /// Forget partial frames of broadcasts below `seq` (they are complete everywhere).
    pub fn forget_below(&mut self, seq: u64) {
        self.reasm.forget_below(seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_text_round_trips_and_draws_inside_its_range() {
        for _ in 0..100 {
            let s = Stream::draw("239.192.0.0/16").unwrap();
            assert_eq!(s.group.ip().octets()[..2], [239, 192]);
            assert!(s.group.port() >= 33000);
            assert_eq!(Stream::decode(&s.encode()), Some(s));
        }
        assert!(Stream::draw("10.0.0.0/8").is_err());
        assert!(Stream::draw("239.1.2.3").is_err());
        assert_eq!(Stream::decode(b"garbage"), None);
        assert_eq!(Stream::draw("239.1.2.3/32").unwrap().group.ip(), &Ipv4Addr::new(239, 1, 2, 3));
    }

    /// Two members on the loopback interface (where the kernel allows multicast): a frame
    /// of several fragments from one reaches the other whole; a datagram of another job is
    /// refused.
    #[test]
    fn a_frame_crosses_the_loopback_group() {
        let s = Stream::draw("239.255.77.0/24").unwrap();
        let lo = Ipv4Addr::LOCALHOST;
        let (Ok(mut a), Ok(mut b)) = (Mcast::open(s, lo, false, 0, 0, 7, 1000, 4), Mcast::open(s, lo, true, 0, 1, 7, 1000, 4)) else {
            eprintln!("no multicast on the loopback interface here; skipped");
            return;
        };
        // Loopback is how one host's sockets see each other's datagrams here; the driver
        // turns it off (host-mates get frames through shared memory).
        for m in [&a, &b] {
            m.sock.set_multicast_loop_v4(true).unwrap();
        }
        let frame: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        if a.write(3, &frame).is_err() {
            eprintln!("multicast send refused here; skipped");
            return;
        }
        let mut got = Vec::new();
        for _ in 0..100 {
            b.drain(|f| got.push(f.to_vec()));
            if !got.is_empty() {
                break;
            }
            b.wait(Duration::from_millis(10));
        }
        if got.is_empty() {
            eprintln!("multicast did not loop back here; skipped");
            return;
        }
        assert_eq!(got, vec![frame]);
        // Its own datagrams are not handed back to the sender.
        let mut own = 0;
        a.drain(|_| own += 1);
        assert_eq!(own, 0);
        let mut other = Mcast::open(s, lo, false, 0, 2, 8, 1000, 4).unwrap();
        other.sock.set_multicast_loop_v4(true).unwrap();
        other.write(4, b"forged").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut n = 0;
        let d = b.drain(|_| n += 1);
        assert_eq!(n, 0);
        assert!(d.refused >= 1);
    }
}
