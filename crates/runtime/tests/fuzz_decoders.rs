//! Stable-toolchain fallback of the fuzz targets in fuzz/ for decoders of outside data
//! (launcher control protocol, fault-tolerance frames, membership messages, tcp data
//! stream, shared-memory ring records, PMI-1 replies, ULFM and rollback messages, checkpoint server messages, channel memory and event logger frames): random
//! inputs and random mutations of valid messages, same oracles as the libFuzzer targets,
//! no coverage guidance. `STEADFAST_FUZZ_CASES` sets the number of
//! cases per target (default 20000). `STEADFAST_FUZZ_SEEDS=DIR` also writes the valid
//! messages as seed files under DIR/<target>/ (how fuzz/corpus was started).

use steadfast_runtime::ft::frame::{self, FrameKey, Kind};
use steadfast_runtime::fuzzing;
use steadfast_runtime::wire::{ClientMsg, ServerMsg};
use steadfast_runtime::{ExitStatus, LauncherEvent};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: enough to vary inputs; no statistics depend on it.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn cases() -> usize {
    std::env::var("STEADFAST_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20000)
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 => {
                let i = rng.below(v.len() + 1);
                v.truncate(i);
            }
            3 => {
                let i = rng.below(v.len() + 1);
                let n = rng.below(16);
                let extra: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(i..i, extra);
            }
            _ => {
                // Lengths and counts: an extreme value at a random position.
                if v.len() >= 4 {
                    let i = rng.below(v.len() - 3);
                    let w = [0u32, 1, 0x7fff_ffff, 0xffff_ffff][rng.below(4)];
                    v[i..i + 4].copy_from_slice(&w.to_le_bytes());
                }
            }
        }
    }
    v
}

fn run(name: &str, seeds: &[Vec<u8>], body: impl Fn(&[u8])) {
    if let Some(dir) = std::env::var_os("STEADFAST_FUZZ_SEEDS") {
        let d = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&d).unwrap();
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i}")), s).unwrap();
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    for s in seeds {
        body(s);
    }
    for _ in 0..cases() {
        let input = if rng.below(4) == 0 || seeds.is_empty() {
            let n = rng.below(256);
            (0..n).map(|_| rng.next() as u8).collect()
        } else {
            let s = &seeds[rng.below(seeds.len())];
            mutate(&mut rng, s)
        };
        body(&input);
    }
}

fn control_seeds() -> Vec<Vec<u8>> {
    let client = [
        ClientMsg::Hello { version: 1, rank: 2, nonce: [9; 16] },
        ClientMsg::Proof { mac: [7; 32] },
        ClientMsg::Put { key: "card-0".into(), value: "addr".into() },
        ClientMsg::Get { key: "card-1".into() },
        ClientMsg::Fence { epoch: 0 },
        ClientMsg::Abort { code: 3, msg: "x".into() },
        ClientMsg::Finalize,
    ];
    let server = [
        ServerMsg::Challenge { nonce: [1; 16], mac: [2; 32] },
        ServerMsg::Welcome { size: 4 },
        ServerMsg::Value { key: "k".into(), value: "v".into() },
        ServerMsg::FenceDone { epoch: 1 },
        ServerMsg::Event(LauncherEvent::RankExited {
            rank: 1,
            status: ExitStatus::Signaled(9),
            finalized: false,
        }),
    ];
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    // A rank's whole session, cut one byte per read onto one connection.
    let mut session = vec![0u8];
    for m in &client {
        let f = m.encode().unwrap();
        session.extend_from_slice(&f);
        seeds.push(f[4..].to_vec());
    }
    seeds.push(session);
    for m in &server {
        seeds.push(m.encode().unwrap()[4..].to_vec());
    }
    seeds
}

#[test]
fn control_wire() {
    run("control_wire", &control_seeds(), fuzzing::control_wire);
}

#[test]
fn ft_frame() {
    let key = FrameKey::from_job_key(0x0123_4567_89ab_cdef);
    let mut seeds = Vec::new();
    let mut two = Vec::new();
    for (kind, payload) in [(Kind::Hello, &[0u8, 0, 0, 1, 0, 0, 0, 4][..]), (Kind::Bye, &[][..])] {
        let mut out = Vec::new();
        frame::encode(&key, kind, 1, 42, payload, &mut out);
        two.extend_from_slice(&out);
        seeds.push(out);
    }
    seeds.push(two);
    run("ft_frame", &seeds, fuzzing::ft_frame);
}

#[test]
fn membership_wire() {
    // Valid messages come from the membership crate's own encoder through mutation of
    // what random bytes decode to; start from short random seeds.
    let seeds: Vec<Vec<u8>> = (0..8u8).map(|k| vec![k, 0, 0, 0, 1, 0, 0, 0, 0]).collect();
    run("membership_wire", &seeds, fuzzing::membership_wire);
}

#[test]
fn tcp_stream() {
    use steadfast_paths::checksum::{crc32c, crc32c_append};
    // [cut, bit 0 clear: from the handshake][connect: magic, rank 1, kind 0, nonce, mac]
    let mut s = vec![2u8];
    s.extend_from_slice(&0x5354_4446_5443_5032u64.to_le_bytes());
    s.extend_from_slice(&1u32.to_le_bytes());
    s.extend_from_slice(&0u32.to_le_bytes());
    s.extend_from_slice(&[0u8; 48]);
    // [cut, bit 0 set: past the handshake][two checksummed frames, numbered 0 and 1, then
    // an acknowledgment and a repair request (control frames)]
    let mut frames = vec![7u8];
    let prefix = |word: u32, seq: u32, ack: u32| {
        let mut p = Vec::new();
        p.extend_from_slice(&word.to_le_bytes());
        p.extend_from_slice(&seq.to_le_bytes());
        p.extend_from_slice(&ack.to_le_bytes());
        let pcrc = crc32c(&p);
        p.extend_from_slice(&pcrc.to_le_bytes());
        (p, pcrc)
    };
    for (seq, len) in [(0u32, 0usize), (1, 100)] {
        let hdr = [len as u8; steadfast_paths::HDR_LEN];
        let payload = vec![0x5a; len];
        let (p, pcrc) = prefix((hdr.len() + len) as u32, seq, 0);
        let hcrc = crc32c_append(pcrc, &hdr);
        frames.extend_from_slice(&p);
        frames.extend_from_slice(&hcrc.to_le_bytes());
        frames.extend_from_slice(&hdr);
        frames.extend_from_slice(&payload);
        frames.extend_from_slice(&crc32c_append(hcrc, &payload).to_le_bytes());
    }
    frames.extend_from_slice(&prefix(1 << 30 | 1, 0, 2).0);
    // A sync frame: a repair request from frame 1 on that also answers request 5.
    let sync = |from: u32| {
        let mut f = prefix(1 << 30 | 3, from, 2).0;
        f.extend_from_slice(&0x434e_5953_4644_5453u64.to_le_bytes());
        for w in [1u32 | 4, 6, 5, 2] {
            f.extend_from_slice(&w.to_le_bytes());
        }
        let crc = crc32c(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    };
    frames.extend_from_slice(&sync(1));
    // A damaged length word (the receiver hunts for the next sync frame), garbage, then
    // a sync frame and a frame again.
    let mut hunt = frames.clone();
    let bad = hunt.len();
    hunt.extend_from_slice(&frames[1..1 + 20 + 40 + 4]);
    hunt[bad] ^= 0x40;
    hunt.extend_from_slice(&[0x03, 0, 0, 0x40, 9, 9, 9]);
    hunt.extend_from_slice(&sync(2));
    hunt.extend_from_slice(&frames[1..1 + 20 + 40 + 4]);
    run("tcp_stream", &[s, frames, hunt], steadfast_paths::tcp::fuzz_stream);
}

/// A ring record as a peer writes it: `[len][payload len][crc][hcrc][header][payload]`,
/// padded to 64-byte lines.
fn ring_record(hdr_byte: u8, payload: &[u8]) -> Vec<u8> {
    use steadfast_reliable::crc::record_crc32c;
    let hdr = [hdr_byte; steadfast_paths::HDR_LEN];
    let plen = payload.len() as u32;
    let len = (16 + hdr.len() + payload.len()).div_ceil(64) * 64;
    let mut r = Vec::with_capacity(len);
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.extend_from_slice(&plen.to_le_bytes());
    r.extend_from_slice(&record_crc32c(plen, &hdr, payload).to_le_bytes());
    r.extend_from_slice(&record_crc32c(plen, &hdr, &[]).to_le_bytes());
    r.extend_from_slice(&hdr);
    r.extend_from_slice(payload);
    r.resize(len, 0);
    r
}

#[test]
fn shm_ring() {
    let one = ring_record(1, b"12345678");
    let mut two = one.clone();
    two.extend_from_slice(&ring_record(2, &[9u8; 200]));
    // A skip record (second word all ones) and then a record.
    let mut skip = vec![0u8; 64];
    skip[0] = 64;
    skip[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    skip.extend_from_slice(&one);
    // One skip record as long as the (4 KiB) ring: it wraps onto itself, and `poll` once
    // read it forever (found by libFuzzer).
    let mut wrap = vec![0u8; 4096];
    wrap[0..4].copy_from_slice(&4096u32.to_le_bytes());
    wrap[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    run("shm_ring", &[one, two, skip, wrap], steadfast_paths::shm::fuzz_ring);
}

#[test]
fn pmi1_wire() {
    let good = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n\
                cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0\n\
                cmd=my_kvsname kvsname=kvs_7_0 rc=0\n\
                cmd=put_result rc=0\n\
                cmd=barrier_out rc=0\n\
                cmd=get_result rc=0 value=127.0.0.1:4000\n\
                cmd=finalize_ack rc=0\n";
    let failing = "cmd=response_to_init pmi_version=1 rc=0\ncmd=maxes rc=0\ncmd=my_kvsname kvsname=k rc=0\n\
                   cmd=put_result rc=1 msg=duplicate_key\n";
    run("pmi1_wire", &[good.as_bytes().to_vec(), failing.as_bytes().to_vec()], steadfast_runtime::pmi::pmi1::fuzz_replies);
}

#[test]
fn ulfm_wire() {
    use steadfast_ulfm::wire::{Body, Message};
    let mut seeds = Vec::new();
    for (size, body) in [(3u8, Body::Query { seq: 3, ballot: 2 }), (4, Body::Revoke)] {
        let mut s = vec![size - 1];
        s.extend_from_slice(&Message { epoch: 1, body }.encode());
        seeds.push(s);
    }
    run("ulfm_wire", &seeds, |d| {
        steadfast_ulfm::wire::fuzz_decode(d);
    });
}

#[test]
fn rollback_wire() {
    use steadfast_rollback::wire::Body;
    use steadfast_rollback::{ChannelRecord, Ident, Message, Recorded};
    let mut seeds: Vec<Vec<u8>> = [
        Body::Checkpoint { wave: 3 },
        Body::Marker { wave: 3, sent_upto: 1 },
        Body::Done { wave: 3, in_transit: 17 },
        Body::Rollback { wave: 2 },
        Body::Resume,
    ]
    .into_iter()
    .map(|b| Message::new(1, b).encode())
    .collect();
    let rec = ChannelRecord {
        rank: 1,
        wave: 9,
        sent: vec![4, 0, 300],
        received: vec![2, 0, 0],
        in_transit: vec![Recorded { from: Ident { world: 0, incarnation: 2, seq: 3 }, bytes: vec![3; 5] }],
    };
    seeds.push(rec.encode());
    run("rollback_wire", &seeds, |d| {
        steadfast_rollback::wire::fuzz_decode(d);
    });
}

#[test]
fn logging_wire() {
    use steadfast_logging::{Event, FromLogger, Peer, ToLogger};
    let m = Event::Match { from: 2, seq: 9 };
    let c = Event::Choice { call: 6, indices: vec![0], failed_before: 3, probed: Some((1, 4)) };
    let seeds: Vec<Vec<u8>> = vec![
        ToLogger::Log { incarnation: 1, first: 7, events: vec![m.clone(), c.clone()] }.encode(),
        ToLogger::Fetch { incarnation: 2, from: 1 }.encode(),
        FromLogger::Ack { upto: 9, stable: vec![9, 3, 0] }.encode(),
        FromLogger::Events { first: 1, events: vec![c.clone()] }.encode(),
        Peer::Piggyback { dets: vec![(1, 2, m.clone())] }.encode(),
        Peer::Held { dets: vec![(5, c)] }.encode(),
        steadfast_logging::logger::journal::record(1, &[m]),
    ];
    run("logging_wire", &seeds, |d| {
        steadfast_logging::wire::fuzz_decode(d);
    });
}

#[test]
fn ckpt_store_wire() {
    use steadfast_runtime::ckpt_store::{FileId, FileKind, Reply, Request};
    let file = FileId { job: "job-0123".into(), wave: 3, rank: 1, kind: FileKind::Image };
    let seeds: Vec<Vec<u8>> = [
        Request::Hello { version: 1, nonce: [3; 16] }.encode(),
        Request::Proof { mac: [4; 32] }.encode(),
        Request::Put { file: file.clone(), len: 1 << 20 }.encode(),
        Request::Get { file: FileId { kind: FileKind::Record, ..file.clone() } }.encode(),
        Request::Prune { job: "job-0123".into(), keep_from: 2 }.encode(),
        Request::Verify { file: FileId { wave: 9, ..file.clone() } }.encode(),
        Reply::Challenge { nonce: [5; 16], mac: [6; 32] }.encode(),
        Reply::Done.encode(),
        Reply::Data { len: 77 }.encode(),
        Reply::Failed { msg: "no such file".into() }.encode(),
    ]
    .into_iter()
    .flat_map(|f| [f[4..].to_vec(), f])
    .collect();
    run("ckpt_store_wire", &seeds, fuzzing::ckpt_store_wire);
}

#[test]
fn channel_memory_wire() {
    use steadfast_paths::cm::{frame, Hello, DELIVER, DEPOSIT, PROOF, RELEASE, VERSION};
    let hdr = [7u8; steadfast_paths::HDR_LEN];
    let mut two = frame(DELIVER, &[&1u32.to_le_bytes(), &hdr, b"abc"]);
    two.extend(frame(DELIVER, &[&2u32.to_le_bytes(), &hdr, b""]));
    let seeds: Vec<Vec<u8>> = vec![
        Hello { version: VERSION, nonce: [1; 16], rank: 3, incarnation: 1, reads_from: Some(9) }.encode(),
        Hello { version: VERSION, nonce: [2; 16], rank: 0, incarnation: 0, reads_from: None }.encode(),
        frame(PROOF, &[&[3u8; 32]]),
        frame(DEPOSIT, &[&2u32.to_le_bytes(), &hdr, b"payload"]),
        frame(RELEASE, &[&77u64.to_le_bytes()]),
        two,
    ];
    run("channel_memory_wire", &seeds, |d| steadfast_paths::cm::fuzz_decode(d));
}

#[test]
fn event_logger_wire() {
    use steadfast_logging::{Event, FromLogger, ToLogger};
    use steadfast_paths::cm::frame;
    use steadfast_runtime::event_logger::{self as el, Hello};
    let log = ToLogger::Log { incarnation: 1, first: 4, events: vec![Event::Match { from: 2, seq: 9 }] }.encode();
    let ack = FromLogger::Ack { upto: 4, stable: vec![4, 0, 7] }.encode();
    let mut two = frame(el::FROM, &[&1u32.to_le_bytes(), &ack]);
    two.extend(frame(el::FROM, &[&0u32.to_le_bytes(), &FromLogger::Checkpoint.encode()]));
    let seeds: Vec<Vec<u8>> = vec![
        Hello { version: el::VERSION, nonce: [1; 16], np: 4, job: "0123abcd".into() }.encode(),
        frame(el::PROOF, &[&[3u8; 32]]),
        frame(el::CHALLENGE, &[&[5u8; 16], &[6u8; 32]]),
        frame(el::TO, &[&2u32.to_le_bytes(), &log]),
        frame(el::DONE, &[]),
        two,
    ]
    .into_iter()
    .flat_map(|f| [f[4..].to_vec(), f])
    .collect();
    run("event_logger_wire", &seeds, el::fuzz_decode);
}
