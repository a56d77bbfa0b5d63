//! Stable-toolchain fallback of the fuzz targets in fuzz/ for decoders of outside data
//! (launcher control protocol, fault-tolerance frames, membership messages, tcp data
//! stream): random inputs and random mutations of valid messages, same oracles as the
//! libFuzzer targets, no coverage guidance. `STEADFAST_FUZZ_CASES` sets the number of
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
    // [cut][hello: magic, key 0x42, rank 1, kind 0][a frame header start]
    let mut s = vec![3u8];
    s.extend_from_slice(&0x5354_4446_5443_5031u64.to_le_bytes());
    s.extend_from_slice(&0x42u64.to_le_bytes());
    s.extend_from_slice(&1u32.to_le_bytes());
    s.extend_from_slice(&0u32.to_le_bytes());
    let mut with_frame = s.clone();
    with_frame.extend_from_slice(&[64, 0, 0, 0, 0, 0, 0, 0]);
    with_frame.extend_from_slice(&[0u8; 68]);
    run("tcp_stream", &[s, with_frame], steadfast_paths::tcp::fuzz_stream);
}
