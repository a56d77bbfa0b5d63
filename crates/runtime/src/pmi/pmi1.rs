//! PMI-1 spoken directly on the wire (MPICH's Hydra, and Slurm's pmi2 plugin, which
//! answers PMI-1 too).
//!
//! The process manager hands each process a connected socket in `PMI_FD` (or a
//! `host:port` in `PMI_PORT`). Requests and replies are single lines of space-separated
//! `name=value` pairs starting with `cmd=`; the protocol is synchronous, one reply per
//! request, except `abort`, which gets none. Values never contain spaces (the caller
//! encodes them, see [`super::encode`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::FromRawFd;

use super::{PmiClient, PmiInfo};
use crate::error::BootstrapError;

/// A longest reply line we accept (a value is at most `vallen_max`, 1024 in Hydra).
const MAX_LINE: usize = 64 << 10;

/// Connection to the PMI-1 server.
#[derive(Debug)]
pub struct Pmi1 {
    r: BufReader<std::fs::File>,
    w: std::fs::File,
    kvsname: String,
    rank: u32,
    size: u32,
    keylen_max: usize,
    vallen_max: usize,
}

fn err(msg: impl Into<String>) -> BootstrapError {
    BootstrapError::Pmi(msg.into())
}

/// Parses `cmd=x a=b c=d` into its pairs (a value runs to the next space).
fn parse_line(line: &str) -> HashMap<&str, &str> {
    line.split_ascii_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

impl Pmi1 {
    /// Connects with `PMI_FD` or `PMI_PORT`, and runs `init`, `get_maxes` and
    /// `get_my_kvsname`. `PMI_RANK` and `PMI_SIZE` give the process's place in the job.
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Result<Pmi1, BootstrapError> {
        let num = |name: &'static str| -> Result<u32, BootstrapError> {
            let v = get(name).ok_or(BootstrapError::MissingVar(name))?;
            v.trim().parse().map_err(|_| BootstrapError::BadVar {
                name,
                reason: format!("{v:?} is not a number"),
            })
        };
        let rank = num("PMI_RANK")?;
        let size = num("PMI_SIZE")?;
        if size == 0 || rank >= size {
            return Err(BootstrapError::BadVar {
                name: "PMI_RANK",
                reason: format!("rank {rank} outside a job of {size}"),
            });
        }
        let file = if let Some(fd) = get("PMI_FD") {
            let fd: i32 = fd.trim().parse().map_err(|_| BootstrapError::BadVar {
                name: "PMI_FD",
                reason: format!("{fd:?} is not a descriptor"),
            })?;
            // SAFETY: F_GETFD only inspects the descriptor table.
            if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(BootstrapError::BadVar {
                    name: "PMI_FD",
                    reason: format!("descriptor {fd} is not open"),
                });
            }
            // SAFETY: the process manager gave this descriptor to this process for PMI;
            // nothing else in the library uses it.
            unsafe { std::fs::File::from_raw_fd(fd) }
        } else if let Some(port) = get("PMI_PORT") {
            let s = TcpStream::connect(port.trim())
                .map_err(|e| err(format!("cannot connect to PMI_PORT={port}: {e}")))?;
            s.set_nodelay(true)?;
            // SAFETY: `into_raw_fd` hands over ownership of the connected socket.
            unsafe { std::fs::File::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(s)) }
        } else {
            return Err(BootstrapError::MissingVar("PMI_FD"));
        };
        let w = file.try_clone()?;
        Pmi1::start(file, w, rank, size)
    }

    /// The opening requests (`init`, `get_maxes`, `get_my_kvsname`) on a connection
    /// read from `r` and written to `w`.
    fn start(r: std::fs::File, w: std::fs::File, rank: u32, size: u32) -> Result<Pmi1, BootstrapError> {
        let mut p = Pmi1 {
            r: BufReader::new(r),
            w,
            kvsname: String::new(),
            rank,
            size,
            keylen_max: 64,
            vallen_max: 1024,
        };
        let init = p.request("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init")?;
        if init.get("pmi_version").map(String::as_str) != Some("1") {
            return Err(err(format!("server speaks PMI version {:?}, not 1", init.get("pmi_version"))));
        }
        let maxes = p.request("cmd=get_maxes", "maxes")?;
        let field = |m: &HashMap<String, String>, k: &str, d: usize| {
            m.get(k).and_then(|v| v.parse().ok()).unwrap_or(d)
        };
        p.keylen_max = field(&maxes, "keylen_max", 64);
        p.vallen_max = field(&maxes, "vallen_max", 1024);
        let kvs = p.request("cmd=get_my_kvsname", "my_kvsname")?;
        p.kvsname = kvs
            .get("kvsname")
            .cloned()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| err("server sent no kvsname"))?;
        Ok(p)
    }

    fn send(&mut self, line: &str) -> Result<(), BootstrapError> {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        self.w
            .write_all(&buf)
            .map_err(|e| err(format!("write to the process manager: {e}")))
    }

    fn recv(&mut self) -> Result<String, BootstrapError> {
        let mut line = String::new();
        let n = (&mut self.r)
            .take(MAX_LINE as u64)
            .read_line(&mut line)
            .map_err(|e| err(format!("read from the process manager: {e}")))?;
        if n == 0 {
            return Err(err("the process manager closed the PMI connection"));
        }
        if !line.ends_with('\n') {
            return Err(err("PMI reply too long or truncated"));
        }
        Ok(line.trim_end().to_owned())
    }

    /// Sends `line` and returns the reply's pairs, checking its `cmd` and `rc`.
    fn request(&mut self, line: &str, reply: &str) -> Result<HashMap<String, String>, BootstrapError> {
        self.send(line)?;
        let got = self.recv()?;
        let pairs = parse_line(&got);
        if pairs.get("cmd").copied() != Some(reply) {
            return Err(err(format!("expected {reply}, got {got:?}")));
        }
        if let Some(rc) = pairs.get("rc") {
            if *rc != "0" {
                let msg = pairs.get("msg").copied().unwrap_or("");
                return Err(err(format!("{reply} failed (rc={rc} {msg})")));
            }
        }
        Ok(pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
    }
}

impl PmiClient for Pmi1 {
    fn info(&self) -> PmiInfo {
        PmiInfo {
            rank: self.rank,
            size: self.size,
            jobid: self.kvsname.clone(),
        }
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        if key.len() > self.keylen_max || value.len() > self.vallen_max {
            return Err(err(format!("key {key:?} or its value is longer than the server accepts")));
        }
        let line = format!("cmd=put kvsname={} key={key} value={value}", self.kvsname);
        self.request(&line, "put_result").map(|_| ())
    }

    fn get(&mut self, _owner: Option<u32>, key: &str) -> Result<String, BootstrapError> {
        let line = format!("cmd=get kvsname={} key={key}", self.kvsname);
        let reply = self.request(&line, "get_result")?;
        reply
            .get("value")
            .cloned()
            .ok_or_else(|| err(format!("get {key}: no value in the reply")))
    }

    fn fence(&mut self) -> Result<(), BootstrapError> {
        self.request("cmd=barrier_in", "barrier_out").map(|_| ())
    }

    fn abort(&mut self, code: i32, _msg: &str) {
        // No reply: the process manager kills the job.
        let _ = self.send(&format!("cmd=abort exitcode={code}"));
    }

    fn finalize(&mut self) -> Result<(), BootstrapError> {
        self.request("cmd=finalize", "finalize_ack").map(|_| ())
    }
}

/// Fuzz entry point (fuzz/fuzz_targets/pmi1_wire.rs and the stable randomized test):
/// `data` is everything a process manager answers on the PMI-1 connection; the client runs
/// its opening requests, then put, get, fence and finalize, reading those answers. Only a
/// bug panics: every malformed, truncated, oversized or out-of-order reply must come back
/// as an error.
#[doc(hidden)]
pub fn fuzz_replies(data: &[u8]) {
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"pmi1-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: a fresh descriptor we own.
    let mut r = unsafe { std::fs::File::from_raw_fd(fd) };
    r.write_all(data).expect("fuzz: fill memfd");
    std::io::Seek::seek(&mut r, std::io::SeekFrom::Start(0)).expect("fuzz: rewind");
    let w = std::fs::OpenOptions::new().write(true).open("/dev/null").expect("fuzz: /dev/null");
    let Ok(mut p) = Pmi1::start(r, w, 1, 4) else { return };
    let _ = p.put("tcp.1", "127.0.0.1:4000");
    let _ = p.fence();
    if let Ok(v) = p.get(Some(0), "tcp.0") {
        assert!(v.len() <= MAX_LINE);
    }
    let _ = p.finalize();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;
    use std::os::unix::net::UnixStream;

    /// A scripted PMI-1 server on the other end of a socket pair: answers every request
    /// the way Hydra does, with a two-rank barrier emulated by an immediate reply.
    fn serve(sock: UnixStream) -> std::thread::JoinHandle<Vec<String>> {
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut kv = HashMap::new();
            let mut r = BufReader::new(sock.try_clone().unwrap());
            let mut w = sock;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap() == 0 {
                    break;
                }
                let line = line.trim_end().to_owned();
                let p = parse_line(&line);
                let reply = match p["cmd"] {
                    "init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0".to_owned(),
                    "get_maxes" => "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024".to_owned(),
                    "get_my_kvsname" => "cmd=my_kvsname rc=0 kvsname=kvs_77_0".to_owned(),
                    "put" => {
                        kv.insert(p["key"].to_owned(), p["value"].to_owned());
                        "cmd=put_result rc=0 msg=success".to_owned()
                    }
                    "get" => match kv.get(p["key"]) {
                        Some(v) => format!("cmd=get_result rc=0 msg=success value={v}"),
                        None => "cmd=get_result rc=-1 msg=key_not_found".to_owned(),
                    },
                    "barrier_in" => "cmd=barrier_out".to_owned(),
                    "finalize" => "cmd=finalize_ack".to_owned(),
                    _ => "cmd=unknown".to_owned(),
                };
                seen.push(line);
                writeln!(w, "{reply}").unwrap();
            }
            seen
        })
    }

    #[test]
    fn talks_pmi1() {
        let (a, b) = UnixStream::pair().unwrap();
        let server = serve(b);
        let fd = a.into_raw_fd().to_string();
        let env: HashMap<&str, String> =
            [("PMI_FD", fd), ("PMI_RANK", "1".into()), ("PMI_SIZE", "2".into())].into();
        let mut p = Pmi1::from_env(&|k| env.get(k).cloned()).unwrap();
        assert_eq!(p.info().jobid, "kvs_77_0");
        assert_eq!((p.info().rank, p.info().size), (1, 2));
        p.put("tcp.1", "127.0.0.1:4000").unwrap();
        p.fence().unwrap();
        assert_eq!(p.get(Some(1), "tcp.1").unwrap(), "127.0.0.1:4000");
        let missing = p.get(Some(0), "tcp.0").unwrap_err().to_string();
        assert!(missing.contains("key_not_found"), "{missing}");
        p.finalize().unwrap();
        drop(p);
        let seen = server.join().unwrap();
        assert_eq!(seen[0], "cmd=init pmi_version=1 pmi_subversion=1");
        assert!(seen.contains(&"cmd=put kvsname=kvs_77_0 key=tcp.1 value=127.0.0.1:4000".to_owned()));
    }

    #[test]
    fn rejects_bad_environment() {
        let env: HashMap<&str, String> =
            [("PMI_FD", "999999".into()), ("PMI_RANK", "0".into()), ("PMI_SIZE", "2".into())].into();
        assert!(matches!(
            Pmi1::from_env(&|k| env.get(k).cloned()),
            Err(BootstrapError::BadVar { name: "PMI_FD", .. })
        ));
        let env: HashMap<&str, String> =
            [("PMI_FD", "0".into()), ("PMI_RANK", "2".into()), ("PMI_SIZE", "2".into())].into();
        assert!(matches!(
            Pmi1::from_env(&|k| env.get(k).cloned()),
            Err(BootstrapError::BadVar { name: "PMI_RANK", .. })
        ));
    }
}
