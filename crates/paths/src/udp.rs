//! UDP datagrams as a [`Wire`] for the reliable path: one socket per local route
//! address, each bound to that address only (never the wildcard address).
//!
//! **Routes.** Every rank opens one socket per local endpoint and publishes them as
//! `key=ip:port;key=ip:port…`. For each peer, the routes are the pairs of endpoints with
//! the same key, in key order (and publication order within a key), so both ends number
//! them alike. Keys come from `STEADFAST_ROUTES`:
//! - unset: one endpoint, the address this host uses to reach the launcher's control
//!   server (127.0.0.1 in a single-host job), key `default`;
//! - a comma-separated list of selectors, each a subnet (`10.77.1.0/24`), an interface
//!   name (`eth1`) or an address (`127.0.0.2`): route *i* uses the local address the
//!   *i*-th selector matches, key `r<i>`;
//! - `auto`: every up, non-loopback IPv4 address of the host, keyed by its subnet (two
//!   hosts share a route per subnet they both sit on).
//!
//! When two ranks share no key they use one route between their first endpoints.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::reliable::{Wire, WireSend};
use crate::{PathCounters, PathError};

/// Socket buffer size asked for (the kernel caps it at `net.core.[rw]mem_max`).
const SOCKET_BUFFER: usize = 4 << 20;

/// A local address to open a route socket on, with the key that pairs it with peers'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// Address to bind (port 0: the kernel picks).
    pub ip: Ipv4Addr,
    /// Pairing key (see the module docs).
    pub key: String,
}

/// An IPv4 interface address of this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    pub name: String,
    pub ip: Ipv4Addr,
    pub prefix: u8,
    pub up: bool,
    pub loopback: bool,
}

/// The host's IPv4 interface addresses (`getifaddrs`).
pub fn interfaces() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        if family != libc::AF_INET {
            continue;
        }
        // SAFETY: AF_INET addresses are sockaddr_in; the name is a C string.
        let (ip, mask, name) = unsafe {
            let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
            let mask = if ifa.ifa_netmask.is_null() {
                0
            } else {
                u32::from_be((*(ifa.ifa_netmask as *const libc::sockaddr_in)).sin_addr.s_addr)
            };
            (
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                mask,
                std::ffi::CStr::from_ptr(ifa.ifa_name).to_string_lossy().into_owned(),
            )
        };
        out.push(IfAddr {
            name,
            ip,
            prefix: mask.count_ones() as u8,
            up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
            loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0,
        });
    }
    // SAFETY: freeing the list getifaddrs returned.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn network(ip: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix.min(32))) };
    Ipv4Addr::from(u32::from(ip) & mask)
}

/// The local address the kernel would use to reach `to` (no packet is sent).
pub fn local_address_towards(to: SocketAddr) -> io::Result<IpAddr> {
    let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0".parse() } else { "[::]:0".parse() }
        .map_err(|_| io::Error::other("address literal"))?;
    let s = UdpSocket::bind(bind)?;
    s.connect(to)?;
    Ok(s.local_addr()?.ip())
}

/// The endpoints to open, from a `STEADFAST_ROUTES` value and the control server's
/// address (see the module docs).
pub fn local_endpoints(
    routes: Option<&str>,
    control: Option<SocketAddr>,
    ifs: &[IfAddr],
) -> Result<Vec<LocalEndpoint>, PathError> {
    let spec = routes.map(str::trim).filter(|s| !s.is_empty());
    match spec {
        None => {
            let ip = match control {
                Some(c) if !c.ip().is_loopback() => match local_address_towards(c) {
                    Ok(IpAddr::V4(ip)) => ip,
                    Ok(IpAddr::V6(_)) => {
                        return Err(PathError::Udp("the control server is IPv6; only IPv4 routes are supported".into()))
                    }
                    Err(e) => {
                        return Err(PathError::Udp(format!("no local address reaches the control server {c}: {e}")))
                    }
                },
                _ => Ipv4Addr::LOCALHOST,
            };
            Ok(vec![LocalEndpoint { ip, key: "default".into() }])
        }
        Some("auto") => {
            let mut v: Vec<LocalEndpoint> = ifs
                .iter()
                .filter(|i| i.up && !i.loopback)
                .map(|i| LocalEndpoint { ip: i.ip, key: format!("{}/{}", network(i.ip, i.prefix), i.prefix) })
                .collect();
            if v.is_empty() {
                v.push(LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "default".into() });
            }
            Ok(v)
        }
        Some(list) => {
            let mut v = Vec::new();
            for (i, sel) in list.split(',').map(str::trim).enumerate() {
                let key = format!("r{i}");
                let found = if let Some((net, len)) = sel.split_once('/') {
                    let net: Ipv4Addr = net
                        .parse()
                        .map_err(|_| PathError::Config(format!("STEADFAST_ROUTES: {sel:?} is not a subnet")))?;
                    let len: u8 = len.parse().ok().filter(|l| *l <= 32).ok_or_else(|| {
                        PathError::Config(format!("STEADFAST_ROUTES: {sel:?} has a bad prefix length"))
                    })?;
                    ifs.iter().find(|f| network(f.ip, len) == network(net, len)).map(|f| f.ip)
                } else if let Ok(ip) = sel.parse::<Ipv4Addr>() {
                    Some(ip)
                } else {
                    ifs.iter().find(|f| f.name == sel).map(|f| f.ip)
                };
                match found {
                    Some(ip) => v.push(LocalEndpoint { ip, key }),
                    None => tracing::warn!(
                        "STEADFAST_ROUTES: {sel:?} matches no address of this host; route {i} not used here"
                    ),
                }
            }
            if v.is_empty() {
                return Err(PathError::Config(format!("STEADFAST_ROUTES={list:?} matches no address of this host")));
            }
            Ok(v)
        }
    }
}

/// A published endpoint of a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Remote {
    key: String,
    addr: SocketAddrV4,
}

fn parse_published(s: &str) -> Result<Vec<Remote>, PathError> {
    let mut v = Vec::new();
    for item in s.split(';').filter(|i| !i.is_empty()) {
        let (key, addr) = item.split_once('=').ok_or_else(|| PathError::Udp(format!("bad endpoint {item:?}")))?;
        let addr: SocketAddrV4 = addr.parse().map_err(|_| PathError::Udp(format!("bad endpoint address {addr:?}")))?;
        v.push(Remote { key: key.to_owned(), addr });
    }
    if v.is_empty() {
        return Err(PathError::Udp(format!("no endpoints in {s:?}")));
    }
    Ok(v)
}

/// What a rank publishes as `udp.<rank>`: the incarnation of the process that opened the
/// endpoints, then the endpoints ([`UdpWire::published`]): `N@key=ip:port;…`. One value,
/// so that a peer never pairs one incarnation's endpoints with another's number.
pub fn with_incarnation(incarnation: u16, published: &str) -> String {
    format!("{incarnation}@{published}")
}

/// Splits a value made by [`with_incarnation`] into the incarnation and the endpoints
/// (a value without the prefix is incarnation 0).
pub fn split_incarnation(s: &str) -> Result<(u16, &str), PathError> {
    match s.split_once('@') {
        Some((n, rest)) => {
            let inc = n.trim().parse().map_err(|_| PathError::Udp(format!("bad incarnation in {s:?}")))?;
            Ok((inc, rest))
        }
        None => Ok((0, s)),
    }
}

/// Pairs local and remote endpoints into routes: `(local index, remote index)`, the same
/// list (mirrored) on both ends.
fn pair_routes(local: &[String], remote: &[String]) -> Vec<(usize, usize)> {
    let mut keys: Vec<&String> = local.iter().filter(|k| remote.contains(k)).collect();
    keys.sort();
    keys.dedup();
    let mut routes = Vec::new();
    for k in keys {
        let l = local.iter().enumerate().filter(|(_, x)| *x == k).map(|(i, _)| i);
        let r = remote.iter().enumerate().filter(|(_, x)| *x == k).map(|(i, _)| i);
        routes.extend(l.zip(r));
    }
    if routes.is_empty() && !local.is_empty() && !remote.is_empty() {
        routes.push((0, 0));
    }
    routes.truncate(usize::from(u8::MAX));
    routes
}

#[derive(Debug, Clone, Copy)]
struct Route {
    sock: usize,
    to: SocketAddrV4,
}

/// UDP sockets of one rank, one per local route endpoint.
pub struct UdpWire {
    socks: Vec<UdpSocket>,
    local: Vec<LocalEndpoint>,
    ports: Vec<u16>,
    peers: Vec<Vec<Route>>,
    next_sock: usize,
    send_errors: u64,
}

impl UdpWire {
    /// Opens one socket per endpoint for a job of `nranks` ranks.
    pub fn bind(endpoints: &[LocalEndpoint], nranks: u32) -> Result<UdpWire, PathError> {
        let mut socks = Vec::new();
        let mut ports = Vec::new();
        for ep in endpoints {
            let s = UdpSocket::bind(SocketAddrV4::new(ep.ip, 0))
                .map_err(|e| PathError::Udp(format!("bind {}: {e}", ep.ip)))?;
            s.set_nonblocking(true)?;
            set_buffer(&s, libc::SO_RCVBUF, SOCKET_BUFFER);
            set_buffer(&s, libc::SO_SNDBUF, SOCKET_BUFFER);
            ports.push(s.local_addr()?.port());
            socks.push(s);
        }
        Ok(UdpWire {
            socks,
            local: endpoints.to_vec(),
            ports,
            peers: vec![Vec::new(); nranks as usize],
            next_sock: 0,
            send_errors: 0,
        })
    }

    /// What to publish for peers: `key=ip:port;…`.
    pub fn published(&self) -> String {
        self.local
            .iter()
            .zip(&self.ports)
            .map(|(ep, port)| format!("{}={}:{}", ep.key, ep.ip, port))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Records `peer`'s published endpoints and derives the routes to it.
    pub fn set_peer(&mut self, peer: u32, published: &str) -> Result<(), PathError> {
        let remote = parse_published(published)?;
        let lk: Vec<String> = self.local.iter().map(|e| e.key.clone()).collect();
        let rk: Vec<String> = remote.iter().map(|r| r.key.clone()).collect();
        let routes = pair_routes(&lk, &rk).into_iter().map(|(l, r)| Route { sock: l, to: remote[r].addr }).collect();
        let slot = self.peers.get_mut(peer as usize).ok_or_else(|| PathError::Udp(format!("no such peer {peer}")))?;
        *slot = routes;
        Ok(())
    }

    /// Smallest receive buffer the kernel granted a route socket (bytes, as the kernel
    /// accounts them: about twice the payload it holds).
    pub fn recv_buffer(&self) -> usize {
        self.socks.iter().map(|s| get_buffer(s, libc::SO_RCVBUF)).min().unwrap_or(0)
    }

    /// Number of route sockets.
    pub fn sockets(&self) -> usize {
        self.socks.len()
    }

    /// Local socket addresses, one per endpoint.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.socks.iter().filter_map(|s| s.local_addr().ok()).collect()
    }
}

fn set_buffer(s: &UdpSocket, opt: i32, bytes: usize) {
    let v = bytes as libc::c_int;
    // SAFETY: setsockopt with a c_int option value on our socket.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn get_buffer(s: &UdpSocket, opt: i32) -> usize {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one c_int into `v`.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        v.max(0) as usize
    } else {
        0
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = a.port().to_be();
    sa.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    sa
}

impl Wire for UdpWire {
    fn routes(&self, peer: u32) -> u8 {
        self.peers.get(peer as usize).map_or(0, |r| r.len() as u8)
    }

    fn send(&mut self, peer: u32, route: u8, header: &[u8], payload: &[u8]) -> WireSend {
        let Some(r) = self.peers.get(peer as usize).and_then(|v| v.get(usize::from(route))).copied() else {
            return WireSend::RouteDown(format!("no route {route} to rank {peer}"));
        };
        let sa = sockaddr(r.to);
        let iov = [
            libc::iovec { iov_base: header.as_ptr() as *mut libc::c_void, iov_len: header.len() },
            libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() },
        ];
        loop {
            // SAFETY: msghdr points at `sa` and `iov`, which outlive the call.
            let n = unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_name = &sa as *const libc::sockaddr_in as *mut libc::c_void;
                msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
                msg.msg_iovlen = if payload.is_empty() { 1 } else { 2 };
                libc::sendmsg(self.socks[r.sock].as_raw_fd(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
            };
            if n >= 0 {
                return WireSend::Sent;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => return WireSend::WouldBlock,
                _ => {
                    self.send_errors += 1;
                    return WireSend::RouteDown(format!("send to {}: {e}", r.to));
                }
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let n = self.socks.len();
        for k in 0..n {
            let i = (self.next_sock + k) % n;
            // SAFETY: `buf` is valid for `buf.len()` bytes of writes.
            let r = unsafe {
                libc::recv(
                    self.socks[i].as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r >= 0 {
                // Next call starts at the following socket: no route starves the others.
                self.next_sock = (i + 1) % n;
                return Ok(Some(r as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                // Errors queued by ICMP (e.g. port unreachable) concern an earlier send.
                Some(libc::ECONNREFUSED) | Some(libc::EHOSTUNREACH) | Some(libc::ENETUNREACH) => {}
                _ => return Err(e),
            }
        }
        Ok(None)
    }

    fn wait(&mut self, timeout: Duration, want_write: bool) {
        let ev = if want_write { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
        let mut fds: Vec<libc::pollfd> =
            self.socks.iter().map(|s| libc::pollfd { fd: s.as_raw_fd(), events: ev, revents: 0 }).collect();
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: fds is a valid array for the duration of the call.
        unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    }

    fn add_counters(&self, _c: &mut PathCounters) {}

    fn set_peer(&mut self, peer: u32, published: &str) -> Result<(), PathError> {
        UdpWire::set_peer(self, peer, published)
    }

    fn describe(&self) -> Vec<String> {
        vec![format!(
            "udp endpoints {}",
            self.local_addrs().iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" ")
        )]
    }

    fn route_label(&self, peer: u32, route: u8) -> String {
        match self.peers.get(peer as usize).and_then(|v| v.get(usize::from(route))) {
            Some(r) => {
                let from = self.socks[r.sock].local_addr().map(|a| a.to_string()).unwrap_or_default();
                format!("{from}->{}", r.to)
            }
            None => format!("route {route}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_pair_by_key_and_mirror() {
        let a = vec!["r0".to_string(), "r1".to_string()];
        let b = vec!["r1".to_string(), "r0".to_string()];
        assert_eq!(pair_routes(&a, &b), vec![(0, 1), (1, 0)]);
        assert_eq!(pair_routes(&b, &a), vec![(1, 0), (0, 1)]);
        // Only shared keys; none shared: one route between the first endpoints.
        let c = vec!["r1".to_string()];
        assert_eq!(pair_routes(&a, &c), vec![(1, 0)]);
        let d = vec!["x".to_string()];
        assert_eq!(pair_routes(&a, &d), vec![(0, 0)]);
    }

    #[test]
    fn selectors_pick_local_addresses() {
        let ifs = vec![
            IfAddr { name: "lo".into(), ip: Ipv4Addr::LOCALHOST, prefix: 8, up: true, loopback: true },
            IfAddr { name: "r1".into(), ip: "10.77.1.1".parse().unwrap(), prefix: 24, up: true, loopback: false },
            IfAddr { name: "r2".into(), ip: "10.77.2.1".parse().unwrap(), prefix: 24, up: true, loopback: false },
        ];
        let e = local_endpoints(Some("10.77.2.0/24,r1,127.0.0.2"), None, &ifs).unwrap();
        assert_eq!(e.iter().map(|e| e.ip.to_string()).collect::<Vec<_>>(), ["10.77.2.1", "10.77.1.1", "127.0.0.2"]);
        assert_eq!(e.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["r0", "r1", "r2"]);
        let auto = local_endpoints(Some("auto"), None, &ifs).unwrap();
        assert_eq!(auto.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["10.77.1.0/24", "10.77.2.0/24"]);
        assert_eq!(local_endpoints(None, None, &ifs).unwrap()[0].ip, Ipv4Addr::LOCALHOST);
        assert!(local_endpoints(Some("10.99.0.0/16"), None, &ifs).is_err());
        assert!(local_endpoints(Some("10.77.1.0/40"), None, &ifs).is_err());
    }

    #[test]
    fn incarnation_prefix_roundtrips() {
        let p = "r0=127.0.0.1:4000;10.77.1.0/24=10.77.1.1:4001";
        assert_eq!(split_incarnation(&with_incarnation(3, p)).unwrap(), (3, p));
        assert_eq!(split_incarnation(p).unwrap(), (0, p));
        assert!(split_incarnation("x@r0=127.0.0.1:1").is_err());
        assert!(split_incarnation("70000@r0=127.0.0.1:1").is_err());
    }

    #[test]
    fn datagrams_flow_on_every_route() {
        let eps = [
            LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "r0".into() },
            LocalEndpoint { ip: "127.0.0.2".parse().unwrap(), key: "r1".into() },
        ];
        let mut a = UdpWire::bind(&eps, 2).unwrap();
        let mut b = UdpWire::bind(&eps, 2).unwrap();
        a.set_peer(1, &b.published()).unwrap();
        b.set_peer(0, &a.published()).unwrap();
        assert_eq!(a.routes(1), 2);
        // Bound to the route addresses only, never the wildcard address.
        assert!(a.local_addrs().iter().all(|s| !s.ip().is_unspecified()));
        for route in 0..2u8 {
            assert_eq!(a.send(1, route, b"hello", &[route]), WireSend::Sent);
        }
        let mut buf = vec![0u8; 100];
        let mut got = Vec::new();
        for _ in 0..200 {
            if let Some(n) = b.recv(&mut buf).unwrap() {
                got.push(buf[..n].to_vec());
            }
            if got.len() == 2 {
                break;
            }
            b.wait(Duration::from_millis(5), false);
        }
        got.sort();
        assert_eq!(got, vec![b"hello\0".to_vec(), b"hello\x01".to_vec()]);
        assert!(a.route_label(1, 1).starts_with("127.0.0.2:"));
    }
}
