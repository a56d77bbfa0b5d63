//! Building a rank's paths at MPI_Init: which path serves which peer, the address
//! exchange through the launcher, checksums and fault injection.
//!
//! Selection per peer: ranks on the same host use the job's path (`STEADFAST_PATH`:
//! shm by default); ranks on other hosts use `STEADFAST_NET_PATH` (udp by default when
//! the job's path is shm, else the job's path). Which host a rank is on comes from
//! `STEADFAST_HOSTMAP`, set by the launcher for multi-host jobs (absent: one host).

use std::net::SocketAddr;
use std::path::Path as FsPath;
use std::time::Duration;

use crate::checksum;
use crate::composite::CompositePath;
use crate::fault::{FaultSpec, FaultyWire, Injector};
use crate::reliable::{ReliableConfig, ReliablePath};
use crate::shm::ShmPath;
use crate::tcp::TcpPath;
use crate::udp::{self, UdpWire};
use crate::{Path, PathError};

/// UDP fragment payload when every route is on the loopback interface.
pub const LOOPBACK_FRAG: usize = 32 << 10;
/// Bytes in flight per peer on routes that leave the host (4 MiB on loopback).
pub const NET_WINDOW: usize = 1 << 20;

/// The launcher services path setup needs.
pub trait Exchange {
    /// Publishes `key = value` to every rank.
    fn put(&mut self, key: &str, value: &str) -> Result<(), String>;
    /// Value of `key` (blocks until some rank put it).
    fn get(&mut self, key: &str) -> Result<String, String>;
    /// Barrier over all ranks.
    fn fence(&mut self) -> Result<(), String>;
}

/// A transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Shm,
    Tcp,
    Udp,
}

impl Kind {
    /// Name used in variables and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Shm => "shm",
            Kind::Tcp => "tcp",
            Kind::Udp => "udp",
        }
    }

    /// Parses `shm`, `tcp` or `udp`.
    pub fn parse(s: &str) -> Option<Kind> {
        match s.trim() {
            "shm" => Some(Kind::Shm),
            "tcp" => Some(Kind::Tcp),
            "udp" => Some(Kind::Udp),
            _ => None,
        }
    }
}

/// Path-related settings, read from the environment by the engine's configuration
/// module (raw values; parsed here).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `STEADFAST_CHECKSUM`.
    pub checksum: Option<String>,
    /// `STEADFAST_FAULTS`.
    pub faults: Option<String>,
    /// `STEADFAST_ROUTES`.
    pub routes: Option<String>,
    /// `STEADFAST_NET_PATH`.
    pub net_path: Option<String>,
    /// `STEADFAST_HOSTMAP`.
    pub hostmap: Option<String>,
    /// `STEADFAST_UDP_FRAG`.
    pub udp_frag: Option<usize>,
    /// `STEADFAST_UDP_WINDOW`: unacknowledged bytes in flight per peer.
    pub udp_window: Option<usize>,
    /// `STEADFAST_PROBE_MS`: route heartbeat / fail-back probe interval.
    pub probe_ms: Option<u64>,
    /// `STEADFAST_RETRIES`: sends of a fragment on one route before the route is suspect.
    pub retries: Option<u32>,
    /// `STEADFAST_CONTROL`: the launcher's control server (to find the job's interface).
    pub control: Option<SocketAddr>,
    /// `STEADFAST_SHM_RING`.
    pub shm_ring: Option<usize>,
}

/// What to build.
pub struct Params<'a> {
    pub rank: u32,
    pub size: u32,
    pub job_key: u64,
    pub jobdir: &'a FsPath,
    /// The job's path (`STEADFAST_PATH`).
    pub kind: Kind,
    pub settings: Settings,
    /// A restarted rank joining a running job: the others published their addresses long
    /// ago and are not in a fence, so there is none.
    pub rejoin: bool,
    /// This process's incarnation (`STEADFAST_INCARNATION`; 0 for a job's first processes).
    /// The udp path publishes it with its endpoints and learns the peers' the same way.
    pub incarnation: u16,
}

/// The built path and what the engine needs to know about each peer.
pub struct Built {
    pub path: Box<dyn Path>,
    /// Path serving each peer (`None` for this rank).
    pub via: Vec<Option<Kind>>,
    /// Process ids of peers served by shared memory (0 for others).
    pub pids: Vec<u32>,
}

impl Built {
    /// Whether `peer` is reached through shared memory (single-copy reads possible).
    pub fn is_shm(&self, peer: u32) -> bool {
        self.via.get(peer as usize).copied().flatten() == Some(Kind::Shm)
    }
}

/// Host index of every rank from a `STEADFAST_HOSTMAP` value: comma-separated host
/// indices in rank order, `H*N` meaning N ranks on host H (e.g. `0*4,1*4`).
pub fn parse_hostmap(s: &str, size: u32) -> Result<Vec<u32>, PathError> {
    let bad = |why: &str| PathError::Config(format!("STEADFAST_HOSTMAP={s:?}: {why}"));
    let mut v = Vec::with_capacity(size as usize);
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (h, n) = match item.split_once('*') {
            Some((h, n)) => (h, n.parse::<u32>().map_err(|_| bad("bad count"))?),
            None => (item, 1),
        };
        let h: u32 = h.trim().parse().map_err(|_| bad("bad host index"))?;
        if v.len() + n as usize > size as usize {
            return Err(bad("more ranks than the job has"));
        }
        v.extend(std::iter::repeat_n(h, n as usize));
    }
    if v.len() != size as usize {
        return Err(bad("fewer ranks than the job has"));
    }
    Ok(v)
}

/// An address of this rank that the other hosts reach, when the job spans several (`None`
/// for a one-host job or an unreadable host map): the one towards the launcher's control
/// server if there is one (the connection the launcher itself relies on), else the first
/// address the network path listens on. Per-rank listeners that peers on other hosts must
/// reach (the membership control channel) bind there instead of the loopback address that
/// serves a one-host job.
pub fn remote_ip(st: &Settings, size: u32) -> Option<std::net::IpAddr> {
    let map = st.hostmap.as_deref().filter(|h| !h.trim().is_empty())?;
    let hosts = parse_hostmap(map, size).ok()?;
    if hosts.iter().all(|&h| h == hosts[0]) {
        return None;
    }
    if let Some(c) = st.control.filter(|c| !c.ip().is_loopback()) {
        if let Ok(ip) = udp::local_address_towards(c) {
            return Some(ip);
        }
    }
    let ifs = udp::interfaces().unwrap_or_default();
    let eps = udp::local_endpoints(st.routes.as_deref(), st.control, &ifs).ok()?;
    eps.first().map(|e| std::net::IpAddr::V4(e.ip))
}

/// `shm:0-3 tcp:4-7`: which ranks each path serves (runs of consecutive ranks).
fn describe_via(via: &[Option<Kind>]) -> String {
    let mut out: Vec<String> = Vec::new();
    for k in [Kind::Shm, Kind::Tcp, Kind::Udp] {
        let ranks: Vec<usize> = (0..via.len()).filter(|&q| via[q] == Some(k)).collect();
        if ranks.is_empty() {
            continue;
        }
        let mut runs: Vec<String> = Vec::new();
        let mut i = 0;
        while i < ranks.len() {
            let mut j = i;
            while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
                j += 1;
            }
            runs.push(if i == j { ranks[i].to_string() } else { format!("{}-{}", ranks[i], ranks[j]) });
            i = j + 1;
        }
        out.push(format!("{}:{}", k.name(), runs.join(",")));
    }
    out.join(" ")
}

fn exch_err(e: String) -> PathError {
    PathError::Config(format!("bootstrap: {e}"))
}

/// Builds the paths of one rank. Collective: every rank of the job calls it (one fence).
pub fn build(p: &Params<'_>, ex: &mut dyn Exchange) -> Result<Built, PathError> {
    let st = &p.settings;
    let n = p.size as usize;
    let hosts = match st.hostmap.as_deref().filter(|h| !h.trim().is_empty()) {
        Some(h) => parse_hostmap(h, p.size)?,
        None => vec![0; n],
    };
    let me = hosts[p.rank as usize];
    let net_kind = match st.net_path.as_deref().filter(|s| !s.trim().is_empty()) {
        Some(s) => match Kind::parse(s) {
            Some(Kind::Shm) | None => {
                return Err(PathError::Config(format!("STEADFAST_NET_PATH={s:?}: expected udp or tcp")))
            }
            Some(k) => k,
        },
        None if p.kind == Kind::Shm => Kind::Udp,
        None => p.kind,
    };
    let via: Vec<Option<Kind>> = (0..n)
        .map(|q| {
            if q == p.rank as usize {
                None
            } else if hosts[q] == me {
                Some(p.kind)
            } else {
                Some(net_kind)
            }
        })
        .collect();
    tracing::debug!(
        rank = p.rank,
        host = me,
        peers = %describe_via(&via),
        "path to each peer"
    );
    // A world of one still gets the job's path.
    let alone = via.iter().all(|v| v.is_none());
    let uses = |k: Kind| via.contains(&Some(k)) || (alone && k == p.kind);
    let remote = |k: Kind| (0..n).any(|q| via[q] == Some(k) && hosts[q] != me);
    let want_shm = uses(Kind::Shm);
    let faults = match st.faults.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => Some(FaultSpec::parse(f)?),
        None => None,
    };
    let injector = |path: &str, damage_only: bool| -> Option<Injector> {
        let f = faults.as_ref().filter(|f| f.applies_to(path) && !f.is_empty())?;
        let f = if damage_only { f.damage_only(path) } else { f.clone() };
        Some(Injector::new(f, p.rank))
    };
    let cks = |path: &str| checksum::for_path(st.checksum.as_deref(), path);

    // Create everything, publish addresses, one fence, then read the peers' addresses.
    let mut shm = None;
    if want_shm && !p.jobdir.exists() {
        // On a remote host (multi-host job) the launcher's job directory does not exist.
        // Directories of this user's earlier jobs whose ranks were all killed go first.
        if let Some(base) = p.jobdir.parent() {
            crate::jobdir::sweep_stale(base, p.jobdir, crate::jobdir::STALE_AFTER);
        }
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().recursive(false).mode(0o700).create(p.jobdir) {
            Ok(()) => {}
            // Another rank of this host was first; its directory is checked below.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(PathError::Shm(format!("create {}: {e}", p.jobdir.display()))),
        }
    }
    // An existing directory is used only if it is ours and private (never one another
    // user prepared), and is held while this rank lives.
    let hold = if want_shm {
        Some(crate::jobdir::Hold::take(p.jobdir).map_err(|e| PathError::Shm(e.to_string()))?)
    } else {
        None
    };
    if want_shm {
        let ring = st.shm_ring.unwrap_or_else(|| {
            crate::shm::default_ring_size(p.size).min(crate::shm::ring_size_fitting(p.jobdir, p.size))
        });
        let mut s = ShmPath::create(p.jobdir, p.rank, p.size, ring)?;
        s.set_dir_hold(hold);
        s.set_checksum(cks("shm")?);
        let stores = steadfast_config::lookup("STEADFAST_SHM_STORES");
        s.set_stores(crate::stores::StoreSetting::parse(stores.as_deref()).unwrap_or_else(|why| {
            steadfast_config::warn(&steadfast_config::ignored("STEADFAST_SHM_STORES", stores.as_deref().unwrap_or(""), &why));
            crate::stores::StoreSetting::Auto
        }));
        if let Some(inj) = injector("shm", true) {
            s.set_faults(inj);
        }
        shm = Some(s);
    }
    let endpoints = if uses(Kind::Udp) || (uses(Kind::Tcp) && remote(Kind::Tcp)) {
        let ifs = udp::interfaces().unwrap_or_default();
        let control = if remote(Kind::Udp) || remote(Kind::Tcp) { st.control } else { None };
        Some(udp::local_endpoints(st.routes.as_deref(), control, &ifs)?)
    } else {
        None
    };
    let mut tcp = None;
    if uses(Kind::Tcp) {
        let ip = match (&endpoints, remote(Kind::Tcp)) {
            (Some(eps), true) => eps[0].ip.to_string(),
            _ => "127.0.0.1".to_owned(),
        };
        let mut t = TcpPath::bind(&format!("{ip}:0"), p.rank, p.size, p.job_key)?;
        t.set_checksum(cks("tcp")?);
        if let Some(inj) = injector("tcp", true) {
            t.set_faults(inj);
        }
        ex.put(&format!("tcp.{}", p.rank), &t.contact()?).map_err(exch_err)?;
        tcp = Some(t);
    }
    let mut udp_wire = None;
    if uses(Kind::Udp) {
        let eps = endpoints.as_deref().unwrap_or_default();
        let w = UdpWire::bind(eps, p.size)?;
        ex.put(&format!("udp.{}", p.rank), &udp::with_incarnation(p.incarnation, &w.published())).map_err(exch_err)?;
        udp_wire = Some(w);
    }
    if !p.rejoin {
        ex.fence().map_err(exch_err)?;
    }

    let mut pids = vec![0u32; n];
    if let Some(s) = shm.as_mut() {
        for q in 0..p.size {
            if via[q as usize] == Some(Kind::Shm) {
                pids[q as usize] = s.peer_pid(q)?;
            }
        }
    }
    if let Some(t) = tcp.as_mut() {
        for q in 0..p.size {
            if via[q as usize] == Some(Kind::Tcp) {
                let a = ex.get(&format!("tcp.{q}")).map_err(exch_err)?;
                t.set_peer_contact(q, &a)?;
            }
        }
    }
    let mut udp_path: Option<Box<dyn Path>> = None;
    if let Some(mut w) = udp_wire {
        // Incarnation of each peer: all 0 unless this process, or the peer, was restarted.
        let mut incs = vec![0u16; n];
        for q in 0..p.size {
            if via[q as usize] == Some(Kind::Udp) {
                let a = ex.get(&format!("udp.{q}")).map_err(exch_err)?;
                let (inc, endpoints) = udp::split_incarnation(&a)?;
                w.set_peer(q, endpoints)?;
                incs[q as usize] = inc;
            }
        }
        let mut rc = ReliableConfig::new(p.job_key);
        rc.checksum = cks("udp")?;
        // Loopback has a 64 KiB MTU: larger fragments halve the per-byte cost there.
        // Elsewhere 8 KiB fits a jumbo frame (and is IP-fragmented on 1500-byte links).
        let eps = endpoints.as_deref().unwrap_or_default();
        if !eps.is_empty() && eps.iter().all(|e| e.ip.is_loopback()) {
            rc.frag = LOOPBACK_FRAG;
        } else {
            // Without congestion control, a window far above the bandwidth-delay product
            // overruns a bottleneck's queue and collapses into retransmissions.
            rc.channel.send_window_bytes = NET_WINDOW;
        }
        if let Some(f) = st.udp_frag {
            rc.frag = f;
        }
        if let Some(ms) = st.probe_ms {
            rc.probe_interval = Duration::from_millis(ms.max(1));
        }
        if let Some(r) = st.retries {
            rc.channel.retries_per_route = r.max(1);
        }
        // The peer's sockets (sized like ours) must hold a window: beyond them the
        // kernel drops datagrams a slow receiver has not read yet.
        let held = w.recv_buffer() / 2 * w.sockets().max(1);
        if held > 0 {
            rc.channel.send_window_bytes = rc.channel.send_window_bytes.min(held.max(4 * rc.frag));
        }
        if let Some(win) = st.udp_window {
            rc.channel.send_window_bytes = win.max(rc.frag);
        }
        fn with_incarnations<W: crate::reliable::Wire>(
            mut r: ReliablePath<W>,
            own: u16,
            peers: &[u16],
        ) -> ReliablePath<W> {
            r.set_incarnation(own);
            for (q, &inc) in peers.iter().enumerate() {
                r.set_peer_incarnation(q as u32, inc);
            }
            r
        }
        udp_path = Some(match injector("udp", false) {
            Some(inj) => Box::new(with_incarnations(
                ReliablePath::new(FaultyWire::new(w, inj), p.rank, p.size, rc)?,
                p.incarnation,
                &incs,
            )),
            None => Box::new(with_incarnations(ReliablePath::new(w, p.rank, p.size, rc)?, p.incarnation, &incs)),
        });
    }

    let mut parts: Vec<(&'static str, Box<dyn Path>)> = Vec::new();
    let mut slot = [None, None, None];
    if let Some(s) = shm {
        slot[0] = Some(parts.len());
        parts.push(("shm", Box::new(s)));
    }
    if let Some(t) = tcp {
        slot[1] = Some(parts.len());
        parts.push(("tcp", Box::new(t)));
    }
    if let Some(u) = udp_path {
        slot[2] = Some(parts.len());
        parts.push(("udp", u));
    }
    let path: Box<dyn Path> = if parts.len() == 1 {
        parts.pop().map(|(_, p)| p).ok_or_else(|| PathError::Config("no path".into()))?
    } else {
        let map = via
            .iter()
            .map(|v| {
                v.and_then(|k| match k {
                    Kind::Shm => slot[0],
                    Kind::Tcp => slot[1],
                    Kind::Udp => slot[2],
                })
            })
            .collect();
        Box::new(CompositePath::new(parts, map)?)
    };
    Ok(Built { path, via, pids })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_address_only_for_jobs_across_hosts() {
        let one = Settings { hostmap: Some("0*4".into()), ..Settings::default() };
        assert_eq!(remote_ip(&one, 4), None);
        assert_eq!(remote_ip(&Settings::default(), 4), None);
        let bad = Settings { hostmap: Some("0*3".into()), ..Settings::default() };
        assert_eq!(remote_ip(&bad, 4), None);
        // Towards a control server on loopback there is no route to learn from: the
        // network path's first address (routes "auto": an interface, or loopback if none).
        let two = Settings {
            hostmap: Some("0*2,1*2".into()),
            routes: Some("auto".into()),
            control: Some("127.0.0.1:9".parse().unwrap()),
            ..Settings::default()
        };
        let ifs = udp::interfaces().unwrap_or_default();
        let first = udp::local_endpoints(Some("auto"), None, &ifs).unwrap()[0].ip;
        assert_eq!(remote_ip(&two, 4), Some(std::net::IpAddr::V4(first)));
    }

    #[test]
    fn via_description_names_runs() {
        let v = [None, Some(Kind::Shm), Some(Kind::Tcp), Some(Kind::Tcp), Some(Kind::Shm), Some(Kind::Tcp)];
        assert_eq!(describe_via(&v), "shm:1,4 tcp:2-3,5");
    }

    #[test]
    fn hostmap_runs() {
        assert_eq!(parse_hostmap("0*2,1*2", 4).unwrap(), vec![0, 0, 1, 1]);
        assert_eq!(parse_hostmap("0,1,0", 3).unwrap(), vec![0, 1, 0]);
        assert!(parse_hostmap("0*3", 2).is_err());
        assert!(parse_hostmap("0*1", 2).is_err());
        assert!(parse_hostmap("x", 1).is_err());
    }
}
